#!/usr/bin/python3
"""`ssd-analyze compare` (analysis/ssd_analysis/compare.py, machine.py) on files written here
in characterize's layout: two synthetic machines with known figures, the table's numbers
checked against them; grouping by /machine and by the older files' root attributes; a file of
another target refused with one line and exit 2.
Run: /usr/bin/python3 -m unittest discover -s analysis/tests"""
import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from ssd_analysis import io as sio  # noqa: E402
from ssd_analysis import machine as MC  # noqa: E402

CLI = os.path.join(HERE, "..", "ssd-analyze")
CONFIG = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256}
KINDS = "ar,verify,draft,glue,branch,rows"

# Two machines: the target's step of 1 (AR), 5 (K = 4's verification) and 16 rows, the draft's
# one-row step, in seconds, and what characterize's headline says of the host.
ZEN = {"steps": (0.010, 0.012, 0.020), "draft": 0.001, "read": 24.0, "node_read": 29.0,
       "node_latency": 52.0,
       "copy": 23.0,
       "fma": 115.0, "bf16": 230.0, "p2p_s": 6e-7, "p2p_gbps": 6.0,
       "machine": {"cpu_model": "AMD EPYC", "cpu_family": 25, "cpu_model_number": 17,
                   "cpu_flags": "avx2 avx512f avx512_bf16", "cpus": 2,
                   "memory_bytes": 23 * 2 ** 30, "hostname": "vm"}}
XEON = {"steps": (0.005, 0.007, 0.015), "draft": 0.001, "read": 60.0, "copy": 50.0,
        "fma": 900.0, "bf16": None, "p2p_s": 4e-7, "p2p_gbps": 9.0,
        "machine": {"cpu_model": "Intel Xeon", "cpu_family": 6, "cpu_model_number": 143,
                    "cpu_flags": "avx2 avx512f", "cpus": 32, "memory_bytes": 256 * 2 ** 30,
                    "hostname": "node7", "slurm_job_id": "1234"}}


def _strings(f, path, values):
    f[path] = np.asarray(values, dtype=np.int32)


def write_characterize(path, m, target="synthetic:llama-124m", machine=True):
    """A characterize file in ssd-bench's layout (docs/hdf5-schema.md) with machine `m`'s
    figures; machine=False writes it as files from before /machine were."""
    with h5py.File(path, "w") as f:
        a = f.attrs
        a.update({"complete": 1, "mode": "characterize", "command": "characterize",
                  "target": target, "draft": "synthetic:llama-12m", "backend": "cpu",
                  "batch_size": 1, "lookahead": 4, "context": 128, "element_bytes": 4,
                  "target_weight_dtype": "BF16", "host_read_gbps": m["read"],
                  "ar_bound_gbps": m["read"], "bandwidth_gbps": m["copy"],
                  "host_fma_gflops": m["fma"], "p2p_latency_s": m["p2p_s"],
                  "p2p_bandwidth_gbps": m["p2p_gbps"], "host": m["machine"]["hostname"],
                  "cpu_model": m["machine"]["cpu_model"], "host_cpus": m["machine"]["cpus"],
                  "gpu_model": "none", "decode_bytes_per_token": 2.0 * 40000,
                  "compute_peak": "bf16 dot-product" if m["bf16"] else "fp32 FMA"})
        if m.get("node_read"):  # two or more ranks on the node (absent with one)
            a["node_read_gbps"] = m["node_read"]
            a["node_latency_median_ns"] = m["node_latency"]
        if m["bf16"]:
            a["host_bf16_dot_gflops"] = m["bf16"]
        for role, spec in (("target", target), ("draft", "synthetic:llama-12m")):
            g = f.create_group(f"models/{role}")
            g.attrs.update({"spec": spec, "config_json": json.dumps(CONFIG),
                            "parameters": 40000})
        gemm = {"rank": [0, 1], "model_id": [0, 1], "shape_id": [0, 0], "kernel_id": [0, 0],
                "rows": [1, 1], "in": [64, 64], "out": [64, 64], "full_out": [64, 64],
                "per_token": [1, 1], "element_bytes": [2, 2], "seconds": [1e-5, 1e-5],
                "gflops": [0.8, 0.8]}
        for k, v in gemm.items():
            f[f"gemm/{k}"] = np.asarray(v, dtype=np.float64 if k in ("seconds", "gflops")
                                        else np.int32)
        f["gemm/model_id"].attrs["names"] = "target,draft"
        f["gemm/kernel_id"].attrs["names"] = "invariant"
        (t1, t5, t16), d1 = m["steps"], m["draft"]
        rows = [1, 5, 16, 1]
        fwd = {"rank": [0, 0, 0, 1], "model_id": [0, 0, 0, 1], "kind_id": [0, 1, 5, 2],
               "rows": rows, "sequences": [1, 1, 1, 1], "context": [128] * 4,
               "calls": [10] * 4, "concurrent": [0] * 4}
        for k, v in fwd.items():
            _strings(f, f"forward/{k}", v)
        f["forward/seconds"] = np.asarray([t1, t5, t16, d1])
        f["forward/best_seconds"] = np.asarray([t1, t5, t16, d1])
        f["forward/model_id"].attrs["names"] = "target,draft"
        f["forward/kind_id"].attrs["names"] = KINDS
        if machine:
            f.create_group("machine").attrs.update(
                {"gpu_name": "none", "gpu_sm_count": 0, "gpu_memory_bytes": 0,
                 "cuda_driver": "none", "cuda_runtime": "none", "slurm_job_id": "",
                 **m["machine"]})


def write_ar_run(path, m, tok_s):
    """An AR run file of machine `m` whose measured decode rate is `tok_s`."""
    with h5py.File(path, "w") as f:
        config = {"target": "synthetic:llama-124m", "batch_size": "1", "draft": "none"}
        f.attrs.update({"complete": 1, "mode": "ar", "config_json": json.dumps(config),
                        "host": m["machine"]["hostname"], "cpu_model": m["machine"]["cpu_model"],
                        "host_cpus": m["machine"]["cpus"], "gpu_model": "none"})
        f.create_group("summary").attrs["decode_tokens_per_s"] = tok_s
        f.create_group("machine").attrs.update(m["machine"])


def run_cli(*args):
    return subprocess.run([sys.executable, CLI, "compare", *args], capture_output=True,
                          text=True, timeout=300)


class Compare(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def rows(self, out):
        with open(os.path.join(out, "compare.csv")) as f:
            return list(csv.DictReader(f))

    def test_two_machines_table_against_the_files(self):
        write_characterize(self.path("zen.h5"), ZEN)
        write_characterize(self.path("xeon.h5"), XEON)
        write_ar_run(self.path("xeon-ar.h5"), XEON, 190.0)
        out = self.path("out")
        p = run_cli(self.path("zen.h5"), self.path("xeon.h5"), self.path("xeon-ar.h5"),
                    "--out", out, "--alpha", "0.8", "--r", "1.0")
        self.assertEqual(p.returncode, 0, p.stderr)
        zen, xeon = self.rows(out)
        for row, m in ((zen, ZEN), (xeon, XEON)):
            t1, t5, t16 = m["steps"]
            self.assertEqual(row["cpu"], m["machine"]["cpu_model"])
            self.assertEqual(int(row["cpus"]), m["machine"]["cpus"])
            self.assertEqual(int(row["mem_GiB"]), m["machine"]["memory_bytes"] // 2 ** 30)
            self.assertAlmostEqual(float(row["read_GBps"]), m["read"])
            self.assertEqual(row["node_read_GBps"], str(m.get("node_read", "nan")))
            self.assertEqual(row["node_latency_ns"], str(m.get("node_latency", "nan")))
            self.assertAlmostEqual(float(row["copy_GBps"]), m["copy"])
            self.assertAlmostEqual(float(row["fp32_GFLOPs"]), m["fma"])
            self.assertEqual(row["bf16_GFLOPs"], str(m["bf16"] or "nan"))
            self.assertAlmostEqual(float(row["AR_ms"]), 1e3 * t1)
            self.assertAlmostEqual(float(row["verify_K+1_AR"]), t5 / t1)
            self.assertAlmostEqual(float(row["verify_16_AR"]), t16 / t1)
            self.assertAlmostEqual(float(row["draft_step_target"]), m["draft"] / t1)
            self.assertAlmostEqual(float(row["p2p_us"]), 1e6 * m["p2p_s"])
            self.assertAlmostEqual(float(row["p2p_GBps"]), m["p2p_gbps"])
            # AR at batch 1 is one target step (no host work measured in these files)
            self.assertAlmostEqual(float(row["AR"]), 1 / t1, places=6)
        self.assertAlmostEqual(float(xeon["AR/1st"]), ZEN["steps"][0] / XEON["steps"][0])
        self.assertEqual(zen["AR_meas"], "")
        self.assertAlmostEqual(float(xeon["AR_meas"]), 190.0)
        self.assertEqual(xeon["hosts"], "node7")
        for mode in ("SD", "SSD"):
            self.assertGreater(float(zen[mode]), 0)
        self.assertIn("2: Intel Xeon f6m143, 32 CPUs", p.stdout)
        for name in ("compare.txt", "roofline_machines.png", "roofline_machines.pdf"):
            self.assertTrue(os.path.getsize(os.path.join(out, name)) > 0, name)
        with open(os.path.join(out, "compare.txt")) as f:
            self.assertEqual(f.read().rstrip("\n"),
                             p.stdout.rstrip("\n").rsplit("\n", 1)[0])

    def test_files_of_one_machine_are_averaged(self):
        faster = dict(ZEN, read=30.0)
        write_characterize(self.path("a.h5"), ZEN)
        write_characterize(self.path("b.h5"), dict(faster, machine=dict(ZEN["machine"],
                                                                         hostname="vm2")))
        write_characterize(self.path("c.h5"), XEON)
        out = self.path("out")
        p = run_cli(self.path("a.h5"), self.path("c.h5"), self.path("b.h5"), "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        zen, xeon = self.rows(out)
        self.assertAlmostEqual(float(zen["read_GBps"]), (ZEN["read"] + 30.0) / 2)
        self.assertEqual((zen["files"], zen["hosts"]), ("2", "vm,vm2"))
        self.assertAlmostEqual(float(xeon["read_GBps"]), XEON["read"])

    def test_a_file_of_another_target_is_refused(self):
        write_characterize(self.path("zen.h5"), ZEN)
        write_characterize(self.path("xeon.h5"), XEON, target="synthetic:llama-3.2-1b")
        p = run_cli(self.path("zen.h5"), self.path("xeon.h5"), "--out", self.path("out"))
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("xeon.h5", p.stderr)
        self.assertIn("one target/draft pair", p.stderr)


class Grouping(unittest.TestCase):
    """machine.group: /machine where a file has it, the root attributes where it does not."""

    def load(self, tmp, name, m, **kw):
        path = os.path.join(tmp, name)
        write_characterize(path, m, **kw)
        return sio.load_run(path)

    def test_older_files_group_by_what_they_record(self):
        with tempfile.TemporaryDirectory() as tmp:
            new = self.load(tmp, "new.h5", ZEN)
            old = self.load(tmp, "old.h5", ZEN, machine=False)
            other = self.load(tmp, "xeon.h5", XEON, machine=False)
            self.assertEqual(MC.identity(old), {"cpu_model": "AMD EPYC", "cpus": 2,
                                                "gpu_name": "none"})
            machines, notes = MC.group([old, other, new])
            self.assertEqual([[f.name for f in m.files] for m in machines],
                             [["old.h5", "new.h5"], ["xeon.h5"]])
            self.assertEqual(notes, [])

    def test_different_machines_never_merge(self):
        with tempfile.TemporaryDirectory() as tmp:
            zen5 = dict(ZEN, machine=dict(ZEN["machine"], cpu_model_number=2))
            a, b = self.load(tmp, "a.h5", ZEN), self.load(tmp, "b.h5", zen5)
            old = self.load(tmp, "old.h5", ZEN, machine=False)
            machines, notes = MC.group([a, b, old])
            self.assertEqual(len(machines), 2)
            self.assertEqual(len(notes), 1)   # the old file fits both: said, not hidden
            self.assertIn("old.h5", notes[0])

    def test_gpu_name_without_the_device_suffix(self):
        with tempfile.TemporaryDirectory() as tmp:
            run = self.load(tmp, "g.h5", ZEN, machine=False)
            run.attrs["gpu_model"] = "NVIDIA H100 80GB HBM3 (cuda:0, PCI 0000:1B:00.0, cc 9.0)"
            self.assertEqual(MC.identity(run)["gpu_name"], "NVIDIA H100 80GB HBM3")


if __name__ == "__main__":
    unittest.main()
