#!/usr/bin/python3
"""slurm/characterize.sbatch against the one-node cluster of scripts/slurm-local.sh (label
slurm; skips with the reason where no Slurm answers): one characterize job for the partition,
whose file's /machine names the node and the job, then the compare job over it, whose table
has the machine's row.
"""
import csv
import os
import shutil
import subprocess
import sys
import unittest

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402
from py_test_slurm import slurm_unavailable  # noqa: E402

ARGS = None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK = ["--target", "synthetic:tiny-llama", "--draft", "synthetic:tiny-llama", "--min-time",
         "0.01", "--memory-bytes", str(8 << 20), "--comm-max-bytes", str(64 << 10)]


class CharacterizeTemplate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        mpi_run.skip_if(slurm_unavailable())

    def test_one_job_per_partition_then_compare(self):
        out = os.path.join(ARGS.work, "hw")
        shutil.rmtree(out, ignore_errors=True)
        env = dict(os.environ, SSD_BENCH=os.path.abspath(ARGS.ssd_bench), WAIT="1",
                   ANALYZE=os.path.join(ROOT, "analysis", "ssd-analyze"))
        res = subprocess.run([os.path.join(ROOT, "slurm", "characterize.sbatch"), out, "local",
                              "--", *QUICK], capture_output=True, text=True, timeout=600,
                             cwd=ARGS.work, env=env)
        logs = ""
        for name in sorted(os.listdir(os.path.join(out, "logs"))):
            with open(os.path.join(out, "logs", name)) as f:
                logs += f.read()
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr + logs)
        jobs = [line.split()[3].rstrip(":") for line in res.stdout.splitlines()
                if line.startswith("# submitted job")]
        self.assertEqual(len(jobs), 2, res.stdout)   # the partition's, then compare's
        with h5py.File(os.path.join(out, "characterize", "local.h5"), "r") as f:
            machine = dict(f["machine"].attrs)
            self.assertEqual(machine["slurm_job_id"], jobs[0])
            self.assertEqual(machine["hostname"], f.attrs["host"])
        with open(os.path.join(out, "compare", "compare.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["hosts"], machine["hostname"])
        self.assertGreater(float(rows[0]["AR"]), 0)
        self.assertIn("1: ", res.stdout)   # WAIT=1 prints the compare job's table

    def test_usage(self):
        res = subprocess.run([os.path.join(ROOT, "slurm", "characterize.sbatch"), "out"],
                             capture_output=True, text=True, timeout=60, cwd=ARGS.work)
        self.assertEqual(res.returncode, 2)
        self.assertIn("usage:", res.stderr)


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__])
