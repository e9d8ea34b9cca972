"""What a characterize result file must satisfy, given the run that wrote it (ranks, K, b, a
draft rank or not), for tests/py_test_characterize.py: every table there, positive and consistent
with its own definitions (bandwidths from bytes and times, the nccl-tests bus bandwidth, the
console's floors of the target's steps, the steadiness flags, the verification window =
floor(verify / branch step) and --budget auto's rule over the least-squares branch-step fit),
and the roofline's curve of target steps as analysis/ssd_analysis draws it. The checks are
CharacterizeChecks, a mixin of a unittest.TestCase; names, strings and target_alone read the
file's tables."""
import math
import os
import re
import sys

import h5py
import numpy as np

from mpi_run import cpu_has_bf16

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Root attributes every result file has (analysis/ssd_analysis/schema.py ROOT_ATTRS).
ROOT_ATTRS = ["schema_version", "complete", "mode", "config_json", "argv", "version",
              "git_commit", "build_type", "host", "cpu_model", "gpu_model", "start_time",
              "end_time", "synthetic_outcomes"]


def names(ds):
    return str(ds.attrs["names"]).split(",")


def strings(f, table, column):
    """An id column of a table as its names."""
    ds = f[f"{table}/{column}"]
    n = names(ds)
    return [n[i] for i in ds[...]]


def target_alone(f):
    """(kind, rows, sequences, seconds) of every target step timed alone at the full context."""
    fw = f["forward"]
    context = fw["context"][...]
    return [(k, int(r), int(q), float(s)) for m, k, r, q, s, c, n in zip(
        strings(f, "forward", "model_id"), strings(f, "forward", "kind_id"), fw["rows"][...],
        fw["sequences"][...], fw["seconds"][...], fw["concurrent"][...], context)
        if m == "target" and not c and n == max(context)]


class CharacterizeChecks:
    """Checks of a characterize file: methods of the unittest.TestCase that mixes them in."""

    def check_common(self, f, ranks, K, b, draft_rank=False):
        for a in ROOT_ATTRS:
            self.assertIn(a, f.attrs, a)
        self.assertEqual(f.attrs["mode"], "characterize")
        self.assertEqual(f.attrs["complete"], 1)
        self.assertEqual(sorted(int(r) for r in f["ranks"]), list(range(ranks)))
        for a in ("bandwidth_gbps", "ar_bound_tok_s", "decode_bytes_per_token",
                  "host_read_gbps", "host_fma_gflops", "host_fma_1thread_gflops", "gemm_step_ms"):
            self.assertGreater(float(f.attrs[a]), 0, a)
        self.assertIn(int(f.attrs["host_fma_lanes"]), (8, 16))
        # Every rank on the node read at once (all of this test's ranks share one node).
        if ranks > 1:
            self.assertEqual(int(f.attrs["node_read_ranks"]), ranks)
            low, high = (float(f.attrs[f"node_read_{e}_rank_gbps"]) for e in ("min", "max"))
            self.assertGreater(low, 0)
            self.assertLessEqual(low, high)
            self.assertAlmostEqual(float(f.attrs["node_read_gbps"]) / ranks, (low + high) / 2,
                                   delta=(high - low) / 2 + 1e-9)
            # Each pass's node rate after the latency between the ranks' cores: the passes'
            # mean is node_read_gbps (the ranks' means summed), the latencies' order statistics
            # the root's.
            n = f["node_read"]
            self.assertEqual(int(n.attrs["ranks"]), ranks)
            self.assertGreater(float(n.attrs["spacing_s"]), 0)
            gbps, ns = n["gbps"][...], n["latency_ns"][...]
            self.assertEqual(len(gbps), 10)
            self.assertEqual(len(ns), 10)
            self.assertTrue(np.all(gbps > 0) and np.all(ns > 0))
            self.assertAlmostEqual(float(np.mean(gbps)), float(f.attrs["node_read_gbps"]),
                                   delta=1e-9 * float(np.max(gbps)) * 10)
            self.assertEqual(float(f.attrs["node_latency_min_ns"]), float(np.min(ns)))
            self.assertEqual(float(f.attrs["node_latency_median_ns"]), float(np.median(ns)))
            self.assertEqual(float(f.attrs["node_latency_max_ns"]), float(np.max(ns)))
        else:
            self.assertNotIn("node_read_gbps", f.attrs)
            self.assertNotIn("node_read", f)
            self.assertNotIn("node_latency_median_ns", f.attrs)
        if cpu_has_bf16():  # the bf16 peak is measured beside the fp32 one, whatever --compute
            self.assertGreater(float(f.attrs["host_bf16_dot_gflops"]), 0)
            self.assertGreater(float(f.attrs["host_bf16_dot_1thread_gflops"]), 0)
        # the bounds are taken at the peak of the target's compute
        compute = f.attrs["target_compute"]
        self.assertEqual(f["models/target"].attrs["compute"], compute)
        self.assertEqual(f.attrs["compute_peak"],
                         {"f32": "fp32 FMA", "bf16": "bf16 dot-product",
                          "amx": "bf16 AMX tile"}[compute])
        self.assertEqual(f.attrs["compute_peak_gflops"],
                         f.attrs[{"f32": "host_fma_gflops", "bf16": "host_bf16_dot_gflops",
                                  "amx": "host_amx_bf16_gflops"}[compute]])

        m = f["memory"]
        self.assertEqual(list(m["rank"][...]), list(range(ranks)))
        np.testing.assert_allclose(m["gbps"][...],
                                   2 * m["buffer_bytes"][...] / m["best_s"][...] / 1e9, rtol=1e-9)
        self.assertTrue(np.all(m["mean_gbps"][...] > 0))
        self.assertTrue(np.all(m["mean_gbps"][...] <= m["gbps"][...] * (1 + 1e-9)))
        self.assertAlmostEqual(f.attrs["bandwidth_gbps"], m["gbps"][0])

        g = f["gemm"]
        secs = g["seconds"][...]
        self.assertTrue(np.all(secs > 0))
        work = 2.0 * g["rows"][...] * g["in"][...] * g["out"][...]
        np.testing.assert_allclose(g["gflops"][...], work / secs / 1e9, rtol=1e-9)
        np.testing.assert_allclose(
            g["gbps"][...], g["in"][...] * g["out"][...] * g["element_bytes"][...] / secs / 1e9,
            rtol=1e-9)
        models, purposes = strings(f, "gemm", "model_id"), strings(f, "gemm", "purpose_id")
        rows = g["rows"][...]
        target_rows = {int(r) for r, mo in zip(rows, models) if mo == "target"}
        self.assertEqual(target_rows, {b, b * (K + 1), 128})
        draft_rows = {int(r) for r, mo in zip(rows, models) if mo == "draft"}
        branch = [b * (K + 1) * m for m in (1, 2, 4, 8)]
        self.assertEqual(draft_rows, {b, b * (K + 1), *branch})
        self.assertTrue(all(p for p in purposes))

        fw = f["forward"]
        kinds = list(zip(strings(f, "forward", "model_id"), strings(f, "forward", "kind_id")))
        rows = [int(r) for r in fw["rows"][...]]
        secs = fw["seconds"][...]
        self.assertTrue(np.all(secs > 0))
        self.assertTrue(np.all(fw["best_seconds"][...] > 0))
        concurrent = [int(c) for c in fw["concurrent"][...]]
        context = [int(c) for c in fw["context"][...]]
        full = max(context)
        # Alone (AR, SD) always; side by side (SSD) too where a draft rank was launched, the
        # same passes but the host work.
        alone, beside = {}, {}
        shorter = []  # (model, rows, context) of the steps timed at a shorter context
        for (model, kind), r, s, c, n in zip(kinds, rows, secs, concurrent, context):
            if n == full or model == "host":  # host work has no context (0)
                (beside if c else alone).setdefault((model, kind), []).append((r, s))
            else:
                self.assertEqual(kind, "rows")
                shorter.append((model, r, n, c))
        # the 16-token step again at a quarter of the context, per model and timing
        self.assertEqual(sorted(shorter), sorted(
            (m, 16 * b, full // 4, c) for m in ("target", "draft") for c in
            ((0, 1) if draft_rank else (0,))))
        # SD's collocated round, on the target's leader (with a copy of the draft where the
        # draft has a rank of its own); SSD's round, target and draft rank, side by side
        self.assertEqual([r for r, _ in alone[("sd", "verify")]], [b * (K + 1)])
        self.assertEqual([r for r, _ in alone[("sd", "draft")]], [b])
        want_beside = ({k for k in alone if k[0] not in ("host", "sd")} |
                       {("ssd", "verify"), ("ssd", "build"), ("ssd", "busy"), ("ssd", "fallback")}) \
            if draft_rank else set()
        self.assertEqual(set(beside), want_beside)
        if draft_rank:
            self.assertEqual([r for r, _ in beside[("ssd", "verify")]], [b * (K + 1)])
            self.assertEqual([r for r, _ in beside[("ssd", "build")]], [branch[0]])
            self.assertEqual([r for r, _ in beside[("ssd", "busy")]], [branch[0]])
            # busy: the build, then branch steps until the outcome arrives
            self.assertGreaterEqual(beside[("ssd", "busy")][0][1], beside[("ssd", "build")][0][1])
            self.assertEqual([r for r, _ in beside[("ssd", "fallback")]], [b])
        # one token for each of many sequences, per model and timing
        many = max(16, 2 * b)
        seqs = [int(n) for n in fw["sequences"][...]]
        for sets in (alone, beside) if draft_rank else (alone,):
            for model in ("target", "draft"):
                self.assertEqual([r for r, _ in sets[(model, "sequences")]], [many])
        self.assertEqual(sorted({n for (m, k), n in zip(kinds, seqs) if k == "sequences"}),
                         [many])
        self.assertTrue(all(n == b for (m, k), n in zip(kinds, seqs)
                            if k != "sequences" and m != "host"))
        for sets in (alone, beside) if draft_rank else (alone,):
            self.assertEqual(sets[("target", "ar")][0][0], b)
            self.assertEqual(sets[("target", "verify")][0][0], b * (K + 1))
            self.assertEqual(sets[("draft", "draft")][0][0], b)
            self.assertEqual(sets[("draft", "glue")][0][0], b * (K + 1))
            self.assertEqual(sorted(r for r, _ in sets[("draft", "branch")]), branch)
            curve = sorted(b * m for m in {2, 3, 4, 8, 16, 2 * (K + 1), 4 * (K + 1)}
                           if m != K + 1)
            for model in ("target", "draft"):
                self.assertEqual(sorted(r for r, _ in sets[(model, "rows")]), curve)
        self.assertAlmostEqual(f.attrs["decode_ms_per_step"], 1e3 * alone[("target", "ar")][0][1])
        # The verification's bound: the AR bound's weight reading or its FLOPs at the FMA peak.
        a = f.attrs
        self.assertEqual(a["verify_rows"], b * (K + 1))
        self.assertAlmostEqual(a["verify_ms"], 1e3 * alone[("target", "verify")][0][1])
        element = {"F32": 4, "BF16": 2, "F16": 2}[a["target_weight_dtype"]]
        read_ms = 1e3 * a["decode_bytes_per_token"] / (a["ar_bound_gbps"] * 1e9)
        fma_ms = 1e3 * 2 * b * (K + 1) * a["decode_bytes_per_token"] / element / (
            a["compute_peak_gflops"] * 1e9)
        self.assertAlmostEqual(a["verify_bound_ms"] / max(read_ms, fma_ms), 1.0, places=9)
        self.check_window(f, beside if draft_rank else alone, alone, K, b)
        self.check_steadiness(f)

    def check_row_floors(self, f, stdout):
        """The console's floors of the target's multi-row steps: every step of the target timed
        alone at the full context (verify, rows, sequences), its floor max(weight reading,
        2 rows params / the compute's peak) in AR bound steps and its time in measured AR
        steps."""
        lines = [l for l in stdout.splitlines() if l.startswith("# target steps of more rows")]
        self.assertEqual(len(lines), 1, stdout)
        got = re.findall(r" (\d+)(?: \((\d+) sequences\))? ([\d.]+)/([\d.]+)",
                         lines[0].split("measured AR steps:")[1])
        a = f.attrs
        element = {"F32": 4, "BF16": 2, "F16": 2}[a["target_weight_dtype"]]
        read_ms = 1e3 * a["decode_bytes_per_token"] / (a["ar_bound_gbps"] * 1e9)
        want = [(rows, seqs if kind == "sequences" else None,
                 max(read_ms, 1e3 * 2 * rows * a["decode_bytes_per_token"] / element /
                     (a["compute_peak_gflops"] * 1e9)) / read_ms,
                 1e3 * s / a["decode_ms_per_step"])
                for kind, rows, seqs, s in target_alone(f)
                if kind in ("verify", "rows", "sequences")]
        want.sort(key=lambda w: w[0])
        self.assertEqual([(int(r), int(q) if q else None) for r, q, _, _ in got],
                         [(r, q) for r, q, _, _ in want])
        for (_, _, floor, measured), (_, _, want_floor, want_measured) in zip(got, want):
            self.assertAlmostEqual(float(floor), want_floor, delta=0.006)
            self.assertAlmostEqual(float(measured), want_measured, delta=0.006)
        # a floor never falls as rows grow
        floors = [float(g[2]) for g in got]
        self.assertEqual(floors, sorted(floors))

    def check_steadiness(self, f):
        """unsteady_passes: per curve (rank, model, timing, sequences, context; causal steps and
        branch steps apart), the passes over 5% below the slowest pass of fewer rows before it;
        and SSD rounds whose verification or build took over 1.2x their passes timed beside."""
        fw = f["forward"]
        ranks = [int(r) for r in fw["rank"][...]]
        kinds = list(zip(strings(f, "forward", "model_id"), strings(f, "forward", "kind_id")))
        curves = {}
        for i, (model, kind) in enumerate(kinds):
            causal = kind in ("ar", "verify", "draft", "glue", "rows")
            if model not in ("target", "draft") or not (causal or kind == "branch"):
                continue
            key = (ranks[i], model, int(fw["concurrent"][i]), int(fw["sequences"][i]),
                   int(fw["context"][i]), causal)
            curves.setdefault(key, []).append((int(fw["rows"][i]), float(fw["seconds"][i])))
        flagged = 0
        for passes in curves.values():
            passes.sort(key=lambda p: p[0])  # stable: equal rows keep the file's order
            slowest = None
            for r, s in passes:
                if slowest and slowest[0] < r and s < 0.95 * slowest[1]:
                    flagged += 1
                if slowest is None or s > slowest[1]:
                    slowest = (r, s)
        # SSD's rounds: their verification over 1.2x the target's verification timed beside,
        # their build over 1.2x the draft's glue and K branch steps beside
        beside = {
            (model, kind, int(fw["rows"][i]), int(fw["sequences"][i])): float(fw["seconds"][i])
            for i, (model, kind) in enumerate(kinds) if int(fw["concurrent"][i])}
        glue = {key[3]: (key[2], s) for key, s in beside.items() if key[:2] == ("draft", "glue")}
        for (model, kind, rows, seqs), s in beside.items():
            if (model, kind) == ("ssd", "verify") and ("target", "verify", rows, seqs) in beside:
                flagged += s > 1.2 * beside[("target", "verify", rows, seqs)]
            if (model, kind) == ("ssd", "build") and seqs in glue \
                    and ("draft", "branch", rows, seqs) in beside:
                glue_rows, glue_s = glue[seqs]
                steps = glue_s + (glue_rows // seqs - 1) * beside[("draft", "branch", rows, seqs)]
                flagged += s > 1.2 * steps
        self.assertEqual(int(f.attrs["unsteady_passes"]), flagged)
        self.assertEqual(len([x for x in str(f.attrs["unsteady"]).split("; ") if x]), flagged)

    def check_window(self, f, by_kind, alone, K, b):
        w = f["window"].attrs
        # the verification as SSD's round takes it, where a draft rank timed that round
        verify = by_kind.get(("ssd", "verify"), by_kind[("target", "verify")])[0][1]
        glue = by_kind[("draft", "glue")][0][1]
        points = sorted(by_kind[("draft", "branch")])
        self.assertEqual(w["verify_time_s"], verify)
        self.assertEqual(w["glue_time_s"], glue)
        self.assertEqual(w["draft_time_s"], by_kind[("draft", "draft")][0][1])
        # T_SD is SD's, whose draft and target take turns: the two as SD's round took them
        draft, sd_verify = alone[("sd", "draft")][0][1], alone[("sd", "verify")][0][1]
        self.assertAlmostEqual(w["t_sd"], K * draft / sd_verify,
                               delta=1e-12 * K * draft / sd_verify)
        self.assertEqual(w["branch_rows"], points[0][0])
        self.assertEqual(w["branch_time_s"], points[0][1])
        self.assertEqual(w["window_steps"], math.floor(verify / points[0][1]))
        self.assertEqual(f.attrs["verification_window_steps"], w["window_steps"])
        # the least-squares fit of branch seconds = a + b rows
        x = np.array([p[0] for p in points], float)
        y = np.array([p[1] for p in points], float)
        var = np.mean(x * x) - np.mean(x) ** 2
        slope = max(0.0, (np.mean(x * y) - np.mean(x) * np.mean(y)) / var)
        intercept = max(0.0, np.mean(y) - slope * np.mean(x))
        self.assertAlmostEqual(w["branch_step_b_s"], slope, delta=1e-9 * max(slope, 1e-12))
        self.assertAlmostEqual(w["branch_step_a_s"], intercept, delta=1e-12)
        # --budget auto: glue + K branch steps of budget * b rows within 90% of the verification
        per_step = (0.9 * verify - glue) / K
        exact = 0.0 if per_step <= intercept else (per_step - intercept) / slope / b
        self.assertLessEqual(math.floor(exact - 1e-6), w["fanout_budget"])
        self.assertLessEqual(w["fanout_budget"], math.floor(exact + 1e-6))
        self.assertEqual(w["budget_rows"], w["fanout_budget"] * b)
        self.assertEqual(f.attrs["fanout_budget"], w["fanout_budget"])
        if w["fanout_budget"] > 0:  # the budget's steps fit, one more sequence's worth would not
            rows = w["budget_rows"]
            self.assertLessEqual(glue + K * (intercept + slope * rows), 0.9 * verify * (1 + 1e-9))
            self.assertGreater(glue + K * (intercept + slope * (rows + b)),
                               0.9 * verify * (1 - 1e-9))

    def check_roofline_steps(self, path, K, b):
        """The roofline's curve of target steps: each step of the target timed alone at the
        full context (ar, verify, rows), by rows, at 2 rows / element bytes FLOP per weight
        byte and 2 rows P / seconds, P the parameters of rank 0's shard."""
        sys.path.insert(0, os.path.join(ROOT, "analysis"))
        from ssd_analysis import figures_detail, io
        runs, errors = io.load_runs([path])
        self.assertEqual(errors, [])
        char = runs[0]
        eb = figures_detail.element_bytes(char)
        steps = figures_detail.target_row_steps(char, eb)
        curve = sorted({b, b * (K + 1)} | {b * m for m in (2, 3, 4, 8, 16, 2 * (K + 1),
                                                           4 * (K + 1))})
        self.assertEqual([r for r, _, _ in steps], curve)
        with h5py.File(path) as f:
            # rank 0's shard: the roof is rank 0's (target TP 2 here)
            P = f.attrs["decode_bytes_per_token"] / eb
            seconds = {rows: s for kind, rows, _, s in target_alone(f)
                       if kind in ("ar", "verify", "rows")}
        for rows, intensity, gflops in steps:
            self.assertAlmostEqual(intensity, 2 * rows / eb)
            self.assertAlmostEqual(gflops, 2 * rows * P / seconds[int(rows)] / 1e9)
