#!/usr/bin/python3
"""Unit tests of analysis/ssd_analysis/figures_cache.py on hand-built runs: Figure 3 (cache-miss
rate vs fan-out, log-log) is written when there are few or no misses, and fits only what it can;
figures.py's make_all draws it.
Run: /usr/bin/python3 -m unittest discover -s analysis/tests"""
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ssd_analysis import figures as F  # noqa: E402
from ssd_analysis import figures_cache as C  # noqa: E402
from ssd_analysis.io import Run  # noqa: E402
from test_metrics import rounds_table  # noqa: E402


def ssd_run(bonus_ranks, target="synthetic:tiny-llama"):
    """An SSD run whose every round (after the first) was a looked-up primary speculation with
    the given bonus ranks; outcome_hit as for fan-out 1."""
    rows = [dict(round=i, source=0 if i == 0 else 1, outcome_hit=int(rank == 1),
                 bonus_rank=int(rank), start_s=float(i), end_s=i + 1.0, verify_time_s=0.5)
            for i, rank in enumerate(bonus_ranks)]
    return Run(path=f"{target}.h5", mode="ssd", attrs={"synthetic_outcomes": 0},
               config={"target": target, "draft": "perturb:0.1", "temperature": "0",
                       "saguaro_c": "0"}, rounds=rounds_table(rows))


def labels(ax):
    return ax.get_legend_handles_labels()[1]


def fit_lines(ax):
    return [line for line in ax.get_lines() if line.get_linestyle() == "--"]


class Figure3Fanout(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ssd-figures-test-")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def draw(self, runs):
        """fig_fanout, saved (drawing is where an empty log axis fails); the primary panel (the
        overall one needs runs whose misses all went to the backup)."""
        fig = C.fig_fanout(runs, self.dir)
        ax = fig.axes[0]
        found = (labels(ax), fit_lines(ax), ax.texts and ax.texts[0].get_text())
        paths = F.save(fig, self.dir, "fig3_fanout")
        for p in paths:
            self.assertGreater(os.path.getsize(p), 1000, p)
        return found

    def test_no_misses_at_any_fanout(self):
        # every bonus token was the draft's top token (all hits, e.g. a C = 0 sweep point): the
        # miss rate is 0 at every F, nothing is positive on the log axis
        names, fits, text = self.draw([ssd_run([1] * 40)])
        self.assertEqual(len(names), 1)
        self.assertIn("no misses at any fan-out", names[0])
        self.assertEqual(fits, [])
        self.assertEqual(text, "no misses at any fan-out")

    def test_misses_only_at_f1_are_fitted(self):
        # ranks 1 and 2 only: the miss curve has one positive point, which a least-squares fit
        # on the curve could not use; the likelihood of the 40 ranks still determines r
        names, fits, _ = self.draw([ssd_run([1, 2] * 20)])
        self.assertRegex(names[0], r": r=\d\.\d\d\u00b1\d\.\d\d, ")
        self.assertEqual(len(fits), 1)

    def test_fit_beside_a_series_without_misses(self):
        rng = np.random.default_rng(4)
        ranks = np.floor((1.0 - rng.random(400)) ** (-1.0 / 0.8)).astype(int)
        ranks[ranks > 64] = 0
        names, fits, text = self.draw([ssd_run(ranks, "synthetic:a"),
                                       ssd_run([1] * 40, "synthetic:b")])
        self.assertEqual(len(names), 2)
        self.assertRegex(names[0], r"^a/.*: r=0\.[78]\d\u00b10\.\d\d, paper's F\^-r \d\.\d\d "
                         r"\(n=400, \d+ beyond 64\)$")
        self.assertIn("no misses at any fan-out", names[1])
        self.assertEqual(len(fits), 1)
        self.assertFalse(text)

    def test_make_all_writes_fig3(self):
        lines = []
        written = F.make_all([ssd_run([1] * 40)], self.dir, lines.append)
        self.assertIn(os.path.join(self.dir, "fig3_fanout.png"), written)
        self.assertIn(os.path.join(self.dir, "fig3_fanout.pdf"), written)
        self.assertTrue(any(line.startswith("fig3_fanout: ") and "skipped" not in line
                            for line in lines), lines)


if __name__ == "__main__":
    unittest.main()
