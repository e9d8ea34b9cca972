#!/usr/bin/python3
"""The GGUF converter (scripts/gguf_to_checkpoint.py) on a qwen2 file as llama.cpp writes the
project's real pair: q/k/v biases, q/k rows NOT permuted (llama.cpp ropes qwen2 in the NeoX
layout, which is HF's rotate_half), an output.weight of its own (untied), and every tensor type
the pair's two GGUFs hold: Q4_K, Q5_0, Q6_K, Q8_0 and F32. The `gguf` package cannot quantize
the K types, so their blocks are random bytes with small finite scales: the test checks that
each tensor lands under its HF name, unpermuted, as the bf16 rounding of what `gguf`
dequantizes, and that ssd-bench loads and runs the result."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real_models import (bf16_round, read_safetensors, tensor_shape, use_venv,  # noqa: E402
                         write_tiny_gguf)

use_venv("gguf", "tokenizers", "jinja2")

import gguf  # noqa: E402
import numpy as np  # noqa: E402

import gguf_to_checkpoint as convert  # noqa: E402
import mpi_run  # noqa: E402

ARGS = None
T = gguf.GGMLQuantizationType
# Bytes of one block of 256 values, and where its f16 scale(s) sit (ggml-common.h's block_q4_K:
# d, dmin first; block_q6_K: d last).
K_BLOCKS = {T.Q4_K: (144, [0, 2]), T.Q6_K: (210, [208])}


def k_quant_blocks(rng, rows, cols, kind):
    """Random blocks of a K type whose scales are small finite f16 values."""
    size, scale_offsets = K_BLOCKS[kind]
    raw = rng.integers(0, 256, size=(rows, cols // 256, size), dtype=np.uint8)
    for offset in scale_offsets:
        scales = rng.uniform(1e-3, 2e-2, size=(rows, cols // 256)).astype(np.float16)
        raw[:, :, offset:offset + 2] = scales.view(np.uint8).reshape(rows, cols // 256, 2)
    return raw.reshape(rows, -1)


class TinyQwen2Gguf:
    """One qwen2 layer: hidden 256 (a K block's length), 4 heads / 2 KV heads of 64, vocab 300."""
    hidden, heads, kv_heads, ffn, vocab = 256, 4, 2, 512, 300
    context, rope_base, rms_eps = 256, 1000000.0, 1e-6
    types = {"token_embd.weight": T.Q5_0, "output.weight": T.Q8_0,
             "blk.0.attn_q.weight": T.Q4_K, "blk.0.attn_k.weight": T.Q5_0,
             "blk.0.attn_v.weight": T.Q8_0, "blk.0.attn_output.weight": T.Q4_K,
             "blk.0.ffn_gate.weight": T.Q4_K, "blk.0.ffn_up.weight": T.Q5_0,
             "blk.0.ffn_down.weight": T.Q6_K, "blk.0.attn_q.bias": T.F32,
             "blk.0.attn_k.bias": T.F32, "blk.0.attn_v.bias": T.F32,
             "blk.0.attn_norm.weight": T.F32, "blk.0.ffn_norm.weight": T.F32,
             "output_norm.weight": T.F32}

    def __init__(self, path):
        rng = np.random.default_rng(11)
        self.hf = {}  # what each HF tensor must hold: gguf's dequantization, unpermuted
        tensors = {}
        for name, kind in self.types.items():
            shape = tensor_shape(self, name)
            if kind in K_BLOCKS:
                data = k_quant_blocks(rng, *shape, kind)
            else:
                values = rng.standard_normal(shape).astype(np.float32) * 0.05
                if name.endswith("norm.weight"):
                    values += 1.0
                data = values if kind == T.F32 else gguf.quants.quantize(values, kind)
            tensors[name] = (data, kind)
            back = gguf.quants.dequantize(data, kind).astype(np.float32).reshape(shape)
            self.hf[convert.hf_name(name)] = back
        special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        write_tiny_gguf(path, "qwen2", self, tensors, special, bos=0, eos=2, pre="qwen2")


class Qwen2Converter(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.path = os.path.join(ARGS.work, "tiny-qwen2.gguf")
        cls.tiny = TinyQwen2Gguf(cls.path)
        cls.out = os.path.join(ARGS.work, "tiny-qwen2")
        convert.convert(cls.path, cls.out, "bf16")

    def test_every_tensor_converts_exactly_and_unpermuted(self):
        got = read_safetensors(os.path.join(self.out, "model.safetensors"))
        self.assertEqual(set(got), set(self.tiny.hf))
        self.assertIn("model.layers.0.self_attn.q_proj.bias", got)
        self.assertIn("lm_head.weight", got)
        for name, want in self.tiny.hf.items():
            np.testing.assert_array_equal(got[name], bf16_round(want), err_msg=name)

    def test_config_is_qwen2_untied(self):
        with open(os.path.join(self.out, "config.json")) as f:
            config = json.load(f)
        self.assertEqual(config["model_type"], "qwen2")
        self.assertEqual(config["architectures"], ["Qwen2ForCausalLM"])
        self.assertFalse(config["tie_word_embeddings"])
        self.assertFalse(config["use_sliding_window"])
        self.assertNotIn("attention_bias", config)   # Qwen2Config has none: always biased
        self.assertEqual((config["rms_norm_eps"], config["rope_theta"]), (1e-06, 1000000.0))
        self.assertEqual((config["head_dim"], config["num_key_value_heads"]), (64, 2))

    def test_ssd_bench_runs_it(self):
        proc = subprocess.run([ARGS.ssd_bench, "--target", self.out, "--max-new-tokens", "3",
                               "--reps", "1", "--warmup", "0", "--threads", "1"],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("qwen2", proc.stdout)
        self.assertIn("heads 4/2, vocab 300; BF16 weights", proc.stdout)


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__])
