"""Pure functions over /rounds and /steps columns (dicts of numpy arrays): batch rounds, AR steps
and the latency components of the speedup model.

/rounds has one row per sequence per round; timings that belong to the whole batch round
(verify, accept, draft, fallback, cache build, start/end) are repeated on every row. A *batch
round* is one (rep, group, round): one target verification of all live rows.
"""
import math

import numpy as np

SOURCE_HIT, SOURCE_PRIMARY, SOURCE_BACKUP = 1, 2, 3


def _first_and_inverse(keys):
    """Unique rows of the 2-D int array `keys`, in first-appearance order: (index of each
    unique key's first row, inverse mapping row -> unique position)."""
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")       # unique keys sorted by first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order], rank[np.ravel(inverse)]


def batch_rounds(rounds):
    """One entry per (rep, group, round), in recorded order. Returns a dict of arrays:
    rep, group, round, rows (live sequences), tokens, tokens_full (sum of 1 + accepted),
    all_hit (every row's speculation came from the cache), any_primary / any_backup (some row
    was speculated by the primary just in time / by the backup), start, end, wall, verify, accept,
    draft, draft_start, draft_end, comm, idle, fallback, build (the cache built during this
    round's verification; 0 when none), branches, budget."""
    r = rounds
    n = len(r.get("rep", []))
    if n == 0:
        return {}
    keys = np.stack([r["rep"], r["group"], r["round"]], axis=1).astype(np.int64)
    first, inv = _first_and_inverse(keys)
    m = len(first)
    rows = np.bincount(inv, minlength=m).astype(float)

    def per_round_sum(col):
        return np.bincount(inv, weights=np.asarray(col, float), minlength=m)

    hits = per_round_sum(r["source"] == SOURCE_HIT)
    primary = per_round_sum(r["source"] == SOURCE_PRIMARY)
    backup = per_round_sum(r["source"] == SOURCE_BACKUP)
    build = np.zeros(m)
    looked = r["outcome_hit"] >= 0
    np.maximum.at(build, inv[looked], r["cache_build_time_s"][looked])
    out = {
        "rep": r["rep"][first], "group": r["group"][first], "round": r["round"][first],
        "rows": rows,
        "tokens": per_round_sum(r["tokens"]),
        "tokens_full": per_round_sum(r["accepted"] + 1),
        "all_hit": hits == rows,
        "any_primary": primary > 0,   # some row drafted just in time by the primary
        "any_backup": backup > 0,     # some row speculated by the backup
        "build": build,
    }
    for name, col in (("start", "start_s"), ("end", "end_s"), ("verify", "verify_time_s"),
                      ("accept", "accept_time_s"), ("draft", "draft_time_s"),
                      ("draft_start", "draft_start_s"), ("draft_end", "draft_end_s"),
                      ("comm", "comm_time_s"), ("idle", "target_idle_s"),
                      ("fallback", "fallback_time_s"), ("branches", "branches"),
                      ("budget", "budget")):
        out[name] = np.asarray(r[col], float)[first]
    out["wall"] = out["end"] - out["start"]
    out["overhang"] = build_overhang(out)
    return out


def build_overhang(br):
    """Per batch round: how long the outcome waited on the draft rank for the previous round's
    cache build to finish (the build starts when the draft has sent its speculation,
    draft_end, and lasts `build`). Bounded by the time until the draft started answering."""
    m = len(br["rep"])
    over = np.zeros(m)
    for i in range(1, m):
        same = br["rep"][i] == br["rep"][i - 1] and br["group"][i] == br["group"][i - 1]
        if not same or br["build"][i - 1] <= 0:
            continue
        build_end = br["draft_end"][i - 1] + br["build"][i - 1]
        over[i] = min(max(0.0, build_end - br["start"][i]),
                      max(0.0, br["draft_start"][i] - br["start"][i]))
    return over


def ar_steps(steps):
    """Decode steps of an AR run (step >= 0), one entry per batch step: dict of rep, rows,
    tokens, time (step_time_s). /steps repeats the step on each batch row; a step is
    identified by (rep, start_s)."""
    s = steps
    if len(s.get("rep", [])) == 0:
        return {}
    sel = s["step"] >= 0
    if not np.any(sel):
        return {}
    rep = s["rep"][sel].astype(np.int64)
    start = s["start_s"][sel]
    # start_s is a float: key on its bit pattern so equal times group exactly.
    keys = np.stack([rep, start.view(np.int64)], axis=1)
    first, inv = _first_and_inverse(keys)
    m = len(first)
    return {
        "rep": rep[first],
        "rows": np.bincount(inv, minlength=m).astype(float),
        "tokens": np.bincount(inv, weights=s["tokens"][sel].astype(float), minlength=m),
        "time": s["step_time_s"][sel][first],
    }


def mean(x, where=None):
    x = np.asarray(x, float)
    if where is not None:
        x = x[np.asarray(where, bool)]
    return float(x.mean()) if x.size else math.nan


def safe_div(a, b):
    return a / b if b and not math.isnan(b) else math.nan


def sd_round_latency(br, sel):
    """SD model of a round (the paper's 1 + T_SD): draft, then verify; in seconds. The
    target's accept step (verification rule, sampling) counts with the verification, as the
    AR step's sampling counts with its forward; comm is 0 when the draft is collocated."""
    return mean(br["verify"] + br["accept"] + br["draft"] + br["comm"], sel)


def ssd_round_latency(br, sel, p, include_overheads=True):
    """Corollary 16's round latency in seconds, evaluated with the run's own component times:
        E[max(w, B)] + (1 - P) F + O,    P = mean over rounds of p^rows,
    where B is the cache build, which overlaps the window w = verification + accept + message
    round trip (the draft builds from sending a speculation until the next outcome arrives),
    F the mean fallback time of rounds with a miss, and O the draft's lookup and message
    packing (draft time beyond the fallback). A hit round costs max(w, B); a miss round also
    waits for the fallback: the whole batch waits for any miss (Corollary 16). With O = 0, no
    transit and B <= v this is exactly Corollary 16 (P max(1, T_p) + (1 - P)(1 + T_b), times
    v); for B > v the miss branch also waits for the build, which the paper's 1 + T_b leaves
    out (Appendix A assumes T_p < 1). include_overheads=False drops O and the transit (the
    paper's idealisation). Returns (latency, parts dict)."""
    sel = np.asarray(sel, bool)
    v = br["verify"] + br["accept"]
    transit = np.maximum(0.0, br["comm"] - br["overhang"])   # message round trip
    window = v + (transit if include_overheads else 0.0)
    hidden = mean(np.maximum(window, br["build"]), sel)
    P = mean(np.clip(p, 0.0, 1.0) ** br["rows"], sel)
    miss = sel & ~br["all_hit"]
    F = mean(br["fallback"], miss) if np.any(miss) else 0.0
    O = mean(np.maximum(0.0, br["draft"] - br["fallback"]), sel)
    lat = hidden + (1.0 - P) * F + (O if include_overheads else 0.0)
    return lat, {"v": mean(v, sel), "max_v_B": hidden, "P_all": P, "F": F, "O": O,
                 "transit": mean(transit, sel), "P_all_measured": mean(br["all_hit"], sel)}
