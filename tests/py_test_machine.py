#!/usr/bin/python3
"""/machine end to end: a run file and a characterize file written by ssd-bench carry this
host's identity (checked against /proc/cpuinfo, the root attributes and the environment's
SLURM_JOB_ID), and `ssd-analyze compare` puts the two files on one machine's row.

  /usr/bin/python3 tests/py_test_machine.py --ssd-bench PATH --work DIR
"""
import csv
import os
import subprocess
import sys
import unittest

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = None
TINY = ["--target", "synthetic:tiny-llama", "--draft", "synthetic:tiny-llama", "--threads", "1"]


def cpuinfo():
    """{key: value} of the first processor in /proc/cpuinfo."""
    out = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if not line.strip():
                break
            key, _, value = line.partition(":")
            out.setdefault(key.strip(), value.strip())
    return out


class Machine(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.run_file = os.path.join(ARGS.work, "sd.h5")
        cls.char_file = os.path.join(ARGS.work, "char.h5")
        env = dict(os.environ, SLURM_JOB_ID="4242")
        for cmd in ([ARGS.ssd_bench, *TINY, "--mode", "sd", "-k", "2", "--max-new-tokens", "8",
                     "--out", cls.run_file, "--overwrite"],
                    [ARGS.ssd_bench, "characterize", *TINY, "--min-time", "0.01",
                     "--memory-bytes", str(8 << 20), "--out", cls.char_file, "--overwrite"]):
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
            assert res.returncode == 0, res.stdout + res.stderr

    def test_this_host(self):
        info = cpuinfo()
        flags = info.get("flags", "").split()
        for path in (self.run_file, self.char_file):
            with h5py.File(path, "r") as f:
                m = dict(f["machine"].attrs)
                self.assertEqual(m["cpu_model"], f.attrs["cpu_model"])
                self.assertEqual(m["cpus"], f.attrs["host_cpus"])
                self.assertEqual(m["hostname"], f.attrs["host"])
            self.assertEqual(m["cpu_family"], int(info.get("cpu family", -1)))
            self.assertEqual(m["cpu_model_number"], int(info.get("model", -1)))
            self.assertEqual(m["cpu_flags"].split(),
                             [x for x in ("avx2", "avx512f", "avx512_bf16") if x in flags])
            self.assertGreater(m["memory_bytes"], 1 << 28)
            self.assertEqual(m["slurm_job_id"], "4242")
            self.assertEqual((m["gpu_name"], m["gpu_sm_count"], m["cuda_driver"]),
                             ("none", 0, "none"))

    def test_compare_puts_both_on_one_row(self):
        out = os.path.join(ARGS.work, "compare")
        res = subprocess.run([os.path.join(ROOT, "analysis", "ssd-analyze"), "compare",
                              self.char_file, self.run_file, "--out", out, "-k", "2"],
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        with open(os.path.join(out, "compare.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["files"], "2")
        self.assertGreater(float(rows[0]["SD_meas"]), 0)
        self.assertGreater(float(rows[0]["SD"]), 0)


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__])
