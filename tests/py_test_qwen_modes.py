#!/usr/bin/python3
"""Every decoding mode on the project's real pair (scripts/get-model.sh): Qwen2.5-Coder-1.5B-
Instruct verifying, Qwen2.5-Coder-0.5B-Instruct drafting, on two coding requests through the
chat template.

Greedy: SD with the draft collocated (batch 1), SD with the draft on its own rank and SSD
(target rank + draft rank) at batch 2 each generate exactly AR's tokens at batch 1. The pair's
drafts are real: most of them are accepted and some are not, so verification accepts, rejects
and takes bonus tokens on real text (the test checks both happen).

Sampled (temperature 1, SSD_BENCH_SLOW_TESTS=1 only: ~5 minutes on 2 cores): the joint
distribution of the first generated tokens of one prompt under SD and SSD matches AR's (the
chi-square homogeneity test of py_test_sd_lossless)."""
import json
import os
import subprocess
import sys
import unittest

import h5py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import mpi_run  # noqa: E402
from real_models import get_model  # noqa: E402
from stat_checks import homogeneity_p_value, tokens_of  # noqa: E402

ARGS = None
# Two requests: each of the four runs loads the 1.5B target and decodes them; with four, the
# test took 217 s of CI beside the others.
REQUESTS = ["Write a Python function that returns the n-th Fibonacci number.",
            "Fix the bug: `def mean(xs): return sum(xs) / len(xs) + 1`"]
NEW_TOKENS = 16


def write_prompts(target, requests, path, copies=1, chat=True):
    """The requests (through the target's chat template, or as plain text) as ssd-bench's
    {"ids": ...} lines."""
    src = path + ".src.jsonl"
    with open(src, "w") as f:
        for text in requests:
            row = {"messages": [{"role": "user", "content": text}]} if chat else {"text": text}
            f.write(json.dumps(row) + "\n")
    proc = subprocess.run([os.path.join(ROOT, "analysis", "ssd-prompts"), "--tokenizer", target,
                           src, "-o", path], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"ssd-prompts: {proc.stderr.strip()}")
    with open(path) as f:
        lines = f.readlines()
    with open(path, "w") as f:
        f.writelines(lines * copies)


class Pair(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(ARGS.work, exist_ok=True)
        cls.target = get_model("qwen2.5-coder-1.5b")
        cls.draft = get_model("qwen2.5-coder-0.5b")
        cls.prompts = os.path.join(ARGS.work, "code2.jsonl")
        write_prompts(cls.target, REQUESTS, cls.prompts)

    def run_mode(self, name, ranks, *flags, prompts=None, new_tokens=NEW_TOKENS):
        """Runs ssd-bench; returns (tokens per sequence, path of its result file)."""
        out = os.path.join(ARGS.work, name + ".h5")
        proc = mpi_run.launch(ARGS, ranks, [
            "--target", self.target, "--prompts", prompts or self.prompts, "--max-new-tokens",
            str(new_tokens), "--ignore-eos", "--reps", "1", "--warmup", "0", "--threads", "1",
            "--out", out, "--overwrite", *flags], timeout=600)
        self.assertEqual(proc.returncode, 0, f"{name}: {proc.stdout[-3000:]}{proc.stderr}")
        return tokens_of(out).tolist(), out


class GreedyLossless(Pair):
    def test_sd_and_ssd_equal_ar(self):
        ar, _ = self.run_mode("ar_b1", 1, "--mode", "ar", "--batch-size", "1")
        self.assertEqual(len(ar), len(REQUESTS))
        draft = ["--draft", self.draft, "--lookahead", "4"]
        # Batch 2 against AR's batch 1: a row's tokens must not depend on the rows beside it.
        runs = {
            "sd_collocated_b1": (1, ["--mode", "sd", "--draft-placement", "collocated",
                                     "--batch-size", "1"]),
            "sd_separate_b2": (2, ["--mode", "sd", "--draft-placement", "separate",
                                   "--batch-size", "2"]),
            "ssd_b2": (2, ["--mode", "ssd", "--batch-size", "2"]),
        }
        for name, (ranks, flags) in runs.items():
            got, path = self.run_mode(name, ranks, *flags, *draft)
            self.assertEqual(got, ar, f"{name} differs from AR")
            with h5py.File(path, "r") as f:
                rate = float(f["/summary"].attrs["acceptance_rate"])
            print(f"\n  {name}: acceptance rate {rate:.3f}", end="", flush=True)
            # A real draft: neither the target itself nor an unrelated model.
            self.assertTrue(0.2 < rate < 1.0, f"{name}: acceptance rate {rate}")


@unittest.skipUnless(os.environ.get("SSD_BENCH_SLOW_TESTS") == "1",
                     "SSD_BENCH_SLOW_TESTS=1 runs the sampled check (~5 minutes on 2 cores)")
class SampledLossless(Pair):
    """Temperature 1: N sequences of one prompt; the first three tokens' joint distributions
    under SD and SSD equal AR's (the first from the prefill, the next two from verification)."""
    N = 240

    def test_sd_and_ssd_match_ar(self):
        # A short code prefix, not a chat request: the prefill of N copies of a chat prompt
        # (~30 tokens with Qwen's system prompt) would cost most of the test on 2 cores.
        one = os.path.join(ARGS.work, "one.jsonl")
        # "import": many likely continuations (os, sys, numpy, ...), so the chi-square test has
        # categories to compare ("import numpy as np\n\ndef" left 2-3).
        write_prompts(self.target, ["import"], one, copies=self.N, chat=False)
        common = ["--batch-size", "40", "--temperature", "1"]
        draft = ["--draft", self.draft, "--lookahead", "2"]
        runs = {"ar": (1, []), "ar_again": (1, []), "sd": (1, ["--mode", "sd", *draft]),
                "ssd": (2, ["--mode", "ssd", *draft])}
        paths = {name: self.run_mode("t1_" + name, ranks, *common, *flags, "--seed",
                                     str(11 + i), prompts=one, new_tokens=3)[1]
                 for i, (name, (ranks, flags)) in enumerate(runs.items())}
        ar = tokens_of(paths["ar"])
        for name in ("ar_again", "sd", "ssd"):
            got = tokens_of(paths[name])
            for columns in ([0, 1], [1, 2]):
                p, stat, df = homogeneity_p_value(got[:, columns], ar[:, columns])
                print(f"\n  {name} vs ar, tokens {columns}: chi2 {stat:.1f} df {df} p {p:.3g}",
                      end="", flush=True)
                self.assertGreater(p, 1e-3, f"{name} tokens {columns}")
                # After "import" the first two tokens vary enough for categories to compare
                # (df 2-5 seen at N = 240); the later pair may pool into one (df 0).
                if columns == [0, 1]:
                    self.assertGreater(df, 0, f"{name}: nothing to compare")


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__])
