"""Figure 6 (right): SSD against the number of draft ranks D at one batch size.

The paper forecasts it from its hit-rate curves; here the measured runs (ssd-bench
--draft-ranks D, sweeps/fig6-draft-ranks.toml) are drawn beside `ssd-analyze predict`'s
first-principles line for the same machine (the characterize file's step costs) and the same
alpha, r, K, b and fallback as the D = 1 run. Left: decode speedup over AR at that batch size.
Right: what more draft ranks buy, the per-sequence fan-out budget each rank chose and the
cache hit rate, measured and predicted.

A run whose ranks outnumber its host's CPUs (T + D > host_cpus) is drawn hollow
and labelled: its draft ranks took cores from the target, so its tok/s measures the machine's
oversubscription, not D draft devices; its budget and hit rate are still what D ranks chose.

A third panel draws the same prediction for the paper's layout (Llama-3.1-70B on 4 H100s,
Llama-3.2-1B on D more; datasheet profile, predict's own alpha and r for that setting,
predict_inputs.py, not the runs'): on 2 CPU cores the target
verifies b(K+1) rows compute-bound, so at b = 16 SSD may lose to AR here while it wins on GPUs,
where verifying 16 x 6 rows still costs about one memory-bound step.
"""
import math

import matplotlib.pyplot as plt
import numpy as np

from . import predict as P
from . import predict_inputs as PI
from . import predict_cli as PC
from . import predict_validate as PV
from . import hardware as H
from . import measured as MS
from .figures_base import PALETTE, Skip


def _cores(run):
    """Online CPUs of the host the run ran on (root attribute host_cpus), or None."""
    try:
        return int(run.attrs["host_cpus"])
    except (KeyError, TypeError, ValueError):
        return None


def _draft_ranks(run):
    return int(float(run.config.get("draft_ranks", 1) or 1))


def _measured(run):
    """(mean per-sequence budget over the ranks' caches, cache hit rate) of an SSD run."""
    d = run.draft_ranks
    budgets = np.asarray(d.get("budget", []), dtype=float)
    budget = float(budgets[budgets > 0].mean()) if np.any(budgets > 0) else math.nan
    hits = np.asarray(run.rounds.get("outcome_hit", []))
    looked = hits >= 0
    p_hit = float((hits[looked] == 1).mean()) if np.any(looked) else math.nan
    return budget, p_hit


def _curve(t_step, d_step, hw, vocab, run, Ds, alpha, r, alpha_b, r_b, K, max_budget=PI.B_CAP,
           char=None, ctx=None):
    """[(D, SSD/AR, hidden budget, p_hit, budget)] from ssd-analyze predict's model; with
    `char`, SSD's overlapped costs as predict takes them for the pair it measured."""
    out = []
    tp = int(run.config.get("target_tp", 1))
    for D in Ds:
        lay = PI.layout_for(t_step, d_step, hw, vocab, D, collocated=False,
                            beside=PI.beside_steps(run.target, run.draft, char, tp, D, ctx),
                            ssd_round=PI.ssd_round_for(run.target, run.draft, char, tp, D))
        ar = P.predict_ar(lay, run.batch_size, run.temperature)
        ssd = P.predict_ssd(lay, run.batch_size, K, alpha, r, run.fallback,
                            temperature=run.temperature, alpha_b=alpha_b, r_b=r_b,
                            max_budget=max_budget)
        out.append((D, ssd.tok_s / ar.tok_s, ssd.window_fanout_limit, ssd.p_hit,
                    ssd.fanout_total))
    return out


def _predictions(run, char, Ds):
    """ssd-analyze predict's SSD for the run's inputs with D = each of Ds, on this machine
    (the characterize file's step costs) and on the paper's layout (h100-sxm profile)."""
    hw = MS.cpu_profile(char)
    ctx = PV.run_context(run)
    t_step, shape = PI.steps_for(run.target, char, hw, int(run.config.get("target_tp", 1)),
                                  ctx, f"{run.name}: target")
    d_step, _ = PI.steps_for(run.draft, char, hw, 1, ctx, f"{run.name}: draft")
    alpha, r, alpha_b, r_b = PV.run_inputs(run)
    here = _curve(t_step, d_step, hw, shape.vocab, run, Ds, alpha, r, alpha_b, r_b,
                  run.lookahead, char=char, ctx=ctx)
    gpu = H.PROFILES["h100-sxm"]
    t70 = H.RooflineStep(H.shape_of("llama-3.1-70b"), gpu, 4, 1024)
    d1 = H.RooflineStep(H.shape_of("llama-3.2-1b"), gpu, 1, 1024)
    # predict's own inputs for the paper's setting (predict_inputs.py): alpha implied by the
    # paper's SD/AR at K = 5, r measured on the pair; not this CPU run's synthetic r = 2, which
    # saturates any cache at a few branches.
    vocab = H.shape_of("llama-3.1-70b").vocab
    ar, sd, _ = PC.PAPER[("llama-3.1-70b", "llama-3.2-1b", "h100-sxm", 4, 1, 1)]
    paper_alpha = PI.implied_alpha(PI.layout_for(t70, d1, gpu, vocab, 1), sd / ar)
    paper_r = PI.PAIR[0.0][1]
    paper = _curve(t70, d1, gpu, vocab, run, Ds, paper_alpha, paper_r, 0.0, None, PI.PAPER_K)
    return here, paper, alpha, r, (paper_alpha, paper_r)


def fig_draft_ranks(runs, out_dir):
    chars = [r for r in runs if r.is_characterize]
    ssd = [r for r in runs if r.mode == "ssd" and r.has_rounds and r.draft_ranks]
    by_b = {}
    for r in ssd:
        by_b.setdefault(r.batch_size, []).append(r)
    groups = {b: rs for b, rs in by_b.items() if len({_draft_ranks(r) for r in rs}) >= 2}
    if not groups:
        raise Skip("needs SSD runs at one batch size with at least two --draft-ranks values")
    if not chars:
        raise Skip("needs a characterize file for the prediction (ssd-bench characterize)")
    char = chars[0]
    b = max(groups)
    group = sorted(groups[b], key=_draft_ranks)
    ars = [r for r in runs if r.mode == "ar" and r.batch_size == b and r.target == group[0].target]
    if not ars:
        raise Skip(f"needs an AR run at batch size {b} for the speedup")
    ar = ars[0].tok_s
    Ds = list(range(1, max(4, max(_draft_ranks(r) for r in group)) + 1))
    try:
        pred, paper, alpha, r_exp, (paper_alpha, paper_r) = _predictions(group[0], char, Ds)
    except H.InputError as e:
        raise Skip(f"no prediction: {e}")

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.8))
    ax1.plot([p[0] for p in pred], [p[1] for p in pred], "-", color=PALETTE[0],
             label="predicted (ssd-analyze predict, characterize's step costs)")
    for run in group:
        D = _draft_ranks(run)
        tp = int(run.config.get("target_tp", 1))
        cores = _cores(run)
        contended = cores is not None and tp + D > cores
        ax1.plot([D], [run.tok_s / ar], "o", color=PALETTE[1],
                 markerfacecolor="none" if contended else PALETTE[1], markersize=7)
        if contended:
            ax1.annotate(f"{tp + D} ranks\non {cores} cores", (D, run.tok_s / ar), fontsize=7,
                         xytext=(6, -4), textcoords="offset points")
    ax1.plot([], [], "o", color=PALETTE[1], label="measured (hollow: oversubscribed)")
    ax1.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    ax1.set_xlabel("draft ranks D")
    ax1.set_ylabel(f"SSD speedup over AR at b = {b}")
    ax1.set_xticks(Ds)
    ax1.set_title(f"This machine: {group[0].target.removeprefix('synthetic:')} + "
                  f"{group[0].draft.removeprefix('synthetic:')},\nK={group[0].lookahead}, "
                  f"fallback {group[0].fallback}", fontsize=9)
    low = min([p[1] for p in pred] + [run.tok_s / ar for run in group])
    ax1.set_ylim(min(0.9, 0.85 * low), max(1.1, 1.15 * max(p[1] for p in pred)))
    ax1.legend(fontsize=7, loc="upper left")

    measured = [(_draft_ranks(run), *_measured(run)) for run in group]
    ax2.plot([p[0] for p in pred], [p[2] for p in pred], "-", color=PALETTE[2],
             label="predicted budget hidden by verification")
    ax2.plot([m[0] for m in measured], [m[1] for m in measured], "s", color=PALETTE[2],
             label="measured budget (--budget auto, mean)")
    ax2.set_xlabel("draft ranks D")
    ax2.set_ylabel("per-sequence fan-out budget")
    ax2.set_xticks(Ds)
    hit = ax2.twinx()
    hit.plot([p[0] for p in pred], [p[3] for p in pred], "--", color=PALETTE[3],
             label="predicted p_hit (best budget)")
    hit.plot([m[0] for m in measured], [m[2] for m in measured], "D", color=PALETTE[3],
             label="measured p_hit")
    hit.set_ylabel("cache hit rate")
    hit.set_ylim(0, 1)
    lines = ax2.get_legend_handles_labels()
    more = hit.get_legend_handles_labels()
    ax2.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="lower right")
    ax2.set_title(f"This machine: b/D rows per rank,\nbudget and p_hit vs D "
                  f"(alpha={alpha:.2f}, r={r_exp:.2f})", fontsize=9)

    ax3.plot([p[0] for p in paper], [p[1] for p in paper], "-o", color=PALETTE[0],
             markerfacecolor="none", label="SSD / AR, predicted")
    ax3.set_xlabel("draft GPUs D")
    ax3.set_ylabel(f"SSD speedup over AR at b = {b}")
    ax3.set_xticks(Ds)
    ax3.set_title("The paper's layout, predicted: Llama-3.1-70B on 4 H100s\n"
                  f"+ Llama-3.2-1B on D GPUs, K=5, alpha={paper_alpha:.2f} (the paper's SD/AR),\n"
                  f"r={paper_r:.1f} (the pair's), budget <= {PI.B_CAP} (datasheet profile)",
                  fontsize=9)
    ax3.set_ylim(1.0, 1.15 * max(p[1] for p in paper))
    ax3.set_xlim(Ds[0] - 0.3, Ds[-1] + 0.45)  # room for the last point's B and p
    ax3.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    for D, speedup, window, p_hit, budget in paper:
        ax3.annotate(f"B={budget}\np={p_hit:.2f}", (D, speedup), fontsize=7,
                     xytext=(4, -16), textcoords="offset points")
    ax3.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"SSD with more draft ranks at batch size {b} (Fig. 6 right): budget and hit "
                 "rate grow with D; speed follows where draft ranks have hardware of their own")
    return fig
