#!/usr/bin/python3
"""A sweep stopped by SIGTERM (Slurm's time limit, kill) mid-run: sweeps/run passes the signal
to the running ssd-bench, stops with exit 143 and one line, leaves no partial file and no rank
behind; running the same command again runs only the runs that are not complete."""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402
from processes import killed_on_exit, signal_and_wait  # noqa: E402

ARGS = None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "sweeps"))
from sweep import is_complete as complete  # noqa: E402  (what sweeps/run itself skips by)


def ssd_bench_processes():
    pids = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(cmdline, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"ssd-bench") and ARGS.work.encode() in b" ".join(argv):
            pids.append(int(cmdline.split("/")[2]))
    return pids


class SweepResume(unittest.TestCase):
    def sweep(self, out):
        # Longer runs than the smoke sweep's, so the signal lands inside one.
        with open(os.path.join(ROOT, "sweeps", "smoke.toml")) as f:
            text = f.read().replace("max-new-tokens = 16", "max-new-tokens = 96")
        path = os.path.join(ARGS.work, "resume.toml")
        with open(path, "w") as f:
            f.write(text.replace('name = "smoke"', 'name = "resume"'))
        return [sys.executable, os.path.join(ROOT, "sweeps", "run"), path, "--out", out,
                "--ssd-bench", ARGS.ssd_bench, "--mpiexec", ARGS.mpiexec]

    def test_killed_sweep_resumes(self):
        shutil.rmtree(ARGS.work, ignore_errors=True)
        out = os.path.join(ARGS.work, "sweep")
        os.makedirs(out)
        cmd = self.sweep(out)
        with killed_on_exit(subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT, text=True)) as proc:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # one run complete, the next one decoding
                done = [p for p in glob.glob(f"{out}/runs/*.h5") if complete(p)]
                if done and ssd_bench_processes():
                    break
                time.sleep(0.05)
            self.assertTrue(done and proc.poll() is None, "no run completed, or the sweep ended")
            stdout, _, took = signal_and_wait(proc, signal.SIGTERM, timeout=60)
        print(f"\n  sweep stopped: exit {proc.returncode} after {took:.2f} s", end="", flush=True)
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, stdout)
        self.assertIn("# sweep stopped by SIGTERM", stdout)
        time.sleep(0.5)
        self.assertEqual(ssd_bench_processes(), [])
        self.assertEqual(glob.glob(f"{out}/runs/*.partial.*"), [])
        stopped_with = sum(complete(p) for p in glob.glob(f"{out}/runs/*.h5"))
        with open(f"{out}/index.json") as f:
            self.assertEqual(sum(r["complete"] for r in json.load(f)["runs"]), stopped_with)

        again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
        header = re.search(r"(\d+) runs, (\d+) already complete, (\d+) to run", again.stdout)
        self.assertIsNotNone(header, again.stdout)
        total, skipped, ran = map(int, header.groups())
        print(f"; resumed: {skipped} of {total} skipped, {ran} run", end="", flush=True)
        self.assertEqual(skipped, stopped_with)
        self.assertEqual(skipped + ran, total)
        with open(f"{out}/index.json") as f:
            self.assertTrue(all(r["complete"] for r in json.load(f)["runs"]))


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__])
