"""docs/hdf5-schema.md as checks: `schema_problems` lists what a file lacks or holds differently
from the document, `consistency_problems` recomputes /summary and /reps from the per-step and
per-round records and lists the disagreements. `ssd-analyze validate` prints both."""
import math

import numpy as np

from . import metrics as M
from . import timing as T

# docs/hdf5-schema.md: what every run file has, and what /rounds has in SD and SSD.
ROOT_ATTRS = ["schema_version", "complete", "mode", "config_json", "argv", "version",
              "git_commit", "build_type", "host", "cpu_model", "gpu_model", "start_time",
              "end_time", "synthetic_outcomes"]
STEP_COLUMNS = ["rep", "step", "row", "sequence", "tokens", "start_s", "step_time_s",
                "forward_time_s"]
REP_COLUMNS = ["rep", "prefill_time_s", "prefill_tokens", "decode_time_s", "decode_tokens",
               "decode_steps", "per_sequence_decode_tokens", "generated_tokens",
               "decode_tokens_per_s", "ms_per_token"]
ROUND_COLUMNS = ["rep", "group", "round", "row", "sequence", "drafted", "accepted",
                 "bonus_token", "tokens", "source", "outcome_hit", "bonus_rank", "fanout",
                 "budget", "branches", "cache_build_time_s", "fallback_time_s", "start_s",
                 "end_s", "draft_start_s", "draft_end_s", "draft_time_s", "verify_time_s",
                 "accept_time_s", "comm_time_s", "target_idle_s", "draft_idle_s",
                 "message_bytes"]
SUMMARY_ATTRS = ["decode_tokens_per_s", "decode_tokens_per_s_std", "prefill_tokens_per_s",
                 "prefill_tokens_per_s_std", "ms_per_token_mean", "ms_per_token_std", "reps",
                 "generated_tokens_per_rep", "tokens_identical_across_reps", "clock_span_s"]
SPEC_SUMMARY_ATTRS = ["rounds", "drafted_tokens", "accepted_tokens", "mean_acceptance_length",
                      "acceptance_rate", "per_position_acceptance",
                      "acceptance_length_histogram", "t_sd", "draft_time_s", "verify_time_s"]
SSD_SUMMARY_ATTRS = ["cache_lookups", "cache_hits", "p_hit", "p_hit_primary", "p_hit_backup",
                     "e_hit", "e_miss", "t_p", "t_b", "ssd_warning"]
# Added in files written since B4 (absent from older ones).
SSD_SUMMARY_ATTRS_NEW = ["t_jit", "t_backup"]

# /rounds `source` values (one definition: metrics.SOURCE_NAMES).
SOURCE_FIRST, SOURCE_HIT, SOURCE_PRIMARY, SOURCE_BACKUP = (
    M.SOURCE_FIRST, M.SOURCE_HIT, M.SOURCE_PRIMARY, M.SOURCE_BACKUP)


def schema_problems(run):
    """Departures of `run` from docs/hdf5-schema.md, one string each."""
    out = []
    if run.is_characterize:
        if run.attrs.get("mode") != "characterize":
            out.append("characterize file has no root `mode` = characterize "
                       f"(root `command` = {run.attrs.get('command')!r})")
        for a in ROOT_ATTRS:
            if a not in run.attrs and a not in ("mode",):
                out.append(f"characterize file lacks root attribute `{a}`")
        return out
    for a in ROOT_ATTRS:
        if a not in run.attrs:
            out.append(f"missing root attribute `{a}`")
    if run.mode not in ("ar", "sd", "ssd"):
        out.append(f"unknown mode {run.mode!r}")
    for a in SUMMARY_ATTRS:
        if a not in run.summary:
            out.append(f"missing /summary attribute `{a}`")
    for name, cols in (("reps", REP_COLUMNS), ("steps", STEP_COLUMNS)):
        table = getattr(run, name)
        missing = [c for c in cols if c not in table]
        if missing:
            out.append(f"/{name} lacks columns {missing}")
        lengths = {len(v) for v in table.values()}
        if len(lengths) > 1:
            out.append(f"/{name} columns have different lengths {sorted(lengths)}")
    if run.mode in ("sd", "ssd"):
        missing = [c for c in ROUND_COLUMNS if c not in run.rounds]
        if missing:
            out.append(f"/rounds lacks columns {missing}")
        for a in SPEC_SUMMARY_ATTRS + (SSD_SUMMARY_ATTRS if run.mode == "ssd" else []):
            if a not in run.summary:
                out.append(f"missing /summary attribute `{a}`")
        if "draft" not in run.models:
            out.append("missing /models/draft")
        r = run.rounds
        has_source = "source" in r and len(r["source"]) > 0
        # SD has no cache: every round is drafted by the primary (source 2), round 0 included.
        # Source 0 (first round, no cache yet) exists only in SSD.
        if run.mode == "sd" and has_source and np.any(r["source"] != SOURCE_PRIMARY):
            out.append("/rounds/source is not 2 on every SD round (schema: 2 = primary draft, "
                       f"every SD round); sources are {sorted(set(r['source'].tolist()))}")
        if run.mode == "ssd" and has_source and "round" in r:
            first = r["round"] == 0
            if np.any(first) and not np.any(r["source"][first] == SOURCE_FIRST):
                out.append("/rounds/source is never 0 on round 0 (schema: 0 = SSD's first "
                           "round); round-0 sources are "
                           f"{sorted(set(r['source'][first].tolist()))}")
        if run.mode == "ssd" and "source" in r and "outcome_hit" in r:
            looked = r["outcome_hit"] >= 0
            n_backup = int(np.sum(looked & (r["source"] == SOURCE_BACKUP)))
            pb = run.summary.get("p_hit_backup")
            # NaN is the schema's "undefined"; a number (0, -1, ...) here is a wrong encoding
            if n_backup == 0 and pb is not None and not _is_nan(pb):
                out.append(f"/summary p_hit_backup = {pb} with no backup-speculated lookups "
                           "(undefined: the schema stores NaN)")
            hit_rows = r["source"] == SOURCE_HIT
            if np.any(r["fallback_time_s"][hit_rows] > 0):
                out.append("/rounds/fallback_time_s is > 0 on some cache-hit rows (schema: 0 on "
                           "a hit); it is the batch round's fallback time")
    if "draft" in run.models and run.mode == "ar":
        out.append("AR run has /models/draft")
    out += _clock_problems(run)
    return out


# Timestamp columns, all in seconds since the run's clock zero (docs/hdf5-schema.md).
TIME_COLUMNS = {"steps": ("start_s",),
                "rounds": ("start_s", "end_s", "draft_start_s", "draft_end_s")}


def _clock_problems(run):
    """Every timestamp lies in [0, /summary clock_span_s] (1 ms of slack for the cross-rank
    clock offset estimate)."""
    span = run.summary.get("clock_span_s")
    if span is None:
        return []
    out = []
    for name, columns in TIME_COLUMNS.items():
        table = getattr(run, name)
        for c in columns:
            t = np.asarray(table.get(c, []), dtype=float)
            if t.size and (t.min() < -1e-3 or t.max() > float(span) + 1e-3):
                out.append(f"/{name}/{c} spans [{t.min():.3f}, {t.max():.3f}] s, outside the "
                           f"run's clock [0, {float(span):.3f}] s")
    return out


def _is_nan(value):
    """True for a float NaN (plain or numpy); False for anything else (lists, strings, ...)."""
    try:
        return math.isnan(value)
    except TypeError:
        return False


def _close(a, b, rel=1e-6, abs_=1e-9):
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def consistency_problems(run):
    """/summary and /reps recomputed from /steps and /rounds with the schema's definitions;
    one string per disagreement."""
    out = []
    if run.is_characterize or not run.reps:
        return out
    reps, s = run.reps, run.summary

    def check(name, stored, recomputed, rel=1e-6):
        if stored is None or recomputed is None:
            return
        if isinstance(recomputed, float) and math.isnan(recomputed):
            # no rounds define it: NaN (the schema's encoding) is right, anything else is not
            if not _is_nan(stored):
                out.append(f"{name} = {stored} although no rounds define it (the schema stores "
                           "NaN)")
            return
        if isinstance(stored, (list, tuple, np.ndarray)):
            ok = len(stored) == len(recomputed) and all(
                _close(float(a), float(b), rel) for a, b in zip(stored, recomputed))
        else:
            ok = _close(float(stored), float(recomputed), rel)
        if not ok:
            out.append(f"{name} = {stored} but the records give {recomputed}")

    tps = reps["decode_tokens"] / reps["decode_time_s"]
    check("/reps/decode_tokens_per_s", list(reps["decode_tokens_per_s"]), list(tps))
    check("/summary decode_tokens_per_s", s.get("decode_tokens_per_s"), float(np.mean(tps)))
    if len(tps) > 1:
        check("/summary decode_tokens_per_s_std", s.get("decode_tokens_per_s_std"),
              float(np.std(tps, ddof=1)))
    check("/reps/ms_per_token", list(reps["ms_per_token"]),
          list(1e3 * reps["decode_time_s"] / reps["per_sequence_decode_tokens"]))
    # Files since 2026-12-03 count the forward passes: the target makes one per AR step or
    # round; the draft ranks' own counts add up to the repetition's.
    if "target_forward_passes" in reps:
        check("/reps/target_forward_passes (one per step or round)",
              list(reps["target_forward_passes"]), list(reps["decode_steps"]))
    dr = run.draft_ranks
    if "draft_forward_passes" in reps and "forward_passes" in dr and len(dr["forward_passes"]):
        check("/reps/draft_forward_passes (sum of /draft_ranks forward_passes)",
              list(reps["draft_forward_passes"]),
              [int(dr["forward_passes"][dr["rep"] == k].sum()) for k in reps["rep"]])
    if run.mode == "ar":
        st = T.ar_steps(run.steps)
        if st:
            per_rep = [(st["rep"] == r) for r in reps["rep"]]
            check("/reps/decode_steps (AR)", list(reps["decode_steps"]),
                  [int(m.sum()) for m in per_rep])
            check("/reps/decode_tokens (AR)", list(reps["decode_tokens"]),
                  [float(st["tokens"][m].sum()) for m in per_rep])
        return out
    r = run.rounds
    if not r or not len(r.get("rep", [])):
        return out
    br = T.batch_rounds(r)
    per_rep = [(br["rep"] == k) for k in reps["rep"]]
    check("/reps/decode_steps", list(reps["decode_steps"]), [int(m.sum()) for m in per_rep])
    check("/reps/decode_tokens", list(reps["decode_tokens"]),
          [float(br["tokens"][m].sum()) for m in per_rep])
    check("/reps/decode_time_s (sum of round end_s - start_s)", list(reps["decode_time_s"]),
          [float(br["wall"][m].sum()) for m in per_rep], rel=1e-4)
    K = run.lookahead
    acc = r["accepted"]
    check("/summary rounds", s.get("rounds"), len(acc))
    check("/summary accepted_tokens", s.get("accepted_tokens"), int(acc.sum()))
    check("/summary drafted_tokens", s.get("drafted_tokens"), int(r["drafted"].sum()))
    check("/summary mean_acceptance_length", s.get("mean_acceptance_length"), 1 + acc.mean())
    check("/summary acceptance_rate", s.get("acceptance_rate"), acc.sum() / r["drafted"].sum())
    check("/summary acceptance_length_histogram", s.get("acceptance_length_histogram"),
          list(np.bincount(np.minimum(acc, K), minlength=K + 1)))
    check("/summary per_position_acceptance", s.get("per_position_acceptance"),
          [float(np.mean(acc > i)) for i in range(K)])
    check("/summary t_sd", s.get("t_sd"), br["draft"].sum() / br["verify"].sum())
    check("/rounds/draft_time_s vs draft_end_s - draft_start_s",
          float(np.max(np.abs(r["draft_time_s"] - (r["draft_end_s"] - r["draft_start_s"])))),
          0.0)
    if np.any(r["tokens"] > acc + 1):
        out.append("/rounds/tokens > accepted + 1 on some rows")
    if "fanout" in r and r["fanout"].ndim == 2 and r["fanout"].shape[1] != K + 1:
        out.append(f"/rounds/fanout has {r['fanout'].shape[1]} columns, K+1 = {K + 1}")
    if run.mode != "ssd":
        return out
    p, pp, pb, n, _, _ = M.hit_rates(r["outcome_hit"], r["source"])
    looked = r["outcome_hit"] >= 0
    check("/summary cache_lookups", s.get("cache_lookups"), n)
    check("/summary cache_hits", s.get("cache_hits"), int(r["outcome_hit"][looked].sum()))
    check("/summary p_hit", s.get("p_hit"), p)
    check("/summary p_hit_primary", s.get("p_hit_primary"), pp)
    if not math.isnan(pb):
        check("/summary p_hit_backup", s.get("p_hit_backup"), pb)
    check("/summary e_hit", s.get("e_hit"), M.e_hit(acc, r["source"]))
    check("/summary e_miss", s.get("e_miss"), M.e_miss(acc, r["source"], r["round"]))
    # the C++ means are over /rounds rows (each row repeats its batch round's times)
    v = r["verify_time_s"].mean()
    if np.any(looked):
        check("/summary t_p", s.get("t_p"), r["cache_build_time_s"][looked].mean() / v)
    miss = (r["source"] != M.SOURCE_HIT) & (r["round"] > 0)
    if np.any(miss):
        check("/summary t_b", s.get("t_b"), r["fallback_time_s"][miss].mean() / v)
    for name, source in (("t_jit", M.SOURCE_PRIMARY), ("t_backup", M.SOURCE_BACKUP)):
        sel = (r["source"] == source) & (r["round"] > 0)
        if name in s and np.any(sel):
            check(f"/summary {name}", s.get(name), r["fallback_time_s"][sel].mean() / v)
    return out
