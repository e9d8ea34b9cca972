#!/usr/bin/python3
"""Unit tests of `ssd-analyze predict` (analysis/ssd_analysis/predict*.py, hardware.py).
Run: /usr/bin/python3 -m unittest discover -s analysis/tests"""
import glob
import itertools
import json
import os
import subprocess
import sys
import unittest

import numpy as np
from dataclasses import replace

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, ".."))

from ssd_analysis import hardware as H  # noqa: E402
from ssd_analysis import measured as MS  # noqa: E402
from ssd_analysis import metrics as M  # noqa: E402
from ssd_analysis import predict as P  # noqa: E402

ANALYZE = os.path.join(ROOT, "analysis", "ssd-analyze")
CHAR = os.path.join(ROOT, "results", "characterize.h5")
RUNS = sorted(glob.glob(os.path.join(ROOT, "results", "*", "runs", "*.h5")))


def gpu_layout(D=1, hw=None, context=1024):
    hw = hw or H.PROFILES["h100-sxm"]
    t = H.RooflineStep(H.shape_of("llama-3.1-70b"), hw, 4, context)
    d = H.RooflineStep(H.shape_of("llama-3.2-1b"), hw, 1, context)
    return P.Layout(t, d, hw.link_latency_s, hw.link_bw, 128256, D)


class Shapes(unittest.TestCase):
    def test_decode_bytes_match_ssd_bench(self):
        # /models/target weight_bytes_per_token of results/characterize.h5 (llama-124m, bf16)
        self.assertEqual(H.shape_of("synthetic:llama-124m").decode_params * 2, 200146944)
        self.assertEqual(H.shape_of("llama-12m").decode_params * 2, 22183936)

    def test_70b_parameter_count(self):
        self.assertAlmostEqual(H.shape_of("llama-3.1-70b").parameters / 1e9, 70.55, delta=0.1)

    def test_unknown_model(self):
        with self.assertRaisesRegex(H.InputError, "--draft"):
            H.shape_of("gpt-5", "--draft")


class Roofline(unittest.TestCase):
    def test_ar_is_bandwidth_over_bytes(self):
        hw = replace(H.PROFILES["h100-sxm"], mem_bw=1e12, peak_flops=1e30, mem_eff=1.0,
                     layer_overhead_s=0.0)
        lay = gpu_layout(hw=hw, context=0)
        t = H.RooflineStep(H.shape_of("llama-3.1-70b"), hw, 1, 0)
        lay.target = t
        want = 1e12 / (H.shape_of("llama-3.1-70b").decode_params * 2)
        self.assertAlmostEqual(P.predict_ar(lay, 1).tok_s, want, delta=want * 1e-12)

    def test_host_work_per_row(self):
        # sampling at T > 0 costs sample_s per logits row: AR adds b of them per step, the
        # verification b(K+1); greedy costs argmax_s instead
        hw = replace(H.PROFILES["h100-sxm"], argmax_s=1e-5, sample_s=4e-4, candidates_s=2e-5)
        lay = gpu_layout(hw=hw, context=0)
        lay.host = hw
        step = lay.target(4, 4)
        self.assertAlmostEqual(P.predict_ar(lay, 4, 1.0).round_s, step + 4 * 4e-4, places=12)
        self.assertAlmostEqual(P.predict_ar(lay, 4, 0.0).round_s, step + 4 * 1e-5, places=12)
        self.assertAlmostEqual(P.verify_time(lay, 4, 3, 1.0),
                               lay.target(16, 4) + 16 * 4e-4, places=12)
        # the cache build pays candidates + a token per branch row: a costlier row hides fewer
        self.assertLess(P.window_budget(lay, 16, 4), P.window_budget(
            gpu_layout(hw=H.PROFILES["h100-sxm"], context=0), 16, 4))

    def test_compute_bound_at_many_rows(self):
        hw = H.PROFILES["h100-sxm"]
        d = H.RooflineStep(H.shape_of("llama-3.2-1b"), hw, 1, 0)
        p = d.parts(4096, 1)
        self.assertGreater(p["t_flop"], p["t_mem"])
        self.assertLess(d.parts(1, 1)["t_flop"], d.parts(1, 1)["t_mem"])

    def test_tp_adds_all_reduce(self):
        hw = H.PROFILES["h100-sxm"]
        s = H.shape_of("llama-3.1-70b")
        self.assertEqual(H.RooflineStep(s, hw, 1).parts(1)["comm"], 0.0)
        self.assertGreater(H.RooflineStep(s, hw, 4).parts(1)["comm"], 2 * 80 * hw.ar_latency_s)


class HitRate(unittest.TestCase):
    def test_monotone_in_budget_and_sums(self):
        curve = P.geometric_shapes(4, 64, 0.8, 0.7)
        for B, (shape, p) in enumerate(curve):
            self.assertEqual(sum(shape), B)
            self.assertAlmostEqual(p, P.hit_rate(shape, 0.8, 0.7), places=12)
        ps = [p for _, p in curve]
        self.assertTrue(all(b > a for a, b in zip(ps, ps[1:])))
        self.assertEqual(ps[0], 0.0)

    def test_greedy_is_the_integer_optimum(self):
        K, a, r = 2, 0.7, 0.9
        for B in range(0, 7):
            best = max(P.hit_rate(list(s), a, r)
                       for s in itertools.product(range(B + 1), repeat=K + 1) if sum(s) == B)
            self.assertAlmostEqual(P.geometric_shapes(K, B, a, r)[B][1], best, places=12)

    def test_geometric_decay(self):
        shape = P.geometric_shapes(5, 60, 0.8, 0.7)[60][0]
        self.assertTrue(all(x >= y for x, y in zip(shape[:-2], shape[1:-1])))

    def test_tokens_per_round(self):
        self.assertAlmostEqual(P.tokens_per_round(0.8, 4), 1 + .8 + .64 + .512 + .4096)
        self.assertEqual(P.tokens_per_round(0.0, 4), 1.0)


class Corollary16(unittest.TestCase):
    def test_round_latency_matches_shared_table(self):
        with open(os.path.join(ROOT, "tests", "reference", "speedup_cases.json")) as f:
            cases = json.load(f)["cases"]
        n = 0
        for c in cases:
            if c["t_p"] > 1.0:
                continue
            got = M.expected_tokens(c["p_hit"], c["e_hit"], c["e_miss"]) / P.round_latency(
                c["p_hit"], c["t_p"], c["t_b"], c["b"])
            self.assertAlmostEqual(got, c["corollary16"], places=9)
            n += 1
        self.assertGreater(n, 0)

    def test_long_build_also_waits_on_a_miss(self):
        self.assertAlmostEqual(P.round_latency(0.0, 1.5, 0.2, 1), 1.7)


class Predictions(unittest.TestCase):
    def test_ssd_ge_sd_ge_ar(self):
        for alpha in (0.6, 0.7, 0.8, 0.9):
            for b in (1, 4, 16):
                lay = gpu_layout()
                ar = P.predict_ar(lay, b).tok_s
                sd = P.best_over_k(lambda k: P.predict_sd(lay, b, k, alpha), range(1, 9)).tok_s
                ssd = P.best_over_k(lambda k: P.predict_ssd(lay, b, k, alpha, 0.7),
                                    range(1, 9)).tok_s
                self.assertGreaterEqual(sd, ar, (alpha, b))
                self.assertGreaterEqual(ssd, sd, (alpha, b))

    def test_budget_and_rate_grow_with_draft_ranks_at_batch_16(self):
        wins, rates, hits = [], [], []
        for D in (1, 2, 3, 4):
            lay = gpu_layout(D)
            wins.append(P.window_budget(lay, 16, 5))
            pr = P.predict_ssd(lay, 16, 5, 0.8, 0.7, "backup", max_budget=256)
            rates.append(pr.tok_s)
            hits.append(pr.p_hit)
        self.assertTrue(all(b > a for a, b in zip(wins, wins[1:])), wins)
        self.assertTrue(all(b >= a for a, b in zip(rates, rates[1:])), rates)
        self.assertTrue(all(b >= a for a, b in zip(hits, hits[1:])), hits)

    def test_backup_wins_at_large_batch(self):
        # Theorem 17: the just-in-time primary at b = 1, the fast backup at large b
        lay = gpu_layout()
        self.assertEqual(P.predict_ssd(lay, 1, 4, 0.8, 0.7).fallback, "primary")
        self.assertEqual(P.predict_ssd(lay, 64, 4, 0.8, 0.7).fallback, "backup")


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


class SideBySide(unittest.TestCase):
    """AR and SD use the passes timed alone; SSD's overlapped verification and cache build the
    ones timed side by side, for the very pair characterize measured."""

    def test_steps_pick_alone_or_beside(self):
        from ssd_analysis import predict_cli as PC
        char = fake_characterize()
        alone = MS.MeasuredStep.from_characterize(char, "target")
        beside = MS.MeasuredStep.from_characterize(char, "target", concurrent=True)
        self.assertAlmostEqual(alone(1), 0.010)
        self.assertAlmostEqual(beside(5), 0.030)
        t, d = PC.beside_steps("synthetic:llama-124m", "llama-12m", char, 1, 1)
        self.assertAlmostEqual(t(5), 0.030)
        self.assertAlmostEqual(d(1), 0.002)
        # another pair, a collocated draft or a TP group: nothing measured side by side
        self.assertEqual(PC.beside_steps("llama-12m", "llama-12m", char, 1, 1), (None, None))
        self.assertEqual(PC.beside_steps("llama-124m", "llama-12m", char, 1, 0), (None, None))
        self.assertEqual(PC.beside_steps("llama-124m", "llama-12m", char, 2, 1), (None, None))

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
        from ssd_analysis import predict_cli as PC
        char = fake_characterize()
        t, d = (MS.MeasuredStep.from_characterize(char, r) for r in ("target", "draft"))
        plain = P.Layout(t, d, 1e-6, 1e9, 32000, 1, False)
        side = P.Layout(t, d, 1e-6, 1e9, 32000, 1, False, None,
                        *PC.beside_steps("llama-124m", "llama-12m", char, 1, 1))
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
        from ssd_analysis import predict_cli as PC
        # in SD's round the verification took 0.018 (0.015 alone), a draft step 0.0015 (0.001)
        char = with_rounds(fake_characterize(), [("sd", "verify", 5, 1, 0.018, 0),
                                                 ("sd", "draft", 1, 1, 0.0015, 0)])
        extras = MS.sd_round_extras(char)
        self.assertAlmostEqual(extras[0], 0.003)
        self.assertAlmostEqual(extras[1], 0.0005)
        t, d = (MS.MeasuredStep.from_characterize(char, r) for r in ("target", "draft"))
        self.assertAlmostEqual(t(5), 0.015)   # the round's rows are not points of the step
        turns = PC.turns_steps("llama-124m", "llama-12m", char, 1, t, d)
        self.assertAlmostEqual(turns[0](5), 0.018)
        self.assertAlmostEqual(turns[1](1), 0.0015)
        # the same seconds at other rows: weights read again, whatever the rows
        self.assertAlmostEqual(turns[0](1), 0.010 + 0.003)
        self.assertEqual(PC.turns_steps("llama-12m", "llama-12m", char, 1, t, d), (None, None))
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
        from ssd_analysis import predict_cli as PC
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
                       ssd_round=PC.ssd_round_for("llama-124m", "llama-12m", char, 1, 1))
        self.assertIs(lay.side_by_side()[0], t)   # alone costs, scaled by overlapped()
        v, b = lay.overlapped(0.015, alone_build)
        self.assertAlmostEqual(b, 0.012)
        self.assertAlmostEqual(v, 0.015 + extra * 0.012 / 0.015)
        self.assertAlmostEqual(lay.overlapped(0.015, 0.0)[0], 0.015)   # no build, no slowdown
        self.assertAlmostEqual(lay.overlapped(0.015, 1.0)[0], 0.015 + extra)
        self.assertAlmostEqual(lay.overlapped(0.150, 1.0)[0], 0.150 + extra)   # seconds
        self.assertIsNone(PC.ssd_round_for("llama-124m", "llama-12m", char, 1, 0))
        self.assertAlmostEqual(lay.fallback_step(1), 0.0015)
        self.assertAlmostEqual(replace(lay, ssd_round=None).fallback_step(1), 0.001)
        # a bigger cache overlaps more of the verification: each round costs more (the
        # backup fallback, whose misses cost no drafting, so only the verification differs)
        small = P.predict_ssd(lay, 1, 4, 0.8, 0.7, "backup", budget=1)
        big = P.predict_ssd(lay, 1, 4, 0.8, 0.7, "backup", budget=3)
        self.assertLess(small.round_s, big.round_s)

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


class FiniteRuns(unittest.TestCase):
    """A measured run stops each sequence at its token limit, and its batch at the last."""

    def test_finite_run_rate(self):
        five = lambda rng, rows: np.full(rows, 5)   # noqa: E731
        # 20 tokens in 4 rounds of 5: the endless rate exactly
        self.assertAlmostEqual(P.finite_run_rate(lambda rows: 0.01, 1, 20, five), 500.0)
        # 21 tokens take a fifth round for one token
        self.assertAlmostEqual(P.finite_run_rate(lambda rows: 0.01, 1, 21, five), 21 / 0.05)
        # rows finish at different rounds: the batch's rounds run on with fewer rows
        rng_tokens = lambda rng, rows: 1 + P.accepted_draws(rng, 0.8, 4, rows)   # noqa: E731
        endless = 16 * P.tokens_per_round(0.8, 4) / 0.05
        finite = P.finite_run_rate(lambda rows: 0.05, 16, 47, rng_tokens)
        self.assertLess(finite, 0.9 * endless)
        # a round with fewer rows costing less gives some of that back
        cheaper = P.finite_run_rate(lambda rows: 0.05 * rows / 16, 16, 47, rng_tokens)
        self.assertGreater(cheaper, finite)
        self.assertEqual(P.finite_run_rate(lambda rows: 0.05, 16, 47, rng_tokens), finite)

    def test_accepted_draws(self):
        rng = np.random.default_rng(3)
        draws = P.accepted_draws(rng, 0.8, 4, 200000)
        self.assertEqual(draws.min(), 0)
        self.assertEqual(draws.max(), 4)
        self.assertAlmostEqual(1 + draws.mean(), P.tokens_per_round(0.8, 4), delta=0.01)
        self.assertTrue(np.all(P.accepted_draws(rng, 1.0, 4, 5) == 4))

    def test_synthetic_sd_drafts_the_resolve_step(self):
        lay = gpu_layout()
        plain = P.predict_sd(lay, 1, 4, 0.8)
        synthetic = P.predict_sd(lay, 1, 4, 0.8, synthetic=True)
        # 0.8^4 of the rounds draft one more step
        self.assertAlmostEqual(synthetic.round_s - plain.round_s, 0.8 ** 4 * lay.draft(1, 1))


def analyze(*args):
    return subprocess.run(["/usr/bin/python3", ANALYZE, "predict", *args], capture_output=True,
                          text=True, timeout=120)


class Cli(unittest.TestCase):
    def test_bad_input_one_line_exit_2(self):
        for args, flag in ((["--alpha", "1.5"], "--alpha"), (["--draft-ranks", "0"],
                                                             "--draft-ranks"),
                           (["--target", "nope"], "--target"), (["--hardware", "tpu"],
                                                                "--hardware"),
                           (["--validate", "x.h5"], "--validate")):
            p = analyze(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertIn(flag, p.stderr)
            self.assertNotIn("Traceback", p.stderr)

    def test_text_csv_json(self):
        p = analyze("--draft-ranks", "1,2", "-b", "1,16")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("paper_SSD", p.stdout)
        self.assertIn("255.8", p.stdout)   # Appendix B.3, printed beside b = 1, D = 1
        c = analyze("--draft-ranks", "1,2", "-b", "1,16", "--format", "csv")
        self.assertEqual(len(c.stdout.strip().splitlines()), 5)
        j = json.loads(analyze("--format", "json", "-b", "16").stdout)
        self.assertEqual(j["rows"][0]["b"], 16)
        self.assertGreater(j["rows"][0]["SSD"], j["rows"][0]["AR"])


@unittest.skipUnless(os.path.exists(CHAR) and RUNS, "results/ not present")
class Validation(unittest.TestCase):
    def test_results_runs(self):
        p = analyze("--validate", *RUNS, "--characterize", CHAR, "--format", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = json.loads(p.stdout)["rows"]
        self.assertEqual(len(rows), len(RUNS))
        # the sweeps with synthetic outcomes on the characterized layout (llama-124m target,
        # llama-12m draft on its own rank or collocated, greedy): the model's home ground
        # (runs with more ranks than host CPUs are shown but not counted: the model gives every
        # rank hardware of its own)
        spec = [r for r in rows if r["target"] == "llama-124m" and r["mode"] != "ar"
                and not r["oversubscribed"]]
        self.assertGreater(len(spec), 10)
        # Speedup over the AR run of the run's own sweep, predicted and measured: the host's
        # drift between characterize and a sweep minutes later cancels (this set: characterize
        # timed the AR step at 7.7 ms, the sweeps' AR runs took 8.0-8.7 ms; two sweeps' AR
        # runs of the same batch-2 configuration gave 180.7 and 204.0 tok/s). The bar is the
        # median and most runs: median within 10%, 60% of runs within 10%, none beyond 25%.
        speedup = np.abs([r["x_err"] for r in spec])
        detail = [(r["file"], round(r["x_err"], 3), round(r["rel_err"], 3)) for r in spec]
        self.assertLessEqual(np.median(speedup), 0.10, detail)
        self.assertGreaterEqual(np.sum(speedup <= 0.10), 0.6 * len(spec), detail)
        self.assertLessEqual(speedup.max(), 0.25, detail)
        # tok/s carries that drift whole: a sanity bound, not the model's bar
        errors = np.abs([r["rel_err"] for r in spec])
        self.assertLessEqual(np.median(errors), 0.20, detail)
        self.assertLessEqual(errors.max(), 0.50, detail)
        text = analyze("--validate", *RUNS, "--characterize", CHAR).stdout
        counted = [r for r in rows if not r["oversubscribed"]]
        n = sum(r["within"] for r in counted)
        self.assertIn(f"# {n} of {len(counted)} runs within 10%", text)
        x = [r for r in counted if r["x_within"] is not None]
        self.assertIn(f"# speedup over the sweep's AR run: {sum(r['x_within'] for r in x)} of "
                      f"{len(x)} SD/SSD runs within 10%", text)


if __name__ == "__main__":
    unittest.main()
