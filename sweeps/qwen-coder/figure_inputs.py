#!/usr/bin/python3
"""figure_inputs.py SET_DIR: the figures' inputs that results/qwen2.5-coder/README.md quotes, per
temperature or batch size, from the runs of the set's sweeps (SET_DIR/SWEEP/runs/*.h5):

  fig4-temperature   per SSD shape and for SD: alpha (the paper's per-token acceptance, the
                     capped-geometric MLE, ssd_analysis.metrics.alpha_mle), mean acceptance
                     length, /summary's acceptance_rate (accepted / drafted, for contrast),
                     p_hit, the per-sequence budget the cache was built with, T_p (cache build
                     / verification) or T_SD, tok/s and the speedup over the AR run
  fig3-fanout        the power-law r after a primary and after a backup speculation, in the
                     harness's (F+1)^-r law (with its standard error) and in the paper's
                     c F^-r, both by maximum likelihood on the ranks, and p_hit at F = 1-8
  fig5-saguaro-c     alpha, p_hit at an equal cache of F_k = 2 and as built, the cache size as
                     built, per C
  fig6-fallback      per batch size: AR, SSD with the primary and with the backup fallback
                     (tok/s, p_hit, T_jit = the just-in-time draft / verification, E_hit,
                     E_miss), and Theorem 17's b* from the pooled constants
  fig7-batch         per batch size: AR, SD and SSD tok/s, the speedups, and SSD's own
                     choices (K, budget) with p_hit, T_p and alpha
  budget-auto        --budget auto beside fixed budgets: the budget built, p_hit, T_p, tok/s
Run by scripts/make-results.sh --set qwen2.5-coder into SET_DIR/numbers.txt."""
import glob
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "analysis"))
from ssd_analysis import figures_cache  # noqa: E402
from ssd_analysis import io  # noqa: E402
from ssd_analysis import metrics as M  # noqa: E402
from ssd_analysis import runstats as RS  # noqa: E402


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
    fig4_conditions(runs)


def fig4_conditions(runs):
    """Theorem 18's two conditions per SSD run: rounds that rejected at k < K and rounds that
    accepted all K, each with its hit rate, its bonus ranks' r (maximum likelihood) and the
    share of its bonuses in the draft's top 2; uniform:2's hit rate on the run's own rounds;
    and the cache shape the run built most often."""
    print("Theorem 18's conditions (looked-up rounds): after a rejection | after all K accepted")
    print(f"{'T':>4} {'run':<16} {'n':>3} {'p_hit':>6} {'r':>5} {'top2':>5} | {'n':>3} "
          f"{'p_hit':>6} {'r':>5} {'top2':>5} | {'uni:2':>5} | most common shape (rounds)")
    for r in sorted((r for r in runs if r.mode == "ssd"), key=lambda r: (r.temperature, r.fanout)):
        rd, K = r.rounds, max(r.lookahead, 1)
        looked = rd["outcome_hit"] >= 0
        cells = []
        for sel in (rd["accepted"] < K, rd["accepted"] >= K):
            m = looked & sel
            ranks = rd["bonus_rank"][m]
            fit, _ = M.fit_power_law_mle(ranks) if np.any(m) else (math.nan, math.nan)
            top2 = float(np.mean((ranks >= 1) & (ranks <= 2))) if np.any(m) else math.nan
            hit = float(np.mean(rd["outcome_hit"][m])) if np.any(m) else math.nan
            cells.append(f"{int(np.sum(m)):>3} {f(hit):>6} {f(fit, '.2f'):>5} {f(top2, '.2f'):>5}")
        shapes, counts = np.unique(rd["fanout"][looked], axis=0, return_counts=True)
        common = (f"({', '.join(str(int(x)) for x in shapes[np.argmax(counts)])}) "
                  f"({int(counts.max())}/{int(np.sum(looked))})") if len(counts) else "-"
        # uni:2 = the hit rate of a uniform cache of 2 on these same rounds (paired: a hit is
        # rank <= F_k whatever was cached, M.hits_at_shape)
        paired = float(np.mean(M.looked_up_hits_at_shape(rd, [2] * (K + 1)))) \
            if np.any(looked) else math.nan
        print(f"{r.temperature:>4g} {'SSD ' + r.fanout:<16} {cells[0]} | {cells[1]} | "
              f"{f(paired):>5} | {common}")


def fig3(runs):
    print("\n## fig3-fanout: r of miss(F) = (F+1)^-r (harness) and of the paper's c F^-r, by "
          "maximum likelihood on the rounds' bonus ranks (censored beyond 64)")
    print(f"{'T':>4} {'after':<8} {'n':>4} {'r':>5} {'+-se':>5} {'paper':>5} "
          + " ".join(f"{'p_hit(' + str(x) + ')':>9}" for x in (1, 2, 4, 8)))
    fan = figures_cache.FANOUTS
    for r in sorted((r for r in runs if r.mode == "ssd"), key=lambda r: r.temperature):
        rd = r.rounds
        looked = rd["outcome_hit"] >= 0
        backup = rd["source"] == M.SOURCE_BACKUP
        for name, sel in (("primary", looked & ~backup), ("backup", looked & backup)):
            ranks = rd["bonus_rank"][sel]
            miss = M.miss_rate_curve(ranks, fan)
            fit, se = M.fit_power_law_mle(ranks)
            print(f"{r.temperature:>4g} {name:<8} {ranks.size:>4} {f(fit, '.2f'):>5} "
                  f"{f(se, '.2f'):>5} {f(M.fit_power_law_paper_mle(ranks), '.2f'):>5} "
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


def fig6(runs):
    print("\n## fig6-fallback: K = 2, greedy, 64 tokens per sequence; T_jit = just-in-time "
          "draft / verification")
    print(f"{'b':>3} {'AR':>6} {'fallback':<8} {'tok/s':>6} {'xAR':>5} {'p_hit':>6} "
          f"{'T_jit':>6} {'E_hit':>6} {'E_miss':>6} {'misses':>6}")
    ar = {r.batch_size: r.tok_s for r in runs if r.mode == "ar"}
    ssd = sorted((r for r in runs if r.mode == "ssd"), key=lambda r: (r.batch_size, r.fallback))
    stats = [RS.ssd_stats(r) for r in ssd]
    for r, st in zip(ssd, stats):
        misses = st["n_jit"] if r.fallback == "primary" else st["n_backup"]
        e_miss = st["e_miss_primary"] if r.fallback == "primary" else st["e_miss_backup"]
        print(f"{r.batch_size:>3} {f(ar.get(r.batch_size), '.2f'):>6} {r.fallback:<8} "
              f"{r.tok_s:>6.2f} {f(r.tok_s / ar.get(r.batch_size, math.nan), '.2f'):>5} "
              f"{f(st['p']):>6} {f(st['t_jit'] if r.fallback == 'primary' else math.nan):>6} "
              f"{f(st['e_hit'], '.2f'):>6} {f(e_miss, '.2f'):>6} {misses:>6}")
    bstar, inputs = RS.theorem17(stats)
    if inputs:
        print(f"Theorem 17, pooled by rounds: p_hit {inputs['p']:.3f}, E_hit "
              f"{inputs['e_hit']:.2f}, T_jit {inputs['t_slow']:.3f}, backup E_miss "
              f"{inputs['e_fast']:.2f}: b* = {bstar:.2f}")


def fig7(runs):
    print("\n## fig7-batch: greedy, 64 tokens per sequence; SD K = 4; SSD's own choices")
    print(f"{'b':>3} {'AR':>6} {'SD':>6} {'SSD':>6} {'SD/AR':>5} {'SSD/AR':>6} {'SSD/SD':>6} "
          f"{'K':>2} {'budget':>6} {'p_hit':>6} {'T_p':>5} {'alpha':>6}")
    by_b = {}
    for r in runs:
        by_b.setdefault(r.batch_size, {})[r.mode] = r
    for b in sorted(by_b):
        m = by_b[b]
        ar, sd, ssd = (m.get(k) for k in ("ar", "sd", "ssd"))
        tok = {k: (x.tok_s if x else math.nan) for k, x in (("ar", ar), ("sd", sd), ("ssd", ssd))}
        budget = alpha = math.nan
        if ssd is not None:
            rd = ssd.rounds
            looked = rd["outcome_hit"] >= 0
            budget = float(np.mean(rd["budget"][looked])) if np.any(looked) else math.nan
            alpha = speculative(ssd)[0]
        print(f"{b:>3} {tok['ar']:>6.2f} {tok['sd']:>6.2f} {tok['ssd']:>6.2f} "
              f"{tok['sd'] / tok['ar']:>5.2f} {tok['ssd'] / tok['ar']:>6.2f} "
              f"{tok['ssd'] / tok['sd']:>6.2f} {ssd.lookahead if ssd else '-':>2} "
              f"{f(budget, '.1f'):>6} {f(ssd.summary.get('p_hit') if ssd else None):>6} "
              f"{f(ssd.summary.get('t_p') if ssd else None, '.2f'):>5} {f(alpha):>6}")


def budget_auto(runs):
    print("\n## budget-auto: SSD at K = 2, batch 1, greedy, 2 tasks x 128 tokens")
    print(f"{'--budget':>8} {'built':>6} {'p_hit':>6} {'T_p':>5} {'tok/s':>6} {'xAR':>5}")
    ar = next((r.tok_s for r in runs if r.mode == "ar"), math.nan)
    ssd = [r for r in runs if r.mode == "ssd"]
    def fixed(r):   # auto first, then the fixed budgets in order
        budget = r.config.get("budget", "auto")
        return (budget != "auto", 0 if budget == "auto" else int(budget))
    for r in sorted(ssd, key=fixed):
        rd = r.rounds
        looked = rd["outcome_hit"] >= 0
        built = float(np.mean(rd["budget"][looked])) if np.any(looked) else math.nan
        print(f"{r.config.get('budget'):>8} {f(built, '.1f'):>6} "
              f"{f(r.summary.get('p_hit')):>6} {f(r.summary.get('t_p'), '.2f'):>5} "
              f"{r.tok_s:>6.2f} {r.tok_s / ar:>5.2f}")
    print(f"AR {ar:.2f} tok/s")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: figure_inputs.py SET_DIR")
    for sweep, fn in (("fig4-temperature", fig4), ("fig3-fanout", fig3),
                      ("fig5-saguaro-c", fig5), ("fig6-fallback", fig6),
                      ("fig7-batch", fig7), ("budget-auto", budget_auto)):
        runs = load(sys.argv[1], sweep)
        if runs:
            fn(runs)
        else:
            print(f"\n## {sweep}: no runs")


if __name__ == "__main__":
    main()
