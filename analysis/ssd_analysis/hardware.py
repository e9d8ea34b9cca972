"""Hardware profiles, model shapes and forward-pass costs for `ssd-analyze predict`.

Two ways to cost a forward pass of `rows` token rows (decode: b, verification: b(K+1), SSD
branch step: b F) of a model:

* `RooflineStep`, from first principles: a step reads the model's weights (decode bytes /
  TP per rank) plus the KV cache of its sequences, and does 2 x params x rows FLOPs;
      time = max(bytes / (bandwidth x mem_eff), flops / (peak x gemm_eff))
             + layers x (launch overhead + 2 all-reduces of rows x hidden bf16 values when TP > 1)
  The GPU profiles below hold datasheet figures (peak, not measured); the efficiencies and
  latencies are stated assumptions, the same for every model, never fitted to any throughput.
* `MeasuredStep` (measured.py), from an `ssd-bench characterize --out` file: the forward passes
  it timed at their row counts, and beyond them the /gemm table's measured per-call times.

The characterized CPU's profile (`cpu_profile`) and `profile`, which picks it or a GPU's by name,
are in measured.py too: they build on its measured steps, and measured.py builds on this module.
"""
from dataclasses import dataclass, replace

# --- model shapes: mirror of model/presets.cpp (hidden, intermediate, layers, heads, kv heads,
# head dim, vocab, tied embeddings). Keep in step with that file.
SHAPES = {
    "llama-3.1-70b": (8192, 28672, 80, 64, 8, 128, 128256, False),
    "llama-3.1-8b": (4096, 14336, 32, 32, 8, 128, 128256, False),
    "llama-3.2-1b": (2048, 8192, 16, 32, 8, 64, 128256, True),
    "qwen3-32b": (5120, 25600, 64, 64, 8, 128, 151936, False),
    "qwen3-0.6b": (1024, 3072, 28, 16, 8, 128, 151936, True),
    "llama-124m": (768, 2048, 12, 12, 4, 64, 32000, False),
    "llama-12m": (256, 688, 4, 4, 2, 64, 32000, True),
    "tiny-llama": (64, 160, 2, 4, 2, 16, 256, False),
    "tiny-llama-tied": (64, 160, 3, 4, 2, 16, 256, True),
    "tiny-qwen3": (64, 128, 2, 4, 2, 32, 256, True),
    "tiny-qwen3-untied": (64, 128, 2, 4, 2, 32, 256, False),
    "tiny-llama-other": (48, 96, 2, 4, 4, 12, 256, False),
}


class InputError(Exception):
    """Bad input; the message names the flag or file."""


@dataclass(frozen=True)
class Shape:
    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool

    @property
    def layer_linear(self):
        """Weights of one layer's linear maps (q, k, v, o, gate, up, down)."""
        h, qd, kvd = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        return h * qd * 2 + h * kvd * 2 + 3 * h * self.intermediate

    @property
    def decode_params(self):
        """Weights one decode step reads through GEMMs: every layer plus the LM head (the
        embedding of a tied model doubles as the LM head; a lookup reads one row)."""
        return self.layers * self.layer_linear + self.vocab * self.hidden

    @property
    def parameters(self):
        norms = (2 * self.layers + 1) * self.hidden
        return self.decode_params + (0 if self.tied else self.vocab * self.hidden) + norms

    def kv_bytes_per_token(self, elem=2):
        return 2 * self.layers * self.kv_heads * self.head_dim * elem


def shape_of(spec, where="--target"):
    """Shape for `synthetic:PRESET`, `PRESET`, or a config.json (HF keys, e.g. an HDF5
    /models/*/config_json). InputError naming `where` otherwise."""
    if isinstance(spec, dict):
        c = spec
        h = int(c["hidden_size"])
        heads = int(c["num_attention_heads"])
        return Shape(c.get("_name", "config"), h, int(c["intermediate_size"]),
                     int(c["num_hidden_layers"]), heads,
                     int(c.get("num_key_value_heads", heads)),
                     int(c.get("head_dim") or h // heads), int(c["vocab_size"]),
                     bool(c.get("tie_word_embeddings", False)))
    name = spec.removeprefix("synthetic:")
    if name not in SHAPES:
        raise InputError(f"{where}: unknown model '{spec}' (one of: {', '.join(SHAPES)})")
    return Shape(name, *SHAPES[name])


# --- hardware profiles ------------------------------------------------------------------------

@dataclass(frozen=True)
class Hardware:
    name: str
    mem_bw: float             # bytes/s, peak memory bandwidth per device
    peak_flops: float         # dense bf16 FLOP/s per device
    mem_eff: float            # achievable fraction of mem_bw when streaming weights
    gemm_eff: float           # achievable fraction of peak_flops for large GEMMs
    layer_overhead_s: float   # kernel launches and small ops per layer per step
    ar_latency_s: float       # all-reduce of a small message inside the TP group
    ar_busbw: float           # all-reduce bus bandwidth, bytes/s
    link_latency_s: float     # draft <-> target one-way message latency
    link_bw: float            # draft <-> target bandwidth, bytes/s
    weight_bytes: int = 2     # bf16
    source: str = ""
    # Host work per logits row (characterize's /forward model "host"): greedy argmax, softmax +
    # draw at T > 0, and SSD's top-64 candidate list. 0 for the GPU profiles, whose engines
    # sample on the device inside the step.
    argmax_s: float = 0.0
    sample_s: float = 0.0
    candidates_s: float = 0.0


# Datasheet figures (NVIDIA H100 SXM5 80GB: 3.35 TB/s HBM3, 989 TFLOP/s dense BF16, NVLink 4
# 900 GB/s bidirectional = 450 GB/s each way; H200 SXM: 4.8 TB/s HBM3e, same compute and
# NVLink; A100 SXM 80GB: 2.039 TB/s HBM2e, 312 TFLOP/s BF16, NVLink 3 600 GB/s = 300 each way).
# Not measured here. The efficiencies (80% of peak bandwidth, 70% of peak FLOPs), launch
# overhead (10 us per layer under CUDA graphs), NCCL small all-reduce (8 us) and p2p (5 us)
# latencies are round assumptions common to all three, not fitted to any reported throughput.
_GPU_COMMON = dict(mem_eff=0.8, gemm_eff=0.7, layer_overhead_s=10e-6, ar_latency_s=8e-6,
                   link_latency_s=5e-6, source="datasheet")
PROFILES = {
    "h100-sxm": Hardware("h100-sxm", 3.35e12, 989e12, ar_busbw=450e9 * 0.8,
                         link_bw=450e9 * 0.8, **_GPU_COMMON),
    "h200": Hardware("h200", 4.8e12, 989e12, ar_busbw=450e9 * 0.8, link_bw=450e9 * 0.8,
                     **_GPU_COMMON),
    "a100-80g": Hardware("a100-80g", 2.039e12, 312e12, ar_busbw=300e9 * 0.8,
                         link_bw=300e9 * 0.8, **_GPU_COMMON),
}


# --- forward-pass costs -----------------------------------------------------------------------

class RooflineStep:
    """Forward pass of `shape` over `tp` devices of `hw`, `context` tokens per sequence."""

    def __init__(self, shape, hw, tp=1, context=1024):
        self.shape, self.hw, self.tp, self.context = shape, hw, tp, context

    def parts(self, rows, sequences=None):
        s, hw = self.shape, self.hw
        seqs = rows if sequences is None else sequences
        weight = s.decode_params * hw.weight_bytes / self.tp
        kv = seqs * self.context * s.kv_bytes_per_token(hw.weight_bytes) / self.tp
        flops = 2.0 * s.decode_params * rows / self.tp \
            + 4.0 * rows * self.context * s.layers * s.heads * s.head_dim / self.tp
        t_mem = (weight + kv) / (hw.mem_bw * hw.mem_eff)
        t_flop = flops / (hw.peak_flops * hw.gemm_eff)
        comm = 0.0
        if self.tp > 1:
            nbytes = rows * s.hidden * hw.weight_bytes
            comm = 2 * s.layers * (hw.ar_latency_s + nbytes * 2 * (self.tp - 1) / self.tp
                                   / hw.ar_busbw)
        return {"bytes": weight + kv, "flops": flops, "t_mem": t_mem, "t_flop": t_flop,
                "comm": comm, "overhead": s.layers * hw.layer_overhead_s}

    def __call__(self, rows, sequences=None):
        p = self.parts(rows, sequences)
        return max(p["t_mem"], p["t_flop"]) + p["comm"] + p["overhead"]


def characterize_specs(char):
    """{'target': spec, 'draft': spec} of the models a characterize file measured."""
    return {k: v.get("spec", "") for k, v in char.models.items()}


def with_overrides(hw, **kw):
    return replace(hw, **{k: v for k, v in kw.items() if v is not None})
