#!/usr/bin/python3
"""Independent numpy reference of the Llama / Qwen2 / Qwen3 forward pass, for tests/test_reference.cpp.

Reads a Hugging Face checkpoint directory on its own (config.json, model.safetensors or a
sharded model.safetensors.index.json; F32, BF16 or F16 tensors), runs the model in float64
with a growing KV cache and writes logits as a float32 .npy of shape [1 + n_decode, vocab]:
row 0 is the logits of the last prompt token after prefill, row i the logits after decode
token i. Written from the Hugging Face modeling code's semantics, not from the C++ sources.

  reference.py --checkpoint DIR --prompt 1,5,7 --decode 9,4 --out logits.npy

--linear-inputs bf16 rounds the input rows of every linear layer (q/k/v/o, gate/up/down, the
head) to bf16, nearest even, before the float64 product: what a GPU's tensor cores and the CPU's
--compute bf16 GEMM multiply. Attention, norms and residuals stay float64.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

# ---------------------------------------------------------------------------- checkpoint


def _decode_tensor(raw, dtype, shape):
    if dtype == "F32":
        values = np.frombuffer(raw, dtype="<f4")
    elif dtype == "F16":
        values = np.frombuffer(raw, dtype="<f2")
    elif dtype == "BF16":
        # bfloat16 is the top half of an IEEE float32.
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        values = bits.view(np.float32)
    else:
        raise ValueError("unsupported safetensors dtype %s" % dtype)
    count = int(np.prod(shape)) if shape else 1
    if values.size != count:
        raise ValueError("tensor byte size does not match its shape %s" % (shape,))
    return values.astype(np.float64).reshape(shape)


def read_safetensors(path, wanted=None):
    """All tensors of one .safetensors file (or only those named in `wanted`) as float64."""
    tensors = {}
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len).decode("utf-8"))
        data_start = 8 + header_len
        for name, info in header.items():
            if name == "__metadata__" or (wanted is not None and name not in wanted):
                continue
            begin, end = info["data_offsets"]
            f.seek(data_start + begin)
            raw = f.read(end - begin)
            if len(raw) != end - begin:
                raise ValueError("%s: tensor %s is truncated" % (path, name))
            tensors[name] = _decode_tensor(raw, info["dtype"], info["shape"])
    return tensors


def read_checkpoint(directory):
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        by_file = {}
        for name, file_name in weight_map.items():
            by_file.setdefault(file_name, set()).add(name)
        tensors = {}
        for file_name, names in sorted(by_file.items()):
            tensors.update(read_safetensors(os.path.join(directory, file_name), names))
        missing = set(weight_map) - set(tensors)
        if missing:
            raise ValueError("index names tensors not found in the shards: %s" % sorted(missing))
        return tensors
    return read_safetensors(os.path.join(directory, "model.safetensors"))


class Config:
    def __init__(self, doc):
        self.model_type = doc["model_type"]
        if self.model_type not in ("llama", "qwen2", "qwen3"):
            raise ValueError("unsupported model_type %s" % self.model_type)
        self.hidden = doc["hidden_size"]
        self.layers = doc["num_hidden_layers"]
        self.heads = doc["num_attention_heads"]
        self.kv_heads = doc.get("num_key_value_heads") or self.heads
        self.head_dim = doc.get("head_dim") or self.hidden // self.heads
        self.eps = doc.get("rms_norm_eps", 1e-6)
        self.theta = doc.get("rope_theta", 10000.0)
        self.rope_scaling = doc.get("rope_scaling")
        self.tied = bool(doc.get("tie_word_embeddings", False))
        self.vocab = doc["vocab_size"]


# ---------------------------------------------------------------------------- model


def rope_inverse_frequencies(cfg):
    """HF _compute_default_rope_parameters, then _compute_llama3_parameters if configured."""
    exponents = np.arange(0, cfg.head_dim, 2, dtype=np.float64) / cfg.head_dim
    inv_freq = 1.0 / np.power(float(cfg.theta), exponents)
    scaling = cfg.rope_scaling
    if not scaling:
        return inv_freq
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return inv_freq
    if kind != "llama3":
        raise ValueError("unsupported rope scaling %s" % kind)
    factor = float(scaling["factor"])
    low = float(scaling["low_freq_factor"])
    high = float(scaling["high_freq_factor"])
    old_context = float(scaling["original_max_position_embeddings"])
    low_freq_wavelen = old_context / low
    high_freq_wavelen = old_context / high
    wavelen = 2.0 * math.pi / inv_freq
    # Long wavelengths (low frequencies) are divided by the factor, short ones kept, and the
    # band between them interpolated smoothly.
    result = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1.0 - smooth) * result / factor + smooth * result
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return np.where(medium, smoothed, result)


def rms_norm(x, weight, eps):
    variance = np.mean(x * x, axis=-1, keepdims=True)
    return weight * (x / np.sqrt(variance + eps))


def apply_rope(x, positions, inv_freq):
    """x: [tokens, heads, head_dim]; HF rotate_half layout (first half pairs with second)."""
    angles = np.outer(np.asarray(positions, dtype=np.float64), inv_freq)  # [tokens, half]
    emb = np.concatenate([angles, angles], axis=-1)[:, None, :]
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * np.cos(emb) + rotated * np.sin(emb)


def round_to_bf16(x):
    """x rounded to the nearest bf16 (ties to even) via its fp32 value, returned as float64."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def silu(x):
    return x / (1.0 + np.exp(-x))


class Model:
    def __init__(self, directory, linear_inputs="f32"):
        self.round_inputs = linear_inputs == "bf16"
        with open(os.path.join(directory, "config.json")) as f:
            self.cfg = Config(json.load(f))
        self.w = read_checkpoint(directory)
        cfg = self.cfg
        self.embed = self.w["model.embed_tokens.weight"]
        if cfg.tied:
            self.lm_head = self.embed
        else:
            self.lm_head = self.w["lm_head.weight"]
        if self.embed.shape != (cfg.vocab, cfg.hidden):
            raise ValueError("embed_tokens has shape %s" % (self.embed.shape,))
        self.inv_freq = rope_inverse_frequencies(cfg)
        # Growing KV cache: per layer, [tokens, kv_heads, head_dim].
        shape = (0, cfg.kv_heads, cfg.head_dim)
        self.k_cache = [np.zeros(shape) for _ in range(cfg.layers)]
        self.v_cache = [np.zeros(shape) for _ in range(cfg.layers)]
        self.length = 0

    def layer(self, i, name):
        return self.w["model.layers.%d.%s" % (i, name)]

    def linear(self, x, weight):
        """x @ weight.T, with x rounded to bf16 first under --linear-inputs bf16."""
        return (round_to_bf16(x) if self.round_inputs else x) @ weight.T

    def attention(self, i, x, positions):
        cfg = self.cfg
        n = x.shape[0]
        q = self.linear(x, self.layer(i, "self_attn.q_proj.weight")).reshape(n, cfg.heads, cfg.head_dim)
        k = self.linear(x, self.layer(i, "self_attn.k_proj.weight")).reshape(n, cfg.kv_heads, cfg.head_dim)
        v = self.linear(x, self.layer(i, "self_attn.v_proj.weight")).reshape(n, cfg.kv_heads, cfg.head_dim)
        if cfg.model_type == "qwen2":  # Qwen2Attention: q/k/v projections with bias=True
            q = q + self.layer(i, "self_attn.q_proj.bias").reshape(cfg.heads, cfg.head_dim)
            k = k + self.layer(i, "self_attn.k_proj.bias").reshape(cfg.kv_heads, cfg.head_dim)
            v = v + self.layer(i, "self_attn.v_proj.bias").reshape(cfg.kv_heads, cfg.head_dim)
        if cfg.model_type == "qwen3":
            q = rms_norm(q, self.layer(i, "self_attn.q_norm.weight"), cfg.eps)
            k = rms_norm(k, self.layer(i, "self_attn.k_norm.weight"), cfg.eps)
        q = apply_rope(q, positions, self.inv_freq)
        k = apply_rope(k, positions, self.inv_freq)
        keys = np.concatenate([self.k_cache[i], k], axis=0)
        values = np.concatenate([self.v_cache[i], v], axis=0)
        self.k_cache[i], self.v_cache[i] = keys, values

        total = keys.shape[0]
        # Query j (absolute position positions[j]) sees cached tokens 0..positions[j].
        key_pos = np.arange(total)
        allowed = key_pos[None, :] <= np.asarray(positions)[:, None]  # [n, total]
        group = cfg.heads // cfg.kv_heads
        out = np.zeros((n, cfg.heads, cfg.head_dim))
        for h in range(cfg.heads):
            kvh = h // group
            scores = (q[:, h, :] @ keys[:, kvh, :].T) / math.sqrt(cfg.head_dim)
            scores = np.where(allowed, scores, -np.inf)
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            out[:, h, :] = probs @ values[:, kvh, :]
        out = out.reshape(n, cfg.heads * cfg.head_dim)
        return self.linear(out, self.layer(i, "self_attn.o_proj.weight"))

    def mlp(self, i, x):
        gate = self.linear(x, self.layer(i, "mlp.gate_proj.weight"))
        up = self.linear(x, self.layer(i, "mlp.up_proj.weight"))
        return self.linear(silu(gate) * up, self.layer(i, "mlp.down_proj.weight"))

    def step(self, tokens):
        """Appends `tokens` to the sequence; returns the logits of the last one."""
        cfg = self.cfg
        for t in tokens:
            if not 0 <= t < cfg.vocab:
                raise ValueError("token %d outside the vocabulary" % t)
        positions = list(range(self.length, self.length + len(tokens)))
        x = self.embed[np.asarray(tokens, dtype=np.int64)]
        for i in range(cfg.layers):
            h = rms_norm(x, self.layer(i, "input_layernorm.weight"), cfg.eps)
            x = x + self.attention(i, h, positions)
            h = rms_norm(x, self.layer(i, "post_attention_layernorm.weight"), cfg.eps)
            x = x + self.mlp(i, h)
        self.length += len(tokens)
        last = rms_norm(x[-1], self.w["model.norm.weight"], cfg.eps)
        return self.linear(last[None, :], self.lm_head)[0]


def parse_tokens(text):
    return [int(t) for t in text.split(",") if t.strip()] if text else []


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--prompt", required=True, help="comma-separated token ids")
    parser.add_argument("--decode", default="", help="comma-separated token ids, one per step")
    parser.add_argument("--out", required=True, help="output .npy, float32 [1+n_decode, vocab]")
    parser.add_argument("--linear-inputs", choices=["f32", "bf16"], default="f32",
                        help="bf16: round every linear layer's input rows to bf16")
    args = parser.parse_args(argv)
    prompt, decode = parse_tokens(args.prompt), parse_tokens(args.decode)
    if not prompt:
        parser.error("--prompt needs at least one token")
    model = Model(args.checkpoint, args.linear_inputs)
    rows = [model.step(prompt)]
    for token in decode:
        rows.append(model.step([token]))
    np.save(args.out, np.stack(rows).astype(np.float32))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
