#!/usr/bin/env python3
"""Converts a llama-architecture GGUF file into a checkpoint directory ssd-bench reads:
model.safetensors (HF tensor names, bf16 or f32), config.json, tokenizer.json (GPT-2 byte-level
BPE built with the `tokenizers` library from the GGUF's vocabulary and merges) and
tokenizer_config.json (special tokens, chat template).

Quantized tensors (Q4_1, Q8_0, ...) are dequantized with the `gguf` package. llama.cpp's
converter permutes the rows of q_proj and k_proj (it interleaves the two rotary halves of each
head); that permutation is undone here, so the checkpoint computes what the HF model does.

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
    """tensors: list of (name, float32 array). Writes one file, data in the given dtype."""
    header, blobs, offset = {}, [], 0
    for name, a in tensors:
        data = to_bf16_bits(a).tobytes() if dtype == "bf16" else a.astype("<f4").tobytes()
        header[name] = {"dtype": "BF16" if dtype == "bf16" else "F32",
                        "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for b in blobs:
            f.write(b)
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
    raise ConvertError(f"tensor {name}: not a llama tensor this converter knows")


def dequantize(tensor):
    import gguf
    a = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    shape = tuple(int(d) for d in reversed(tensor.shape))  # GGUF lists ne0 (columns) first
    return np.asarray(a, dtype=np.float32).reshape(shape)


def convert_tensors(reader, heads, kv_heads):
    out = []
    for t in reader.tensors:
        name = hf_name(t.name)
        a = dequantize(t)
        if name.endswith("self_attn.q_proj.weight"):
            a = unpermute(a, heads)
        elif name.endswith("self_attn.k_proj.weight"):
            a = unpermute(a, kv_heads)
        out.append((name, a))
    return out


def make_config(reader, names, dtype):
    arch = field(reader, "general.architecture")
    if arch != "llama":
        raise ConvertError(f"general.architecture is {arch!r}; only llama is supported")
    p = "llama."
    heads = int(field(reader, p + "attention.head_count"))
    hidden = int(field(reader, p + "embedding_length"))
    tokens = field(reader, "tokenizer.ggml.tokens")
    head_dim = int(field(reader, p + "rope.dimension_count", hidden // heads))
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(field(reader, p + "feed_forward_length")),
        "num_hidden_layers": int(field(reader, p + "block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(field(reader, p + "attention.head_count_kv", heads)),
        "head_dim": head_dim,
        "rms_norm_eps": float(field(reader, p + "attention.layer_norm_rms_epsilon")),
        "rope_theta": float(field(reader, p + "rope.freq_base", 10000.0)),
        "max_position_embeddings": int(field(reader, p + "context_length")),
        "vocab_size": int(field(reader, p + "vocab_size", len(tokens))),
        "tie_word_embeddings": "lm_head.weight" not in names,
        "bos_token_id": int(field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(field(reader, "tokenizer.ggml.eos_token_id")),
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "torch_dtype": "bfloat16" if dtype == "bf16" else "float32",
    }


def write_tokenizer(reader, out_dir):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    if field(reader, "tokenizer.ggml.model") != "gpt2":
        raise ConvertError("tokenizer.ggml.model is not gpt2 (byte-level BPE)")
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type", [1] * len(tokens))
    merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges")]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    try:
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    except Exception as e:  # the tokenizers library raises plain Exception
        raise ConvertError(f"tokenizer: {e}") from None
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # Token type 3 is CONTROL in GGUF: special tokens (<|im_start|>, <|endoftext|>, ...).
    special = [t for t, ty in zip(tokens, types) if int(ty) == 3]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    bos = tokens[int(field(reader, "tokenizer.ggml.bos_token_id"))]
    eos = tokens[int(field(reader, "tokenizer.ggml.eos_token_id"))]
    config = {"bos_token": bos, "eos_token": eos, "add_bos_token":
              bool(field(reader, "tokenizer.ggml.add_bos_token", False)),
              "chat_template": field(reader, "tokenizer.chat_template", "")}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=1)


def convert(gguf_path, out_dir, dtype):
    import gguf
    reader = gguf.GGUFReader(gguf_path)
    names = {hf_name(t.name) for t in reader.tensors}
    config = make_config(reader, names, dtype)
    tensors = convert_tensors(reader, config["num_attention_heads"],
                              config["num_key_value_heads"])
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
