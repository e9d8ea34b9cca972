"""Forward-pass costs measured by an `ssd-bench characterize --out` file, for `ssd-analyze
predict` on the machine it characterized:

* `MeasuredStep`: the forward passes it timed (/forward: AR step, verification, draft step,
  glue, branch steps, the cost curve of 2-16 tokens per sequence) at their row counts, beyond
  them the /gemm table's measured per-row increments, moved to a run's own context and number
  of sequences by what the file also timed (a shorter context; one token for many sequences).
* The rounds it timed as the runs take them: SD's (`sd_round_extras`, `TakingTurns`) and
  SSD's (`ssd_round_factors`, applied by predict.Layout.overlapped).
* The machine itself as a hardware.Hardware roofline (`cpu_profile`), and `profile`, which
  picks it (--hardware cpu) or one of hardware.PROFILES by name.
"""
import json
import math

import numpy as np

from .hardware import PROFILES, Hardware, InputError, shape_of


KV_BYTES = 4   # the K/V cache's element bytes (fp32 on both backends: Backend::alloc)


class MeasuredStep:
    """Forward pass timed by a characterize file: the /forward table's measured mean time at
    the row counts it measured for this model (duplicates averaged), linear in between; beyond
    them (and below) the /gemm table's measured per-row increments (each linear shape's time
    interpolated over its measured rows, extrapolated with the last segment's slope) plus each
    further row's attention over the context.

    The points are timed at one context (characterize --context). Where the file also timed a
    step at a shorter context, the difference is attention's cost per row and context token,
    and a step asked for at another `context` adds that cost for the difference.

    The points' rows are tokens of `measured_sequences` sequences (characterize --batch-size),
    whose K/V the rows share. Rows spread over more sequences each read their own: a further
    sequence costs `s_per_sequence_token` per context token, measured where the file timed one
    token for each of many sequences (kind "sequences") against as many rows of its batch, else
    the floor of its K/V bytes (fp32 K and V of every layer) at the read bandwidth `read_bw`."""

    def __init__(self, curves, points, shape=None, measured_context=None,
                 attention_s_per_row_token=0.0, context=None, measured_sequences=None,
                 read_bw=None):
        self.curves, self.shape = curves, shape
        self.points = sorted(points)   # [(rows, seconds)] of measured forward passes
        self.measured_context = measured_context
        self.attention_s_per_row_token = attention_s_per_row_token
        self.context = context
        self.measured_sequences = measured_sequences
        self.s_per_sequence_token = (shape.kv_bytes_per_token(KV_BYTES) / read_bw
                                     if shape is not None and read_bw else 0.0)

    def _more_sequences(self, sequences):
        if sequences is None or self.measured_sequences is None:
            return 0.0
        context = self.context if self.context is not None else self.measured_context
        extra = max(sequences - self.measured_sequences, 0)
        return extra * (context or 0) * self.s_per_sequence_token

    def _context_shift(self, rows):
        if self.context is None or self.measured_context is None:
            return 0.0
        return self.attention_s_per_row_token * rows * (self.context - self.measured_context)

    @staticmethod
    def _interp(rows_pts, secs, rows):
        x, y = np.asarray(rows_pts, float), np.asarray(secs, float)
        if rows <= x[0]:
            return float(y[0] * rows / x[0]) if x.size < 2 else \
                float(max(y[0] + (y[1] - y[0]) / (x[1] - x[0]) * (rows - x[0]), 0.0))
        if rows >= x[-1]:
            if x.size < 2:
                return float(y[-1] * rows / x[-1])
            slope = max((y[-1] - y[-2]) / (x[-1] - x[-2]), 0.0)
            return float(y[-1] + slope * (rows - x[-1]))
        return float(np.interp(rows, x, y))

    def gemm(self, rows):
        return sum(count * self._interp(x, y, rows) for count, x, y in self.curves)

    def __call__(self, rows, sequences=None):
        return max(self._at_measured_context(rows) + self._context_shift(rows), 0.0) \
            + self._more_sequences(sequences)

    def _at_measured_context(self, rows):
        if not self.points:
            return self.gemm(rows)
        xs = [r for r, _ in self.points]
        ys = [t for _, t in self.points]
        if xs[0] <= rows <= xs[-1]:
            return float(np.interp(rows, xs, ys))
        edge, t = (xs[0], ys[0]) if rows < xs[0] else (xs[-1], ys[-1])
        # the GEMMs' measured increments, and each further row's attention over the context
        attention = self.attention_s_per_row_token * (self.measured_context or 0)
        return max(t + self.gemm(rows) - self.gemm(edge) + attention * (rows - edge), 0.0)

    @classmethod
    def from_characterize(cls, char, role, concurrent=False, context=None):
        """role 'target' or 'draft'; None when the file has no GEMMs of that model.
        concurrent: the forward passes timed side by side with the other model's rank (SSD)
        rather than alone (AR, SD); files without the column, or without such passes, give
        whatever they timed. context: the run's tokens per sequence (None: the file's)."""
        g, names = char.gemm, char.gemm_attrs.get("model_id", {}).get("names", "").split(",")
        if not g or role not in names:
            return None
        mid = names.index(role)
        model = np.asarray(g["model_id"]) == mid
        sel = model & (np.asarray(g["rank"]) == np.asarray(g["rank"])[model].min())
        curves = []
        for sid in sorted(set(np.asarray(g["shape_id"])[sel].tolist())):
            m = sel & (np.asarray(g["shape_id"]) == sid)
            rows, secs = np.asarray(g["rows"])[m], np.asarray(g["seconds"])[m]
            # a slice of a huge matrix was timed: scale to the full output width
            scale = np.asarray(g["full_out"])[m] / np.asarray(g["out"])[m]
            order = np.argsort(rows)
            r_u, idx = np.unique(rows[order], return_index=True)
            curves.append((int(np.asarray(g["per_token"])[m][0]), r_u,
                           (secs * scale)[order][idx]))
        points, kw_seq = [], {}
        f = char.tables.get("forward", {})
        fn = char.table_attrs.get("forward", {}).get("model_id", {}).get("names", "").split(",")
        if f and role in fn:
            fm = np.asarray(f["model_id"]) == fn.index(role)
            if "concurrent" in f:
                side = fm & (np.asarray(f["concurrent"]) == int(concurrent))
                fm = side if side.any() else fm
            # the passes over the file's batch of sequences; kind "sequences" (one token for
            # each of more sequences) apart, for the cost of each further sequence
            many = None
            if "sequences" in f and fm.any():
                seqs = np.asarray(f["sequences"])
                batch = int(seqs[fm].min())
                kw_seq = {"measured_sequences": batch}
                spread = fm & (seqs > batch)
                if spread.any():
                    i = np.flatnonzero(spread)[0]
                    many = (int(seqs[i]), float(f["rows"][i]), float(f["seconds"][i]))
                fm = fm & (seqs == batch)
            rows, secs = np.asarray(f["rows"], float)[fm], np.asarray(f["seconds"], float)[fm]
            ctx = np.asarray(f["context"], float)[fm] if "context" in f else np.zeros(rows.size)
            main = ctx.max() if ctx.size else 0.0
            at = ctx == main
            points = [(float(r), float(secs[at & (rows == r)].mean()))
                      for r in np.unique(rows[at])]
            # the most rows also timed at a shorter context: attention's cost per row and
            # context token, for steps asked for at another context
            kw = {"measured_context": float(main)} if main > 0 else {}
            both = sorted(set(rows[~at].tolist()) & set(rows[at].tolist()))
            if both:
                r = both[-1]
                short = ctx[~at & (rows == r)].max()
                t_main = secs[at & (rows == r)].mean()
                t_short = secs[(ctx == short) & (rows == r)].mean()
                kw = {"measured_context": float(main), "attention_s_per_row_token":
                      max(float((t_main - t_short) / (r * (main - short))), 0.0)}
        else:
            kw = {}
        shape = None
        cfg = char.models.get(role, {}).get("config_json")
        if cfg:
            try:
                shape = shape_of(json.loads(cfg))
            except (KeyError, ValueError, TypeError):
                shape = None
        attrs = getattr(char, "attrs", {})
        bw = float(attrs.get("ar_bound_gbps") or attrs.get("bandwidth_gbps") or 0)
        step = cls(curves, points, shape, context=context, read_bw=bw * 1e9 or None,
                   **kw_seq, **kw)
        if many is not None and points:
            seqs, rows_many, t_many = many
            main_ctx = kw.get("measured_context") or max(float(np.max(ctx)), 1.0)
            extra = t_many - step._at_measured_context(rows_many)
            step.s_per_sequence_token = max(
                extra / ((seqs - kw_seq["measured_sequences"]) * main_ctx), 0.0)
        return step

    @property
    def overhead_1(self):
        """Measured forward at its smallest row count minus its GEMMs (non-GEMM work)."""
        if not self.points:
            return 0.0
        r, t = self.points[0]
        return max(t - self.gemm(r), 0.0)


class TakingTurns:
    """A step cost as SD's collocated round takes it: `step` (timed alone) plus what
    characterize measured the model's pass to cost more inside SD's round (model "sd": the
    target's verification right after the draft's K steps, each draft step right after the
    verification) than the same pass repeated alone. The difference is weights the repeated pass
    finds in the last-level cache and the round's pass reads from memory again, the other
    model's weights having gone through the cache in between: bytes, so the same seconds at any
    rows and context."""

    def __init__(self, step, extra_s):
        self.step, self.extra_s = step, extra_s
        self.shape = getattr(step, "shape", None)

    def __call__(self, rows, sequences=None):
        return self.step(rows, sequences) + self.extra_s


def model_rows(char, model_name):
    """{kind: (rows, sequences, mean seconds)} of /forward's model `model_name` (the rounds
    characterize timed, the host work), or {} without them."""
    f = char.tables.get("forward", {})
    attrs = char.table_attrs.get("forward", {})
    fn = attrs.get("model_id", {}).get("names", "").split(",")
    kn = attrs.get("kind_id", {}).get("names", "").split(",")
    if not f or model_name not in fn:
        return {}
    model, kind = np.asarray(f["model_id"]), np.asarray(f["kind_id"])
    out = {}
    for k, name in enumerate(kn):
        m = (model == fn.index(model_name)) & (kind == k)
        if m.any():
            sequences = np.asarray(f.get("sequences", f["rows"]))[m][0]
            out[name] = (float(np.asarray(f["rows"])[m][0]), float(sequences),
                         float(np.asarray(f["seconds"], float)[m].mean()))
    return out


def host_row_costs(char):
    """{argmax_s, sample_s, candidates_s}: the per-row host work characterize timed (model
    "host" in /forward; 0 for files from before it did)."""
    host = model_rows(char, "host")
    return {f"{kind}_s": host[kind][2] if kind in host else 0.0
            for kind in ("argmax", "sample", "candidates")}


def ssd_round_factors(char):
    """(verify_extra_s, build_factor, fallback_extra_s) from SSD's round as characterize timed
    it (model "ssd": the target's verification beside the draft rank's uniform:1 cache build
    and, in files that have kind busy, further branch steps until the outcome, each round
    started together, then K just-in-time draft steps): the seconds the verification took
    beyond the same pass alone, per share of it the draft was busy (the draft's weights through
    the shared last-level cache and on the memory bus while both run; seconds, as TakingTurns:
    the runs' verification at b = 16 took 1.02-1.05x the pass alone where b = 1's took
    1.07-1.12x); the build's time over its glue and K branch steps alone; the seconds a
    just-in-time step takes beyond the draft's step alone. Each at least 0. None without such
    rows (older files, no draft rank). Files without busy had the build alone beside the
    verification, about half of it at llama-124m: the share divided the slowdown, and chance
    in the timing with it."""
    rows = model_rows(char, "ssd")
    target = MeasuredStep.from_characterize(char, "target")
    draft = MeasuredStep.from_characterize(char, "draft")
    if any(k not in rows for k in ("verify", "build", "fallback")) or None in (target, draft):
        return None
    v_rows, b, v_s = rows["verify"]
    branch_rows, _, build_s = rows["build"]
    K = int(round(v_rows / b)) - 1
    alone_verify = target(v_rows, b)
    alone_build = draft(v_rows, b) + K * draft(branch_rows, b)
    overlap = min((rows["busy"][2] if "busy" in rows else build_s) / v_s, 1.0)
    extra = max(v_s - alone_verify, 0.0) / overlap if overlap > 0 else 0.0
    step_rows, _, step_s = rows["fallback"]
    return extra, build_s / alone_build, max(step_s - draft(step_rows, b), 0.0)


def sd_round_extras(char):
    """(verify, draft) seconds SD's round's passes took beyond the same passes alone (at
    least 0), from a characterize file's /forward model "sd"; None when the file has none
    (older files, no draft)."""
    rows = model_rows(char, "sd")
    target = MeasuredStep.from_characterize(char, "target")
    draft = MeasuredStep.from_characterize(char, "draft")
    if any(k not in rows for k in ("verify", "draft")) or None in (target, draft):
        return None
    (v_rows, b, v_s), (d_rows, _, d_s) = rows["verify"], rows["draft"]
    return max(v_s - target(v_rows, b), 0.0), max(d_s - draft(d_rows, b), 0.0)


# --- the characterized machine as a hardware profile ----------------------------------------------

def cpu_profile(char):
    """This CPU as a roofline, from a characterize file: the AR bound's read bandwidth, the best
    GEMM rate measured (already achieved, so efficiencies 1), the measured all-reduce and
    draft<->target link, and the non-GEMM remainder of the target's AR step per layer."""
    a = char.attrs
    bw = float(a.get("ar_bound_gbps") or a.get("bandwidth_gbps")) * 1e9
    gf = np.asarray(char.gemm.get("gflops", [1.0]), float)
    fwd = MeasuredStep.from_characterize(char, "target")
    layers = max(1, fwd.shape.layers) if fwd and fwd.shape else 1
    over = fwd.overhead_1 / layers if fwd else 0.0
    return Hardware("cpu", bw, float(gf.max()) * 1e9, 1.0, 1.0, over,
                    float(a.get("all_reduce_latency_s", 0.0) or 0.0),
                    float(a.get("all_reduce_busbw_gbps", 0.0) or 0.0) * 1e9 or math.inf,
                    float(a.get("p2p_latency_s", 0.0) or 0.0),
                    float(a.get("p2p_bandwidth_gbps", 0.0) or 0.0) * 1e9 or math.inf,
                    int(a.get("element_bytes", 4) if a.get("target_weight_dtype") != "BF16"
                        else 2), source=f"characterize {char.name}",
                    **host_row_costs(char))


def profile(name, char=None):
    if name == "cpu":
        if char is None:
            raise InputError("--hardware cpu: needs --characterize FILE")
        return cpu_profile(char)
    if name not in PROFILES:
        raise InputError(f"--hardware: unknown profile '{name}' "
                         f"(one of: {', '.join(PROFILES)}, cpu)")
    return PROFILES[name]
