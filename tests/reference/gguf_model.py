"""The weights of a qwen2 or llama GGUF file, for gguf_forward.py: the file's header, metadata
and tensors parsed here (GgufFile), and the model's hyperparameters and weights (GgufModel),
dequantized by the `gguf` package and, with weights "bf16", rounded to bfloat16 (nearest even:
the values scripts/get-model.sh's checkpoint holds). gguf_forward.py imports it after limiting
BLAS to one thread and re-executing itself where `gguf` is (the venv of scripts/python-env.sh).

With weights "bf16" the matrices are held as their bfloat16 bit patterns (uint16; `widen` gives
the float32 values back, exactly): half the memory of float32. On a 2-core KVM guest most of
the 1.5B model's load was the kernel zeroing fresh pages for 6.2 GB of float32 matrices
(perf: 77% of the samples in clear_page): the load took 47 s, 15 s now, with the same logits
bit for bit. (py_test_qwen_forward alone: 93 -> 82 s; forward_logits, loading next, now meets
more of the guest's fresh pages itself.)
"""
import ctypes
import mmap
import struct

import gguf
import numpy as np


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


def widen(bits):
    """bfloat16 bit patterns (uint16) -> float32 values, exactly."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


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
        bf16 = self.weights == "bf16"
        out = np.empty((rows, cols), dtype=np.uint16 if bf16 else np.float32)
        # Block-wise: dequantizing a whole 150k-row table at once peaks at several GB. Blocks
        # of 1M values keep the dequantizer's temporaries under keep_freed_memory's 32 MiB
        # mmap threshold, so that they reuse heap pages instead of faulting in fresh ones each
        # block (4M: the 1.5B model's load 47 s; 1M: 32 s, both still float32 matrices).
        step = max(1, (1 << 20) // cols)
        for begin in range(0, rows, step):
            values = self.dequantize(name, slice(begin, begin + step))
            out[begin:begin + step] = values.view(np.uint32) >> 16 if bf16 else values
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
