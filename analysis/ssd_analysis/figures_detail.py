"""Per-run figures: the rank timeline (Gantt) and the roofline. See figures.py."""
import json
import math
import os

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

from . import timing as T
from . import validate as V
from .figures_base import PALETTE, Skip, short

COLORS = {"prefill": "#8c564b", "verify": "#1f77b4", "accept": "#17becf",
          "idle": "#e0e0e0", "draft": "#ff7f0e", "fallback": "#d62728", "lookup": "#bcbd22",
          "build": "#2ca02c", "message": "#7f7f7f"}
ROUNDS_SHOWN = 20


def _pick_timeline_run(runs, path):
    if path:
        for r in runs:
            if r.path == path or r.name == os.path.basename(path):
                if not r.has_rounds:
                    raise Skip(f"{r.name} has no /rounds records")
                return r
        raise Skip(f"--timeline {path} is not among the files")
    for mode in ("ssd", "sd"):
        for r in runs:
            if r.mode == mode and r.has_rounds:
                return r
    raise Skip("needs an SD or SSD run with /rounds records")


def _rank_names(run):
    draft_rank = next((k for k, a in sorted(run.ranks.items())
                       if str(a.get("role", "")).startswith("draft")), None)
    target = "rank 0: target"
    draft = f"rank {draft_rank}: draft" if draft_rank is not None else "rank 0: draft (collocated)"
    return target, draft, draft_rank is not None


def fig_timeline(runs, out_dir, path=None):
    run = _pick_timeline_run(runs, path)
    br = T.batch_rounds(run.rounds)
    sel = np.where((br["rep"] == br["rep"][0]) & (br["group"] == br["group"][0]))[0]
    sel = sel[:ROUNDS_SHOWN]
    t0 = br["start"][sel[0]]
    # The group's prefill: the latest prefill step of this rep that starts before round 0.
    st = run.steps
    pre = None
    if len(st.get("rep", [])):
        cand = np.where((st["step"] < 0) & (st["rep"] == br["rep"][0]) & (st["start_s"] <= t0))[0]
        if cand.size:
            i = cand[np.argmax(st["start_s"][cand])]
            pre = (st["start_s"][i], st["step_time_s"][i])
            t0 = min(t0, pre[0])
    ms = lambda t: 1e3 * (t - t0)  # noqa: E731
    target_name, draft_name, separate = _rank_names(run)
    end = ms(br["end"][sel[-1]])
    fig, ax = plt.subplots(figsize=(12.0, 3.6))
    y_t, y_d, h = 1.0, 0.0, 0.6

    def bar(y, a, b, kind, **kw):
        if b > a:
            ax.broken_barh([(a, b - a)], (y - h / 2, h), facecolors=COLORS[kind],
                           edgecolor="none", **kw)

    bar(y_t, 0, end, "idle", hatch="//")
    bar(y_d, 0, end, "idle")
    if pre is not None:
        bar(y_t, ms(pre[0]), ms(pre[0] + pre[1]), "prefill")
    for i in sel:
        v_end = br["end"][i] - br["accept"][i]
        v_start = v_end - br["verify"][i]
        bar(y_t, ms(v_start), ms(v_end), "verify")
        bar(y_t, ms(v_end), ms(br["end"][i]), "accept")
        ds, de = br["draft_start"][i], br["draft_end"][i]
        if run.mode == "ssd":
            kind = "fallback" if br["fallback"][i] > 0 else "lookup"
        else:
            kind = "draft"
        bar(y_d, ms(ds), ms(de), kind)
        if br["build"][i] > 0:
            bar(y_d, ms(de), ms(de + br["build"][i]), "build")
        if separate:
            arrive = br["start"][i] + br["idle"][i]
            ax.annotate("", xy=(ms(ds), y_d + h / 2), xytext=(ms(br["start"][i]), y_t - h / 2),
                        arrowprops=dict(arrowstyle="->", color=COLORS["message"], lw=0.6))
            ax.annotate("", xy=(ms(arrive), y_t - h / 2), xytext=(ms(de), y_d + h / 2),
                        arrowprops=dict(arrowstyle="->", color=COLORS["message"], lw=0.6,
                                        linestyle="--"))
        ax.text(ms(v_start), y_t + h / 2 + 0.05, str(br["round"][i]), fontsize=6,
                ha="left", va="bottom")
    ax.set_yticks([y_d, y_t], [draft_name, target_name])
    ax.set_ylim(-0.6, 1.75)
    ax.set_xlim(0, end * 1.01)
    ax.set_xlabel("time since the group's prefill (ms)")
    ax.grid(axis="y", visible=False)
    draft_kinds = [("lookup", "draft: cache lookup"), ("fallback", "draft: fallback drafting"),
                   ("build", "draft: cache build")] if run.mode == "ssd" else \
        [("draft", "draft: drafting K tokens")]
    handles = [Patch(facecolor=COLORS["prefill"], label="prefill: the target's and the draft's"),
               Patch(facecolor=COLORS["verify"], label="target: verify K+1"),
               Patch(facecolor=COLORS["accept"], label="target: accept"),
               Patch(facecolor=COLORS["idle"], hatch="//", label="target: idle, waiting"),
               Patch(facecolor=COLORS["idle"], label="draft: idle")]
    handles += [Patch(facecolor=COLORS[k], label=n) for k, n in draft_kinds]
    if separate:
        handles.append(plt.Line2D([], [], color=COLORS["message"], lw=0.8,
                                  label="messages: outcome (solid), speculation (dashed)"))
    ax.legend(handles=handles, fontsize=7, ncol=5, loc="upper center",
              bbox_to_anchor=(0.5, -0.25), frameon=False)
    ax.set_title(f"{run.name}: {run.label()}, {short(run.target)} / {short(run.draft)}, "
                 f"b={run.batch_size}: first {len(sel)} rounds of rep {br['rep'][0]}, "
                 f"group {br['group'][0]} (numbers: round)", fontsize=9)
    return fig


# --- roofline --------------------------------------------------------------------------------

def _names(char, table, column, default):
    """The `names` attribute of an id column of a characterize table, as a list."""
    attrs = char.table_attrs.get(table) or (char.gemm_attrs if table == "gemm" else {})
    return str(attrs.get(column, {}).get("names", default)).split(",")


_DTYPE_BYTES = {"F32": 4.0, "BF16": 2.0, "F16": 2.0}


def element_bytes(char):
    """Bytes per weight element as characterized: the target's weight dtype where the file
    records it (the cpu backend keeps bf16 weights in 2 bytes while its activations, the
    element_bytes attribute, stay fp32); else element_bytes (4: fp32 cpu, 2: bf16 cuda); files
    from before characterize recorded either are fp32."""
    dtype = char.attrs.get("target_weight_dtype", "")
    dtype = (dtype.decode() if isinstance(dtype, bytes) else str(dtype)).upper()
    if dtype in _DTYPE_BYTES:
        return _DTYPE_BYTES[dtype]
    return float(char.attrs.get("element_bytes", 4))


def _gemm_points(char):
    g = char.gemm
    if not g:
        return []
    names = _names(char, "gemm", "kernel_id", "invariant,openblas")
    pts = []
    for i in range(len(g["gflops"])):
        rows, n_in, n_out = float(g["rows"][i]), float(g["in"][i]), float(g["out"][i])
        eb = float(g["element_bytes"][i]) if "element_bytes" in g else 4.0
        bytes_ = eb * (n_in * n_out + rows * n_in + rows * n_out)
        pts.append((2.0 * rows * n_in * n_out / bytes_, float(g["gflops"][i]),
                    names[int(g["kernel_id"][i])] if int(g["kernel_id"][i]) < len(names) else "?"))
    return pts


def _target_shard_params(char, eb):
    """Parameters of rank 0's target shard that a step multiplies by: the linear weights of its
    decode bytes (`decode_bytes_per_token`, rank 0's shard under tensor parallelism) where the
    file has them, else the whole model's (weights_read). The roofline is rank 0's, so the
    FLOPs charged against it must be rank 0's too."""
    decode_bytes = float(char.attrs.get("decode_bytes_per_token", math.nan))
    if math.isfinite(decode_bytes) and decode_bytes > 0:
        return decode_bytes / eb
    return weights_read(char.models.get("target", {}))


def characterize_kinds(char, eb):
    """(label, intensity, achieved GFLOP/s) of the forward passes characterize timed itself: the
    target's AR step and verification, the draft step and the smallest branch step."""
    t = char.tables.get("forward")
    if not t or not len(t.get("seconds", [])):
        return []
    models = _names(char, "forward", "model_id", "target,draft")
    kinds = _names(char, "forward", "kind_id", "ar,verify,draft,glue,branch")
    rows_of = {}
    for i in range(len(t["seconds"])):
        model, kind = models[int(t["model_id"][i])], kinds[int(t["kind_id"][i])]
        if kind in ("ar", "verify", "draft", "branch"):
            key = (model, kind)
            if key not in rows_of or t["rows"][i] < t["rows"][rows_of[key]]:
                rows_of[key] = i
    out = []
    for (model, kind), i in rows_of.items():
        P = _target_shard_params(char, eb) if model == "target" else \
            weights_read(char.models.get(model, {}))
        rows, sec = float(t["rows"][i]), float(t["seconds"][i])
        label = {"ar": "AR step", "verify": "verify", "draft": "draft step",
                 "branch": "branch step"}[kind]
        out.append((f"{label} ({rows:.3g} rows, characterize)", 2 * rows / eb,
                    2 * rows * P / sec / 1e9))
    return out


def target_row_steps(char, eb):
    """(rows, intensity, achieved GFLOP/s) of every target step characterize timed alone at its
    full context: the AR step, the verification and the multi-row steps (kinds ar, verify,
    rows), by rows. How a verification's or a batch's step climbs the roof as rows grow."""
    t = char.tables.get("forward")
    if not t or not len(t.get("seconds", [])) or "context" not in t:
        return []
    models = _names(char, "forward", "model_id", "")
    kinds = _names(char, "forward", "kind_id", "")
    full = max(int(c) for c in t["context"])
    P = _target_shard_params(char, eb)
    steps = {}
    for i in range(len(t["seconds"])):
        m, k = int(t["model_id"][i]), int(t["kind_id"][i])
        if m >= len(models) or k >= len(kinds) or models[m] != "target" or \
                kinds[k] not in ("ar", "verify", "rows") or int(t["concurrent"][i]) or \
                int(t["context"][i]) != full:
            continue
        rows = float(t["rows"][i])
        steps[rows] = (rows, 2 * rows / eb, 2 * rows * P / float(t["seconds"][i]) / 1e9)
    return [steps[r] for r in sorted(steps)] if math.isfinite(P) else []


def weights_read(model_attrs):
    """Parameters a forward pass reads (and multiplies by): all of them, less the input
    embedding table when it is not tied to the LM head (only the tokens' rows are read), as in
    `ssd-bench characterize`'s decode bytes."""
    P = float(model_attrs.get("parameters", math.nan))
    try:
        cfg = json.loads(model_attrs.get("config_json", "{}"))
    except json.JSONDecodeError:
        return P
    if not cfg.get("tie_word_embeddings", False) and "vocab_size" in cfg:
        P -= float(cfg["vocab_size"] - 1) * float(cfg.get("hidden_size", 0))
    return P


def _forward_kinds(runs, eb=4.0, shard=None):
    """(label, intensity, achieved GFLOP/s or NaN) for AR step, verification, draft step and
    branch step, from the first speculative run (and its AR baseline). Intensity of a forward
    of `rows` tokens through a model of P parameters of `eb` bytes: 2 rows P / (eb P).
    shard(run) is the share of the target's parameters on rank 0 (1 without tensor
    parallelism): the roof is one rank's."""
    shard = shard or (lambda run: 1.0)
    spec = next((r for r in runs if r.mode == "ssd" and r.has_rounds), None) or \
        next((r for r in runs if r.mode == "sd" and r.has_rounds), None)
    ar = None
    if spec is not None:
        ar = next((r for r in runs if r.mode == "ar" and r.sweep_key() == spec.sweep_key()), None)
    ar = ar or next((r for r in runs if r.mode == "ar"), None)
    sd = next((r for r in runs if r.mode == "sd" and r.has_rounds and
               (spec is None or r.draft == spec.draft)), None)
    kinds = []
    if ar is not None:
        P = weights_read(ar.models.get("target", {})) * shard(ar)
        base = V.ar_baseline(ar)
        b = base["rows"] if base["steps"] else ar.batch_size
        kinds.append((f"AR step ({b:.3g} rows)", 2 * b / eb, 2 * b * P / base["t_ar"] / 1e9))
    if spec is not None:
        br = T.batch_rounds(spec.rounds)
        P = weights_read(spec.models.get("target", {})) * shard(spec)
        Pd = weights_read(spec.models.get("draft", {}))
        K, rows = spec.lookahead, float(np.mean(br["rows"]))
        kinds.append((f"verify ({rows * (K + 1):.3g} rows)", 2 * rows * (K + 1) / eb,
                      2 * rows * (K + 1) * P / T.mean(br["verify"]) / 1e9))
        # a draft step: SD drafting K tokens, or SSD's just-in-time drafting of a miss
        if sd is not None:
            sbr = T.batch_rounds(sd.rounds)
            d_rows, step = float(np.mean(sbr["rows"])), T.mean(sbr["draft"] / sd.lookahead)
        else:
            jit = (br["round"] > 0) & br["any_primary"] & ~br["any_backup"] & (br["fallback"] > 0)
            d_rows, step = rows, (T.mean(br["fallback"] / K, jit) if np.any(jit) else math.nan)
        kinds.append((f"draft step ({d_rows:.3g} rows)", 2 * d_rows / eb,
                      2 * d_rows * Pd / step / 1e9))
        built = br["build"] > 0
        if np.any(built):
            branches = float(np.mean(br["branches"][built]))
            per_step = T.mean(br["build"], built) / (K + 1)   # glue step + K branch steps
            kinds.append((f"branch step ({branches:.3g} rows)", 2 * branches / eb,
                          2 * branches * Pd / per_step / 1e9))
    return kinds


def fig_roofline(runs, out_dir):
    chars = [r for r in runs if r.is_characterize]
    if not chars:
        raise Skip("no characterize file among the inputs (ssd-bench characterize --out FILE)")
    char = chars[0]
    copy = float(char.attrs.get("bandwidth_gbps", math.nan))
    # The memory roof is the AR bound's bandwidth: the host's read bandwidth for the cpu backend
    # (decode GEMMs only read their weights), device copy on a GPU; files from before the bound
    # recorded its bandwidth, copy.
    bw = float(char.attrs.get("ar_bound_gbps", copy))
    source = char.attrs.get("ar_bound_bandwidth", "copy bandwidth")
    source = source.decode() if isinstance(source, bytes) else str(source)
    gemm = _gemm_points(char)
    if not math.isfinite(bw) or not gemm:
        raise Skip(f"{char.name} lacks bandwidth_gbps or /gemm measurements")
    eb = element_bytes(char)
    # The compute roof: the host's peak of the instruction the target's GEMMs multiply with (a
    # register-only loop: fp32 FMAs under --compute f32, vdpbf16ps under bf16; files from before
    # --compute have the fp32 FMA peak only) where characterize measured it for the cpu backend,
    # else the best GEMM it timed (a GPU, or files from before the FMA probe).
    best_gemm = max(g for _, g, _ in gemm)
    fma = float(char.attrs.get("compute_peak_gflops", char.attrs.get("host_fma_gflops", math.nan)))
    peak_name = char.attrs.get("compute_peak", "fp32 FMA")
    peak_name = peak_name.decode() if isinstance(peak_name, bytes) else str(peak_name)
    on_cpu = char.attrs.get("backend", "cpu") == "cpu"
    peak = fma if on_cpu and math.isfinite(fma) and fma > 0 else best_gemm
    peak_label = (f"{peak_name} peak {peak:.1f} GFLOP/s" if peak != best_gemm
                  else f"peak {peak:.1f} GFLOP/s (best GEMM)")
    # Run files' forward passes when there are any, else the ones characterize timed itself.
    # A run's rank 0 holds the characterized shard's share of the target where the run has
    # the file's tensor parallelism (and target), else about 1/T of it.
    char_tp = int(char.attrs.get("target_tp", 1))
    full_params = weights_read(char.models.get("target", {}))
    char_share = _target_shard_params(char, eb) / full_params if full_params > 0 else math.nan

    def shard(run):
        tp = int(float(run.config.get("target_tp", 1) or 1))
        same = tp == char_tp and run.target == char.target
        return char_share if same and math.isfinite(char_share) else 1.0 / tp

    kinds = _forward_kinds(runs, eb, shard) or characterize_kinds(char, eb)
    steps = target_row_steps(char, eb)
    xs = [i for i, _, _ in gemm] + [i for _, i, _ in kinds] + [i for _, i, _ in steps]
    lo, hi = min(xs + [0.25]) / 2, max(xs + [peak / bw]) * 4
    x = np.geomspace(lo, hi, 200)
    fig, ax = plt.subplots(figsize=(10.5, 4.8))
    ax.plot(x, np.minimum(peak, bw * x), color="black", linewidth=1.5,
            label=f"roofline: {bw:.1f} GB/s (rank 0's {source}, the AR bound's), {peak_label}")
    # Copy bandwidth (read + write) beside it where it differs: what the harness reported as the
    # roof before the AR bound took the read-only figure.
    if math.isfinite(copy) and abs(copy - bw) > 0.05 * bw:
        ax.plot(x, np.minimum(peak, copy * x), color="black", linewidth=1, linestyle="--",
                label=f"copy bandwidth: {copy:.1f} GB/s ({char.attrs.get('backend', 'cpu')}, "
                      f"rank 0)")
    if len(steps) > 1:
        ax.plot([i for _, i, _ in steps], [g for _, _, g in steps], color="#555555",
                linewidth=1, marker=".", markersize=6,
                label=f"target steps of {steps[0][0]:.3g}-{steps[-1][0]:.3g} rows "
                      f"(characterize, alone; the roof above each is its floor)")
    markers = "os^vP*X"
    kernels = list(dict.fromkeys(k for _, _, k in gemm))
    for n, kernel in enumerate(kernels):
        pts = [(i, g) for i, g, k in gemm if k == kernel]
        best = max(g for _, g in pts)
        ax.scatter(*zip(*pts), marker=markers[n % len(markers)], s=14, color="#999999",
                   alpha=0.8, label=f"GEMM at the models' shapes ({kernel}; best {best:.1f})")
    for n, (label, inten, achieved) in enumerate(kinds):
        color = PALETTE[n % len(PALETTE)]
        ax.scatter([inten], [min(peak, bw * inten)], marker="D", s=40, facecolors="none",
                   edgecolors=color, linewidths=1.5)
        if math.isfinite(achieved):
            ax.scatter([inten], [achieved], marker="D", s=40, color=color,
                       label=f"{label}: {achieved:.2f} GFLOP/s")
            ax.plot([inten, inten], [achieved, min(peak, bw * inten)], color=color,
                    linestyle=":", linewidth=1)
        else:
            ax.scatter([], [], marker="D", color=color, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    weights = "fp32" if eb == 4 else ("bf16" if eb == 2 else f"{eb:g}-byte")
    ax.set_xlabel(f"arithmetic intensity (FLOP / weight byte) = 2 rows P / {eb:g} P  "
                  f"({weights} weights)")
    ax.set_ylabel("GFLOP/s")
    threads = char.attrs.get("threads", "?")
    plural = "" if str(threads) == "1" else "s"
    ax.set_title(f"Roofline of {char.attrs.get('host', '?')} ({threads} thread{plural}); "
                 f"hollow: attainable, filled: achieved", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
