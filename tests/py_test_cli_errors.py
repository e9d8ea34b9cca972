#!/usr/bin/python3
"""Bad input gets one line on stderr naming the flag or file, exit status 2, and no crash;
--help and --config work."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402

ARGS = None
TINY = ["--target", "synthetic:tiny-llama", "--max-new-tokens", "2", "--reps", "1",
        "--warmup", "0", "--threads", "1"]


def run(*flags):
    return subprocess.run([ARGS.ssd_bench, *flags], capture_output=True, text=True, timeout=120)


class Errors(unittest.TestCase):
    def expect_error(self, flags, *needles):
        proc = run(*flags)
        self.assertEqual(proc.returncode, 2, f"{flags}: {proc.stdout}{proc.stderr}")
        lines = proc.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, f"{flags}: expected one line, got {proc.stderr!r}")
        for needle in needles:
            self.assertIn(needle, lines[0], f"{flags}: {lines[0]}")
        return lines[0]

    def write(self, name, text):
        path = os.path.join(ARGS.work, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_numeric_flags(self):
        self.expect_error(TINY + ["--batch-size", "0"], "--batch-size")
        self.expect_error(TINY + ["--max-new-tokens", "-1"], "--max-new-tokens")
        self.expect_error(TINY + ["--temperature", "-0.5"], "--temperature")
        self.expect_error(TINY + ["--threads", "0"], "--threads")
        self.expect_error(TINY + ["--reps", "0"], "--reps")
        self.expect_error(TINY + ["--prompt-len", "0"], "--prompt-len")
        self.expect_error(TINY + ["--batch-size", "many"], "--batch-size")

    def test_range_errors_name_the_bound(self):
        """No 300-digit DBL_MAX (CLI11's PositiveNumber): the rule and the value given."""
        cases = [(["--lookahead", "0"], "--lookahead: must be >= 1 (got 0)"),
                 (["--temperature", "-0.5"], "--temperature: must be >= 0 (got -0.5)"),
                 (["--saguaro-c", "1.5"], "--saguaro-c: must be in [0, 1] (got 1.5)"),
                 (["--batch-size", "many"], "--batch-size: expected a number (got many)"),
                 (["--lookahead", "some"],
                  "--lookahead: expected auto or a whole number (got some)"),
                 (["--lookahead", "2.5"], "--lookahead: expected auto or a whole number (got 2.5)")]
        for flags, message in cases:
            line = self.expect_error(TINY + flags, message)
            self.assertLess(len(line), 120, line)
        line = self.expect_error(["characterize", "--min-time", "0"],
                                 "--min-time: must be > 0 (got 0)")

    def test_choices_and_unknown_flags(self):
        self.expect_error(TINY + ["--mode", "fast"], "--mode")
        self.expect_error(TINY + ["--gemm", "magic"], "--gemm")
        self.expect_error(TINY + ["--no-such-flag"], "--no-such-flag")

    def test_compute(self):
        """--compute: a value no backend has, bf16 with what cannot multiply in bf16."""
        self.expect_error(TINY + ["--compute", "nope"], "--compute")
        self.expect_error(TINY + ["--compute", "bf16", "--gemm", "openblas"], "--compute",
                          "invariant")
        if mpi_run.cpu_has_bf16():  # fp32 weights, refused before loading
            self.expect_error(TINY + ["--compute", "bf16", "--weight-dtype", "f32"], "--compute",
                              "--weight-dtype")
        else:  # the CPU refuses first
            self.expect_error(TINY + ["--compute", "bf16", "--weight-dtype", "f32"], "--compute",
                              "AVX512_BF16")
        self.expect_error(TINY + ["--compute", "amx", "--gemm", "openblas"], "--compute",
                          "invariant")
        if mpi_run.cpu_has_amx_bf16():
            self.expect_error(TINY + ["--compute", "amx", "--weight-dtype", "f32"], "--compute amx",
                              "--weight-dtype")
        else:
            self.expect_error(TINY + ["--compute", "amx", "--weight-dtype", "bf16"], "--compute",
                              "AMX")

    def test_models(self):
        self.expect_error(["--target", "synthetic:llama-9000"], "--target", "llama-9000")
        self.expect_error(["--target", "/no/such/checkpoint"], "--target", "/no/such/checkpoint")
        bad = os.path.join(ARGS.work, "bad-checkpoint")
        os.makedirs(bad, exist_ok=True)
        with open(os.path.join(bad, "config.json"), "w") as f:
            json.dump({"model_type": "llama", "hidden_size": 64}, f)
        self.expect_error(["--target", bad], "--target", "config.json")

    def test_prompts(self):
        self.expect_error(TINY + ["--prompts", "/no/such.jsonl"], "--prompts")
        path = self.write("bad.jsonl", '{"ids": [1, 2, 3]}\n{"ids": [1, 2,\n')
        self.expect_error(TINY + ["--prompts", path], "--prompts", "line 2")
        path = self.write("oov.jsonl", '{"ids": [1, 999999]}\n')
        self.expect_error(TINY + ["--prompts", path], "--prompts", "line 1")
        path = self.write("text.jsonl", '{"text": "The capital of France is"}\n')
        self.expect_error(TINY + ["--prompts", path], "--prompts", "line 1", "ssd-prompts")
        path = self.write("noids.jsonl", '{"tokens": [1]}\n')
        self.expect_error(TINY + ["--prompts", path], "--prompts", "ids")

    def test_context_limit(self):
        self.expect_error(["--target", "synthetic:tiny-llama", "--max-new-tokens", "100000"],
                          "--max-new-tokens")

    def test_output_directory(self):
        self.expect_error(TINY + ["--out", "/no/such/dir/x.h5"], "--out")
        # An existing directory that refuses new files (even to root): found before decoding,
        # so the run's header is all that was printed and no result row.
        proc = run(*TINY, "--out", "/proc/x.h5")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("--out: cannot create /proc/x.h5", proc.stderr)
        self.assertNotIn("Avg decode throughput", proc.stdout)
        self.assertEqual([f for f in os.listdir(ARGS.work) if ".partial." in f], [])

    def test_a_run_that_cannot_fit_in_memory_stops_before_loading(self):
        """--batch-size 100000 needs ~100 GiB of KV cache alone: one line with both figures."""
        line = self.expect_error(["--batch-size", "100000", "--max-new-tokens", "8",
                                  "--threads", "1"], "not enough memory", "--batch-size (100000)")
        self.assertRegex(line, r"needs about [0-9.]+ GiB \(weights .* KV cache .*\), "
                               r"[0-9.]+ GiB available")

    def test_make_checkpoint(self):
        self.expect_error(["make-checkpoint", "--preset", "nope", "--out",
                           os.path.join(ARGS.work, "ck")], "nope")
        self.expect_error(["make-checkpoint", "--preset", "tiny-llama", "--out",
                           os.path.join(ARGS.work, "ck"), "--dtype", "f8"], "--dtype")

    def test_help_is_grouped(self):
        proc = run("--help")
        self.assertEqual(proc.returncode, 0)
        for group in ["Models", "Decoding", "Prompts", "Repetitions", "Hardware", "Output"]:
            self.assertIn(group, proc.stdout)

    def test_jsonl_rows_are_json(self):
        """--output-format jsonl: every row parses, with null where a figure does not apply."""
        for mode, extra in [("ar", []), ("sd", ["--draft", "synthetic:tiny-llama"])]:
            proc = run(*TINY, "--mode", mode, *extra, "--output-format", "jsonl")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            rows = [json.loads(line, parse_constant=self.fail)
                    for line in proc.stdout.splitlines() if line.startswith("{")]
            self.assertEqual(len(rows), 1, proc.stdout)
            row = rows[0]
            self.assertEqual(row["mode"], mode)
            self.assertGreater(row["decode_tok_s_mean"], 0)
            if mode == "ar":
                for key in ["draft", "lookahead", "acceptance_rate", "t_sd", "p_hit"]:
                    self.assertIsNone(row[key], key)
            else:
                self.assertEqual(row["draft"], "tiny-llama")
                self.assertEqual(row["lookahead"], 4)
                self.assertGreaterEqual(row["acceptance_rate"], 0)
                self.assertIsNone(row["p_hit"])  # SD has no speculation cache

    def test_config_file_and_prompt_file(self):
        prompts = self.write("ok.jsonl", '{"ids": [1, 5, 9]}\n\n{"ids": [1, 7]}\n')
        config = self.write("run.toml", f'batch-size = 2\nprompts = "{prompts}"\n'
                            'max-new-tokens = 3\ntarget = "synthetic:tiny-qwen3"\n')
        proc = run("--config", config, "--reps", "1", "--warmup", "0", "--threads", "1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("batch_size=2", proc.stdout)
        self.assertIn("target=synthetic:tiny-qwen3", proc.stdout)
        self.assertIn("num_prompts=2", proc.stdout)
        self.assertIn("Check: generated tokens identical", proc.stdout)


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__], fresh_work=True)
