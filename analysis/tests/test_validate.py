#!/usr/bin/python3
"""`ssd-analyze validate`'s checks: every check is a relative error within the tolerance, or
within its sampling slack. Equation (1)'s check used an absolute difference of 0.1, which let a
predicted p_hit of 0.159 pass against a measured 0.111 (+43%).
Run: /usr/bin/python3 -m unittest discover -s analysis/tests"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ssd_analysis.runstats import theorem17  # noqa: E402
from ssd_analysis.validate import Check  # noqa: E402


class RelativeChecks(unittest.TestCase):
    def test_an_error_of_43_percent_fails(self):
        check = Check("Eq.(1) p_hit", 0.159, 0.111, slack=0.02)
        self.assertAlmostEqual(check.error, 0.159 / 0.111 - 1)
        self.assertFalse(check.ok(0.1))

    def test_within_the_tolerance_passes(self):
        self.assertTrue(Check("Eq.(1) p_hit", 0.118, 0.111).ok(0.1))
        self.assertFalse(Check("Eq.(1) p_hit", 0.124, 0.111).ok(0.1))

    def test_sampling_slack_widens_the_tolerance(self):
        # 2 standard errors of a p_hit of 0.111 over 100 lookups: 0.063 absolute, 57% relative
        self.assertTrue(Check("Eq.(1) p_hit", 0.159, 0.111, slack=0.57).ok(0.1))

    def test_no_measured_value_never_passes(self):
        self.assertFalse(Check("Eq.(1) p_hit", 0.1, 0.0).ok(0.1))


class PooledTheorem17(unittest.TestCase):
    def test_inputs_are_weighted_by_their_rounds(self):
        few = {"p": 0.5, "lookups": 100, "e_hit": 2.0, "n_hit": 50, "t_jit": 0.4, "n_jit": 10,
               "e_miss_backup": 1.0, "n_backup": 0}
        many = {"p": 0.9, "lookups": 300, "e_hit": 3.0, "n_hit": 270, "t_jit": 0.1,
                "n_jit": 30, "e_miss_backup": 1.2, "n_backup": 30}
        _, inputs = theorem17([few, many])
        self.assertAlmostEqual(inputs["p"], (0.5 * 100 + 0.9 * 300) / 400)
        self.assertAlmostEqual(inputs["e_hit"], (2.0 * 50 + 3.0 * 270) / 320)
        self.assertAlmostEqual(inputs["t_slow"], (0.4 * 10 + 0.1 * 30) / 40)
        self.assertAlmostEqual(inputs["e_fast"], 1.2)   # the run without backup rounds weighs 0


if __name__ == "__main__":
    unittest.main()
