#!/usr/bin/python3
"""`ssd-analyze traffic` (analysis/ssd_analysis/traffic.py) on hand-written run files with known
forward passes and weight bytes: the bytes per token and the read rate recomputed by hand, the
SSD/SD split into those two parts multiplying back to the speed ratio, and a file from before the
passes were counted refused with one line and exit 2.
Run: /usr/bin/python3 -m unittest discover -s analysis/tests"""
import contextlib
import io as stdio
import os
import sys
import unittest

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from ssd_analysis import traffic as TR  # noqa: E402
from test_compare import ZEN, write_characterize  # noqa: E402
from test_schema import RunFiles, ssd_rounds  # noqa: E402

TARGET_BYTES, DRAFT_BYTES = 3.0e9, 1.0e9
MODELS = {"target": {"weight_bytes_per_token": TARGET_BYTES},
          "draft": {"weight_bytes_per_token": DRAFT_BYTES}}


class Traffic(RunFiles, unittest.TestCase):
    def run_file(self, mode, draft_passes, counted=True):
        # Four rounds of 1 s each, 2 + 4 + 2 + 1 = 9 tokens (ssd_rounds: accepted + 1).
        rd = ssd_rounds(sources=[0, 1, 2, 1] if mode == "ssd" else [2, 2, 2, 2],
                        outcomes=[1, 0, 1, -1] if mode == "ssd" else [-1] * 4,
                        accepted=[1, 3, 1, 0])
        extra = dict(target_forward_passes=[4], draft_forward_passes=[draft_passes])
        return self.write(mode, rd, reps_extra=extra if counted else None, model_attrs=MODELS)

    def cli(self, *args):
        out, err = stdio.StringIO(), stdio.StringIO()
        parser = TR.OneLineErrors(prog="t")
        sub = parser.add_subparsers(dest="command", required=True)
        TR.add_parser(sub, TR.cmd_traffic)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                a = parser.parse_args(["traffic", *args])
                status = a.func(a)
            except SystemExit as e:
                status = e.code
        return status, out.getvalue(), err.getvalue()

    def test_bytes_per_token_and_rate(self):
        sd = self.run_file("sd", draft_passes=12)
        row = TR.traffic(sd)
        total = 4 * TARGET_BYTES + 12 * DRAFT_BYTES
        self.assertAlmostEqual(row["GB_per_tok"], total / 9 / 1e9)
        self.assertAlmostEqual(row["GBps"], total / 4.0 / 1e9)
        self.assertAlmostEqual(row["draft_passes_per_tok"], 12 / 9)
        self.assertAlmostEqual(row["tok_s"], 9 / 4.0)

    def test_ssd_over_sd_splits_into_bytes_and_rate(self):
        sd = self.run_file("sd", draft_passes=12)
        ssd = self.run_file("ssd", draft_passes=16)
        status, out, err = self.cli(sd.path, ssd.path)
        self.assertEqual(status, 0, err)
        line = [x for x in out.splitlines() if x.startswith(os.path.basename(ssd.path))][-1]
        # Same tokens and time: speed 1.000; SSD read (12 + 16) GB against SD's (12 + 12).
        self.assertIn("SSD/SD 1.000 = bytes per token 0.857", line)
        self.assertIn("x read rate 1.167", line)
        # Equal hardware (one core each): the ceiling at one read rate, d = 1 GB / 3 GB.
        self.assertIn("(equal hardware)", line)
        self.assertIn("at one read rate at most 0.833 (1 - d/2, d = draft/target bytes 0.333)",
                      line)

    def test_equal_rate_ceiling_bounds_every_round(self):
        # The docstring's bound, checked against the round model it comes from: SSD's tokens
        # per target pass at its best K over SD's at SD's best K never exceed 1 - d/2.
        def tokens(a, K):
            return (1 - a ** (K + 1)) / (1 - a)
        for d in (0.5, 1 / 3, 0.2, 0.1, 0.05):
            for a in (0.6, 0.8, 0.9, 0.99):
                sd = max(2 * tokens(a, K) / (1 + K * d) for K in range(1, 300))
                ssd = max(tokens(a, K) / max(1.0, (K + 1) * d) for K in range(1, 300))
                self.assertLessEqual(ssd / sd, TR.equal_rate_ceiling(d) + 1e-12, (d, a))
        # The bound is met at SD's own K where (K + 1) d = 1: d = 0.1, K = 9, every token
        # accepted (K + 1 a round): SSD 10 tokens a pass, SD 2 x 10 / 1.9.
        self.assertAlmostEqual(10 / (2 * 10 / 1.9), TR.equal_rate_ceiling(0.1))

    def test_read_rate_against_the_characterize_file(self):
        sd = self.run_file("sd", draft_passes=12)   # one core: against host_read_gbps
        char = os.path.join(self.dir, "char.h5")
        write_characterize(char, ZEN)
        with h5py.File(char, "a") as f:
            f["node_read/gbps"] = np.array([30.0, 60.0, 40.0])
            f["node_read/latency_ns"] = np.array([40.0, 190.0, 45.0])
        status, out, err = self.cli(sd.path, "--characterize", char, "--format", "csv")
        self.assertEqual(status, 0, err)
        of_read = float(out.splitlines()[1].split(",")[-1])
        self.assertAlmostEqual(of_read, (4 * TARGET_BYTES + 12 * DRAFT_BYTES) / 4.0 / 1e9 / 24.0)
        status, out, err = self.cli(sd.path, "--characterize", char)
        self.assertIn("# read rates: 24.0 GB/s one core alone, every core of the node at once "
                      "29.0 GB/s", out)
        self.assertIn("# node read: 3 passes 30.0-60.0 GB/s (median 40.0), the cores 40-190 ns "
                      "apart", out)

    def on_gpus(self, run, devices):
        # /ranks as ssd-bench writes them on GPUs: each rank's device names its index and PCI slot.
        with h5py.File(run.path, "a") as f:
            for rank, device in enumerate(devices):
                g = f.create_group(f"ranks/{rank}")
                g.attrs.update(host="node", threads=8, device=device)
        return TR.sio.load_run(run.path)

    def test_gpu_runs_compare_gpus_not_cores(self):
        gpu0 = "NVIDIA H200 (cuda:0, PCI 0000:00:06.0, cc 9.0)"
        gpu1 = "NVIDIA H200 (cuda:1, PCI 0000:00:07.0, cc 9.0)"
        sd = self.on_gpus(self.run_file("sd", draft_passes=12), [gpu0])
        shared = self.on_gpus(self.run_file("ssd", draft_passes=16), [gpu0, gpu0])
        own = self.on_gpus(self.run_file("ssd", draft_passes=16), [gpu0, gpu1])
        self.assertEqual([TR.traffic(r)["gpus"] for r in (sd, shared, own)], [1, 1, 2])
        char = os.path.join(self.dir, "char.h5")
        write_characterize(char, ZEN)
        status, out, err = self.cli(sd.path, shared.path, own.path, "--characterize", char)
        self.assertEqual(status, 0, err)
        lines = out.splitlines()
        # Both SSD runs have 16 CPU threads to SD's 8: the GPUs decide the comparison.
        self.assertIn(f"{os.path.basename(shared.path)} / {os.path.basename(sd.path)} "
                      "(equal hardware)", out)
        self.assertIn(f"{os.path.basename(own.path)} / {os.path.basename(sd.path)} "
                      "(2 GPUs against 1)", out)
        # The host's read rates say nothing of a GPU's memory: no fraction for these runs.
        row = [x for x in lines if x.strip().startswith(os.path.basename(sd.path))][0]
        self.assertTrue(row.rstrip().endswith("-"), row)

    def test_file_without_passes_is_refused_in_one_line(self):
        old = self.run_file("sd", draft_passes=12, counted=False)
        status, out, err = self.cli(old.path)
        self.assertEqual(status, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("no /reps target_forward_passes", err)


if __name__ == "__main__":
    unittest.main()
