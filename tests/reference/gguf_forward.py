#!/usr/bin/python3
"""Independent float64 numpy forward pass of a qwen2 or llama GGUF file, run greedily.

Reads the GGUF file itself with the `gguf` package (dequantize, then, with --weights bf16,
round every tensor to bfloat16, nearest even: the values scripts/get-model.sh's checkpoint
holds; --weights exact keeps the dequantized float32 values). Written from the Hugging Face
Qwen2 / Llama modeling semantics, sharing no code with scripts/gguf_to_checkpoint.py or the
C++: RMSNorm, q/k/v projections (with biases for qwen2), rotate_half RoPE, GQA causal
attention with a KV cache per prompt, SwiGLU, final norm, LM head (tied when the file has no
output.weight).

A batch of prompts runs together, each with its own KV cache, but every weight matrix is
read once per step for all rows of the step. Weights are held as bfloat16 bit patterns
(--weights bf16; 1.5 B parameters in ~3 GB) or float32 (exact); each matmul converts the
weight to float64 block by block, so products and sums are float64. Writes an .npz: `tokens`
int32 [prompts, steps] (the greedy tokens, or the --force tokens) and `logits` float32
[prompts, steps, vocab] (row j: the logits that chose token j: after prefill for j = 0, after
feeding token j - 1 otherwise).

  gguf_forward.py --gguf model.gguf --prompts prompts.jsonl --steps 32 --weights bf16 \\
      --out ref.npz [--force other.npz] [--show]

prompts.jsonl holds ssd-bench's prompt lines, {"ids": [...]}; --prompt 1,2,3 (repeatable)
gives prompts inline. Needs `gguf` (the venv of scripts/python-env.sh; Debian's python3
re-executes itself there). Reading and dequantizing the GGUF file: gguf_model.py.
"""
import argparse
import json
import os
import sys
import time

# One BLAS thread: the reference runs beside ssd-bench and the build on a shared machine, and
# its timings are quoted per core. Must precede the first numpy import.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "analysis"))
from ssd_analysis import venv  # noqa: E402

venv.ensure("gguf")

import numpy as np  # noqa: E402
from gguf_model import GgufModel, keep_freed_memory, widen  # noqa: E402

# float64 elements of one converted weight block: ~1 MB stays in the core's cache between
# the conversion and the matmul, where whole-matrix conversion streams 8 bytes per weight
# through memory twice (measured 2-5x slower for 4-row decode steps).
BLOCK_ELEMENTS = 1 << 17


def linear(x, weight, bias=None):
    """x float64 [n, in] @ weight.T (float32 [out, in], or bfloat16 bit patterns as uint16;
    converted exactly to float64)."""
    out_t = np.empty((weight.shape[0], x.shape[0]))
    step = max(8, BLOCK_ELEMENTS // weight.shape[1])
    block64 = np.empty((step, weight.shape[1]))
    for begin in range(0, weight.shape[0], step):
        block = weight[begin:begin + step]
        converted = block64[:block.shape[0]]
        converted[...] = widen(block) if block.dtype == np.uint16 else block
        np.matmul(converted, x.T, out=out_t[begin:begin + block.shape[0]])
    out = np.ascontiguousarray(out_t.T)
    return out if bias is None else out + bias


def rms_norm(x, weight, eps):
    return weight * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def apply_rope(x, positions, inv_freq):
    """x [rows, heads, head_dim]; HF rotate_half: element i rotates with i + head_dim / 2."""
    angles = np.outer(positions.astype(np.float64), inv_freq)
    emb = np.concatenate([angles, angles], axis=-1)[:, None, :]
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * np.cos(emb) + rotated * np.sin(emb)


def silu(x):
    return x / (1.0 + np.exp(-x))


class Batch:
    """One step's rows over several prompts, each prompt's rows contiguous and in order."""

    def __init__(self, model, capacity, prompts):
        shape = (len(prompts), model.layers, capacity, model.kv_heads, model.head_dim)
        self.k_cache, self.v_cache = np.zeros(shape), np.zeros(shape)
        self.length = [0] * len(prompts)
        self.model = model

    def step(self, new_tokens):
        """Appends new_tokens[s] to prompt s; returns float64 logits [prompts, vocab] of each
        prompt's last new token."""
        m = self.model
        tokens = [t for seq in new_tokens for t in seq]
        spans, positions, row = [], [], 0
        for s, seq in enumerate(new_tokens):
            spans.append((row, row + len(seq)))
            positions.extend(range(self.length[s], self.length[s] + len(seq)))
            row += len(seq)
        positions = np.asarray(positions)
        x = m.embed_rows(tokens)
        n = len(tokens)
        for i, w in enumerate(m.w):
            h = rms_norm(x, w["attn_norm"], m.eps)
            q = linear(h, w["q"], w.get("q_bias")).reshape(n, m.heads, m.head_dim)
            k = linear(h, w["k"], w.get("k_bias")).reshape(n, m.kv_heads, m.head_dim)
            v = linear(h, w["v"], w.get("v_bias")).reshape(n, m.kv_heads, m.head_dim)
            q = apply_rope(q, positions, m.inv_freq)
            k = apply_rope(k, positions, m.inv_freq)
            attn = np.empty((n, m.heads * m.head_dim))
            for s, (begin, end) in enumerate(spans):
                attn[begin:end] = self.attend(s, i, q[begin:end], k[begin:end], v[begin:end])
            x = x + linear(attn, w["o"])
            h = rms_norm(x, w["ffn_norm"], m.eps)
            x = x + linear(silu(linear(h, w["gate"])) * linear(h, w["up"]), w["down"])
        for s, seq in enumerate(new_tokens):
            self.length[s] += len(seq)
        last = x[[end - 1 for _, end in spans]]
        return linear(rms_norm(last, m.final_norm, m.eps), m.lm_head)

    def attend(self, s, layer, q, k, v):
        m = self.model
        start, n = self.length[s], q.shape[0]
        self.k_cache[s, layer, start:start + n] = k
        self.v_cache[s, layer, start:start + n] = v
        keys = self.k_cache[s, layer, :start + n]  # [total, kv_heads, head_dim]
        values = self.v_cache[s, layer, :start + n]
        group = m.heads // m.kv_heads
        # GQA: query head h reads KV head h // group.
        qg = q.reshape(n, m.kv_heads, group, m.head_dim)
        scores = np.einsum("nkgd,tkd->kgnt", qg, keys) / np.sqrt(m.head_dim)
        visible = np.arange(start + n)[None, :] <= (start + np.arange(n))[:, None]  # [n, total]
        scores = np.where(visible, scores, -np.inf)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = scores / scores.sum(axis=-1, keepdims=True)
        out = np.einsum("kgnt,tkd->nkgd", probs, values)
        return out.reshape(n, m.heads * m.head_dim)


def generate(model, prompts, steps, forced=None):
    """Greedy (or forced) decoding of every prompt for `steps` tokens."""
    batch = Batch(model, max(len(p) for p in prompts) + steps, prompts)
    tokens = np.zeros((len(prompts), steps), dtype=np.int32)
    logits = np.zeros((len(prompts), steps, model.vocab), dtype=np.float32)
    new = prompts
    for j in range(steps):
        step_logits = batch.step(new)
        logits[:, j] = step_logits
        tokens[:, j] = forced[:, j] if forced is not None else np.argmax(step_logits, axis=-1)
        new = [[int(t)] for t in tokens[:, j]]
    return tokens, logits


def token_texts(model):
    """Each token's text: GPT-2 byte-level BPE maps every byte to a printable character."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars = printable + [256 + i for i in range(256 - len(printable))]
    to_byte = {chr(c): b for b, c in zip(printable + sorted(set(range(256)) - set(printable)),
                                         chars)}
    names = model.field("tokenizer.ggml.tokens")
    return [bytes(to_byte.get(ch, ord("?")) for ch in name) for name in names]


def read_prompts(args):
    prompts = [[int(t) for t in p.split(",")] for p in args.prompt]
    if args.prompts:
        with open(args.prompts) as f:
            prompts += [json.loads(line)["ids"] for line in f if line.strip()]
    if not prompts or not all(prompts):
        raise ValueError("no prompts, or an empty one")
    return prompts


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--prompts", help='JSONL, one {"ids": [...]} per line')
    parser.add_argument("--prompt", action="append", default=[], help="comma-separated ids")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--weights", choices=("bf16", "exact"), required=True)
    parser.add_argument("--force", help="an .npz of this tool: follow its tokens, not argmax")
    parser.add_argument("--out", required=True, help="output .npz")
    parser.add_argument("--show", action="store_true", help="print each continuation's text")
    args = parser.parse_args(argv)
    try:
        prompts = read_prompts(args)
        forced = None
        if args.force:
            forced = np.load(args.force)["tokens"]
            if forced.shape[0] != len(prompts) or forced.shape[1] < args.steps:
                raise ValueError(f"--force {args.force}: tokens {forced.shape}, need "
                                 f"[{len(prompts)}, >= {args.steps}]")
        start = time.time()
        keep_freed_memory()
        model = GgufModel(args.gguf, args.weights)
        loaded = time.time()
        tokens, logits = generate(model, prompts, args.steps, forced)
        done = time.time()
    except (OSError, ValueError, KeyError) as e:
        print(f"gguf_forward: {e}", file=sys.stderr)
        return 2
    np.savez(args.out, tokens=tokens, logits=logits)
    print(f"gguf_forward: {os.path.basename(args.gguf)} ({model.arch}, {args.weights}): load "
          f"{loaded - start:.1f} s, {len(prompts)} prompts x {args.steps} steps "
          f"{done - loaded:.1f} s", file=sys.stderr)
    if args.show:
        texts = token_texts(model)
        for p, row in zip(prompts, tokens):
            print(repr(b"".join(texts[t] for t in p).decode("utf-8", "replace")), "->",
                  repr(b"".join(texts[t] for t in row).decode("utf-8", "replace")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
