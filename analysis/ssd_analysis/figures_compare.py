"""`ssd-analyze compare`'s roofline: every machine's roofs and measured points on one axes, a
colour per machine (compare.py). Each machine is drawn from its first characterize file, as
figures_detail.fig_roofline draws one: the memory roof is the AR bound's bandwidth, the
compute roof the peak of the target's compute mode (solid) with the other mode's peak dashed
where it was measured; on a GPU, the best GEMM. Points: the target's steps of 1 to 20 rows
timed alone (a line) and the forward passes characterize timed (AR step, verification, draft
and branch steps: diamonds)."""
import math
import os

import matplotlib.pyplot as plt
import numpy as np

from . import figures_detail as FD
from .figures_base import PALETTE


def roofs(char):
    """(memory GB/s, [(label, GFLOP/s, main)]) of one characterize file: `main` marks the peak
    the target's GEMMs run at."""
    a = char.attrs
    bw = float(a.get("ar_bound_gbps", a.get("bandwidth_gbps", math.nan)))
    gflops = np.asarray(char.gemm.get("gflops", [math.nan]), float)
    if a.get("backend", "cpu") != "cpu" or "host_fma_gflops" not in a:
        return bw, [("best GEMM", float(np.nanmax(gflops)), True)]
    used = str(a.get("compute_peak", "fp32 FMA"))
    peaks = [("fp32 FMA", float(a["host_fma_gflops"]), used == "fp32 FMA")]
    if "host_bf16_dot_gflops" in a:
        peaks.append(("bf16 dot-product", float(a["host_bf16_dot_gflops"]),
                      used == "bf16 dot-product"))
    return bw, peaks


def fig_roofline_machines(machines):
    fig, ax = plt.subplots(figsize=(10.5, 5.0))
    xs = [0.25]
    drawn = []
    for n, m in enumerate(machines):
        char = next((f for f in m.files if f.is_characterize), None)
        if char is None:
            continue
        eb = FD.element_bytes(char)
        bw, peaks = roofs(char)
        steps = FD.target_row_steps(char, eb)
        kinds = FD.characterize_kinds(char, eb)
        xs += [i for _, i, _ in steps] + [i for _, i, _ in kinds]
        xs += [p / bw for _, p, _ in peaks if bw > 0]
        drawn.append((n, m, char, bw, peaks, steps, kinds))
    x = np.geomspace(min(xs) / 2, max(xs) * 4, 200)
    for n, m, char, bw, peaks, steps, kinds in drawn:
        color = PALETTE[n % len(PALETTE)]
        name = f"{n + 1}: {m.label()}"
        for label, peak, main in peaks:
            ax.plot(x, np.minimum(peak, bw * x), color=color,
                    linewidth=1.6 if main else 0.9, linestyle="-" if main else "--",
                    label=f"{name}: {bw:.1f} GB/s, {label} {peak:.1f} GFLOP/s"
                          + ("" if main else " (other compute mode)"))
        if steps:
            ax.plot([i for _, i, _ in steps], [g for _, _, g in steps], color=color,
                    marker=".", linewidth=0.8, markersize=6,
                    label=f"{name}: target steps of {steps[0][0]:.3g}-{steps[-1][0]:.3g} rows")
        for label, inten, achieved in kinds:
            ax.scatter([inten], [achieved], marker="D", s=30, color=color)
        if kinds:
            ax.scatter([], [], marker="D", s=30, color=color,
                       label=f"{name}: " + ", ".join(dict.fromkeys(k.split(" (")[0]
                                                            for k, _, _ in kinds)))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / weight byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("Rooflines of the machines compared (each machine's first characterize "
                 "file; rank 0)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def save_roofline(machines, out_dir):
    """Writes roofline_machines.png and .pdf; returns their names."""
    fig = fig_roofline_machines(machines)
    names = []
    for ext in ("png", "pdf"):
        names.append(f"roofline_machines.{ext}")
        fig.savefig(os.path.join(out_dir, names[-1]), bbox_inches="tight")
    plt.close(fig)
    return names
