#!/usr/bin/python3
"""Unit tests of analysis/ssd_analysis: the paper's formulas on hand-built records with known
answers. Run: /usr/bin/python3 -m unittest discover -s analysis/tests"""
import json
import math
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ssd_analysis import metrics as M  # noqa: E402
from ssd_analysis import timing as T  # noqa: E402

# Hand-built /rounds of one SSD batch group, batch 1, 6 rounds:
#   round   0      1     2     3     4     5
#   source  2(1st) 1     1     2     3     1      (1 hit, 2 primary JIT, 3 backup)
#   accepted 3     2     4     0     1     2
#   outcome_hit 1  1     0     0     1    -1      (round 5: sequence ended, never looked up)
SOURCE = np.array([2, 1, 1, 2, 3, 1])
ACCEPTED = np.array([3, 2, 4, 0, 1, 2])
OUTCOME = np.array([1, 1, 0, 0, 1, -1])
ROUND = np.arange(6)


class HitStatistics(unittest.TestCase):
    def test_p_hit(self):
        self.assertAlmostEqual(M.p_hit(OUTCOME), 3 / 5)

    def test_p_hit_by_source(self):
        p, pp, pb, n, n_p, n_b = M.hit_rates(OUTCOME, SOURCE)
        self.assertAlmostEqual(p, 3 / 5)
        # primary-speculated lookups: rounds 0 (hit), 1 (hit), 2 (miss), 3 (miss)
        self.assertAlmostEqual(pp, 2 / 4)
        # backup-speculated lookups: round 4 (hit)
        self.assertAlmostEqual(pb, 1.0)
        self.assertEqual((n, n_p, n_b), (5, 4, 1))

    def test_no_backup_rounds_is_nan(self):
        _, _, pb, _, _, n_b = M.hit_rates(np.array([1, 0]), np.array([1, 2]))
        self.assertTrue(math.isnan(pb))
        self.assertEqual(n_b, 0)

    def test_e_hit_and_e_miss(self):
        # hits: rounds 1, 2, 5 -> accepted 2, 4, 2
        self.assertAlmostEqual(M.e_hit(ACCEPTED, SOURCE), 1 + 8 / 3)
        # misses after round 0: rounds 3 (JIT) and 4 (backup) -> accepted 0, 1
        self.assertAlmostEqual(M.e_miss(ACCEPTED, SOURCE, ROUND), 1 + 0.5)

    def test_e_sd(self):
        self.assertAlmostEqual(M.e_sd([0, 1, 2, 3]), 2.5)


class Equation1(unittest.TestCase):
    def test_closed_form(self):
        self.assertAlmostEqual(M.eq1_p_hit(0.8, 0.3), 0.3 / 0.5)
        self.assertAlmostEqual(M.eq1_p_hit(0.5, 0.5), 0.5)   # memoryless chain
        self.assertEqual(M.eq1_p_hit(1.0, 0.0), 1.0)

    def test_matches_simulated_chain(self):
        rng = np.random.default_rng(1)
        pp, pb = 0.7, 0.2
        hit, hits, n = True, 0, 200_000
        for u in rng.random(n):
            hit = u < (pp if hit else pb)   # hit -> next round speculated by the primary
            hits += hit
        self.assertAlmostEqual(hits / n, M.eq1_p_hit(pp, pb), delta=0.005)


class Theorem7AndCorollary16(unittest.TestCase):
    P, EH, EM, TP, TB = 0.5, 4.0, 2.0, 0.5, 0.2

    def test_theorem7(self):
        # (0.5*4 + 0.5*2) / (0.5*max(1, 0.5) + 0.5*(1 + 0.2)) = 3 / 1.1
        self.assertAlmostEqual(M.theorem7_speedup(self.P, self.EH, self.EM, self.TP, self.TB),
                               3 / 1.1)
        # T_p > 1: a hit round costs T_p
        self.assertAlmostEqual(M.theorem7_speedup(self.P, self.EH, self.EM, 2.0, self.TB),
                               3 / (0.5 * 2.0 + 0.5 * 1.2))

    def test_verify_unit_divides(self):
        base = M.theorem7_speedup(self.P, self.EH, self.EM, self.TP, self.TB)
        self.assertAlmostEqual(
            M.theorem7_speedup(self.P, self.EH, self.EM, self.TP, self.TB, verify=2.5), base / 2.5)

    def test_corollary16(self):
        t7 = M.theorem7_speedup(self.P, self.EH, self.EM, self.TP, self.TB)
        self.assertAlmostEqual(
            M.corollary16_speedup(self.P, self.EH, self.EM, self.TP, self.TB, 1), t7)
        # b = 2: all hit with probability 0.25: 3 / (0.25 + 0.75 * 1.2)
        self.assertAlmostEqual(
            M.corollary16_speedup(self.P, self.EH, self.EM, self.TP, self.TB, 2), 3 / 1.15)
        # b -> infinity: (p E_hit + (1-p) E_miss) / (1 + T_b)
        self.assertAlmostEqual(
            M.corollary16_speedup(self.P, self.EH, self.EM, self.TP, self.TB, 10_000), 3 / 1.2)
        # monotone non-increasing in b
        s = [M.corollary16_speedup(self.P, self.EH, self.EM, self.TP, self.TB, b)
             for b in range(1, 20)]
        self.assertTrue(all(a >= b for a, b in zip(s, s[1:])))

    def test_sd_speedup(self):
        self.assertAlmostEqual(M.sd_speedup(3.0, 0.5), 2.0)
        # AR units: E_SD / (verify_rel + T_SD_rel), T_SD_rel = verify_rel * T_SD
        self.assertAlmostEqual(M.sd_speedup(3.0, 0.5, verify=1.5), 3.0 / (1.5 + 0.75))

    def test_corollary8_ssd_no_worse_than_sd(self):
        # primary and backup both the SD speculator: E_hit = E_miss = E_SD, T_p = T_b = T_SD
        for p in (0.0, 0.3, 1.0):
            for t in (0.0, 0.4, 2.0):
                ssd = M.theorem7_speedup(p, 3.0, 3.0, t, t)
                self.assertGreaterEqual(ssd + 1e-12, M.sd_speedup(3.0, t))


class Corollary9(unittest.TestCase):
    def test_bounds_values(self):
        lo, hi = M.corollary9_bounds(t_sd=0.5, e_hit_=3.0, e_sd_=2.0, p=0.6)
        self.assertAlmostEqual(hi, 1.5 * 1.5)
        self.assertAlmostEqual(lo, 1.5 * 1.5 * 0.6)

    def test_ratio_inside_bounds(self):
        rng = np.random.default_rng(2)
        for _ in range(500):
            p, t_p, t_sd = rng.random(), 0.99 * rng.random(), 2 * rng.random()
            e_miss = 1 + 3 * rng.random()
            e_hit = e_miss + 2 * rng.random()
            e_sd = 1 + 4 * rng.random()
            ratio = M.theorem7_speedup(p, e_hit, e_miss, t_p, 0.0) / M.sd_speedup(e_sd, t_sd)
            lo, hi = M.corollary9_bounds(t_sd, e_hit, e_sd, p)
            self.assertLessEqual(lo, ratio + 1e-12)
            self.assertLessEqual(ratio, hi + 1e-12)


class Theorem17(unittest.TestCase):
    def test_speedups_equal_at_b_star(self):
        for p, e_hit, e_miss, t_jit in ((0.8, 4.0, 1.5, 0.6), (0.6, 3.0, 1.2, 0.9),
                                        (0.95, 5.0, 2.0, 0.3)):
            b = M.b_star(p, e_hit, e_miss, t_jit)
            self.assertTrue(0 < b < math.inf, (p, e_hit, e_miss, t_jit, b))
            slow = M.speedup_slow_backup(p, e_hit, t_jit, b)
            fast = M.speedup_fast_backup(p, e_hit, e_miss, b)
            self.assertAlmostEqual(slow, fast, places=9)
            # the slow (primary) fallback wins below b*, the fast backup above
            self.assertGreater(M.speedup_slow_backup(p, e_hit, t_jit, b / 2), fast)
            self.assertLess(M.speedup_slow_backup(p, e_hit, t_jit, 2 * b), fast)

    def test_closed_form(self):
        p, e_hit, e_miss, t_jit = 0.8, 4.0, 1.5, 0.6
        n = p * e_hit + (1 - p) * e_miss
        expect = math.log(1 + 1 / t_jit - e_hit / (t_jit * n)) / math.log(p)
        self.assertAlmostEqual(M.b_star(p, e_hit, e_miss, t_jit), expect)

    def test_no_crossing(self):
        # backup as good as the primary: the backup always wins
        self.assertEqual(M.b_star(0.8, 3.0, 3.0, 0.5), 0.0)
        # a useless backup and a cheap primary: x* < 0, the primary always wins
        self.assertEqual(M.b_star(0.5, 5.0, 1.0, 0.1), math.inf)


class PowerLaw(unittest.TestCase):
    def draw_ranks(self, r, n, rng, examined=64):
        # P(rank > F) = (F + 1)^-r  <=>  rank = floor(U^(-1/r)), U uniform on (0, 1]
        u = 1.0 - rng.random(n)
        rank = np.floor(u ** (-1.0 / r)).astype(np.int64)
        rank[rank > examined] = 0          # beyond the examined list: recorded as 0
        return rank

    def test_miss_curve(self):
        ranks = np.array([1, 1, 2, 3, 0, 5])
        np.testing.assert_allclose(M.miss_rate_curve(ranks, [1, 2, 4, 64]),
                                   [4 / 6, 3 / 6, 2 / 6, 1 / 6])

    def test_fit_recovers_r(self):
        rng = np.random.default_rng(3)
        for r in (0.4, 0.8, 1.5, 2.5):
            ranks = self.draw_ranks(r, 20_000, rng)
            fit, se = M.fit_power_law_mle(ranks)
            self.assertAlmostEqual(fit, r, delta=4 * se)
            self.assertLess(se, 0.03 * r)

    def test_censoring_beyond_the_list_is_counted(self):
        # at r = 0.3 a third of the ranks lie beyond the 64 examined: treating them as rank
        # 65 or dropping them would bias r; censored, the fit still finds it
        rng = np.random.default_rng(4)
        ranks = self.draw_ranks(0.3, 20_000, rng)
        self.assertGreater(np.mean(ranks == 0), 0.25)
        fit, se = M.fit_power_law_mle(ranks)
        self.assertAlmostEqual(fit, 0.3, delta=4 * se)

    def test_fit_without_data(self):
        self.assertTrue(math.isnan(M.fit_power_law_mle(np.array([], int))[0]))
        self.assertTrue(math.isnan(M.fit_power_law_mle(np.ones(50, int))[0]))  # never a miss
        self.assertTrue(math.isnan(M.fit_power_law_paper_mle(np.ones(50, int))))

    def test_fit_in_the_papers_convention(self):
        # Definition 11's law with a free constant: miss(F) = c F^-r for F >= 1
        rng = np.random.default_rng(5)
        for r, c in ((0.5, 0.6), (1.2, 0.3)):
            u = rng.random(40_000)
            ranks = np.where(u > c, 1, np.floor((u / c) ** (-1.0 / r)).astype(np.int64) + 1)
            ranks[ranks > 64] = 0
            self.assertAlmostEqual(M.fit_power_law_paper_mle(ranks), r, delta=0.05 * r)
        # on the shifted law the paper's r is below the shifted one
        shifted = self.draw_ranks(1.5, 20_000, rng)
        self.assertLess(M.fit_power_law_paper_mle(shifted), M.fit_power_law_mle(shifted)[0])


class Equation1Finite(unittest.TestCase):
    def test_long_sequences_reach_equation_1(self):
        self.assertAlmostEqual(M.eq1_finite(0.9, 0.2, 1.0, [100_000]),
                               M.eq1_p_hit(0.9, 0.2), places=4)
        self.assertAlmostEqual(M.eq1_finite(0.9, 0.2, 0.5, [100_000]),
                               M.eq1_mixed(0.9, 0.2, 0.5), places=4)

    def test_short_sequences_stay_near_the_primary_start(self):
        # one lookup each: always the primary's hit rate
        self.assertAlmostEqual(M.eq1_finite(0.9, 0.1, 1.0, [1, 1, 1]), 0.9)
        # two: 0.9, then 0.9 * 0.9 + 0.1 * 0.1
        self.assertAlmostEqual(M.eq1_finite(0.9, 0.1, 1.0, [2]), (0.9 + 0.82) / 2)
        self.assertGreater(M.eq1_finite(0.9, 0.1, 1.0, [30]), M.eq1_p_hit(0.9, 0.1))

    def test_simulated_chains_match(self):
        rng = np.random.default_rng(7)
        hits = n = 0
        for _ in range(4000):
            primary = True
            for _ in range(25):
                hit = rng.random() < (0.85 if primary else 0.15)
                hits, n = hits + hit, n + 1
                primary = hit or rng.random() >= 0.7
        self.assertAlmostEqual(M.eq1_finite(0.85, 0.15, 0.7, [25] * 4000), hits / n,
                               delta=0.01)


class Pareto(unittest.TestCase):
    def test_frontier(self):
        lat = [1.0, 2.0, 3.0, 2.5, 4.0]
        thr = [10., 30., 25., 40., 50.]
        self.assertEqual(M.pareto_frontier(lat, thr), [0, 1, 3, 4])


def rounds_table(rows):
    """/rounds columns from a list of dicts (defaults for the rest)."""
    defaults = dict(rep=0, group=0, round=0, row=0, sequence=0, drafted=3, accepted=0,
                    bonus_token=0, tokens=1, source=2, outcome_hit=-1, bonus_rank=0, budget=0,
                    branches=0, cache_build_time_s=0.0, fallback_time_s=0.0, start_s=0.0,
                    end_s=0.0, draft_start_s=0.0, draft_end_s=0.0, draft_time_s=0.0,
                    verify_time_s=0.0, accept_time_s=0.0, comm_time_s=0.0, target_idle_s=0.0,
                    draft_idle_s=0.0, message_bytes=0)
    full = [defaults | r for r in rows]
    return {k: np.array([r[k] for r in full]) for k in defaults}


class Timing(unittest.TestCase):
    def test_batch_rounds_merge_rows(self):
        rd = rounds_table([
            dict(round=0, row=0, tokens=3, accepted=2, source=2, outcome_hit=1,
                 cache_build_time_s=0.5, verify_time_s=1.0, start_s=0, end_s=2),
            dict(round=0, row=1, tokens=1, accepted=0, source=2, outcome_hit=0,
                 cache_build_time_s=0.5, verify_time_s=1.0, start_s=0, end_s=2),
            dict(round=1, row=0, tokens=4, accepted=3, source=1, outcome_hit=-1,
                 verify_time_s=1.0, start_s=2, end_s=3),
        ])
        br = T.batch_rounds(rd)
        np.testing.assert_array_equal(br["rows"], [2, 1])
        np.testing.assert_array_equal(br["tokens"], [4, 4])
        np.testing.assert_array_equal(br["tokens_full"], [4, 4])
        np.testing.assert_array_equal(br["all_hit"], [False, True])
        np.testing.assert_array_equal(br["build"], [0.5, 0.0])
        np.testing.assert_array_equal(br["wall"], [2.0, 1.0])

    def test_ssd_latency_all_hits_equals_verify(self):
        # every row hits, build (0.5) hidden under verification (1.0), no overheads: the round
        # costs exactly one verification (Theorem 7 with p = 1, T_p < 1)
        rd = rounds_table([dict(round=i, source=1, outcome_hit=1, cache_build_time_s=0.5,
                                verify_time_s=1.0) for i in range(1, 5)])
        br = T.batch_rounds(rd)
        lat, parts = T.ssd_round_latency(br, np.ones(4, bool), p=1.0)
        self.assertAlmostEqual(lat, 1.0)
        # a build longer than the verification shows: max(1, T_p)
        rd["cache_build_time_s"][:] = 1.5
        lat, _ = T.ssd_round_latency(T.batch_rounds(rd), np.ones(4, bool), p=1.0)
        self.assertAlmostEqual(lat, 1.5)

    def test_ssd_latency_build_hides_message_transit(self):
        # the draft builds while the speculation travels, is verified and the outcome returns:
        # a build (2.0) longer than verify (1.0) + round trip (0.5) is all the round waits for
        rd = rounds_table([dict(round=i, source=1, outcome_hit=1, cache_build_time_s=2.0,
                                verify_time_s=1.0, comm_time_s=0.5, draft_time_s=0.1)
                           for i in range(1, 4)])
        lat, parts = T.ssd_round_latency(T.batch_rounds(rd), np.ones(3, bool), p=1.0)
        self.assertAlmostEqual(parts["transit"], 0.5)
        self.assertAlmostEqual(lat, 2.0 + 0.1)         # build + lookup
        rd["cache_build_time_s"][:] = 1.2              # now verify + transit is the longer
        lat, _ = T.ssd_round_latency(T.batch_rounds(rd), np.ones(3, bool), p=1.0)
        self.assertAlmostEqual(lat, 1.5 + 0.1)
        ideal, _ = T.ssd_round_latency(T.batch_rounds(rd), np.ones(3, bool), p=1.0,
                                       include_overheads=False)
        self.assertAlmostEqual(ideal, 1.2)              # the paper: max(1, T_p) verifications

    def test_ssd_latency_misses_add_fallback(self):
        # batch of 2, p = 0.5: all hit with probability 1/4 (Corollary 16); misses add F
        rd = rounds_table([dict(round=1, row=r, source=2, outcome_hit=0, verify_time_s=1.0,
                                fallback_time_s=0.4, draft_time_s=0.4) for r in (0, 1)])
        lat, parts = T.ssd_round_latency(T.batch_rounds(rd), np.ones(1, bool), p=0.5)
        self.assertAlmostEqual(parts["P_all"], 0.25)
        self.assertAlmostEqual(lat, 1.0 + 0.75 * 0.4)

    def test_ar_steps_dedupe_rows(self):
        steps = {"rep": np.array([0, 0, 0, 0, 0]), "step": np.array([-1, 0, 0, 1, 1]),
                 "row": np.array([0, 0, 1, 0, 1]), "tokens": np.array([1, 1, 1, 1, 1]),
                 "start_s": np.array([0.0, 1.0, 1.0, 2.0, 2.0]),
                 "step_time_s": np.array([0.5, 0.2, 0.2, 0.4, 0.4])}
        st = T.ar_steps(steps)
        np.testing.assert_array_equal(st["rows"], [2, 2])
        np.testing.assert_allclose(st["time"], [0.2, 0.4])



class CacheFigureStatistics(unittest.TestCase):
    """The quantities Figures 4 and 5 plot from a run's /rounds."""

    def test_alpha_mle_recovers_a_capped_geometric(self):
        # Appendix A.2's model: k accepted with probability a^k (1 - a) for k < K, a^K at K.
        rng = np.random.default_rng(5)
        for a, K in ((0.85, 3), (0.5, 4), (0.95, 8)):
            k = np.minimum(rng.geometric(1 - a, size=20000) - 1, K)
            self.assertAlmostEqual(M.alpha_mle(k, K), a, delta=0.01)
            # acceptance_rate (accepted / drafted) is a different, smaller number
            self.assertLess(k.mean() / K, a)
        self.assertEqual(M.alpha_mle([3, 3, 3], 3), 1.0)
        self.assertEqual(M.alpha_mle([0, 0], 3), 0.0)
        self.assertTrue(math.isnan(M.alpha_mle([], 3)))

    def test_hits_at_shape_counts_ranks_within_each_positions_fanout(self):
        accepted = np.array([0, 0, 1, 3, 3])
        ranks = np.array([1, 3, 2, 0, 4])  # rank 0: outside the draft's list
        np.testing.assert_array_equal(M.hits_at_shape(accepted, ranks, [2, 2, 1, 4]),
                                      [True, False, True, False, True])
        self.assertEqual(M.fixed_shape("uniform:2", 3), [2, 2, 2, 2])
        self.assertEqual(M.fixed_shape("list:4,0,0,0", 3), [4, 0, 0, 0])
        self.assertIsNone(M.fixed_shape("geometric:8", 3))

    def test_eq1_curve_of_two_equal_curves_is_that_curve(self):
        ranks = np.array([1, 1, 2, 5, 9, 1, 3])
        f = np.arange(1, 11)
        want = M.miss_rate_curve(ranks, f)
        np.testing.assert_allclose(M.eq1_miss_curve(ranks, ranks, f), want)
        self.assertIsNone(M.eq1_miss_curve(ranks, [], f))


class SharedSpeedupTable(unittest.TestCase):
    """tests/reference/speedup_cases.json: the same table tests/test_fallback.cpp checks the
    run-time fallback policy against, so analysis and ssd-bench agree on Corollary 16 and
    Theorem 17's slow fallback."""

    def test_matches_the_table(self):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                            "reference", "speedup_cases.json")
        with open(path) as f:
            cases = json.load(f)["cases"]
        self.assertGreater(len(cases), 100)
        for c in cases:
            # the table's one primary latency (keyed t_jit, make_speedup_cases.py) is
            # Corollary 16's T_p as well
            args = (c["p_hit"], c["e_hit"], c["e_miss"], c["t_jit"], c["t_b"], c["b"])
            self.assertAlmostEqual(M.corollary16_speedup(*args), c["corollary16"], places=12)
            self.assertAlmostEqual(
                M.speedup_slow_backup(c["p_hit"], c["e_hit"], c["t_jit"], c["b"]),
                c["slow_fallback"], places=12)
            if "b_star" in c:
                self.assertAlmostEqual(M.b_star(c["p_hit"], c["e_hit"], c["e_miss"], c["t_jit"]),
                                       c["b_star"], places=9)

if __name__ == "__main__":
    unittest.main()
