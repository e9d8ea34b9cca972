#!/usr/bin/python3
"""SSD / SAGUARO end to end through ssd-bench and mpirun: outcomes, records and errors.

1. Synthetic outcomes (--outcomes synthetic:alpha=A,r=R[,r_all=RA,alpha_b=AB,r_b=RB]) are
   faithful per speculation source: the acceptance rate, per-position acceptance and cache hit
   rate of primary-drafted rounds match A and R (RA after all K accepted), those of backup
   rounds AB (0 for random tokens) and RB (default log2(1/(1-A))), and every looked-up
   outcome's hit is exactly 1 <= bonus_rank <= F_k.
2. The /rounds records and the /summary SSD attributes agree with each other and with the
   algorithm (sources, fallbacks, fan-out budgets).
3. Bad SSD flags get one "ssd-bench: error:" line naming the flag, and exit status 2.
Lossless decoding: py_test_ssd.py."""
import math
import os
import shutil
import sys
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402
import ssd_runs  # noqa: E402
from ssd_runs import (BACKUP, COMMON, TARGET, check_ssd_records, launch,  # noqa: E402
                      read_rounds, run_all)
from stat_checks import tokens_of  # noqa: E402

ARGS = None


class SyntheticOutcomes(unittest.TestCase):
    """--outcomes synthetic:alpha=A,r=R[,r_all=RA,alpha_b=AB,r_b=RB]: the drawn outcomes
    follow the model of the speculation's source (the primary's A, and R after a rejection, RA
    after all K accepted; the backup's AB, RB, AB = 0 for a random backup), and the cache hits
    exactly the outcomes whose bonus ranks within F."""
    K = 3
    PROMPTS = 12
    # name: (mode, A, R, F, fallback, backup, AB or None for the default, RB or None,
    #        RA or None for one law)
    CASES = {
        "ssd_a06_r07_f3": ("ssd", 0.6, 0.7, 3, "primary", "random", None, None, None),
        "ssd_a08_r12_f1": ("ssd", 0.8, 1.2, 1, "backup", "random", None, None, None),
        "ssd_a07_r09_f2_ngram": ("ssd", 0.7, 0.9, 2, "backup", "ngram", 0.4, 0.5, None),
        # Theorem 18's two curves, far apart: after all K accepted the bonus ranks far better
        "ssd_a07_r05_ra25_f2": ("ssd", 0.7, 0.5, 2, "primary", "random", None, None, 2.5),
        "sd_a06_r07": ("sd", 0.6, 0.7, None, None, None, None, None, None),
        "sd_a08_r12": ("sd", 0.8, 1.2, None, None, None, None, None, None),
    }

    @classmethod
    def setUpClass(cls):
        shutil.rmtree(os.path.join(ARGS.work, "synthetic"), ignore_errors=True)
        os.makedirs(os.path.join(ARGS.work, "synthetic"))
        common = ["--target", TARGET, "--draft", "synthetic:tiny-llama-other", "-k",
                  str(cls.K), "--num-prompts", str(cls.PROMPTS), "--batch-size", "6",
                  "--prompt-len", "6", "--max-new-tokens", "160", "--seed", "5", *COMMON]
        jobs = {}
        for name, (mode, a, r, f, fallback, backup, ab, rb, ra) in cls.CASES.items():
            spec = f"synthetic:alpha={a},r={r}"
            spec += f",r_all={ra}" if ra is not None else ""
            spec += f",alpha_b={ab}" if ab is not None else ""
            spec += f",r_b={rb}" if rb is not None else ""
            flags = [*common, "--mode", mode, "--outcomes", spec]
            if mode == "ssd":
                flags += ["--fanout", f"uniform:{f}", "--fallback", fallback, "--backup", backup]
            jobs[f"synthetic/{name}"] = (2, flags)
        cls.results = run_all(jobs)

    def load(self, name):
        path, proc = self.results[f"synthetic/{name}"]
        self.assertEqual(proc.returncode, 0, f"{name}: {proc.stdout[-2000:]}{proc.stderr}")
        with h5py.File(path, "r") as f:
            self.assertEqual(int(f.attrs["synthetic_outcomes"]), 1, name)
        tokens = tokens_of(path)
        self.assertEqual(tokens.shape, (self.PROMPTS, 160))
        self.assertTrue((tokens >= 0).all(), f"{name}: unresolved bonus (-1) at "
                        f"{np.argwhere(tokens < 0)[:5].tolist()}")
        return path

    def check_summary(self, name, rounds, s):
        """The /summary acceptance attributes are those of the /rounds records."""
        K, accepted = self.K, rounds["accepted"]
        self.assertAlmostEqual(float(s["acceptance_rate"]), accepted.mean() / K, places=12,
                               msg=name)
        per_position = np.array([(accepted >= i).mean() for i in range(1, K + 1)])
        np.testing.assert_allclose(s["per_position_acceptance"], per_position, rtol=0,
                                   atol=1e-12, err_msg=name)

    def check_acceptance(self, name, a, accepted, least=300):
        """k of these rounds follows the capped geometric law of acceptance a."""
        K = self.K
        n = len(accepted)
        self.assertGreater(n, least, name)
        if a == 0:
            self.assertTrue((accepted == 0).all(), f"{name}: a = 0 but k = "
                            f"{sorted(set(accepted.tolist()))}")
            print(f"\n  {name}: {n} rounds, all k = 0 (model a = 0)", end="", flush=True)
            return
        # P(k >= i) = A^i; E[k] = sum_i A^i.
        p_ge = np.array([a ** i for i in range(1, K + 1)])
        p_k = np.array([a ** j * (1 - a) for j in range(K)] + [a ** K])
        mean_k = (np.arange(K + 1) * p_k).sum()
        sd_k = math.sqrt(((np.arange(K + 1) - mean_k) ** 2 * p_k).sum())
        rate = accepted.mean() / K
        print(f"\n  {name}: {n} rounds, acceptance {rate:.4f} (model {mean_k / K:.4f} +- "
              f"{sd_k / math.sqrt(n) / K:.4f})", end="", flush=True)
        self.assertLess(abs(rate - mean_k / K), 4 * sd_k / math.sqrt(n) / K, name)
        per_position = np.array([(accepted >= i).mean() for i in range(1, K + 1)])
        se = np.sqrt(p_ge * (1 - p_ge) / n)
        print(f"; per position {np.round(per_position, 4).tolist()} (model "
              f"{np.round(p_ge, 4).tolist()})", end="", flush=True)
        self.assertTrue((np.abs(per_position - p_ge) < 4 * se).all(), name)

    def check_ranks(self, name, rounds, mask, f, r):
        """Cache hits and bonus ranks of the looked-up rounds in `mask` follow
        P(rank > F) = (F+1)^-r."""
        hit = rounds["outcome_hit"]
        looked = mask & (hit >= 0)
        n = int(looked.sum())
        p = 1 - (f + 1) ** (-r)
        measured = hit[looked].mean()
        se = math.sqrt(p * (1 - p) / n)
        print(f"; p_hit {measured:.4f} over {n} lookups (model {p:.4f} +- {se:.4f})",
              end="", flush=True)
        self.assertLess(abs(measured - p), 4 * se, name)
        rank = rounds["bonus_rank"][looked]
        for j in (2, 4, 16):
            q = j ** (-r)
            got = ((rank >= j) | (rank == 0)).mean()
            self.assertLess(abs(got - q), 4 * math.sqrt(q * (1 - q) / n),
                            f"{name}: P(rank >= {j}) = {got:.4f}, model {q:.4f}")

    def test_ssd(self):
        for name, (mode, a, r, f, fallback, backup, ab, rb, ra) in self.CASES.items():
            if mode != "ssd":
                continue
            with self.subTest(name=name):
                path = self.load(name)
                rounds, s = check_ssd_records(self, name, path, fallback)
                self.check_summary(name, rounds, s)
                looked = rounds["outcome_hit"] >= 0
                self.assertTrue((rounds["fanout"][looked] == f).all(), name)
                from_backup = rounds["source"] == BACKUP
                # Rounds the primary drafted (first, cache hit, just in time) follow A and R.
                self.check_acceptance(f"{name} primary-drafted", a, rounds["accepted"][~from_backup])
                if ra is None:
                    self.check_ranks(name, rounds, ~from_backup, f, r)
                else:  # each condition its own law, told apart by k
                    all_k = rounds["accepted"] == self.K
                    self.check_ranks(f"{name} after a rejection", rounds,
                                     ~from_backup & ~all_k, f, r)
                    self.check_ranks(f"{name} after all K", rounds, ~from_backup & all_k, f, ra)
                if fallback == "primary":
                    self.assertFalse(from_backup.any(), name)
                    continue
                # Backup rounds follow AB (0 for random tokens: ~1/vocab) and RB (default
                # log2(1/(1-A)): the draft's top guess is the bonus with probability A).
                self.check_acceptance(f"{name} backup-drafted", 0.0 if ab is None else ab,
                                      rounds["accepted"][from_backup], least=100)
                self.check_ranks(name, rounds, from_backup, f,
                                 math.log2(1 / (1 - a)) if rb is None else rb)

    def test_sd(self):
        for name, (mode, a, r, f, fallback, backup, ab, rb, ra) in self.CASES.items():
            if mode != "sd":
                continue
            with self.subTest(name=name):
                rounds, s, _ = read_rounds(self.load(name))
                self.check_summary(name, rounds, s)
                self.check_acceptance(name, a, rounds["accepted"], least=600)

class Records(unittest.TestCase):
    """Fan-out budgets and fallback sources in the records, with real outcomes."""

    @classmethod
    def setUpClass(cls):
        shutil.rmtree(os.path.join(ARGS.work, "records"), ignore_errors=True)
        os.makedirs(os.path.join(ARGS.work, "records"))
        common = ["--target", TARGET, "--mode", "ssd", "--draft", "perturb:0.1", "-k", "3",
                  "--num-prompts", "6", "--batch-size", "3", "--prompt-len", "6",
                  "--max-new-tokens", "40", "--seed", "8", *COMMON]
        cls.cases = {  # name: (flags, fallback, fixed budget)
            "records/geometric_budget6": (["--fanout", "geometric", "--budget", "6",
                                           "--fallback", "auto"], "auto", 6),
            "records/geometric5_backup": (["--fanout", "geometric:5", "--fallback", "backup",
                                           "--backup", "ngram"], "backup", 5),
            "records/list_primary": (["--fanout", "list:2,2,1,3", "--fallback", "primary"],
                                     "primary", 8),
            "records/sampled_backup": (["--fanout", "geometric", "--budget", "7",
                                        "--fallback", "backup", "--temperature", "1"],
                                       "backup", 7),
        }
        cls.results = run_all({n: (2, [*common, *flags]) for n, (flags, _, _) in
                               cls.cases.items()})

    def test_records(self):
        for name, (_, fallback, budget) in self.cases.items():
            with self.subTest(name=name):
                path, proc = self.results[name]
                self.assertEqual(proc.returncode, 0, f"{name}: {proc.stderr}")
                r, s = check_ssd_records(self, name, path, fallback, fixed_budget=budget)
                misses = int((r["outcome_hit"] == 0).sum())
                self.assertGreater(misses, 0, f"{name}: no miss, the fallback is untested")
                print(f"\n  {name}: p_hit {float(s['p_hit']):.3f} e_hit "
                      f"{float(s['e_hit']):.3f} e_miss {float(s['e_miss']):.3f} t_p "
                      f"{float(s['t_p']):.2f} t_b {float(s['t_b']):.3f}", end="", flush=True)


class Errors(unittest.TestCase):
    TINY = ["--target", TARGET, "--mode", "ssd", "--draft", "perturb:0.1", "--max-new-tokens",
            "4", "--reps", "1", "--warmup", "0", "--threads", "1"]

    def expect_error(self, np_, flags, *needles):
        proc = launch(np_, flags, timeout=120, quiet=True)
        self.assertEqual(proc.returncode, 2, f"{flags}: {proc.stdout}{proc.stderr}")
        lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, f"{flags}: expected one line, got {proc.stderr!r}")
        self.assertTrue(lines[0].startswith("ssd-bench: error: "), lines[0])
        for needle in needles:
            self.assertIn(needle, lines[0], f"{flags}: {lines[0]}")

    def test_ssd_needs_a_draft_rank(self):
        self.expect_error(1, self.TINY, "--mode ssd")
        self.expect_error(2, [*self.TINY, "--target-tp", "2"], "--mode ssd")

    def test_bad_flags(self):
        for flags, needle in (
                (["-k", "3", "--fanout", "list:1,2"], "--fanout"),
                (["-k", "1", "--fanout", "list:1,2,3"], "--fanout"),
                (["--fanout", "nonsense"], "--fanout"),
                (["--fanout", "uniform:0"], "--fanout"),
                (["--saguaro-c", "1.5"], "--saguaro-c"),
                (["--saguaro-c", "0.5"], "--saguaro-c"),  # a greedy draft: nothing to reshape
                (["--budget", "-3"], "--budget"),
                (["--outcomes", "synthetic:alpha=2,r=1"], "--outcomes"),
                (["--outcomes", "synthetic:alpha=0.5"], "--outcomes"),
                (["--outcomes", "synthetic:alpha=0.5,r=0"], "--outcomes"),
                (["--outcomes", "synthetic:alpha=0.5,r=1,r_all=0"], "--outcomes"),
                (["--outcomes", "synthetic:alpha=0.5,r=1,r_all=2,r_all=3"], "--outcomes"),
                (["--outcomes", "synthetic:alpha=0.5,r=1,alpha_b=1.5"], "--outcomes"),
                (["--outcomes", "synthetic:alpha=0.5,r=1,alpha=0.6"], "--outcomes"),
                (["--outcomes", "synthetic:alpha=0.5,r=1", "--backup", "ngram",
                  "--fallback", "auto"], "alpha_b"),
                # synthetic outcomes follow A and R only: T and C would be silently ignored
                (["--outcomes", "synthetic:alpha=0.8,r=1", "--temperature", "1"],
                 "--temperature 1"),
                (["--outcomes", "synthetic:alpha=0.8,r=1", "--draft-temperature", "0.5"],
                 "--draft-temperature 0.5"),
                (["--outcomes", "synthetic:alpha=0.8,r=1", "--temperature", "1",
                  "--saguaro-c", "0.5"], "--saguaro-c 0.5"),
                (["--fallback", "sometimes"], "--fallback"),
                (["--backup", "oracle"], "--backup")):
            with self.subTest(flags=flags):
                self.expect_error(2, [*self.TINY, *flags], needle)


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__], setup=ssd_runs.configure)
