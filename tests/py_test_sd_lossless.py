#!/usr/bin/python3
"""Speculative decoding is lossless, end to end through ssd-bench and mpirun.

Greedy: SD generates exactly AR's tokens for every lookahead K, batch size, target TP degree,
draft placement and draft quality (the target itself, a slightly perturbed target, an unrelated
model), and AR at TP=2 generates TP=1's tokens.
Sampled (temperature 1): the joint distribution of the first generated tokens under SD matches
AR's (chi-square homogeneity test over many independent sequences of one prompt), and the test
has the power to tell temperature 1 from 0.7."""
import concurrent.futures
import itertools
import os
import shutil
import sys
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402
from stat_checks import (chi2_sf, first_difference, printed_p_value,  # noqa: E402
                         same_prompt_file, tokens_of)

ARGS = None
TARGET = "synthetic:tiny-llama"
GREEDY = ["--target", TARGET, "--seed", "3", "--num-prompts", "3", "--prompt-len", "6",
          "--max-new-tokens", "20", "--ignore-eos", "--reps", "1", "--warmup", "0",
          "--threads", "1"]
# perturb:0 is the target itself (every draft token accepted), perturb:0.05 a close draft
# (a mix of accepts and rejects), tiny-llama-other an unrelated model (mostly rejected).
DRAFTS = ["perturb:0", "perturb:0.05", "synthetic:tiny-llama-other"]
WORKERS = 2


def launch(np_, flags, timeout=120):
    """ssd-bench under mpiexec with np_ ranks; returns the CompletedProcess."""
    # Under ASan (harmless otherwise): these many runs skip leak checking, which with Open MPI
    # needs ASan's slow unwinder (see tests/CMakeLists.txt) and would take minutes here;
    # py_test_mpi_layout and mpi_test_tensor_parallel check the same code paths for leaks.
    asan = os.environ.get("ASAN_OPTIONS", "") + ":fast_unwind_on_malloc=1:detect_leaks=0"
    return mpi_run.launch(ARGS, np_, flags, timeout,
                          env={"OMPI_MCA_mpi_yield_when_idle": "1", "ASAN_OPTIONS": asan})


def run_to_file(name, np_, flags):
    """Runs ssd-bench writing work/name.h5; returns (name, path, proc)."""
    path = os.path.join(ARGS.work, name + ".h5")
    if os.path.exists(path):
        os.remove(path)
    proc = launch(np_, [*flags, "--out", path])
    return name, path, proc


def run_all(jobs):
    """jobs: {name: (np, flags)} run concurrently; returns {name: (path, proc)}."""
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(run_to_file, name, np_, flags)
                   for name, (np_, flags) in jobs.items()]
        return {name: (path, proc) for name, path, proc in (f.result() for f in futures)}


class ChiSquare(unittest.TestCase):
    def test_survival_function(self):
        # scipy.stats.chi2.sf reference values.
        self.assertAlmostEqual(chi2_sf(3.841458820694124, 1), 0.05, places=9)
        self.assertAlmostEqual(chi2_sf(10.0, 4), 0.04042768199451279, places=9)
        self.assertAlmostEqual(chi2_sf(30.0, 10), 0.000856641210775301, places=10)
        self.assertAlmostEqual(chi2_sf(100.0, 63), 0.002077236552784822, places=10)
        self.assertAlmostEqual(chi2_sf(0.5, 7), 0.9994464813904249, places=10)


class GreedyLossless(unittest.TestCase):
    """72 SD runs against AR, all greedy: tokens must be identical."""

    @classmethod
    def setUpClass(cls):
        shutil.rmtree(os.path.join(ARGS.work, "greedy"), ignore_errors=True)
        os.makedirs(os.path.join(ARGS.work, "greedy"))
        jobs = {f"greedy/ar_tp{tp}": (tp, [*GREEDY, "--target-tp", str(tp)]) for tp in (1, 2)}
        cls.configs = {}
        for draft, k, b, tp, placement in itertools.product(DRAFTS, (1, 3, 5), (1, 3), (1, 2),
                                                            ("separate", "collocated")):
            name = (f"greedy/sd_{draft.split(':')[-1]}_k{k}_b{b}_tp{tp}_{placement}")
            np_ = tp + 1 if placement == "separate" else tp
            jobs[name] = (np_, [*GREEDY, "--mode", "sd", "--draft", draft, "-k", str(k),
                                "--batch-size", str(b), "--target-tp", str(tp),
                                "--draft-placement", placement])
            cls.configs[name] = dict(draft=draft, k=k, b=b, tp=tp, placement=placement)
        cls.results = run_all(jobs)

    def checked_tokens(self, name):
        path, proc = self.results[name]
        self.assertEqual(proc.returncode, 0, f"{name}: {proc.stdout[-2000:]}{proc.stderr}")
        return tokens_of(path)

    def test_ar_tp2_equals_tp1(self):
        tp1 = self.checked_tokens("greedy/ar_tp1")
        tp2 = self.checked_tokens("greedy/ar_tp2")
        self.assertEqual(tp1.shape, (3, 20))
        if not np.array_equal(tp1, tp2):
            self.fail("AR TP=2 != TP=1 (a near-tie of logits that agree to ~1e-6?): " +
                      first_difference(tp2, tp1))

    def test_sd_equals_ar(self):
        ar = {tp: self.checked_tokens(f"greedy/ar_tp{tp}") for tp in (1, 2)}
        mismatches, rates = [], {}
        for name, cfg in self.configs.items():
            tokens = self.checked_tokens(name)
            if not np.array_equal(tokens, ar[cfg["tp"]]):
                mismatches.append(f"{name}: {first_difference(tokens, ar[cfg['tp']])}")
            with h5py.File(self.results[name][0], "r") as f:
                rate = float(f["/summary"].attrs["acceptance_rate"])
                accepted = f["/rounds/accepted"][...].sum()
                drafted = f["/rounds/drafted"][...].sum()
            self.assertAlmostEqual(rate, accepted / drafted, places=12, msg=name)
            rates.setdefault(cfg["draft"], []).append((rate, name))
        for draft, values in rates.items():
            r = [v for v, _ in values]
            print(f"\n  greedy acceptance rate, draft {draft}: min {min(r):.3f} mean "
                  f"{np.mean(r):.3f} max {max(r):.3f} over {len(r)} runs", end="", flush=True)
        self.assertEqual(mismatches, [], "SD != AR:\n" + "\n".join(mismatches))
        for rate, name in rates["perturb:0"]:
            self.assertEqual(rate, 1.0, f"{name}: the target as its own draft must accept all")
        for rate, name in rates["synthetic:tiny-llama-other"]:
            self.assertLess(rate, 0.5, name)
        for rate, name in rates["perturb:0.05"]:
            self.assertTrue(0.0 < rate < 1.0, f"{name}: acceptance rate {rate} is not a mix")


class SampledLossless(unittest.TestCase):
    """Temperature 1: N independent sequences of one prompt; the first tokens' joint
    distribution under SD equals AR's."""
    N = 2000

    @classmethod
    def setUpClass(cls):
        prompts = same_prompt_file(os.path.join(ARGS.work, "sampled"), cls.N)
        # Three new tokens: t1 comes from the prefill, t2 and t3 from the first speculation
        # round (accepted drafts or the bonus), so (t1, t2) and (t2, t3) exercise verification.
        common = ["--target", TARGET, "--prompts", prompts, "--batch-size", "50",
                  "--max-new-tokens", "3", "--ignore-eos", "--reps", "1", "--warmup", "0",
                  "--threads", "1"]
        sd = [*common, "--mode", "sd", "-k", "2", "--draft-placement", "collocated",
              "--temperature", "1"]
        jobs = {
            "sampled/ar_t1": (1, [*common, "--temperature", "1", "--seed", "101"]),
            "sampled/ar_t1_again": (1, [*common, "--temperature", "1", "--seed", "102"]),
            "sampled/ar_t07": (1, [*common, "--temperature", "0.7", "--seed", "103"]),
            "sampled/sd_perturb": (1, [*sd, "--draft", "perturb:0.2", "--seed", "104"]),
            "sampled/sd_other": (1, [*sd, "--draft", "synthetic:tiny-llama-other", "--seed",
                                     "105"]),
        }
        cls.results = run_all(jobs)

    def tokens(self, name):
        path, proc = self.results[name]
        self.assertEqual(proc.returncode, 0, f"{name}: {proc.stdout[-2000:]}{proc.stderr}")
        t = tokens_of(path)
        self.assertEqual(t.shape, (self.N, 3))
        return t

    def compare(self, a, b, columns):
        return printed_p_value(a, self.tokens(a), b, self.tokens(b), columns)

    def acceptance(self, name):
        with h5py.File(self.results[name][0], "r") as f:
            return float(f["/summary"].attrs["acceptance_rate"])

    def test_sd_matches_ar(self):
        for sd in ("sampled/sd_perturb", "sampled/sd_other"):
            rate = self.acceptance(sd)
            print(f"\n  {sd}: acceptance rate {rate:.3f}", end="", flush=True)
            for columns in ([0, 1], [1, 2]):
                self.assertGreater(self.compare(sd, "sampled/ar_t1", columns), 1e-3,
                                   f"{sd} tokens {columns}")
        self.assertTrue(0.1 < self.acceptance("sampled/sd_perturb") < 0.9,
                        "perturb:0.2 should accept some draft tokens and reject others")

    def test_ar_matches_itself(self):
        self.assertGreater(self.compare("sampled/ar_t1_again", "sampled/ar_t1", [0, 1]), 1e-3)

    def test_power_temperature_07_is_rejected(self):
        self.assertLess(self.compare("sampled/ar_t07", "sampled/ar_t1", [0, 1]), 1e-6)


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__])
