#!/usr/bin/python3
"""`ssd-analyze summary`'s threads and speedup columns on hand-built runs: xAR over the AR runs
on the target rank's threads (the paper's layout), xAR= over those on as many threads in all
(equal hardware). Run: /usr/bin/python3 -m unittest discover -s analysis/tests"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ssd_analysis import summary  # noqa: E402
from ssd_analysis.io import Run  # noqa: E402


def run(mode, tok_s, threads, target="pair-1.5b", temperature="0"):
    config = {"target": target, "batch_size": "1", "temperature": temperature,
              "max_new_tokens": "128", "lookahead": "2", "draft": "pair-0.5b"}
    ranks = {r: {"threads": t} for r, t in enumerate(threads)}
    return Run(path=f"{mode}-{tok_s}.h5", mode=mode, attrs={}, config=config,
               summary={"decode_tokens_per_s": tok_s}, ranks=ranks)


class SpeedupColumns(unittest.TestCase):
    def setUp(self):
        self.runs = [run("ar", 8.0, [1]), run("ar", 10.0, [1]), run("ar", 12.0, [2]),
                     run("sd", 13.5, [1]), run("sd", 15.0, [2]), run("ssd", 18.0, [1, 1]),
                     run("ssd", 30.0, [1, 1], temperature="1")]

    def row(self, i):
        return summary.row(self.runs[i], self.runs)

    def test_threads_per_rank(self):
        self.assertEqual(self.row(0)["threads"], "1")
        self.assertEqual(self.row(5)["threads"], "1+1")

    def test_ssd_over_one_core_ar_and_over_two(self):
        # The AR mean on 1 thread is 9: SSD's 18 is 2.00x there, and 1.50x AR on 2 threads.
        self.assertEqual(self.row(5)["xAR"], "2.00")
        self.assertEqual(self.row(5)["xAR="], "1.50")

    def test_sd_compares_with_ar_on_its_own_threads(self):
        self.assertEqual(self.row(3)["xAR"], "1.50")
        self.assertEqual(self.row(3)["xAR="], "1.50")
        self.assertEqual(self.row(4)["xAR"], "1.25")

    def test_no_comparable_ar_gives_a_dash(self):
        self.assertEqual(self.row(6)["xAR"], "-")  # no AR at temperature 1 among the runs
        self.assertEqual(self.row(0)["xAR"], "-")  # AR rows carry no speedup
        lone = run("ssd", 18.0, [1, 1])
        self.assertEqual(summary.row(lone, [lone])["xAR="], "-")


if __name__ == "__main__":
    unittest.main()
