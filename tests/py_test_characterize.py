#!/usr/bin/python3
"""ssd-bench characterize end to end, with tiny models and short measurements: one rank (draft
collocated) and three ranks (target TP 2 + a draft rank). Checks that every table of the HDF5
file is there, positive and consistent with its own definitions (bandwidths from bytes and
times, the nccl-tests bus bandwidth, the verification window = floor(verify / branch step) and
--budget auto's rule over the least-squares branch-step fit), that analysis/ssd-analyze draws
the roofline from the file, and that bad input gets one line naming the flag (exit 2). The
checks of a file are tests/characterize_checks.py's.

  /usr/bin/python3 tests/py_test_characterize.py --ssd-bench PATH --work DIR --mpiexec PATH
"""
import os
import shutil
import subprocess
import sys
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402
from characterize_checks import CharacterizeChecks, strings  # noqa: E402
from mpi_run import cpu_has_amx_bf16, cpu_has_bf16  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = None
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_mpi_yield_when_idle="1")
# Short measurements: the point is the plumbing and the arithmetic, not the numbers.
QUICK = ["--threads", "1", "--min-time", "0.01", "--memory-bytes", str(8 << 20),
         "--comm-max-bytes", str(64 << 10)]
TINY = ["--target", "synthetic:tiny-llama", "--draft", "synthetic:tiny-llama-other"]


def characterize(np_, *flags):
    cmd = [ARGS.ssd_bench, "characterize", *flags]
    if np_ > 1 or shutil.which(ARGS.mpiexec):  # one rank runs alone where no mpiexec is
        cmd = [ARGS.mpiexec, "--oversubscribe", "--bind-to", "none", "-np", str(np_), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=ENV)


class Characterize(CharacterizeChecks, unittest.TestCase):
    def run_ok(self, np_, *flags):
        proc = characterize(np_, *flags)
        self.assertEqual(proc.returncode, 0, f"{flags}:\n{proc.stdout}\n{proc.stderr}")
        self.assertIn("# Out of bounds values : 0 OK", proc.stdout)
        return proc

    def test_one_rank_collocated_draft(self):
        path = os.path.join(ARGS.work, "one.h5")
        proc = self.run_ok(1, *TINY, *QUICK, "--out", path)
        self.assertIn("the draft is collocated", proc.stdout)
        self.assertIn("# verification window:", proc.stdout)
        with h5py.File(path) as f:
            self.check_common(f, ranks=1, K=4, b=1)
            self.check_row_floors(f, proc.stdout)
            self.assertEqual(f.attrs["target_compute"], "f32")  # --compute's default
            self.assertIn("+ draft", f["ranks/0"].attrs["role"])
            self.assertNotIn("all_reduce", f)  # TP 1
            self.assertNotIn("p2p", f)  # no draft rank
            self.assertEqual(set(f["gemm/rank"][...]), {0})

    def test_three_ranks_tp2_and_draft(self):
        path = os.path.join(ARGS.work, "three.h5")
        K, b = 3, 2
        proc = self.run_ok(3, *TINY, *QUICK, "--target-tp", "2", "-k", str(K), "-b", str(b),
                           "--context", "48", "--out", path)
        for title in ("# memory bandwidth", "# node read bandwidth (the 3 ranks",
                      "# node placement (", "# GEMM",
                      "# target all-reduce over 2 ranks", "# draft<->target point to point",
                      "# forward passes", "# largest hidden fan-out budget"):
            self.assertIn(title, proc.stdout)
        with h5py.File(path) as f:
            self.check_common(f, ranks=3, K=K, b=b, draft_rank=True)
            self.check_row_floors(f, proc.stdout)
            self.assertEqual(f["ranks/2"].attrs["role"], "draft 0/1")
            g = f["gemm"]
            models, shapes = strings(f, "gemm", "model_id"), strings(f, "gemm", "shape_id")
            ranks = g["rank"][...]
            self.assertEqual({int(r) for r, m in zip(ranks, models) if m == "target"}, {0, 1})
            self.assertEqual({int(r) for r, m in zip(ranks, models) if m == "draft"}, {2})
            # tiny-llama: 4 heads of 16, so a TP-2 shard's q_proj has 32 output rows
            q = [int(o) for o, s, m in zip(g["out"][...], shapes, models)
                 if s.startswith("q_proj") and m == "target"]
            self.assertTrue(q and all(o == 32 for o in q), q)
            self.assertEqual({int(r) for r in f["forward/rank"][...]}, {0, 2})

            a = f["all_reduce"]
            n = int(a.attrs["ranks"])
            self.assertEqual(n, 2)
            sizes = list(a["bytes"][...])
            self.assertEqual(sizes, [4 * 4 ** i for i in range(len(sizes))])
            self.assertEqual(sizes[-1], 64 << 10)
            np.testing.assert_allclose(a["algbw_gbps"][...],
                                       a["bytes"][...] / a["seconds"][...] / 1e9, rtol=1e-9)
            np.testing.assert_allclose(a["busbw_gbps"][...],
                                       a["algbw_gbps"][...] * 2 * (n - 1) / n, rtol=1e-12)
            self.assertTrue(np.all(a["iterations"][...] >= 2))
            self.assertEqual(f.attrs["all_reduce_latency_s"], a["seconds"][0])
            self.assertEqual(f.attrs["all_reduce_busbw_gbps"], np.max(a["busbw_gbps"][...]))

            p = f["p2p"]
            self.assertEqual(int(p.attrs["draft_rank"]), 2)
            self.assertTrue(np.all(p["seconds"][...] > 0))
            wire = p["wire_bytes"][...]
            self.assertTrue(np.all(wire > 0))
            self.assertTrue(np.all(np.abs(wire[-3:] - p["bytes"][-3:]) < 64))  # ~ the size asked
            np.testing.assert_allclose(p["gbps"][...], wire / p["seconds"][...] / 1e9, rtol=1e-9)
            self.assertEqual(f.attrs["p2p_latency_s"], p["seconds"][0])

        out = os.path.join(ARGS.work, "figures")
        proc = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "analysis", "ssd-analyze"),
                               "figures", path, "--out", out], capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertGreater(os.path.getsize(os.path.join(out, "roofline.png")), 1000)
        self.check_roofline_steps(path, K, b)

    def check_compute(self, compute, peak_name, peak_attr, lanes):
        """--compute `compute`: recorded as the target's compute (header, /config, /models,
        root), its peak (`peak_attr`, `lanes` fp32 accumulators an instruction) beside the fp32
        one, and the floors taken at it."""
        path = os.path.join(ARGS.work, f"{compute}.h5")
        # tiny-llama's checkpoint is fp32 (its config's torch_dtype): bf16 products need bf16
        proc = self.run_ok(1, "--target", "synthetic:tiny-llama", *QUICK, "--weight-dtype", "bf16",
                           "--compute", compute, "--out", path)
        self.assertIn(f"BF16 weights, {compute} compute", proc.stdout)
        self.assertIn(f"# host {peak_name} peak", proc.stdout)
        self.assertIn(f"{compute} compute), rows: floor", proc.stdout)
        with h5py.File(path) as f:
            a = f.attrs
            self.assertEqual(a["target_compute"], compute)
            self.assertEqual(f["config"].attrs["compute"], compute)
            self.assertEqual(f["models/target"].attrs["compute"], compute)
            self.assertEqual(a["compute_peak"], peak_name)
            self.assertEqual(a["compute_peak_gflops"], a[f"{peak_attr}_gflops"])
            self.assertEqual(int(a[f"{peak_attr}_lanes"]), lanes)
            self.assertGreater(a["host_fma_gflops"], 0)  # the other compute's, recorded too
            self.check_row_floors(f, proc.stdout)
        return path

    def test_bf16_compute(self):
        """--compute bf16: its vdpbf16ps peak (16 lanes of 4 FLOPs)."""
        if not cpu_has_bf16():
            self.skipTest("no avx512_bf16 in /proc/cpuinfo")
        self.check_compute("bf16", "bf16 dot-product", "host_bf16_dot", 16)

    def test_amx_compute(self):
        """--compute amx: its TDPBF16PS peak (256 accumulators of 64 FLOPs), above vdpbf16ps's."""
        if not cpu_has_amx_bf16():
            self.skipTest("no amx_bf16 in /proc/cpuinfo")
        path = self.check_compute("amx", "bf16 AMX tile", "host_amx_bf16", 256)
        with h5py.File(path) as f:
            self.assertGreater(f.attrs["host_amx_bf16_gflops"], f.attrs["host_bf16_dot_gflops"])

    def test_no_forward_target_only(self):
        path = os.path.join(ARGS.work, "noforward.h5")
        self.run_ok(1, "--target", "synthetic:tiny-qwen3", *QUICK, "--no-forward", "--out", path)
        with h5py.File(path) as f:
            self.assertIn("gemm", f)
            self.assertEqual(set(strings(f, "gemm", "model_id")), {"target"})
            self.assertNotIn("forward", f)
            self.assertNotIn("window", f)
            self.assertNotIn("decode_ms_per_step", f.attrs)
            self.assertNotIn("verify_bound_ms", f.attrs)

    def expect_error(self, np_, flags, needle):
        proc = characterize(np_, *flags)
        self.assertEqual(proc.returncode, 2, f"{flags}: {proc.stdout}{proc.stderr}")
        lines = [line for line in proc.stderr.splitlines() if line.startswith("ssd-bench:")]
        self.assertEqual(len(lines), 1, f"{flags}: {proc.stderr!r}")
        self.assertTrue(lines[0].startswith(f"ssd-bench: error: {needle}"), lines[0])

    def test_bad_input(self):
        existing = os.path.join(ARGS.work, "exists.h5")
        open(existing, "w").close()
        quick = [*QUICK, "--no-forward"]
        self.expect_error(2, ["--target", "synthetic:tiny-llama", *quick], "--draft")
        self.expect_error(3, [*TINY, *quick, "--target-tp", "3"], "--target-tp")
        self.expect_error(3, [*TINY, *quick, "--target-tp", "1", "--draft-ranks", "2"],
                          "--draft-ranks")
        self.expect_error(1, [*TINY, *quick, "--context", "600"], "--context")
        self.expect_error(1, [*TINY, *quick, "--branch-rows", "0"], "--branch-rows")
        self.expect_error(1, ["--target", "synthetic:tiny-llama", *quick, "--branch-rows", "4"],
                          "--branch-rows")
        self.expect_error(1, [*TINY, *quick, "--min-time", "0"], "--min-time")
        self.expect_error(1, ["--target", "synthetic:nope", *quick], "--target")
        self.expect_error(1, [*TINY, *quick, "--out", existing], "--out")
        self.expect_error(2, [*TINY, *quick, "--out", existing], "--out")


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__], fresh_work=True)
