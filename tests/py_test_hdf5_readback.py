#!/usr/bin/python3
"""Runs ssd-bench on a tiny synthetic model and reads its HDF5 file back with h5py: every
dataset and attribute of docs/hdf5-schema.md is there, and the tokens equal the console's."""
import json
import os
import re
import subprocess
import sys
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402

ARGS = None


def run(*flags, check=True):
    cmd = [ARGS.ssd_bench, *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def console_tokens(stdout):
    tokens = {}
    for line in stdout.splitlines():
        m = re.match(r"# tokens\[(\d+)\]:(.*)$", line)
        if m:
            tokens[int(m.group(1))] = [int(t) for t in m.group(2).split()]
    return tokens


class ReadBack(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.path = os.path.join(ARGS.work, "ar.h5")
        cls.proc = run("--target", "synthetic:tiny-llama", "--batch-size", "2",
                       "--num-prompts", "3", "--prompt-len", "7", "--max-new-tokens", "12",
                       "--temperature", "0.8", "--seed", "5", "--warmup", "1", "--reps", "2",
                       "--threads", "1", "--show-tokens", "--out", cls.path)

    def test_tokens_match_console(self):
        with h5py.File(self.path, "r") as f:
            generated = f["/generated_tokens"][...]
        self.assertEqual(generated.dtype, np.int32)
        self.assertEqual(generated.shape, (3, 12))
        shown = console_tokens(self.proc.stdout)
        self.assertEqual(sorted(shown), [0, 1, 2])
        for i, tokens in shown.items():
            row = generated[i]
            self.assertEqual(list(row[: len(tokens)]), tokens)
            self.assertTrue(np.all(row[len(tokens):] == -1), "padding must be -1")

    def test_root_attributes(self):
        with h5py.File(self.path, "r") as f:
            a = f.attrs
            for name in ["schema_version", "mode", "config_json", "argv", "git_commit",
                         "build_type", "host", "cpu_model", "gpu_model", "start_time",
                         "end_time", "version"]:
                self.assertIn(name, a, name)
            self.assertEqual(a["mode"], "ar")
            self.assertEqual(int(a["complete"]), 1)
            config = json.loads(a["config_json"])
            self.assertEqual(config["target"], "synthetic:tiny-llama")
            self.assertEqual(config["batch_size"], "2")
            self.assertIn("--max-new-tokens", a["argv"])
            for lib in ["hdf5", "mpi", "openblas"]:
                self.assertIn(lib, f["/libraries"].attrs)
            self.assertEqual(f["/config"].attrs["temperature"], "0.8")
            self.assertIn("config_json", f["/models/target"].attrs)
            self.assertEqual(f["/ranks/0"].attrs["role"], "target tp 0/1")

    def test_step_records(self):
        with h5py.File(self.path, "r") as f:
            steps = f["/steps"]
            n = len(steps["rep"])
            for col in ["rep", "step", "row", "sequence", "tokens", "start_s", "step_time_s",
                        "forward_time_s"]:
                self.assertEqual(len(steps[col]), n, col)
            self.assertEqual(set(steps["rep"][...]), {0, 1})
            self.assertTrue(np.all(steps["forward_time_s"][...] <= steps["step_time_s"][...]))
            # Each recorded rep emitted every generated token exactly once.
            generated = f["/generated_tokens"][...]
            per_rep = int(np.sum(generated >= 0))
            for rep in (0, 1):
                sel = steps["rep"][...] == rep
                self.assertEqual(int(np.sum(steps["tokens"][...][sel])), per_rep)
            self.assertEqual(f["/prompt_tokens"].shape, (3, 7))
            self.assertEqual(list(f["/prompt_lengths"][...]), [7, 7, 7])

    def test_summary(self):
        with h5py.File(self.path, "r") as f:
            s = f["/summary"].attrs
            for name in ["decode_tokens_per_s", "prefill_tokens_per_s", "ms_per_token_mean",
                         "ms_per_token_std"]:
                self.assertIn(name, s)
                self.assertTrue(np.isfinite(s[name]))
            self.assertGreater(s["decode_tokens_per_s"], 0)
            reps = f["/reps"]
            tps = reps["decode_tokens"][...] / reps["decode_time_s"][...]
            self.assertAlmostEqual(float(np.mean(tps)), float(s["decode_tokens_per_s"]),
                                   places=6)
        # The console row shows the same mean.
        m = re.search(r"Avg decode throughput: ([0-9.]+) tok/s", self.proc.stdout)
        self.assertIsNotNone(m)
        with h5py.File(self.path, "r") as f:
            self.assertAlmostEqual(float(m.group(1)), f["/summary"].attrs["decode_tokens_per_s"],
                                   delta=0.01)

    def test_weight_traffic_line(self):
        # "# Weight traffic: B per token (P target forward passes per token), read at R GB/s",
        # from the same counts the file's /reps holds.
        m = re.search(r"Weight traffic: [0-9.]+ [kMG]B per token \(([0-9.]+) target forward "
                      r"passes per token\), read at ([0-9.]+) GB/s", self.proc.stdout)
        self.assertIsNotNone(m, self.proc.stdout[-1500:])
        with h5py.File(self.path, "r") as f:
            reps = f["/reps"]
            passes = float(np.sum(reps["target_forward_passes"][...]))
            tokens = float(np.sum(reps["decode_tokens"][...]))
            seconds = float(np.sum(reps["decode_time_s"][...]))
            np.testing.assert_array_equal(reps["target_forward_passes"][...],
                                          reps["decode_steps"][...])
            weight_bytes = float(f["/models/target"].attrs["weight_bytes_per_token"])
        self.assertAlmostEqual(float(m.group(1)), passes / tokens, delta=0.0005)
        self.assertAlmostEqual(float(m.group(2)), passes * weight_bytes / seconds / 1e9,
                               delta=0.05 + 0.001 * float(m.group(2)))

    def test_no_overwrite_without_flag(self):
        proc = run("--target", "synthetic:tiny-llama", "--max-new-tokens", "2", "--out",
                   self.path, check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--overwrite", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)

    def test_no_partial_file_left_on_error(self):
        path = os.path.join(ARGS.work, "bad.h5")
        proc = run("--target", "synthetic:no-such-model", "--out", path, check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertFalse(os.path.exists(path))
        self.assertEqual([p for p in os.listdir(ARGS.work) if "partial" in p], [])


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__], fresh_work=True)
