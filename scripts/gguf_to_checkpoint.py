#!/usr/bin/env python3
"""Converts a llama- or qwen2-architecture GGUF file into a checkpoint directory ssd-bench reads:
model.safetensors (HF tensor names, bf16 or f32), config.json, tokenizer.json (byte-level BPE
with GPT-2's or Qwen2's pre-tokenizer, built by scripts/gguf_tokenizer.py from the GGUF's
vocabulary and merges) and tokenizer_config.json (special tokens, chat template).

Quantized tensors (Q4_1, Q4_K, Q5_0, Q6_K, Q8_0, ...) are dequantized to fp32 with the `gguf`
package, then stored as bf16 (round to nearest even) or f32. llama.cpp's converter permutes the
rows of a llama model's q_proj and k_proj (it interleaves the two rotary halves of each head);
that permutation is undone here, so the checkpoint computes what the HF model does. A qwen2
model's rows are stored unpermuted (llama.cpp ropes it in the NeoX layout, HF's rotate_half),
and its q/k/v biases are kept. An untied output.weight is kept as lm_head: the GGUF quantizes
it apart from the embedding, and the checkpoint computes what the GGUF computes.

Usage: gguf_to_checkpoint.py MODEL.gguf OUT_DIR [--dtype bf16|f32]
Run it with the project's venv (scripts/python-env.sh), which has `gguf` and `tokenizers`.
"""
import argparse
import json
import os
import sys

import numpy as np


class ConvertError(Exception):
    pass


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        if default is None:
            raise ConvertError(f"missing metadata key {key}")
        return default
    return f.contents()


def unpermute(w, heads):
    """Inverse of llama.cpp's permute(w, n_head): rows of each head go from the rotary-pair
    interleaved order (llama.cpp) back to HF's [first half | second half] order."""
    rows = w.shape[0]
    return (w.reshape(heads, rows // heads // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def permute(w, heads):
    """llama.cpp's permute (convert_hf_to_gguf.py's LlamaModel.permute), for the tests."""
    rows = w.shape[0]
    return (w.reshape(heads, 2, rows // heads // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def to_bf16_bits(a):
    """fp32 -> bf16 bit patterns, round to nearest even (NaN kept quiet)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        rounded[nan] = 0x7FC0
    return rounded


def write_safetensors(path, tensors, dtype):
    """tensors: list of (name, shape, make) where make() returns the float32 array. Writes one
    file, data in the given dtype, one tensor at a time: held all at once, the 1.5B model's
    fp32 arrays and their bf16 copies took ~9 GB, and a conversion beside CI's build spent
    more time in the kernel zeroing their pages than in dequantizing."""
    width = 2 if dtype == "bf16" else 4
    header, offset = {}, 0
    for name, shape, _ in tensors:
        size = width * int(np.prod(shape, dtype=np.int64))
        header[name] = {"dtype": "BF16" if dtype == "bf16" else "F32",
                        "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for name, shape, make in tensors:
            a = make()
            if tuple(a.shape) != tuple(shape):
                raise ConvertError(f"tensor {name}: shape {a.shape}, expected {shape}")
            f.write(to_bf16_bits(a).tobytes() if dtype == "bf16" else a.astype("<f4").tobytes())
    os.replace(tmp, path)


LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def hf_name(name):
    if name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if name == "output_norm.weight":
        return "model.norm.weight"
    if name == "output.weight":
        return "lm_head.weight"
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in LAYER_NAMES:
        return f"model.layers.{parts[1]}.{LAYER_NAMES[parts[2]]}.{parts[3]}"
    raise ConvertError(f"tensor {name}: not a llama/qwen2 tensor this converter knows")


def gguf_shape(tensor):
    return tuple(int(d) for d in reversed(tensor.shape))  # GGUF lists ne0 (columns) first


def dequantize(tensor):
    import gguf
    a = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    return np.asarray(a, dtype=np.float32).reshape(gguf_shape(tensor))


def convert_tensors(reader, config):
    """(HF name, shape, make) of every tensor, make() giving its fp32 array; a llama model's
    q/k rows unpermuted."""
    permuted = config["model_type"] == "llama"

    def make(t, name):
        a = dequantize(t)
        if permuted and name.endswith("self_attn.q_proj.weight"):
            a = unpermute(a, config["num_attention_heads"])
        elif permuted and name.endswith("self_attn.k_proj.weight"):
            a = unpermute(a, config["num_key_value_heads"])
        return a
    out = []
    for t in reader.tensors:
        name = hf_name(t.name)
        out.append((name, gguf_shape(t), lambda t=t, name=name: make(t, name)))
    return out


def float32_value(x):
    """A GGUF float32 field as the decimal it was written from (1e-06, not 9.99999997e-07)."""
    return float(str(np.float32(x)))


def make_config(reader, names, dtype):
    arch = field(reader, "general.architecture")
    if arch not in ("llama", "qwen2"):
        raise ConvertError(f"general.architecture is {arch!r}; only llama and qwen2 are supported")
    p = arch + "."
    heads = int(field(reader, p + "attention.head_count"))
    hidden = int(field(reader, p + "embedding_length"))
    tokens = field(reader, "tokenizer.ggml.tokens")
    head_dim = int(field(reader, p + "rope.dimension_count", hidden // heads))
    config = {
        "architectures": ["Qwen2ForCausalLM" if arch == "qwen2" else "LlamaForCausalLM"],
        "model_type": arch,
        "hidden_size": hidden,
        "intermediate_size": int(field(reader, p + "feed_forward_length")),
        "num_hidden_layers": int(field(reader, p + "block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(field(reader, p + "attention.head_count_kv", heads)),
        "head_dim": head_dim,
        "rms_norm_eps": float32_value(field(reader, p + "attention.layer_norm_rms_epsilon")),
        "rope_theta": float32_value(field(reader, p + "rope.freq_base", 10000.0)),
        "max_position_embeddings": int(field(reader, p + "context_length")),
        "vocab_size": int(field(reader, p + "vocab_size", len(tokens))),
        "tie_word_embeddings": "lm_head.weight" not in names,
        "bos_token_id": int(field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(field(reader, "tokenizer.ggml.eos_token_id")),
        "hidden_act": "silu",
        "torch_dtype": "bfloat16" if dtype == "bf16" else "float32",
    }
    # Qwen2Config has no bias fields (q/k/v always have one) but a sliding window, off in
    # every released Qwen2.5 model and in llama.cpp's qwen2.
    if arch == "qwen2":
        config["use_sliding_window"] = False
    else:
        config.update(attention_bias=False, mlp_bias=False)
    return config


def write_tokenizer(reader, out_dir):
    # The tokenizer is its own concept (which pre-tokenizer each GGUF family needs): see
    # gguf_tokenizer.py, beside this file.
    import gguf_tokenizer
    try:
        gguf_tokenizer.write(reader, out_dir)
    except gguf_tokenizer.TokenizerError as e:
        raise ConvertError(str(e)) from None


def convert(gguf_path, out_dir, dtype):
    import gguf
    reader = gguf.GGUFReader(gguf_path)
    names = {hf_name(t.name) for t in reader.tensors}
    config = make_config(reader, names, dtype)
    tensors = convert_tensors(reader, config)
    os.makedirs(out_dir, exist_ok=True)
    write_tokenizer(reader, out_dir)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    # The weights last, written atomically: a directory with model.safetensors is complete.
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, dtype)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("out_dir")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    args = ap.parse_args()
    try:
        convert(args.gguf, args.out_dir, args.dtype)
    except (ConvertError, OSError, ValueError, KeyError) as e:
        print(f"gguf_to_checkpoint: {args.gguf}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
