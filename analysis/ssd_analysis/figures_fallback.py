"""Figure 6 (left): SSD's fallback on a cache miss, primary (drafted just in time) vs backup,
across batch sizes, with Theorem 17's b* from the runs' pooled constants and a panel that checks
the theorem's premise (the just-in-time cost, in verifications, the same at every b)."""
import math

import matplotlib.pyplot as plt
import numpy as np

from . import metrics as M
from . import validate as V
from .figures_base import PALETTE, Skip, speculative


def fig_fallback(runs, out_dir):
    ssd = [r for r in speculative(runs, "ssd") if r.fallback in ("primary", "backup")]
    kinds = {r.fallback for r in ssd}
    if kinds != {"primary", "backup"}:
        raise Skip("needs SSD runs with --fallback primary and with --fallback backup")
    stats = [V.ssd_stats(r) for r in ssd]
    bstar, inputs = V.theorem17(stats)
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 3.9))
    for kind, color in (("primary", PALETTE[0]), ("backup", PALETTE[1])):
        by_b = {}
        for r in ssd:
            if r.fallback == kind:
                by_b.setdefault(r.batch_size, []).append(r.tok_s)
        bs = sorted(by_b)
        name = "primary (just in time)" if kind == "primary" else \
            f"backup ({next(r.backup for r in ssd if r.fallback == 'backup')})"
        ax1.plot(bs, [np.mean(by_b[b]) for b in bs], "o-", color=color, label=name)
    bmax = max(r.batch_size for r in ssd)
    _fallback_premise(ax3, ssd, stats, inputs)
    for ax in (ax1, ax2, ax3):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size b")
        ax.set_xlim(0.8, 1.25 * max(bmax, 2 * bstar if 1 <= bstar < math.inf else bmax))
        if 1 <= bstar < math.inf:
            ax.axvline(bstar, color="black", linestyle=":", linewidth=1)
            ax.annotate(f"b* = {bstar:.2f}", (bstar, 0.95), xycoords=("data", "axes fraction"),
                        xytext=(4, 0), textcoords="offset points", fontsize=8)
    ax1.set_ylabel("decode tok/s (whole batch)")
    ax1.set_title("Measured")
    ax1.legend(fontsize=8)
    if inputs:
        bs = np.geomspace(1, max(bmax, 2 * bstar if 1 <= bstar < math.inf else bmax), 60)
        p, e_hit, t_slow, e_fast = inputs["p"], inputs["e_hit"], inputs["t_slow"], \
            inputs["e_fast"]
        ax2.plot(bs, [M.speedup_slow_backup(p, e_hit, t_slow, b) for b in bs], color=PALETTE[0],
                 label=f"primary: E_hit/(1+T_p-T_p p^b), T_p={t_slow:.2f}")
        ax2.plot(bs, [M.speedup_fast_backup(p, e_hit, e_fast, b) for b in bs], color=PALETTE[1],
                 label=f"backup: p E_hit+(1-p) E_miss, E_miss={e_fast:.2f}")
        verdict = f", b*={bstar:.2f}" if 1 <= bstar < math.inf else (
            f", b*={bstar:.2f} < 1: backup better at every b" if bstar < 1 else
            ": primary better at every b")
        ax2.set_title(f"Theorem 17 model (p_hit={p:.2f}, E_hit={e_hit:.2f})\n{verdict[2:]}",
                      fontsize=9)
        ax2.legend(fontsize=7)
    else:
        ax2.text(0.5, 0.5, "b* needs just-in-time and backup misses", ha="center",
                 transform=ax2.transAxes)
    ax2.set_ylabel("speedup over AR, verification = 1")
    fig.suptitle("Primary vs backup fallback across batch sizes (Fig. 6 left)")
    return fig


def _fallback_premise(ax, ssd, stats, inputs):
    """Theorem 17 holds T_p, the just-in-time draft's cost in verifications, constant over b;
    the primary runs' measured T_jit at each b shows whether this machine keeps it so."""
    by_b = {}
    for r, st in zip(ssd, stats):
        if r.fallback == "primary" and math.isfinite(st["t_jit"]) and st["n_jit"] > 0:
            by_b.setdefault(r.batch_size, []).append(st["t_jit"])
    bs = sorted(by_b)
    t = [float(np.mean(by_b[b])) for b in bs]
    ax.plot(bs, t, "o-", color=PALETTE[0], label="measured T_jit (primary runs)")
    if inputs:
        ax.axhline(inputs["t_slow"], color="black", linestyle="--", linewidth=1,
                   label=f"Theorem 17's constant: pooled {inputs['t_slow']:.3f}")
    ax.set_ylabel("just-in-time draft / verification")
    ax.set_ylim(0, 1.15 * max(t + [inputs.get("t_slow", 0) if inputs else 0, 1e-3]))
    title = "Theorem 17's premise: T_p constant over b"
    if len(t) >= 2 and min(t) > 0 and max(t) / min(t) > 1.5:
        title += (f"\nmeasured {t[0]:.3f} (b={bs[0]}) to {t[-1]:.3f} (b={bs[-1]}), "
                  f"{max(t) / min(t):.1f}x apart: it fails here")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
