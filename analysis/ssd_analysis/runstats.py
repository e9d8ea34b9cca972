"""Per-run statistics shared by `validate` and `figures`: the AR baseline's latency unit,
timing noise, SSD hit statistics and T's, Theorem 17's b*, sweep groups."""
import math
from collections import OrderedDict

import numpy as np

from . import metrics as M
from . import timing as T


def ar_baseline(run):
    """Mean AR step time t_AR (the latency unit), mean rows per step and the step count."""
    st = T.ar_steps(run.steps)
    if not st:
        return {"t_ar": math.nan, "rows": math.nan, "steps": 0}
    return {"t_ar": float(np.mean(st["time"])), "rows": float(np.mean(st["rows"])),
            "steps": len(st["time"])}


def cv(run):
    x = np.asarray(run.reps.get("decode_tokens_per_s", []), float)
    return float(np.std(x, ddof=1) / np.mean(x)) if x.size > 1 and np.mean(x) > 0 else 0.0


def _lookups_per_sequence(rounds):
    """Looked-up outcomes of each sequence in each repetition: the lengths of its hit chain."""
    looked = rounds["outcome_hit"] >= 0
    keys = np.stack([rounds["rep"][looked], rounds["sequence"][looked]], axis=1)
    if keys.size == 0:
        return []
    _, counts = np.unique(keys, axis=0, return_counts=True)
    return counts.tolist()


def ssd_stats(run):
    """Hit statistics and T's. q: share of the misses (steady rounds not speculated from the
    cache) that the backup speculated; e_miss_primary / e_miss_backup: E_miss of the rounds
    drafted just in time by the primary / by the backup (for Theorem 17). The T's (t_p, t_b,
    t_jit, t_backup) are ssd-bench's own /summary figures (docs/hdf5-schema.md): defined once,
    in harness/summary.cpp, never recomputed here (NaN where a file predates one)."""
    r = run.rounds
    p, pp, pb, n, n_p, n_b = M.hit_rates(r["outcome_hit"], r["source"])
    later = r["round"] > 0
    acc = r["accepted"]

    def e_of(source):
        sel = later & (r["source"] == source)
        return 1.0 + float(acc[sel].mean()) if np.any(sel) else math.nan

    def summary_t(name):
        value = run.summary.get(name)
        return float(value) if value is not None else math.nan

    return {"p": p, "pp": pp, "pb": pb, "lookups": n, "n_p": n_p, "n_b": n_b,
            "e_hit": M.e_hit(acc, r["source"]),
            "e_miss": M.e_miss(acc, r["source"], r["round"]),
            "e_miss_primary": e_of(M.SOURCE_PRIMARY), "e_miss_backup": e_of(M.SOURCE_BACKUP),
            "q": float(np.mean(r["source"][later & (r["source"] >= M.SOURCE_PRIMARY)]
                               == M.SOURCE_BACKUP))
            if np.any(later & (r["source"] >= M.SOURCE_PRIMARY)) else math.nan,
            "t_p": summary_t("t_p"), "t_b": summary_t("t_b"),
            "t_jit": summary_t("t_jit"), "t_backup": summary_t("t_backup"),
            "chain_lengths": _lookups_per_sequence(r),
            # rounds behind each mean, to pool runs by rounds (theorem17)
            "n_hit": int(np.sum(r["source"] == M.SOURCE_HIT)),
            "n_jit": int(np.sum(later & (r["source"] == M.SOURCE_PRIMARY))),
            "n_backup": int(np.sum(later & (r["source"] == M.SOURCE_BACKUP)))}


# Which count weighs each of Theorem 17's inputs when runs are pooled: a run of 200 lookups
# says more about p_hit than one of 20, and T_jit and E_miss come only from the rounds that
# drafted just in time or by the backup.
POOL_WEIGHTS = {"p": "lookups", "e_hit": "n_hit", "t_jit": "n_jit", "e_miss_backup": "n_backup"}


def theorem17(stats_list):
    """b* of Theorem 17 from SSD statistics (one run or several pooled by the caller): p_hit
    and E_hit of the cache, the slow primary's just-in-time time (its T_p in the theorem) and
    the fast backup's E_miss, each pooled over runs weighted by the rounds behind it
    (POOL_WEIGHTS; equal weights for statistics without the counts). NaN when no run drafted a
    miss just in time or by the backup."""
    def pick(key):
        pairs = [(s[key], s.get(POOL_WEIGHTS[key], 1)) for s in stats_list
                 if math.isfinite(s.get(key, math.nan))]
        weight = sum(w for _, w in pairs)
        return float(sum(v * w for v, w in pairs) / weight) if weight > 0 else math.nan
    p, e_hit, t_slow, e_fast = pick("p"), pick("e_hit"), pick("t_jit"), pick("e_miss_backup")
    if not all(math.isfinite(x) for x in (p, e_hit, t_slow, e_fast)):
        return math.nan, {}
    return M.b_star(p, e_hit, e_fast, t_slow), {"p": p, "e_hit": e_hit, "t_slow": t_slow,
                                                 "e_fast": e_fast}


def group_runs(runs):
    groups = OrderedDict()
    for r in runs:
        if not r.is_characterize:
            groups.setdefault(r.sweep_key(), []).append(r)
    return groups
