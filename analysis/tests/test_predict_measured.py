#!/usr/bin/python3
"""Unit tests of the step costs `ssd-analyze predict` reads from a characterize file
(analysis/ssd_analysis/measured.py: alone, side by side, SD's and SSD's rounds, further
sequences) and of the finite runs its validation predicts (predict.finite_run_rate).
Run: /usr/bin/python3 -m unittest discover -s analysis/tests"""
import os
import sys
import unittest
from dataclasses import replace

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from ssd_analysis import measured as MS  # noqa: E402
from ssd_analysis import predict as P  # noqa: E402
from test_predict import gpu_layout  # noqa: E402


def fake_characterize(target="synthetic:llama-124m", draft="synthetic:llama-12m"):
    """A characterize file's tables as io.load_run gives them: one GEMM each, and forward
    passes timed alone (1 and 5 rows) and side by side (twice as long)."""
    from types import SimpleNamespace
    gemm = {"model_id": [0, 1], "rank": [0, 1], "shape_id": [0, 0], "rows": [1, 1],
            "seconds": [1e-3, 1e-4], "full_out": [1, 1], "out": [1, 1], "per_token": [1, 1]}
    forward = {"model_id": [0, 0, 1, 1, 0, 0, 1, 1], "rows": [1, 5, 1, 5, 1, 5, 1, 5],
               "seconds": [0.010, 0.015, 0.001, 0.002, 0.020, 0.030, 0.002, 0.004],
               "concurrent": [0, 0, 0, 0, 1, 1, 1, 1]}
    names = {"model_id": {"names": "target,draft"}}
    return SimpleNamespace(gemm=gemm, gemm_attrs=names, tables={"forward": forward},
                           table_attrs={"forward": names},
                           models={"target": {"spec": target}, "draft": {"spec": draft}})


class Steadiness(unittest.TestCase):
    """predict repeats the characterize file's own warning (its unsteady_passes attribute)."""

    def test_warns_only_for_flagged_files(self):
        from types import SimpleNamespace
        from ssd_analysis.predict_inputs import steadiness_note
        self.assertIsNone(steadiness_note(None))
        self.assertIsNone(steadiness_note(SimpleNamespace(attrs={})))  # before the check
        self.assertIsNone(steadiness_note(SimpleNamespace(attrs={"unsteady_passes": 0,
                                                                 "unsteady": ""})))
        flagged = "target alone rows 3 rows 10.320 ms < rows 2 rows 13.197 ms"
        note = steadiness_note(SimpleNamespace(attrs={"unsteady_passes": 1, "unsteady": flagged}))
        self.assertIn("WARNING", note)
        self.assertIn("1 unsteady", note)
        self.assertIn(flagged, note)


class SideBySide(unittest.TestCase):
    """AR and SD use the passes timed alone; SSD's overlapped verification and cache build the
    ones timed side by side, for the very pair characterize measured."""

    def test_steps_pick_alone_or_beside(self):
        from ssd_analysis import predict_inputs as PI
        char = fake_characterize()
        alone = MS.MeasuredStep.from_characterize(char, "target")
        beside = MS.MeasuredStep.from_characterize(char, "target", concurrent=True)
        self.assertAlmostEqual(alone(1), 0.010)
        self.assertAlmostEqual(beside(5), 0.030)
        t, d = PI.beside_steps("synthetic:llama-124m", "llama-12m", char, 1, 1)
        self.assertAlmostEqual(t(5), 0.030)
        self.assertAlmostEqual(d(1), 0.002)
        # another pair, a collocated draft or a TP group: nothing measured side by side
        self.assertEqual(PI.beside_steps("llama-12m", "llama-12m", char, 1, 1), (None, None))
        self.assertEqual(PI.beside_steps("llama-124m", "llama-12m", char, 1, 0), (None, None))
        self.assertEqual(PI.beside_steps("llama-124m", "llama-12m", char, 2, 1), (None, None))

    def test_attention_cost_scales_to_the_runs_context(self):
        char = fake_characterize()
        fw = char.tables["forward"]
        # the 5-row target step alone also at a quarter of the context, 4 ms faster
        for column, value in (("model_id", 0), ("rows", 5), ("seconds", 0.011),
                              ("concurrent", 0)):
            fw[column] = fw[column] + [value]
        fw["context"] = [128] * 8 + [32]
        per_row_token = 0.004 / (5 * 96)
        at_file = MS.MeasuredStep.from_characterize(char, "target")
        at_run = MS.MeasuredStep.from_characterize(char, "target", context=40)
        self.assertAlmostEqual(at_file(5), 0.015)   # the short-context point is not a point
        self.assertAlmostEqual(at_run(5), 0.015 - per_row_token * 5 * 88)
        self.assertAlmostEqual(at_run(1), 0.010 - per_row_token * 1 * 88)
        # the draft timed no shorter context: no shift
        self.assertAlmostEqual(MS.MeasuredStep.from_characterize(char, "draft", context=40)(1),
                               0.001)

    def test_ssd_slower_beside_sd_and_ar_unchanged(self):
        from ssd_analysis import predict_inputs as PI
        char = fake_characterize()
        t, d = (MS.MeasuredStep.from_characterize(char, r) for r in ("target", "draft"))
        plain = P.Layout(t, d, 1e-6, 1e9, 32000, 1, False)
        side = P.Layout(t, d, 1e-6, 1e9, 32000, 1, False, None,
                        *PI.beside_steps("llama-124m", "llama-12m", char, 1, 1))
        self.assertEqual(P.predict_ar(side, 1).tok_s, P.predict_ar(plain, 1).tok_s)
        self.assertEqual(P.predict_sd(side, 1, 4, 0.8).tok_s, P.predict_sd(plain, 1, 4, 0.8).tok_s)
        fast = P.predict_ssd(plain, 1, 4, 0.8, 0.7, budget=2)
        slow = P.predict_ssd(side, 1, 4, 0.8, 0.7, budget=2)
        self.assertLess(slow.tok_s, fast.tok_s)


def with_rounds(char, rows):
    """`char` with /forward rows (model, kind, rows, sequences, seconds, concurrent) added: the
    kinds characterize times beside the single passes (SD's and SSD's rounds, sequences)."""
    fw = char.tables["forward"]
    n = len(fw["rows"])
    models = ["target", "draft"]
    kinds = ["pass"]
    fw["kind_id"] = [0] * n
    fw["sequences"] = [1] * n
    for model, kind, r, seqs, secs, conc in rows:
        models += [model] if model not in models else []
        kinds += [kind] if kind not in kinds else []
        for column, value in (("model_id", models.index(model)), ("kind_id", kinds.index(kind)),
                              ("rows", r), ("sequences", seqs), ("seconds", secs),
                              ("concurrent", conc)):
            fw[column] = fw[column] + [value]
    char.table_attrs = {"forward": {"model_id": {"names": ",".join(models)},
                                    "kind_id": {"names": ",".join(kinds)}}}
    return char


class Rounds(unittest.TestCase):
    """The costs characterize times as the runs take them: SD's round (each model's pass after
    the other's), SSD's round (the verification beside a cache build), and one token for each
    of many sequences."""

    def test_sd_round_adds_to_collocated_sd_only(self):
        from ssd_analysis import predict_inputs as PI
        # in SD's round the verification took 0.018 (0.015 alone), a draft step 0.0015 (0.001)
        char = with_rounds(fake_characterize(), [("sd", "verify", 5, 1, 0.018, 0),
                                                 ("sd", "draft", 1, 1, 0.0015, 0)])
        extras = MS.sd_round_extras(char)
        self.assertAlmostEqual(extras[0], 0.003)
        self.assertAlmostEqual(extras[1], 0.0005)
        t, d = (MS.MeasuredStep.from_characterize(char, r) for r in ("target", "draft"))
        self.assertAlmostEqual(t(5), 0.015)   # the round's rows are not points of the step
        turns = PI.turns_steps("llama-124m", "llama-12m", char, 1, t, d)
        self.assertAlmostEqual(turns[0](5), 0.018)
        self.assertAlmostEqual(turns[1](1), 0.0015)
        # the same seconds at other rows: weights read again, whatever the rows
        self.assertAlmostEqual(turns[0](1), 0.010 + 0.003)
        self.assertEqual(PI.turns_steps("llama-12m", "llama-12m", char, 1, t, d), (None, None))
        plain = P.Layout(t, d, 1e-6, 1e9, 32000, 1, True)
        turned = P.Layout(t, d, 1e-6, 1e9, 32000, 1, True, None, None, None, *turns)
        sd, sd_turned = P.predict_sd(plain, 1, 4, 0.8), P.predict_sd(turned, 1, 4, 0.8)
        self.assertAlmostEqual(sd.round_s, 0.015 + 4 * 0.001)
        self.assertAlmostEqual(sd_turned.round_s, 0.018 + 4 * 0.0015)
        self.assertEqual(P.predict_ar(turned, 1).tok_s, P.predict_ar(plain, 1).tok_s)
        # a separate draft rank keeps each model on its own rank: no turns
        separate = replace(turned, sd_collocated=False)
        self.assertLess(P.predict_sd(separate, 1, 4, 0.8).round_s, sd_turned.round_s)

    def test_ssd_round_slows_the_verification_by_the_overlap(self):
        from ssd_analysis import predict_inputs as PI
        # SSD's round: the verification 0.018 beside a build of 0.012 (0.002 + 4 x 0.0025
        # alone: glue = the 5-row pass, branch steps of 10 rows interpolated past 5 rows)
        # and just-in-time steps of 0.0015 (0.001 alone)
        char = with_rounds(fake_characterize(), [("ssd", "verify", 5, 1, 0.018, 1),
                                                 ("ssd", "build", 10, 1, 0.012, 1),
                                                 ("ssd", "fallback", 1, 1, 0.0015, 1)])
        d = MS.MeasuredStep.from_characterize(char, "draft")
        alone_build = d(5) + 4 * d(10)
        extra, factor, fallback = MS.ssd_round_factors(char)
        self.assertAlmostEqual(factor, 0.012 / alone_build)
        self.assertAlmostEqual(fallback, 0.0005)
        self.assertAlmostEqual(extra, (0.018 - 0.015) / (0.012 / 0.018))
        t = MS.MeasuredStep.from_characterize(char, "target")
        lay = P.Layout(t, d, 1e-6, 1e9, 32000, 1, False,
                       ssd_round=PI.ssd_round_for("llama-124m", "llama-12m", char, 1, 1))
        self.assertIs(lay.side_by_side()[0], t)   # alone costs, scaled by overlapped()
        v, b = lay.overlapped(0.015, alone_build)
        self.assertAlmostEqual(b, 0.012)
        self.assertAlmostEqual(v, 0.015 + extra * 0.012 / 0.015)
        self.assertAlmostEqual(lay.overlapped(0.015, 0.0)[0], 0.015)   # no build, no slowdown
        self.assertAlmostEqual(lay.overlapped(0.015, 1.0)[0], 0.015 + extra)
        self.assertAlmostEqual(lay.overlapped(0.150, 1.0)[0], 0.150 + extra)   # seconds
        self.assertIsNone(PI.ssd_round_for("llama-124m", "llama-12m", char, 1, 0))
        self.assertAlmostEqual(lay.fallback_step(1), 0.0015)
        self.assertAlmostEqual(replace(lay, ssd_round=None).fallback_step(1), 0.001)
        # a bigger cache overlaps more of the verification: each round costs more (the
        # backup fallback, whose misses cost no drafting, so only the verification differs)
        small = P.predict_ssd(lay, 1, 4, 0.8, 0.7, "backup", budget=1)
        big = P.predict_ssd(lay, 1, 4, 0.8, 0.7, "backup", budget=3)
        self.assertLess(small.round_s, big.round_s)

    def test_ssd_round_busy_through_the_verification(self):
        # Newer files: the draft went on with branch steps until the outcome (kind busy,
        # 0.019 s from the go), so its traffic lay beside the whole verification: the extra is
        # the verification's whole slowdown, not that slowdown over the build's share of it.
        char = with_rounds(fake_characterize(), [("ssd", "verify", 5, 1, 0.018, 1),
                                                 ("ssd", "build", 10, 1, 0.012, 1),
                                                 ("ssd", "busy", 10, 1, 0.019, 1),
                                                 ("ssd", "fallback", 1, 1, 0.0015, 1)])
        extra, _, _ = MS.ssd_round_factors(char)
        self.assertAlmostEqual(extra, 0.018 - 0.015)
        # a draft that stopped short of the verification's end: its share again
        char = with_rounds(fake_characterize(), [("ssd", "verify", 5, 1, 0.018, 1),
                                                 ("ssd", "build", 10, 1, 0.012, 1),
                                                 ("ssd", "busy", 10, 1, 0.0135, 1),
                                                 ("ssd", "fallback", 1, 1, 0.0015, 1)])
        self.assertAlmostEqual(MS.ssd_round_factors(char)[0], 0.003 / 0.75)

    def test_further_sequences_cost_what_characterize_measured(self):
        # one token for each of 16 sequences took 0.040 where 16 rows of one sequence take
        # 0.015 + the GEMMs' 11 further rows (0.001 each) = 0.026
        char = with_rounds(fake_characterize(), [("target", "sequences", 16, 16, 0.040, 0)])
        char.tables["forward"]["context"] = [128] * len(char.tables["forward"]["rows"])
        t = MS.MeasuredStep.from_characterize(char, "target")
        per = (0.040 - t(16)) / (15 * 128)
        self.assertAlmostEqual(t(16), 0.026)
        self.assertAlmostEqual(t.s_per_sequence_token, per)
        self.assertAlmostEqual(t(16, 16), 0.040)
        self.assertAlmostEqual(t(5, 1), 0.015)
        self.assertAlmostEqual(t(10, 2), t(10) + per * 128)
        at_run = MS.MeasuredStep.from_characterize(char, "target", context=40)
        self.assertAlmostEqual(at_run(4, 4) - at_run(4), 3 * 40 * per)

    def test_validation_takes_the_runs_draws_and_budget(self):
        from types import SimpleNamespace
        from ssd_analysis import predict_validate as PV
        # four looked-up outcomes after the primary's speculations (3 hits), two after the
        # backup's (none), one round not looked up; budgets 6, 6, 8 chosen
        rounds = {"outcome_hit": np.array([1, 1, 0, 1, 0, 0, -1]),
                  "source": np.array([1, 1, 2, 1, 3, 3, 0]),
                  "budget": np.array([6, 6, 8, -1, 6, 8, -1])}
        run = SimpleNamespace(rounds=rounds, mode="ssd")
        self.assertEqual(PV.realised_hit_rates(run), (0.75, 0.0))
        self.assertEqual(PV.chosen_budget(run), 6)
        self.assertEqual(PV.realised_hit_rates(SimpleNamespace(rounds=rounds, mode="sd")),
                         (None, None))
        lay = gpu_layout()
        law = P.predict_ssd(lay, 1, 4, 0.8, 0.7, "primary", shape=[1] * 5)
        drawn = P.predict_ssd(lay, 1, 4, 0.8, 0.7, "primary", shape=[1] * 5,
                              realised=(0.75, None))
        self.assertAlmostEqual(drawn.p_hit, 0.75)
        self.assertNotAlmostEqual(law.p_hit, 0.75)

    def test_validation_fits_a_power_law_per_condition(self):
        from types import SimpleNamespace
        from ssd_analysis import metrics as M
        from ssd_analysis import predict_validate as PV
        # K = 3: 40 rounds rejected at k < 3 whose bonus ranks spread (r small), 40 rounds that
        # accepted all 3 whose bonus is mostly the draft's first (r large), 5 not looked up
        rng = np.random.default_rng(7)

        def ranks(r, n):   # inverse of the shifted law: P(rank > F) = (F + 1)^-r
            return np.minimum(np.floor(rng.random(n) ** (-1.0 / r)).astype(int), 64)
        rej, acc = ranks(0.6, 40), ranks(2.5, 40)
        rounds = {"accepted": np.r_[np.full(40, 1), np.full(40, 3), np.full(5, 0)],
                  "bonus_rank": np.r_[rej, acc, np.zeros(5, int)],
                  "outcome_hit": np.r_[np.ones(80, int), np.full(5, -1)]}
        run = SimpleNamespace(rounds=rounds, mode="ssd", lookahead=3, config={})
        pooled = 1.0
        r, r_all = PV.run_law(run, pooled)
        own = [M.fit_power_law_mle(x)[0] for x in (rej, acc)]
        w = PV.CONDITION_PRIOR_WEIGHT
        self.assertAlmostEqual(r, (40 * own[0] + w * pooled) / (40 + w))
        self.assertAlmostEqual(r_all, (40 * own[1] + w * pooled) / (40 + w))
        self.assertLess(r, 1.0)
        self.assertGreater(r_all, 1.5)
        # below MIN_CONDITION_ROUNDS a condition keeps the pooled fit
        few = dict(rounds, outcome_hit=np.r_[np.ones(40, int), np.full(33, -1),
                                              np.ones(7, int), np.full(5, -1)])
        self.assertEqual(PV.run_law(SimpleNamespace(**{**vars(run), "rounds": few}), pooled)[1],
                         pooled)
        # synthetic outcomes draw from their own laws, one unless r_all is given; SD has no cache
        synthetic = SimpleNamespace(**{**vars(run), "config": {"outcomes":
                                                                 "synthetic:alpha=0.8,r=0.7"}})
        self.assertEqual(PV.run_law(synthetic, 0.7), (0.7, 0.7))
        two = SimpleNamespace(**{**vars(run), "config": {
            "outcomes": "synthetic:alpha=0.8,r=0.7,r_all=2.5,alpha_b=0.1"}})
        self.assertEqual(PV.run_law(two, 0.7), (0.7, 2.5))
        self.assertEqual(PV.run_law(SimpleNamespace(**{**vars(run), "mode": "sd"}), 0.9),
                         (0.9, 0.9))

    def test_validation_takes_the_fallback_the_rounds_drew(self):
        from types import SimpleNamespace
        from ssd_analysis import predict_validate as PV
        # sources: 0 first, 1 hit, 2 primary (just in time), 3 backup
        primary = {"source": np.array([0, 1, 2, 1, 2, 3])}
        backup = {"source": np.array([0, 3, 1, 3, 2])}
        no_miss = {"source": np.array([0, 1, 1])}
        self.assertEqual(PV.fallback_used(SimpleNamespace(rounds=primary, fallback="auto")),
                         "primary")
        self.assertEqual(PV.fallback_used(SimpleNamespace(rounds=backup, fallback="auto")),
                         "backup")
        self.assertEqual(PV.fallback_used(SimpleNamespace(rounds=no_miss, fallback="auto")),
                         "auto")
        # a fallback the run was given stays, whatever its rounds show
        self.assertEqual(PV.fallback_used(SimpleNamespace(rounds=backup, fallback="primary")),
                         "primary")
        self.assertEqual(PV.fallback_used(SimpleNamespace(rounds={}, fallback="auto")), "auto")

    def test_validation_takes_the_prompts_own_lengths_for_the_context(self):
        from types import SimpleNamespace
        from ssd_analysis import predict_validate as PV
        # a --prompts file's run: /config prompt_len keeps its default, the prompts are longer
        from_file = SimpleNamespace(config={"prompt_len": "32"}, max_new_tokens=64,
                                    prompt_lengths=[55, 60, 81])
        self.assertEqual(PV.run_context(from_file), 65 + 32)
        # generated prompts (and files written before /prompt_lengths was read): prompt_len
        generated = SimpleNamespace(config={"prompt_len": "48"}, max_new_tokens=16,
                                    prompt_lengths=[])
        self.assertEqual(PV.run_context(generated), 48 + 8)
        self.assertEqual(PV.run_context(SimpleNamespace(config={}, max_new_tokens=10)), 16 + 5)


class FiniteRuns(unittest.TestCase):
    """A measured run stops each sequence at its token limit, and its batch at the last."""

    def test_finite_run_rate(self):
        five = lambda rng, live, trial: np.full(live.size, 5)   # noqa: E731
        # 20 tokens in 4 rounds of 5: the endless rate exactly
        self.assertAlmostEqual(P.finite_run_rate(lambda rows: 0.01, 1, 20, five), 500.0)
        # 21 tokens take a fifth round for one token
        self.assertAlmostEqual(P.finite_run_rate(lambda rows: 0.01, 1, 21, five), 21 / 0.05)
        # rows finish at different rounds: the batch's rounds run on with fewer rows
        rng_tokens = lambda rng, live, trial: 1 + P.accepted_draws(rng, 0.8, 4, live.size)  # noqa: E731,E501
        endless = 16 * P.tokens_per_round(0.8, 4) / 0.05
        finite = P.finite_run_rate(lambda rows: 0.05, 16, 47, rng_tokens)
        self.assertLess(finite, 0.9 * endless)
        # a round with fewer rows costing less gives some of that back
        cheaper = P.finite_run_rate(lambda rows: 0.05 * rows / 16, 16, 47, rng_tokens)
        self.assertGreater(cheaper, finite)
        self.assertEqual(P.finite_run_rate(lambda rows: 0.05, 16, 47, rng_tokens), finite)
        # the same mean tokens per round (4.52 and 2.19 for 3.36 twice) split unevenly between
        # the rows: the batch waits for its slower row, so fewer tokens per second
        def uneven(rng, live, trial):
            return 1 + P.accepted_draws(rng, np.where(live % 2 == 0, 0.95, 0.57), 4, live.size)
        self.assertLess(P.finite_run_rate(lambda rows: 0.05, 2, 47, uneven),
                        0.9 * P.finite_run_rate(lambda rows: 0.05, 2, 47, rng_tokens))

    def test_accepted_draws(self):
        rng = np.random.default_rng(3)
        draws = P.accepted_draws(rng, 0.8, 4, 200000)
        self.assertEqual(draws.min(), 0)
        self.assertEqual(draws.max(), 4)
        self.assertAlmostEqual(1 + draws.mean(), P.tokens_per_round(0.8, 4), delta=0.01)
        self.assertTrue(np.all(P.accepted_draws(rng, 1.0, 4, 5) == 4))
        # one alpha per verification
        mixed = P.accepted_draws(rng, np.tile([0.0, 1.0], 1000), 4, 2000)
        self.assertTrue(np.all(mixed[0::2] == 0) and np.all(mixed[1::2] == 4))

    def test_synthetic_sd_lists_candidates_and_drafts_no_more_steps(self):
        lay = gpu_layout()
        plain = P.predict_sd(lay, 1, 4, 0.8)
        synthetic = P.predict_sd(lay, 1, 4, 0.8, synthetic=True)
        # each drafted token's candidate list, and no draft step after a full accept
        self.assertAlmostEqual(synthetic.round_s - plain.round_s, 4 * lay.candidates())


if __name__ == "__main__":
    unittest.main()
