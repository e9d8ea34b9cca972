#!/usr/bin/python3
"""Several draft ranks (--draft-ranks D): the batch's sequences split across them (row r on
draft rank r % D), each rank building the speculation cache of its own sequences.

Greedy SSD with D = 1, 2, 3 and target TP 1, 2 (and SD with 2 separate draft ranks) generates
exactly AR's tokens, including a batch group with fewer rows than draft ranks; the records say
which rank served each row and what each rank did. Temperature 1 with D = 2: the distribution
of the first tokens matches AR's (chi-square), and the test tells temperature 0.7 from 1.
Killing any one draft rank mid-run ends the whole job, with no result file."""
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402
import ssd_runs  # noqa: E402
from processes import alive, killed_on_exit, world_ranks  # noqa: E402
from ssd_runs import COMMON, TARGET  # noqa: E402
from stat_checks import first_difference, printed_p_value, tokens_of  # noqa: E402

ARGS = None
# 5 prompts in batches of 4: the second group has one row, so with D = 2, 3 some ranks get no
# sequence in it.
K = 3
GREEDY = ["--target", TARGET, "--seed", "3", "--num-prompts", "5", "--batch-size", "4",
          "--prompt-len", "6", "--max-new-tokens", "24", "-k", str(K), *COMMON]


def run(name, ranks, flags):
    path = os.path.join(ARGS.work, name + ".h5")
    if os.path.exists(path):
        os.remove(path)
    # ssd_runs.launch: with yield-when-idle, since up to 5 ranks share this machine's 2 cores
    proc = ssd_runs.launch(ranks, [*flags, "--out", path], timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"{name}: exit {proc.returncode}\n{proc.stdout[-3000:]}"
                             f"{proc.stderr[-3000:]}")
    return path


class GreedyEqualsAR(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ar = tokens_of(run("ar", 1, ["--mode", "ar", *GREEDY]))

    def check(self, name, path, draft_ranks):
        got = tokens_of(path)
        self.assertEqual(got.shape, self.ar.shape, name)
        if not np.array_equal(got, self.ar):
            self.fail(f"{name}: first difference {first_difference(got, self.ar)}")
        with h5py.File(path, "r") as f:
            rounds = {k: f["rounds"][k][...] for k in ("row", "group", "draft_rank", "round")}
            ranks = {k: f["draft_ranks"][k][...] for k in f["draft_ranks"]}
            reps = {k: f["reps"][k][...] for k in f["reps"]}
            self.assertEqual(int(f.attrs["complete"]), 1)
            mode = f.attrs["mode"]
        # Forward passes: the target verifies once a round; the draft ranks' own counts add up
        # to the repetition's. SD's rank drafts K steps for its rows each round; SSD's first
        # answer of a group is that too, later ones its cache build (a glue step and up to K
        # branch steps) and any just-in-time fallback (K more).
        np.testing.assert_array_equal(reps["target_forward_passes"], reps["decode_steps"])
        self.assertEqual(int(reps["draft_forward_passes"].sum()),
                         int(ranks["forward_passes"].sum()))
        passes, first = ranks["forward_passes"], ranks["round"] == 0
        if mode == "sd":
            self.assertTrue((passes == K).all(), f"{name}: {passes.tolist()}")
        else:
            self.assertTrue((passes[first] == K).all(), f"{name}: {passes[first].tolist()}")
            self.assertTrue(((passes[~first] >= 1) & (passes[~first] <= 2 * K + 1)).all(),
                            f"{name}: {passes[~first].tolist()}")
        # Row r is served by rank r % D, every round.
        np.testing.assert_array_equal(rounds["draft_rank"], rounds["row"] % draft_ranks)
        # Group 0 (4 rows) used every rank; group 1 (1 row) only rank 0.
        for group, expected in ((0, list(range(min(draft_ranks, 4)))), (1, [0])):
            used = np.unique(ranks["draft_rank"][ranks["group"] == group]).tolist()
            self.assertEqual(used, expected, f"{name} group {group}")
        # Each rank's record counts the rows it answered for; they add up to the rounds'.
        for group in (0, 1):
            per_round = {}
            for rnd, n in zip(ranks["round"][ranks["group"] == group],
                              ranks["sequences"][ranks["group"] == group]):
                per_round[rnd] = per_round.get(rnd, 0) + n
            in_rounds = np.bincount(rounds["round"][rounds["group"] == group])
            for rnd, n in per_round.items():
                self.assertGreaterEqual(n, in_rounds[rnd] if rnd < len(in_rounds) else 0)
        self.assertTrue((ranks["idle_s"] >= 0).all() and (ranks["cache_build_time_s"] >= 0).all())
        self.assertTrue((ranks["draft_end_s"] >= ranks["draft_start_s"]).all())

    def test_ssd(self):
        for tp in (1, 2):
            for d in (1, 2, 3):
                name = f"ssd_tp{tp}_d{d}"
                with self.subTest(name=name):
                    path = run(name, tp + d,
                               ["--mode", "ssd", "--draft", "perturb:0.05", "--target-tp",
                                str(tp), "--draft-ranks", str(d), *GREEDY])
                    self.check(name, path, d)

    def test_sd_separate(self):
        path = run("sd_d2", 3, ["--mode", "sd", "--draft", "perturb:0.05", "--draft-ranks", "2",
                                *GREEDY])
        self.check("sd_d2", path, 2)


class SampledLossless(ssd_runs.SampledRuns, unittest.TestCase):
    """Temperature 1, N sequences of one prompt split over 2 draft ranks."""

    @classmethod
    def setUpClass(cls):
        common = cls.sampled_flags()
        cls.paths = {
            "ssd_d2": run("sampled/ssd_d2", 3, [
                *common, "--mode", "ssd", "--draft", "perturb:0.3", "-k", "2", "--temperature",
                "1", "--saguaro-c", "0.5", "--draft-ranks", "2", "--fanout", "geometric",
                "--budget", "6", "--fallback", "primary", "--seed", "204"]),
            "ar_t1": run("sampled/ar_t1", 1, [*common, "--temperature", "1", "--seed", "201"]),
            "ar_t07": run("sampled/ar_t07", 1, [*common, "--temperature", "0.7", "--seed",
                                                "203"]),
        }

    def p_value(self, a, b, columns):
        return printed_p_value(a, tokens_of(self.paths[a]), b, tokens_of(self.paths[b]), columns)

    def test_ssd_two_draft_ranks_matches_ar(self):
        with h5py.File(self.paths["ssd_d2"], "r") as f:
            served = np.unique(f["rounds/draft_rank"][...]).tolist()
            hits = int((f["rounds/source"][...] == 1).sum())
        self.assertEqual(served, [0, 1])
        self.assertGreater(hits, 50)  # later tokens came through both ranks' caches
        for columns in ([0, 1], [1, 2], [2, 3], [4, 5]):
            self.assertGreater(self.p_value("ssd_d2", "ar_t1", columns), 1e-3, columns)

    def test_power_temperature_07_is_rejected(self):
        self.assertLess(self.p_value("ar_t07", "ar_t1", [0, 1]), 1e-6)


class DraftRankDies(unittest.TestCase):
    def test_killing_any_draft_rank_ends_the_job(self):
        for victim in (1, 2, 3):  # TP 1: world ranks 1..3 are draft ranks 0..2
            with self.subTest(victim=victim):
                self.kill(victim)

    def kill(self, victim):
        out = os.path.join(ARGS.work, f"killed{victim}.h5")
        flags = ["--target", TARGET, "--mode", "ssd", "--draft", "perturb:0.05",
                 "--draft-ranks", "3", "--batch-size", "6", "--num-prompts", "6",
                 "--max-new-tokens", "20", "--reps", "1000000", "--warmup", "0", "--threads",
                 "1", "--ignore-eos", "--out", out, "--overwrite"]
        with tempfile.TemporaryDirectory(prefix="ompi-") as session:
            env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       OMPI_MCA_mpi_yield_when_idle="1", OMPI_MCA_orte_tmpdir_base=session)
            cmd = [ARGS.mpiexec, "--oversubscribe", "--bind-to", "none", "-np", "4",
                   ARGS.ssd_bench, *flags]
            with killed_on_exit(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.PIPE, text=True,
                                                 env=env)) as proc:
                ranks = {}
                deadline = time.monotonic() + 30
                while len(ranks) < 4 and time.monotonic() < deadline:
                    ranks = world_ranks(proc.pid)
                    time.sleep(0.05)
                self.assertEqual(len(ranks), 4, "the ranks did not start")
                time.sleep(1.5)  # into the (effectively endless) decode loop
                self.assertIsNone(proc.poll(), "the run ended before the rank was killed")
                os.kill(ranks[victim], signal.SIGKILL)
                start = time.monotonic()
                _, stderr = proc.communicate(timeout=60)
                print(f"\n  world rank {victim} (draft {victim - 1}) killed: mpiexec exited "
                      f"{proc.returncode} after {time.monotonic() - start:.1f} s", end="",
                      flush=True)
                self.assertNotEqual(proc.returncode, 0, stderr)
                time.sleep(0.5)
                for rank, pid in ranks.items():
                    self.assertFalse(alive(pid), f"rank {rank} (pid {pid}) outlived the job")
                self.assertFalse(os.path.exists(out), "a result file was left behind")


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__], setup=ssd_runs.configure, fresh_work=True)
