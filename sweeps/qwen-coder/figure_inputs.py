#!/usr/bin/python3
"""figure_inputs.py SET_DIR: the figures' inputs that results/qwen2.5-coder/README.md quotes, per
temperature, from the runs of the set's three sweeps (SET_DIR/SWEEP/runs/*.h5):

  fig4-temperature   per SSD shape and for SD: alpha (the paper's per-token acceptance, the
                     capped-geometric MLE, ssd_analysis.metrics.alpha_mle), mean acceptance
                     length, /summary's acceptance_rate (accepted / drafted, for contrast),
                     p_hit, the per-sequence budget the cache was built with, T_p (cache build
                     / verification) or T_SD, tok/s and the speedup over the AR run
  fig3-fanout        the fitted power-law r after a primary and after a backup speculation,
                     in the harness's (F+1)^-r law and as the paper's F^-r slope, and p_hit at
                     F = 1, 2, 4, 8
  fig5-saguaro-c     alpha, p_hit at an equal cache of F_k = 2 and as built, the cache size as
                     built, per C
Run by scripts/make-results.sh --set qwen2.5-coder into SET_DIR/numbers.txt."""
import glob
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "analysis"))
from ssd_analysis import figures as F  # noqa: E402
from ssd_analysis import io  # noqa: E402
from ssd_analysis import metrics as M  # noqa: E402


def load(set_dir, sweep):
    runs, errors = io.load_runs(sorted(glob.glob(os.path.join(set_dir, sweep, "runs", "*.h5"))))
    for e in errors:
        print(f"figure_inputs.py: {e}", file=sys.stderr)
    return runs


def f(x, spec=".3f"):
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def speculative(run):
    """alpha and acceptance length over the rounds the primary drafted (SD: every round)."""
    rd = run.rounds
    primary = rd["source"] != M.SOURCE_BACKUP
    acc = rd["accepted"][primary]
    return M.alpha_mle(acc, rd["drafted"][primary]), 1.0 + float(np.mean(acc))


def fig4(runs):
    ar = {r.temperature: r.tok_s for r in runs if r.mode == "ar"}
    print("## fig4-temperature: K = 3, b = 1, 3 coding tasks x 48 tokens")
    print(f"{'T':>4} {'run':<16} {'alpha':>6} {'acc.len':>7} {'acc.rate':>8} {'p_hit':>6} "
          f"{'budget':>6} {'T_p|T_SD':>8} {'rounds':>6} {'tok/s':>6} {'xAR':>5}")
    for r in sorted((r for r in runs if r.mode != "ar"),
                    key=lambda r: (r.temperature, r.mode, r.fanout)):
        alpha, length = speculative(r)
        rd = r.rounds
        looked = rd["outcome_hit"] >= 0 if r.mode == "ssd" else np.zeros(0, bool)
        budget = float(np.mean(rd["budget"][looked])) if np.any(looked) else math.nan
        t = r.summary.get("t_p" if r.mode == "ssd" else "t_sd", math.nan)
        name = "SD" if r.mode == "sd" else f"SSD {r.fanout}"
        print(f"{r.temperature:>4g} {name:<16} {f(alpha):>6} {f(length, '.2f'):>7} "
              f"{f(r.summary.get('acceptance_rate'), '.3f'):>8} "
              f"{f(r.summary.get('p_hit', math.nan), '.3f'):>6} {f(budget, '.1f'):>6} "
              f"{f(t, '.2f'):>8} {len(rd['accepted']):>6} {r.tok_s:>6.2f} "
              f"{f(r.tok_s / ar.get(r.temperature, math.nan), '.2f'):>5}")
    print("AR tok/s: " + ", ".join(f"T={t:g} {v:.2f}" for t, v in sorted(ar.items())))


def fig3(runs):
    print("\n## fig3-fanout: r of miss(F) = (F+1)^-r (harness) and the paper's F^-r slope")
    print(f"{'T':>4} {'after':<8} {'n':>4} {'r':>5} {'slope':>5} "
          + " ".join(f"{'p_hit(' + str(x) + ')':>9}" for x in (1, 2, 4, 8)))
    fan = F.FANOUTS
    for r in sorted((r for r in runs if r.mode == "ssd"), key=lambda r: r.temperature):
        rd = r.rounds
        looked = rd["outcome_hit"] >= 0
        backup = rd["source"] == M.SOURCE_BACKUP
        for name, sel in (("primary", looked & ~backup), ("backup", looked & backup)):
            ranks = rd["bonus_rank"][sel]
            miss = M.miss_rate_curve(ranks, fan)
            counts = np.full(fan.shape, ranks.size)
            print(f"{r.temperature:>4g} {name:<8} {ranks.size:>4} "
                  f"{f(M.fit_power_law(fan, miss, counts), '.2f'):>5} "
                  f"{f(M.fit_power_law_paper(fan, miss, counts), '.2f'):>5} "
                  + " ".join(f"{1 - miss[x - 1]:>9.3f}" for x in (1, 2, 4, 8)))


def fig5(runs):
    print("\n## fig5-saguaro-c: T = 1, uniform:2 at K = 3 (a cache of 8 per sequence)")
    print(f"{'C':>5} {'alpha':>6} {'acc.len':>7} {'p_hit@8':>7} {'p_hit':>6} {'built':>6} "
          f"{'lookups':>7} {'tok/s':>6}")
    for r in sorted((r for r in runs if r.mode == "ssd"), key=lambda r: r.saguaro_c):
        c = M.cache_stats(r.rounds, r.fanout, r.lookahead)
        print(f"{r.saguaro_c:>5g} {f(c['alpha']):>6} {f(speculative(r)[1], '.2f'):>7} "
              f"{f(c['p_shape']):>7} {f(c['p_built']):>6} {f(c['built'], '.2f'):>6} "
              f"{c['lookups']:>7} {r.tok_s:>6.2f}")
    print("p_hit@8: a cache of F_k = 2 at every k (bonus ranks); p_hit, built: the cache the "
          "run built and its mean size")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: figure_inputs.py SET_DIR")
    for sweep, fn in (("fig4-temperature", fig4), ("fig3-fanout", fig3),
                      ("fig5-saguaro-c", fig5)):
        runs = load(sys.argv[1], sweep)
        if runs:
            fn(runs)
        else:
            print(f"\n## {sweep}: no runs")


if __name__ == "__main__":
    main()
