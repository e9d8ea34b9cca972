"""`ssd-analyze figures`: the paper's figures from whatever runs are given.

Each figure is written as NAME.png and NAME.pdf; a figure whose inputs are not among the files
is skipped with a printed reason. Figures (paper numbering):
  fig7_speedup      AR / SD / SSD speedup per configuration (Figure 7 left)
  fig7_pareto       throughput vs per-sequence latency over batch sizes, Pareto frontier (7 right)
  fig3_fanout       cache-miss rate vs fan-out F from bonus ranks, power-law fits (Figure 3;
                    figures_cache.py)
  fig4_temperature  hit rate and tok/s vs temperature, uniform vs geometric fan-out (Figure 4;
                    figures_cache.py)
  fig5_saguaro_c    acceptance rate vs hit rate over Saguaro's C (Figure 5 left;
                    figures_cache.py)
  fig6_fallback     primary vs backup fallback over batch sizes, Theorem 17's b* (Figure 6 left;
                    figures_fallback.py)
  fig6_draft_ranks  SSD vs number of draft ranks at one batch size, measured and predicted
                    (Figure 6 right; figures_scale.py)
  timeline          per-round Gantt chart of the ranks of one run (figures_detail.py)
  roofline          forward kinds on the characterized machine's roofline (figures_detail.py)
"""
import math
import os
from collections import OrderedDict

import matplotlib.pyplot as plt

from . import figures_cache as C
from . import figures_detail as D
from . import figures_fallback as FB
from . import figures_scale as S
from . import metrics as M
from . import validate as V
from .figures_base import (MODE_COLORS, PALETTE, Skip,  # and: the Agg backend, the style
                           model_name, short)

MARKERS = {"ar": "s", "sd": "o", "ssd": "^"}


def save(fig, out_dir, name):
    paths = [os.path.join(out_dir, f"{name}.{ext}") for ext in ("png", "pdf")]
    for p in paths:
        fig.savefig(p)
    plt.close(fig)
    return paths


def group_title(key):
    target, b, temp, n, _ = key
    return f"{model_name(target)}\nb={b} T={temp:g} n={n}"


# --- (a) Figure 7 left -----------------------------------------------------------------------

def fig_speedup(runs, out_dir):
    groups = sorted(((k, g) for k, g in V.group_runs(runs).items()
                     if any(r.mode == "ar" for r in g) and any(r.mode != "ar" for r in g)),
                    key=lambda kg: (str(kg[0][0]), kg[0][2], kg[0][3], kg[0][1]))
    if not groups:
        raise Skip("needs an AR run and an SD/SSD run of the same sweep")
    labels = sorted(OrderedDict.fromkeys(r.label() for _, g in groups for r in g),
                    key=lambda l: ("AR", "SD", "SSD").index(l.split()[0]))
    per_group = max(len({r.label() for r in g}) for _, g in groups)
    fig, ax = plt.subplots(figsize=(max(5.5, 2.0 + 0.45 * per_group * len(groups)), 4.2))
    width = 0.8 / per_group
    values, seen = [], set()
    for gi, (key, members) in enumerate(groups):
        ar = next(r for r in members if r.mode == "ar")
        present = [l for l in labels if any(r.label() == l for r in members)]
        for li, label in enumerate(present):
            run = next(r for r in members if r.label() == label)
            s = run.tok_s / ar.tok_s
            rel = math.hypot(run.tok_s_std / run.tok_s, 0 if run is ar else
                             ar.tok_s_std / ar.tok_s)
            x = gi + width * (li - (len(present) - 1) / 2)
            ax.bar(x, s, width, color=_label_color(label, labels), edgecolor="black",
                   linewidth=0.5, label=None if label in seen else label)
            ax.errorbar(x, s, yerr=[[min(s * rel, 0.9 * s)], [s * rel]], color="black",
                        capsize=2, linewidth=0.8)
            ax.annotate(f"{s:.3g}x" + (f"\nK={run.lookahead}" if run.lookahead_auto else ""),
                        (x, s * (1 + rel)), xytext=(0, 2),
                        textcoords="offset points", ha="center", fontsize=7)
            seen.add(label)
            values.append(s)
    if min(values) < 0.05:
        ax.set_yscale("log")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(groups)), [group_title(k) for k, _ in groups], fontsize=8)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylabel("decode speedup over AR (tok/s ratio)")
    ax.set_title("Decoding speed relative to AR (Fig. 7 left)\nerror bars: std over repetitions")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def _label_color(label, labels):
    """Grey for AR, blues for SD configurations, reds for SSD ones."""
    if label == "AR":
        return MODE_COLORS["ar"]
    mode = label.split()[0]
    same = [l for l in labels if l.split()[0] == mode]
    shades = {"SD": ["#1f77b4", "#6baed6", "#08519c", "#9ecae1"],
              "SSD": ["#d62728", "#fd8d3c", "#a50f15", "#fdae6b", "#e7298a"]}.get(mode, PALETTE)
    return shades[same.index(label) % len(shades)]


# --- (b) Figure 7 right ----------------------------------------------------------------------

def fig_pareto(runs, out_dir):
    pts = [r for r in runs if r.mode in ("ar", "sd", "ssd")
           and math.isfinite(r.tok_s) and math.isfinite(r.ms_per_token)]
    if len(pts) < 2 or len({r.batch_size for r in pts}) < 2:
        raise Skip("needs runs at two or more batch sizes")
    fig, ax = plt.subplots(figsize=(8.5, 4.4))
    series = OrderedDict()
    pts.sort(key=lambda r: ("ar", "sd", "ssd").index(r.mode))
    for r in pts:
        series.setdefault((r.mode, r.label(), short(r.target), r.temperature, r.max_new_tokens),
                          []).append(r)
    labels = list(OrderedDict.fromkeys(k[1] for k in series))
    many_n = len({k[4] for k in series}) > 1
    styles = {n: st for n, st in zip(sorted({k[3:] for k in series}), ["-", "--", ":", "-."] * 9)}
    for (mode, label, target, temp, n), rs in series.items():
        rs.sort(key=lambda r: r.batch_size)
        ax.plot([r.ms_per_token for r in rs], [r.tok_s for r in rs], marker=MARKERS[mode],
                color=_label_color(label, labels), linewidth=1, linestyle=styles[(temp, n)],
                label=f"{label} ({target}, T={temp:g}" + (f", n={n})" if many_n else ")"))
        for r in rs:
            ax.annotate(f"b={r.batch_size}", (r.ms_per_token, r.tok_s), xytext=(4, -3),
                        textcoords="offset points", fontsize=7)
    lat = [r.ms_per_token for r in pts]
    thr = [r.tok_s for r in pts]
    if max(lat) / min(lat) > 20 or max(thr) / min(thr) > 20:
        ax.set_xscale("log")
        ax.set_yscale("log")
    # one frontier per (target, temperature): only those runs are comparable
    fronts = OrderedDict()
    for r in pts:
        fronts.setdefault((short(r.target), r.temperature, r.max_new_tokens), []).append(r)
    for i, ((target, temp, n), rs) in enumerate(fronts.items()):
        front = M.pareto_frontier([r.ms_per_token for r in rs], [r.tok_s for r in rs])
        ax.step([rs[i].ms_per_token for i in front], [rs[i].tok_s for i in front], where="post",
                color="black", linestyle=["--", ":", "-."][i % 3], linewidth=1.2, alpha=0.7,
                label=f"Pareto frontier ({target}, T={temp:g}" + (f", n={n})" if many_n
                                                                   else ")"))
    ax.set_xlabel("per-sequence latency (ms / token)")
    ax.set_ylabel("throughput (decode tok/s, whole batch)")
    ax.set_title("Throughput vs latency over batch sizes (Fig. 7 right)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


FIGURES = [("fig7_speedup", fig_speedup), ("fig7_pareto", fig_pareto),
           ("fig3_fanout", C.fig_fanout), ("fig4_temperature", C.fig_temperature),
           ("fig5_saguaro_c", C.fig_saguaro_c)]


def make_all(runs, out_dir, out, timeline_run=None):
    """Writes every figure whose inputs exist; prints one line per figure; returns paths."""
    figures = FIGURES + [("fig6_fallback", FB.fig_fallback),
                         ("fig6_draft_ranks", S.fig_draft_ranks),
                         ("timeline", lambda rs, d: D.fig_timeline(rs, d, timeline_run)),
                         ("roofline", D.fig_roofline)]
    written = []
    for name, fn in figures:
        try:
            fig = fn(runs, out_dir)
        except Skip as e:
            out(f"{name}: skipped ({e})")
            continue
        paths = save(fig, out_dir, name)
        written += paths
        out(f"{name}: {' '.join(paths)}")
    return written
