#!/usr/bin/python3
"""Figure 6 (right), analysis/ssd_analysis/figures_scale.py, on the shipped results/ runs
(sweeps/fig6-draft-ranks.toml and results/characterize.h5): the per-rank budget and the
predictions grow with the number of draft ranks, oversubscribed runs are drawn apart, and
without runs at two draft-rank counts the figure is skipped with the reason.
Run: /usr/bin/python3 -m unittest discover -s analysis/tests"""
import glob
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from ssd_analysis import figures as F  # noqa: E402
from ssd_analysis import figures_scale as S  # noqa: E402
from ssd_analysis import io  # noqa: E402

RESULTS = os.path.join(HERE, "..", "..", "results")
RUNS = sorted(glob.glob(os.path.join(RESULTS, "fig6-draft-ranks", "runs", "*.h5")))
CHAR = os.path.join(RESULTS, "characterize.h5")


@unittest.skipUnless(RUNS and os.path.exists(CHAR), "results/fig6-draft-ranks not generated")
class DraftRanksFigure(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs, errors = io.load_runs(RUNS + [CHAR])
        assert not errors, errors
        cls.dir = tempfile.mkdtemp(prefix="ssd-figures-scale-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def test_budget_and_predictions_grow_with_draft_ranks(self):
        ssd = sorted((r for r in self.runs if r.mode == "ssd"), key=S._draft_ranks)
        self.assertEqual([S._draft_ranks(r) for r in ssd], [1, 2, 3])
        budgets = [S._measured(r)[0] for r in ssd]
        # b/D rows per rank: the same window affords each sequence more branches. Not D times
        # more here: D = 2 puts 3 ranks on this host's 2 cores, and D = 3 four. Earlier sets
        # measured 1.29x (8.8 -> 11.4) and 1.64x (8.9 -> 14.6) from D = 1 to 2; the bf16-compute
        # set on a Zen 4 host 1.01x (7.9 -> 8.1) in the committed runs and 1.58x (7.1 -> 11.2)
        # in a rerun minutes later, with D = 3 at 2.3x and 3.0x. So: D = 2 never below D = 1
        # by more than noise, D = 3 clearly above it.
        self.assertGreater(budgets[1], 0.9 * budgets[0], budgets)
        self.assertGreater(budgets[2], 1.2 * budgets[0], budgets)
        for r in ssd:  # every draft rank served, and row i was served by rank i % D
            D = S._draft_ranks(r)
            self.assertEqual(sorted(set(r.draft_ranks["draft_rank"].tolist())), list(range(D)))
            np.testing.assert_array_equal(r.rounds["draft_rank"], r.rounds["row"] % D)
        here, paper, _, _, _ = S._predictions(ssd[0], next(r for r in self.runs
                                                        if r.is_characterize), [1, 2, 3, 4])
        self.assertTrue(all(b2 >= b1 for (_, _, b1, _, _), (_, _, b2, _, _)
                            in zip(here, here[1:])), here)
        self.assertTrue(all(s2 >= s1 for (_, s1, *_), (_, s2, *_) in zip(paper, paper[1:])),
                        paper)
        self.assertGreater(paper[-1][1], paper[0][1])

    def test_figure(self):
        fig = S.fig_draft_ranks(self.runs, self.dir)
        speed = fig.axes[0]
        # Measured points: filled where T + D <= host CPUs, hollow where oversubscribed.
        points = [line for line in speed.get_lines() if line.get_marker() == "o"
                  and len(line.get_xdata()) == 1]
        faces = {int(line.get_xdata()[0]): line.get_markerfacecolor() for line in points}
        cores = S._cores(next(r for r in self.runs if r.mode == "ssd"))
        for D, face in faces.items():
            self.assertEqual(face == "none", 1 + D > cores, (D, face, cores))
        for p in F.save(fig, self.dir, "fig6_draft_ranks"):
            self.assertGreater(os.path.getsize(p), 1000, p)

    def test_skipped_without_two_draft_rank_counts(self):
        one = [r for r in self.runs if r.is_characterize or r.mode == "ar"
               or S._draft_ranks(r) == 1]
        with self.assertRaises(F.Skip):
            S.fig_draft_ranks(one, self.dir)


if __name__ == "__main__":
    unittest.main()
