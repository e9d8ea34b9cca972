#!/usr/bin/python3
"""SIGINT and SIGTERM (Ctrl-C, Slurm's time limit): a run stops within seconds, every rank with
it, exits non-zero with one line from ssd-bench, and leaves no result file (neither the final
one nor a partial one)."""
import glob
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402
from processes import alive, catches, descendants, killed_on_exit, signal_and_wait  # noqa: E402

ARGS = None
# Effectively endless: the signal always lands mid-run.
ENDLESS = ["--target", "synthetic:tiny-llama", "--max-new-tokens", "32", "--ignore-eos",
           "--reps", "1000000", "--warmup", "0", "--threads", "1", "--progress", "0"]


class Signals(unittest.TestCase):
    def setUp(self):
        os.makedirs(ARGS.work, exist_ok=True)
        for f in glob.glob(os.path.join(ARGS.work, "*")):
            os.remove(f)

    def stop(self, cmd, sig, started, env=None, settle=1.0):
        out = os.path.join(ARGS.work, "run.h5")
        with killed_on_exit(subprocess.Popen([*cmd, "--out", out], stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True, env=env)) as proc:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not started(proc):
                time.sleep(0.1)
            time.sleep(settle)  # decoding by now, unless settle is 0
            self.assertIsNone(proc.poll(), "the run ended before the signal")
            ranks = descendants(proc.pid)
            _, stderr, took = signal_and_wait(proc, sig, timeout=30)
        print(f"\n  {signal.Signals(sig).name}: exit {proc.returncode} after {took:.2f} s",
              end="", flush=True)
        self.assertLess(took, 5.0)
        self.assertNotEqual(proc.returncode, 0)
        own = [line for line in stderr.splitlines() if line.startswith("ssd-bench:")]
        self.assertEqual(own, [f"ssd-bench: stopped by {signal.Signals(sig).name}; no result "
                               "file was written"], stderr)
        time.sleep(0.5)
        for pid in ranks:
            self.assertFalse(alive(pid), f"pid {pid} outlived the run")
        self.assertEqual(os.listdir(ARGS.work), [])  # no result, no partial file
        return proc.returncode

    def test_sigint_stops_a_single_rank_run(self):
        # Started: its handler is in place, which MPI_Init comes before (a singleton's MPI_Init
        # took 2.3 s on a host whose munge socket had no daemon behind it).
        code = self.stop([ARGS.ssd_bench, *ENDLESS], signal.SIGINT,
                         lambda p: catches(p.pid, signal.SIGINT))
        self.assertEqual(code, 128 + signal.SIGINT)

    def test_sigterm_as_soon_as_it_is_caught(self):
        # Slurm's early TERM can land a second into a job, in MPI_Init (PMIx wire-up): the
        # handler is installed before it, with the launcher's rank, so the stop is the same.
        code = self.stop([ARGS.ssd_bench, *ENDLESS], signal.SIGTERM,
                         lambda p: catches(p.pid, signal.SIGTERM), settle=0.0)
        self.assertEqual(code, 128 + signal.SIGTERM)

    def test_sigterm_to_mpiexec_stops_every_rank(self):
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        cmd = [ARGS.mpiexec, "--oversubscribe", "--bind-to", "none", "-np", "2", ARGS.ssd_bench,
               *ENDLESS, "--mode", "ssd", "--draft", "perturb:0.1"]
        self.stop(cmd, signal.SIGTERM, lambda p: len(descendants(p.pid)) >= 2, env)


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__])
