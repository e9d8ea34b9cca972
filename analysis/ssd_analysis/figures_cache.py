"""The figures of the SAGUARO cache (`ssd-analyze figures`, drawn through figures.py's list):
  fig3_fanout       cache-miss rate vs fan-out F from bonus ranks, power-law fits (Figure 3)
  fig4_temperature  hit rate and tok/s vs temperature, uniform vs geometric fan-out (Figure 4)
  fig5_saguaro_c    acceptance rate vs hit rate over Saguaro's C (Figure 5 left)
"""
import math
from collections import OrderedDict

import matplotlib.pyplot as plt
import numpy as np

from . import metrics as M
from .figures_base import MODE_COLORS, PALETTE, Skip, model_name, short, speculative


# --- (c) Figure 3 ----------------------------------------------------------------------------

FANOUTS = np.arange(1, 65)
MAX_SERIES = 6
MIN_RANKS = 10     # fewer looked-up outcomes than this make no curve


def fig_fanout(runs, out_dir):
    pools = OrderedDict()
    for r in speculative(runs, "ssd"):
        rd = r.rounds
        looked = rd["outcome_hit"] >= 0
        if not np.any(looked):
            continue
        key = (short(r.target), r.draft, r.temperature, r.saguaro_c, r.synthetic_outcomes)
        pool = pools.setdefault(key, {"primary": [], "backup": [], "all": [], "eq1": True})
        pool["eq1"] &= r.fallback == "backup"   # Equation (1): every miss goes to the backup
        backup = looked & (rd["source"] == M.SOURCE_BACKUP)
        pool["primary"].append(rd["bonus_rank"][looked & ~backup])
        pool["backup"].append(rd["bonus_rank"][backup])
        pool["all"].append(rd["bonus_rank"][looked])
    if not pools:
        raise Skip("needs SSD runs with looked-up outcomes (bonus_rank)")
    if len(pools) > MAX_SERIES:   # keep the setups with the most lookups
        keep = sorted(pools, key=lambda k: -sum(len(a) for a in pools[k]["all"]))[:MAX_SERIES]
        pools = OrderedDict((k, v) for k, v in pools.items() if k in keep)
    backups = "/".join(sorted({r.backup for r in speculative(runs, "ssd")} - {"-"}))
    pairs = {f"{model_name(k[0])}/{model_name(k[1])}" for k in pools}
    pair = pairs.pop() if len(pairs) == 1 and len(pools) > 1 else ""   # said once, in the title
    panels = [("primary", "after a primary speculation: 1 - p_hit,p(F)"),
              ("backup", f"after a backup ({backups}) speculation: 1 - p_hit,b(F)"),
              ("all", "overall: 1 - p_hit(F), Eq. (1) of the two\n(runs whose every miss went "
                      "to the backup)")]
    fig, axes = plt.subplots(1, 3, figsize=(13.0, 4.6), sharey=True)
    lows, sizes = [], []
    for ax, (kind, title) in zip(axes, panels):
        drawn = positive = 0
        for i, (key, pool) in enumerate(pools.items()):
            color = PALETTE[i % len(PALETTE)]
            target, draft, temp, c, syn = key
            name = ("" if pair else f"{model_name(target)}/{model_name(draft)} ") + \
                f"T={temp:g}" + (f" C={c:g}" if c != 1 else "") + (" synth." if syn else "")
            if kind == "all":
                miss, fitted = _overall_miss(pool)
                if miss is None:
                    continue
                n = sum(a.size for a in pool["primary"] + pool["backup"])
                label, fit_y = f"{name} (n={n})", fitted
            else:
                ranks = np.concatenate(pool[kind])
                if ranks.size < MIN_RANKS:
                    continue
                miss = M.miss_rate_curve(ranks, FANOUTS)
                r, se = M.fit_power_law_mle(ranks)
                r_paper = M.fit_power_law_paper_mle(ranks)
                censored = int(np.sum(ranks == 0))
                fit = ("no misses at any fan-out" if not np.any(miss > 0) else
                       f"r={r:.2f}\u00b1{se:.2f}, paper's F^-r {r_paper:.2f}"
                       if math.isfinite(r) else "no fit")
                n = ranks.size
                label = f"{name}: {fit} (n={n}, {censored} beyond {M.RANK_LIST})"
                fit_y = (FANOUTS + 1.0) ** -r if math.isfinite(r) else None
            ok = miss > 0          # the log axis shows only fan-outs with some miss
            ax.plot(FANOUTS[ok], miss[ok], "o", ms=3, color=color, label=label)
            if fit_y is not None:
                ax.plot(FANOUTS, fit_y, "--", color=color, linewidth=1)
            if np.any(ok):
                lows.append(miss[ok].min())
                positive += 1
            sizes.append(n)
            drawn += 1
        if not drawn:
            ax.text(0.5, 0.5, f"fewer than {MIN_RANKS} rounds of this kind" if kind != "all"
                    else "needs --fallback backup runs (Eq. (1))", ha="center",
                    transform=ax.transAxes)
        elif not positive:
            ax.text(0.5, 0.5, "no misses at any fan-out", ha="center", transform=ax.transAxes)
        ax.set_xscale("log")
        ax.set_xlim(0.8, 80)
        ax.set_yscale("log")
        ax.set_xlabel("fan-out F (bonus tokens cached per position)")
        ax.set_title(title, fontsize=9)
        if drawn:
            ax.legend(fontsize=7, loc="lower left")
    axes[0].set_ylabel("cache-miss rate  P(rank > F)")
    # explicit limits: a log axis with no positive data (no misses anywhere) cannot autoscale;
    # without any miss, down to half the smallest rate the largest sample could show
    if lows:
        axes[0].set_ylim(min(lows) / 2, 1.2)
    else:
        axes[0].set_ylim(0.5 / max(sizes, default=MIN_RANKS), 1.2)
    fig.suptitle("Cache misses fall as a power law in fan-out (Fig. 3)" + (f", {pair}" if pair
                                                                           else "") +
                 "\ndashed: (F+1)^-r, maximum likelihood on per-round ranks (censored past "
                 f"{M.RANK_LIST}), \u00b1 1 s.e.; right: Eq. (1) of the two fits")
    return fig


def _overall_miss(pool):
    """1 - p_hit(F) by Equation (1) from the rounds after a primary and after a backup
    speculation, and the same from the two fitted laws; (None, None) unless every miss went to
    the backup (Equation (1)'s premise) and both conditions have MIN_RANKS rounds."""
    if not pool["eq1"]:
        return None, None
    primary, backup = (np.concatenate(pool[k]) for k in ("primary", "backup"))
    miss = M.eq1_miss_curve(primary, backup, FANOUTS, MIN_RANKS)
    if miss is None:
        return None, None
    r_p, _ = M.fit_power_law_mle(primary)
    r_b, _ = M.fit_power_law_mle(backup)
    if not (math.isfinite(r_p) and math.isfinite(r_b)):
        return miss, None
    fitted = np.array([1.0 - M.eq1_p_hit(1 - (F + 1.0) ** -r_p, 1 - (F + 1.0) ** -r_b)
                       for F in FANOUTS])
    return miss, fitted


def _cache(r):
    return M.cache_stats(r.rounds, r.fanout, r.lookahead)


# --- (d) Figure 4 ----------------------------------------------------------------------------

def fig_temperature(runs, out_dir):
    ssd = speculative(runs, "ssd")
    if len({r.temperature for r in ssd}) < 2:
        raise Skip("needs SSD runs at two or more temperatures")
    series = OrderedDict()
    for r in ssd:
        key = (short(r.target), short(r.draft), r.batch_size, r.max_new_tokens, r.fanout)
        series.setdefault(key, {}).setdefault(r.temperature, []).append(r)
    series = OrderedDict((k, v) for k, v in series.items() if len(v) > 1)
    if not series:
        raise Skip("needs one SSD setup (target, draft, batch, fan-out) at two or more "
                   "temperatures")
    setups = {k[:4] for k in series}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10.5, 3.9))
    for i, (key, by_t) in enumerate(series.items()):
        ts = sorted(by_t)
        color = PALETTE[i % len(PALETTE)]
        # the cache each built, per sequence: Figure 4 compares shapes at one budget
        size = np.nanmean([_cache(r)["built"] for rs in by_t.values() for r in rs])
        name = f"SSD {key[4]}, cache {size:.1f}" + (
            "" if len(setups) == 1 else f" ({key[0]}/{key[1]}, b={key[2]}, n={key[3]})")
        style = "o-" if key[4].startswith("geometric") else "o--"
        ax1.plot(ts, [np.mean([r.tok_s for r in by_t[t]]) for t in ts], style, color=color,
                 label=name)
        hits = [[_cache(r) for r in by_t[t]] for t in ts]   # pooled over runs at one T
        n = [sum(c["lookups"] for c in cs) for cs in hits]
        p = [sum(c["p_built"] * c["lookups"] for c in cs) / max(k, 1) for cs, k in zip(hits, n)]
        ax2.errorbar(ts, p, yerr=[M.binomial_se(*a) for a in zip(p, n)], fmt=style, capsize=2,
                     color=color, label=name)
        _paired_uniform(ax2, key[4], by_t, ts, size, color)
    base = {"sd": {}, "ar": {}}   # the baselines of the same setups
    for r in runs:
        if r.mode in base and any((short(r.target), short(r.draft), r.batch_size,
                                   r.max_new_tokens) in (s, (s[0], "-") + s[2:]) for s in setups):
            base[r.mode].setdefault(r.temperature, []).append(r.tok_s)
    for mode, style, color in (("sd", "s:", "black"), ("ar", "x:", MODE_COLORS["ar"])):
        if base[mode]:
            ts = sorted(base[mode])
            ax1.plot(ts, [np.mean(base[mode][t]) for t in ts], style, color=color,
                     label=mode.upper())
    speeds = [y for line in ax1.get_lines() for y in line.get_ydata() if y > 0]
    if speeds and max(speeds) > 5 * min(speeds):   # e.g. a tiny model's AR far above SSD
        ax1.set_yscale("log")
    ax1.set_title(_speed_caveat(ssd, base["ar"]), fontsize=8)
    ax1.set_xlabel("temperature")
    ax1.set_ylabel("decode tok/s")
    ax1.legend(fontsize=7)
    ax2.set_xlabel("temperature")
    ax2.set_ylabel("cache hit rate p_hit")
    ax2.set_ylim(0, 1.02)
    ax2.set_title("Cache hit rate")
    ax2.legend(fontsize=7)
    fig.suptitle("Uniform vs geometric fan-out across temperatures (Fig. 4)")
    return fig


def _paired_uniform(ax, fanout, by_t, ts, size, color):
    """On a geometric series' own rounds, the hit rate a uniform cache of the same size would
    have had (M.hits_at_shape: a hit is rank <= F_k, and the bonus does not depend on the
    cache). At T > 0 two runs decode different text, and at ~45 lookups a run the text moves
    p_hit more than the shape does; on the same rounds only the shape differs."""
    K = {r.lookahead for rs in by_t.values() for r in rs}
    if not fanout.startswith("geometric") or len(K) != 1 or not math.isfinite(size):
        return
    K = K.pop()
    f = size / (K + 1)
    if abs(f - round(f)) > 0.05 or round(f) < 1:
        return
    shape = [int(round(f))] * (K + 1)
    p = []
    for t in ts:
        hits = np.concatenate([M.looked_up_hits_at_shape(r.rounds, shape) for r in by_t[t]])
        p.append(float(np.mean(hits)) if len(hits) else math.nan)
    ax.plot(ts, p, "^:", color=color, mfc="none",
            label=f"uniform:{shape[0]} on the {fanout} runs' rounds (paired)")


def _speed_caveat(ssd, ar_by_t):
    """The speed panel's title: where SSD runs below AR, the measured reason, so that the panel
    is not read as SSD being slow by nature."""
    ratios = [r.tok_s / np.mean(ar_by_t[r.temperature]) for r in ssd if r.temperature in ar_by_t]
    if not ratios or max(ratios) >= 1:
        return "Decode speed"
    t_p = np.nanmean([float(r.summary.get("t_p", math.nan)) for r in ssd])
    why = (f"its draft ({model_name(ssd[0].draft)}) is a perturbed\ncopy of the target, as "
           "costly a step" if ssd[0].draft.startswith("perturb:") else "its draft is costly")
    return (f"Decode speed: SSD at {min(ratios):.2f}-{max(ratios):.2f}x AR, as {why}: a cache\n"
            f"build takes T_p = {t_p:.1f} verifications (the paper's draft is ~1/70\nof its "
            "target). Speed is not this setup's point; the hit rates are.")


# --- (e) Figure 5 left -----------------------------------------------------------------------

def fig_saguaro_c(runs, out_dir):
    series = OrderedDict()
    for r in speculative(runs, "ssd"):
        series.setdefault(r.sweep_key() + (r.draft, r.fanout), []).append(r)
    series = OrderedDict((k, v) for k, v in series.items() if len({r.saguaro_c for r in v}) > 1)
    if not series:
        raise Skip("needs SSD runs at two or more Saguaro C values with the same setup")
    fig, ax = plt.subplots(figsize=(6.5, 4.6))
    for i, (key, rs) in enumerate(series.items()):
        rs.sort(key=lambda r: r.saguaro_c)
        cs = [_cache(r) for r in rs]
        y, ye = [c["alpha"] for c in cs], [c["alpha_se"] for c in cs]
        target, b, temp, n, _, draft, fanout = key
        color = PALETTE[i % len(PALETTE)]
        name = f"{model_name(target)}/{model_name(draft)} T={temp:g} b={b} {fanout}"
        equal = all(math.isfinite(c["p_shape"]) for c in cs)
        for kind, style, label in (("p_shape", "o-", f"cache of {cs[0]['shape']:g} at every C"),
                                   ("p_built", "o:", "cache as built (its size)")):
            if kind == "p_shape" and not equal:
                continue
            x = [c[kind] for c in cs]
            ax.errorbar(x, y, xerr=[M.binomial_se(p, c["lookups"]) for p, c in zip(x, cs)],
                        yerr=ye, fmt=style, color=color, capsize=2, elinewidth=0.6,
                        mfc=color if kind == "p_shape" else "none", label=f"{name}: {label}")
        for r, c in zip(rs, cs):
            ax.annotate(f"C={r.saguaro_c:g}", (c["p_shape" if equal else "p_built"], c["alpha"]),
                        xytext=(4, 3), textcoords="offset points", fontsize=7)
            ax.annotate(f"({c['built']:.1f})", (c["p_built"], c["alpha"]), xytext=(-4, -9),
                        ha="right", textcoords="offset points", fontsize=6, color=color)
    ax.set_xlabel("cache hit rate p_hit")
    ax.set_ylabel("per-token acceptance \u03b1 (capped-geometric MLE)")
    ax.set_title("Saguaro sampling trades acceptance for hits (Fig. 5 left)\nerror bars: one "
                 "standard error (binomial)", fontsize=10)
    ax.legend(fontsize=7)
    return fig
