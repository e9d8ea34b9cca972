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
read once per step for all rows of the step. Weights are held as float32 (1.5 B parameters
fit in ~6 GB); each matmul converts the weight to float64 block by block, so products and
sums are float64. Writes an .npz: `tokens` int32 [prompts, steps] (the greedy tokens, or the
--force tokens) and `logits` float32 [prompts, steps, vocab] (row j: the logits that chose
token j: after prefill for j = 0, after feeding token j - 1 otherwise).

  gguf_forward.py --gguf model.gguf --prompts prompts.jsonl --steps 32 --weights bf16 \\
      --out ref.npz [--force other.npz] [--show]

prompts.jsonl holds ssd-bench's prompt lines, {"ids": [...]}; --prompt 1,2,3 (repeatable)
gives prompts inline. Needs `gguf` (the venv of scripts/python-env.sh; Debian's python3
re-executes itself there).
"""
import argparse
import ctypes
import json
import mmap
import os
import struct
import sys
import time

# One BLAS thread: the reference runs beside ssd-bench and the build on a shared machine, and
# its timings are quoted per core. Must precede the first numpy import.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "analysis"))
from ssd_analysis import venv  # noqa: E402

venv.ensure("gguf")

import gguf  # noqa: E402
import numpy as np  # noqa: E402

# float64 elements of one converted weight block: ~1 MB stays in the core's cache between
# the conversion and the matmul, where whole-matrix conversion streams 8 bytes per weight
# through memory twice (measured 2-5x slower for 4-row decode steps).
BLOCK_ELEMENTS = 1 << 17


def keep_freed_memory():
    """Dequantizing allocates and frees tens of MB per block; glibc would hand each block back
    to the kernel and fault it in again (measured: sys time 3.5 s -> 1.4 s of a 0.5B load)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 25)  # M_MMAP_THRESHOLD: glibc's maximum, 32 MiB
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass  # not glibc: only slower


def round_to_bf16(values):
    """float32 -> float32 holding the nearest bfloat16, ties to even (finite values)."""
    bits = np.array(values, dtype=np.float32).view(np.uint32)
    # In place, a pass per operation: the load rounds every weight of the model.
    carry = bits >> 16
    carry &= np.uint32(1)
    carry += np.uint32(0x7FFF)
    bits += carry
    bits &= np.uint32(0xFFFF0000)
    return bits.view(np.float32)


class GgufFile:
    """A GGUF file's metadata and tensors (raw bytes, [rows, row bytes] per tensor).

    Parsed here rather than with gguf.GGUFReader, which takes several seconds per file to build its
    per-field numpy views of the 150k-token vocabulary; the values are decoded by the
    `gguf` package (gguf.quants.dequantize) all the same."""
    SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
               10: "<Q", 11: "<q", 12: "<d"}
    STRING, ARRAY = 8, 9

    def __init__(self, path):
        try:
            self.parse(path)
        except struct.error:
            raise ValueError(f"{path}: truncated GGUF file") from None

    def parse(self, path):
        with open(path, "rb") as f:
            self.bytes = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.at = 0
        magic, version = self.read("<4sI")
        if magic != b"GGUF" or version < 2:
            raise ValueError(f"{path}: not a GGUF v2/v3 file")
        tensor_count, field_count = self.read("<QQ")
        self.fields = {}
        for _ in range(field_count):
            key = self.string()
            self.fields[key] = self.value(self.read("<I")[0])
        infos = []
        for _ in range(tensor_count):
            name = self.string()
            dims = self.read("<%dQ" % self.read("<I")[0])
            kind, offset = self.read("<IQ")
            infos.append((name, dims, gguf.GGMLQuantizationType(kind), offset))
        alignment = self.fields.get("general.alignment", 32)
        data_start = (self.at + alignment - 1) // alignment * alignment
        everything = np.frombuffer(self.bytes, dtype=np.uint8)
        self.tensors = {}
        for name, dims, kind, offset in infos:
            block, block_bytes = gguf.GGML_QUANT_SIZES[kind]
            row_bytes = dims[0] // block * block_bytes
            rows = int(np.prod(dims[1:], dtype=np.int64))
            begin = data_start + offset
            if begin + rows * row_bytes > everything.size:
                raise ValueError(f"{path}: tensor {name} runs past the end of the file")
            raw = everything[begin:begin + rows * row_bytes].reshape(rows, row_bytes)
            self.tensors[name] = (tuple(dims), kind, raw)

    def read(self, fmt):
        values = struct.unpack_from(fmt, self.bytes, self.at)
        self.at += struct.calcsize(fmt)
        return values

    def string(self):
        (length,) = self.read("<Q")
        self.at += length
        return self.bytes[self.at - length:self.at].decode("utf-8", "replace")

    def value(self, kind):
        if kind == self.STRING:
            return self.string()
        if kind == self.ARRAY:
            item_kind, count = self.read("<IQ")
            return [self.value(item_kind) for _ in range(count)]
        return self.read(self.SCALARS[kind])[0]


class GgufModel:
    def __init__(self, path, weights):
        self.file = GgufFile(path)
        self.tensors = self.file.tensors
        self.weights = weights
        arch = self.field("general.architecture")
        if arch not in ("qwen2", "llama"):
            raise ValueError(f"{path}: architecture {arch}, expected qwen2 or llama")
        self.arch = arch
        self.layers = self.field(f"{arch}.block_count")
        self.hidden = self.field(f"{arch}.embedding_length")
        self.heads = self.field(f"{arch}.attention.head_count")
        self.kv_heads = self.field(f"{arch}.attention.head_count_kv", self.heads)
        self.head_dim = self.field(f"{arch}.attention.key_length", self.hidden // self.heads)
        self.eps = float(self.field(f"{arch}.attention.layer_norm_rms_epsilon"))
        theta = float(self.field(f"{arch}.rope.freq_base", 10000.0))
        # What this reference does not implement must fail rather than give wrong logits.
        if self.field(f"{arch}.rope.scaling.type", "none") not in ("none",) or \
                "rope_freqs.weight" in self.tensors:
            raise ValueError(f"{path}: RoPE scaling is not supported")
        if self.field(f"{arch}.rope.dimension_count", self.head_dim) != self.head_dim:
            raise ValueError(f"{path}: partial rotary embeddings are not supported")
        self.inv_freq = 1.0 / theta ** (np.arange(0, self.head_dim, 2) / self.head_dim)
        self.vocab = self.tensors["token_embd.weight"][0][1]
        # A tied head needs the whole table; otherwise only the rows of the tokens seen.
        tied = "output.weight" not in self.tensors
        self.lm_head = self.matrix("token_embd.weight" if tied else "output.weight")
        self.w = [self.load_layer(i) for i in range(self.layers)]
        self.final_norm = self.vector("output_norm.weight")

    def field(self, key, default=None):
        value = self.file.fields.get(key, default)
        if value is None:
            raise ValueError(f"GGUF metadata lacks {key}")
        return value

    def dequantize(self, name, rows=slice(None)):
        """float32 [rows, ne0] of a tensor: GGUF lists dimensions ne0 first, so a matrix comes
        out in the HF [out, in] layout."""
        _, kind, raw = self.tensors[name]
        values = gguf.quants.dequantize(raw[rows], kind).astype(np.float32, copy=False)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{name}: non-finite weights")
        return round_to_bf16(values) if self.weights == "bf16" else values

    def matrix(self, name, permuted_heads=None):
        dims = self.tensors[name][0]
        if len(dims) != 2:
            raise ValueError(f"{name}: {len(dims)} dimensions, expected a matrix")
        cols, rows = dims
        out = np.empty((rows, cols), dtype=np.float32)
        # Block-wise: dequantizing a whole 150k-row table at once peaks at several GB.
        step = max(1, (1 << 22) // cols)
        for begin in range(0, rows, step):
            out[begin:begin + step] = self.dequantize(name, slice(begin, begin + step))
        if permuted_heads:
            # llama.cpp's converter reorders each llama q/k head's rows so that the two halves
            # rotated together interleave (GGML's rope pairs adjacent rows); HF pairs row i
            # with row i + head_dim / 2. Undo it: row 2i + j of a head -> row j * half + i.
            half = rows // permuted_heads // 2
            out = out.reshape(permuted_heads, half, 2, cols).swapaxes(1, 2).reshape(rows, cols)
        return out

    def vector(self, name):
        return self.dequantize(name).astype(np.float64).reshape(-1)

    def load_layer(self, i):
        p = f"blk.{i}."
        llama = self.arch == "llama"
        w = {
            "attn_norm": self.vector(p + "attn_norm.weight"),
            "q": self.matrix(p + "attn_q.weight", self.heads if llama else None),
            "k": self.matrix(p + "attn_k.weight", self.kv_heads if llama else None),
            "v": self.matrix(p + "attn_v.weight"),
            "o": self.matrix(p + "attn_output.weight"),
            "ffn_norm": self.vector(p + "ffn_norm.weight"),
            "gate": self.matrix(p + "ffn_gate.weight"),
            "up": self.matrix(p + "ffn_up.weight"),
            "down": self.matrix(p + "ffn_down.weight"),
        }
        for name in ("q", "k", "v"):
            bias = p + f"attn_{name}.bias"
            if bias in self.tensors:
                if llama:
                    raise ValueError(f"{bias}: llama with attention biases is not supported")
                w[name + "_bias"] = self.vector(bias)
        if self.arch == "qwen2" and "q_bias" not in w:
            raise ValueError(f"{p}attn_q.bias: missing (qwen2 has q/k/v biases)")
        return w

    def embed_rows(self, tokens):
        if min(tokens) < 0 or max(tokens) >= self.vocab:
            raise ValueError(f"token outside the vocabulary of {self.vocab}")
        return self.dequantize("token_embd.weight", np.asarray(tokens)).astype(np.float64)


def linear(x, weight, bias=None):
    """x float64 [n, in] @ weight.T (float32 [out, in], converted exactly to float64)."""
    out_t = np.empty((weight.shape[0], x.shape[0]))
    step = max(8, BLOCK_ELEMENTS // weight.shape[1])
    block64 = np.empty((step, weight.shape[1]))
    for begin in range(0, weight.shape[0], step):
        block = weight[begin:begin + step]
        converted = block64[:block.shape[0]]
        converted[...] = block
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
