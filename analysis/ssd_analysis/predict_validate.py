"""`ssd-analyze predict --validate`: predict.py's model against this project's own runs, each
run's inputs (acceptance, hit rates, budget, fan-out, fallback) taken from its rounds and every
step cost from one characterize file."""
import math
import os
import re
import sys

import numpy as np

from . import hardware as H
from . import io as sio
from . import measured as MS
from . import metrics as M
from . import predict as P
from . import predict_inputs as PI
from . import timing as T
from .tables import emit_table, format_cell


def outcome_law(run):
    """{name: value} of the synthetic outcome law a run drew from (--outcomes synthetic:alpha=A,
    r=R,...); empty for a run whose outcomes the models decided."""
    return dict(re.findall(r"(\w+)=([\d.]+)", run.config.get("outcomes", "")))


def run_inputs(run):
    """alpha, r, alpha_b, r_b of a run: the acceptance rate realised in its /rounds (maximum
    likelihood of the capped geometric model: accepted / (accepted + rounds with a rejection),
    over rounds the primary drafted; over the backup's rounds for alpha_b), r from the
    synthetic outcome law when the run drew its outcomes, else fitted to its bonus ranks; r_b
    from the law, defaulted as ssd/synthetic_outcome.h does, log2(1 / (1 - A)) of the law's A."""
    rd = run.rounds
    cfg = outcome_law(run)
    acc, src, K = rd.get("accepted"), rd.get("source"), max(run.lookahead, 1)

    def mle(sel, default):
        if acc is None or not np.any(sel):
            return default
        a, rej = float(acc[sel].sum()), float(np.sum(acc[sel] < K))
        return a / (a + rej) if a + rej > 0 else default
    alpha = mle(src != M.SOURCE_BACKUP, float(cfg.get("alpha", 0.8))) if acc is not None \
        else float(cfg.get("alpha", 0.8))
    alpha_b = mle(src == M.SOURCE_BACKUP, float(cfg.get("alpha_b", 0.0))) if acc is not None \
        else 0.0
    if "r" in cfg:
        r = float(cfg["r"])
    elif rd.get("bonus_rank") is not None and run.mode == "ssd":
        r, _ = M.fit_power_law_mle(rd["bonus_rank"][rd["outcome_hit"] >= 0])
        r = 0.7 if not math.isfinite(r) else r
    else:
        r = 0.7
    r_b = float(cfg["r_b"]) if "r_b" in cfg else (
        math.log2(1.0 / max(1.0 - float(cfg["alpha"]), 1e-9)) if "alpha" in cfg else None)
    return alpha, r, alpha_b, r_b


# As ssd/fanout_estimator.h: a condition's own fit counts from this many looked-up rounds and is
# pulled towards the pooled fit by as many.
MIN_CONDITION_ROUNDS = 8
CONDITION_PRIOR_WEIGHT = 8.0


def run_law(run, pooled_r):
    """(r, r_all): the power-law exponent after a rejection (accepted < K) and after all K
    accepted (Theorem 18's two curves, ssd/fanout.h FanoutLaw), each fitted to the run's
    looked-up rounds of that condition (metrics.fit_power_law_mle) as FanoutEstimator would at
    the run's end: its own fit from MIN_CONDITION_ROUNDS rounds, pulled towards pooled_r by
    CONDITION_PRIOR_WEIGHT; pooled_r below that. A run that drew synthetic outcomes has the
    laws it drew from (ssd/synthetic_outcome.h): (pooled_r, its r_all, pooled_r unless given)."""
    rd = run.rounds
    law = outcome_law(run)
    if "r" in law:
        return pooled_r, float(law.get("r_all", pooled_r))
    if run.mode != "ssd" or rd.get("bonus_rank") is None or rd.get("accepted") is None:
        return pooled_r, pooled_r
    K, looked = max(run.lookahead, 1), rd["outcome_hit"] >= 0

    def fit(sel):
        n = int(np.sum(looked & sel))
        if n < MIN_CONDITION_ROUNDS:
            return pooled_r
        own, _ = M.fit_power_law_mle(rd["bonus_rank"][looked & sel])
        if not math.isfinite(own):
            return pooled_r
        return (n * own + CONDITION_PRIOR_WEIGHT * pooled_r) / (n + CONDITION_PRIOR_WEIGHT)
    return fit(rd["accepted"] < K), fit(rd["accepted"] >= K)


def sequence_inputs(run, alpha, alpha_b, backup_share):
    """[[(alpha, alpha_b, backup share) of each row] of each batch group]: the acceptance each
    sequence realised in its own rounds (run_inputs' estimate over its rows; the run's where it
    has none) and the share of its rounds the backup drafted. A batch runs until its slowest
    sequence is done, and sequences of one batch draw from different texts: at fig3's b = 2,
    one sequence of a pair ran 5-14 rounds alone after the other had finished. None without
    per-row rounds (older files)."""
    rd = run.rounds
    need = ("accepted", "source", "sequence", "group", "row")
    if any(rd.get(c) is None for c in need) or len(rd["accepted"]) == 0:
        return None
    acc, src, seq = (np.asarray(rd[c]) for c in ("accepted", "source", "sequence"))
    K = max(run.lookahead, 1)

    def mle(sel, default):
        a, rej = float(acc[sel].sum()), float(np.sum(acc[sel] < K))
        return a / (a + rej) if a + rej > 0 else default
    groups = {}
    for g, row, s in zip(np.asarray(rd["group"]), np.asarray(rd["row"]), seq):
        groups.setdefault(int(g), {})[int(row)] = int(s)
    out = []
    for g in sorted(groups):
        rows = []
        for row in sorted(groups[g]):
            mine = seq == groups[g][row]
            drafted = mine & (src != M.SOURCE_FIRST)
            backup = mine & (src == M.SOURCE_BACKUP)
            share = float(backup.sum() / drafted.sum()) if backup_share > 0 and drafted.any() \
                else 0.0
            rows.append((mle(mine & ~backup, alpha), mle(backup, alpha_b), share))
        out.append(rows)
    return out


def realised_hit_rates(run):
    """(p_hit,p, p_hit,b): the share of looked-up outcomes the cache held, after a speculation
    of the primary and of the backup, as the run's rounds drew them (None where none was
    looked up). A short run strays from its outcome law: 17 rounds of batch 1 hit a uniform:1
    cache 0.59 of the time where the law gives 0.75, a tenth fewer tokens per round."""
    rd = run.rounds
    hit, src = rd.get("outcome_hit"), rd.get("source")
    if hit is None or src is None or run.mode != "ssd":
        return None, None
    looked = hit >= 0

    def share(sel):
        return float(hit[sel].mean()) if np.any(sel) else None
    return share(looked & (src != M.SOURCE_BACKUP)), share(looked & (src == M.SOURCE_BACKUP))


def chosen_budget(run):
    """The per-sequence budget --budget auto chose in a run (the median over its rounds'
    /rounds/budget), or None: the prediction is of the cache the run built, not of the budget
    the model would pick."""
    budget = run.rounds.get("budget")
    if budget is None or len(budget) == 0:
        return None
    chosen = np.asarray(budget)[np.asarray(budget) >= 0]
    return int(round(float(np.median(chosen)))) if chosen.size else None


def prepared_branches(run):
    """Mean branches per sequence a run's caches really held (/rounds/fanout, Definition 10's
    prepared fan-out, summed over k), or None. Below the configured shape when Saguaro's C < 1
    spares the branch of the draft's own token (fig5: 5.5 of uniform:2's 8 at C = 0.75)."""
    fanout = run.rounds.get("fanout")
    if fanout is None or np.ndim(fanout) != 2:
        return None
    looked = np.asarray(fanout)[np.asarray(fanout)[:, 0] >= 0]
    return float(looked.sum(axis=1).mean()) if len(looked) else None


def fallback_used(run):
    """The fallback a run's misses drew: its --fallback, or under auto the one its /rounds name
    (source primary or backup, the more frequent), so that the prediction is of the rounds the
    run ran, not of the fallback the model would pick. The pair's SSD runs at K = 4 drafted
    every miss just in time (no backup round) where the model, left to choose, took the backup
    and predicted 15.9-17.4 tok/s against 10.8-12.0 measured. auto where no round missed."""
    src = run.rounds.get("source")
    if run.fallback != "auto" or src is None:
        return run.fallback
    src = np.asarray(src)
    primary, backup = int(np.sum(src == M.SOURCE_PRIMARY)), int(np.sum(src == M.SOURCE_BACKUP))
    if primary + backup == 0:
        return run.fallback
    return "backup" if backup > primary else "primary"


def run_context(run):
    """A run's mean context: its prompts' mean length (/prompt_lengths) and half its new
    tokens. /config prompt_len is the length of generated prompts only: a --prompts file's
    run keeps its default of 32 there, which put the pair's code prompts (53-85 tokens) at
    half their context."""
    lengths = getattr(run, "prompt_lengths", None)
    prompt = (round(sum(lengths) / len(lengths)) if lengths
              else int(float(run.config.get("prompt_len", 16) or 16)))
    return prompt + run.max_new_tokens // 2


def round_time_ratio(run, pred):
    """An SD/SSD run's mean round wall time over the forecast's (pred.round_s), over its rounds
    of the full batch (a batch's last rounds, with rows finished, are cheaper than the b-row
    round the model prices); NaN for AR or a run without timed rounds. With it, a forecast's
    error splits into the round's time (the host's speed during the run against the
    characterize file's) and the rest (tokens per round, start-up, time between rounds): priced
    at its own round time the error is (1 + rel_err) / ratio - 1. On the pair's Zen 5 set every
    SD and SSD run's rest was within 8.4% where 22 of the 36 missed 10%, most by rounds 1.1-1.6x
    the file's (verification beside the cache build in the host's slow two-core state)."""
    rounds = run.rounds
    if run.mode == "ar" or not rounds or not len(rounds.get("rep", [])) or \
            not math.isfinite(pred.round_s) or pred.round_s <= 0:
        return math.nan
    br = T.batch_rounds(rounds)
    full = br["rows"] == run.batch_size
    return float(br["wall"][full].mean()) / pred.round_s if np.any(full) else math.nan


def predict_run(run, char):
    """Predicted decode tok/s of one run file from the characterize file's step costs."""
    hw = MS.cpu_profile(char)
    b, K, mnt = run.batch_size, run.lookahead, run.max_new_tokens
    ctx = run_context(run)
    t_spec = run.target
    d_spec = t_spec if run.draft.startswith("perturb:") else run.draft
    t_step, shape = PI.steps_for(t_spec, char, hw, int(run.config.get("target_tp", 1)), ctx,
                                  f"{run.name}: target")
    if run.mode == "ar":
        return P.predict_ar(PI.layout_for(t_step, t_step, hw, shape.vocab, 1), b,
                            run.temperature), {}
    d_step, _ = PI.steps_for(d_spec, char, hw, 1, ctx, f"{run.name}: draft")
    D = max(int(run.config.get("draft_ranks", 1) or 0), 0)
    tp = int(run.config.get("target_tp", 1))
    lay = PI.layout_for(t_step, d_step, hw, shape.vocab, max(D, 1), collocated=(D == 0),
                        beside=PI.beside_steps(t_spec, d_spec, char, tp, D, ctx),
                        turns=PI.turns_steps(t_spec, d_spec, char, tp, t_step, d_step),
                        ssd_round=PI.ssd_round_for(t_spec, d_spec, char, tp, D))
    alpha, r, alpha_b, r_b = run_inputs(run)
    r, r_all = run_law(run, r)
    info = {"alpha": alpha, "r": r, "r_all": r_all}
    if run.mode == "sd":
        synthetic = run.config.get("outcomes", "").startswith("synthetic")

        def predict_at(rows):
            return P.predict_sd(lay, rows, K, alpha, run.temperature, synthetic)
    else:
        budget = run.config.get("budget", "auto")
        budget = int(budget) if budget.isdigit() else chosen_budget(run)
        shape_ = P.parse_shape(run.fanout, K, alpha, r, budget, r_all)
        bshape = P.parse_shape(run.config.get("fanout_backup", "uniform:1"), K, alpha_b,
                               r_b or 1.0, budget or 1)
        built = prepared_branches(run) if shape_ else None
        realised = realised_hit_rates(run)
        fallback = fallback_used(run)

        def predict_at(rows):
            return P.predict_ssd(lay, rows, K, alpha, r, fallback, shape=shape_,
                                 temperature=run.temperature, alpha_b=alpha_b, r_b=r_b,
                                 backup_shape=bshape, max_budget=PI.B_CAP, built=built,
                                 realised=realised, r_all=r_all)
    pred = predict_at(b)
    # A row's round is the backup's with the stationary miss share (Equation (1)); else the
    # primary's, a cache hit's or a just-in-time draft's alike.
    backup_share = 1.0 - pred.p_hit if pred.fallback == "backup" else 0.0

    sequences = sequence_inputs(run, alpha, alpha_b, backup_share)

    def tokens_at(rng, live, trial):
        if sequences is not None and len(sequences[trial % len(sequences)]) == b:
            rows = np.array(sequences[trial % len(sequences)])[live]   # alpha, alpha_b, share
            backup = rng.random(live.size) < rows[:, 2]
            return 1 + P.accepted_draws(rng, np.where(backup, rows[:, 1], rows[:, 0]), K,
                                        live.size)
        drafted = P.accepted_draws(rng, alpha, K, live.size)
        if backup_share > 0:
            backup = rng.random(live.size) < backup_share
            drafted[backup] = P.accepted_draws(rng, alpha_b, K, int(backup.sum()))
        return 1 + drafted
    pred.tok_s = P.finite_run_rate(
        lambda rows: pred.round_s if rows == b else predict_at(rows).round_s, b,
        max(mnt - 1, 1), tokens_at)
    return pred, info


def validate(args, out=print):
    if not args.characterize:
        raise H.InputError("--validate: needs --characterize FILE (the machine's step costs)")
    char = PI.load_characterize(args.characterize)
    runs, errors = sio.load_runs(args.validate)
    for e in errors:
        print(f"ssd-analyze predict: {e}", file=sys.stderr)
    # The AR run of each SD/SSD run's own sweep (same folder, same sweep key, as many threads
    # on the target's rank), for speedups.
    baselines = {}
    for run in runs:
        if not run.is_characterize and run.mode == "ar":
            baselines.setdefault((os.path.dirname(run.path), run.sweep_key(), run.threads), run)
    # The file's step costs hold for its own threads per rank: a run on other thread counts is
    # shown, not counted (on this project's 2-core host a 1-thread file predicted the 2-thread
    # pair runs 28-52% low).
    file_threads = int(char.attrs.get("threads", 0) or 0)
    # So do they for the file's compute: a run whose target multiplied in another (f32, bf16 dot
    # products, AMX tiles; --compute) has other step costs (on a host with AMX, an amx file
    # forecast a bf16 run's SD 32% fast).
    file_compute = str(char.attrs.get("target_compute", "") or "")
    rows = []
    for run in runs:
        if run.is_characterize:
            continue
        try:
            pred, info = predict_run(run, char)
            base = baselines.get((os.path.dirname(run.path), run.sweep_key(), run.threads))
            speedup = (pred.tok_s / predict_run(base, char)[0].tok_s, run.tok_s / base.tok_s) \
                if base is not None and run.mode != "ar" else (math.nan, math.nan)
        except H.InputError as e:
            print(f"ssd-analyze predict: {e}", file=sys.stderr)
            continue
        err = M.relative_error(pred.tok_s, run.tok_s)
        x_err = M.relative_error(*speedup)
        round_x = round_time_ratio(run, pred)
        # More ranks than the host has CPUs: the draft ranks took the target's cores, which the
        # model (every rank on hardware of its own) does not describe; shown, not counted.
        ranks = int(run.config.get("target_tp", 1) or 1) + max(
            int(run.config.get("draft_ranks", 0) or 0), 0)
        cpus = run.attrs.get("host_cpus")
        oversubscribed = cpus is not None and ranks > int(cpus)
        other_threads = file_threads > 0 and run.threads != file_threads
        compute = str((getattr(run, "models", None) or {}).get("target", {}).get("compute", ""))
        other_compute = bool(file_compute and compute and compute != file_compute)
        rows.append({"file": run.name, "mode": run.mode, "target": run.target.removeprefix(
            "synthetic:"), "draft": run.draft.removeprefix("synthetic:"), "b": run.batch_size,
            "K": run.lookahead or None, "fanout": run.fanout, "fallback": pred.fallback,
            "alpha": info.get("alpha"), "r": info.get("r"), "r_K": info.get("r_all"),
            "p_hit": pred.p_hit, "T_p": pred.t_p, "predicted": pred.tok_s, "measured": run.tok_s,
            "rel_err": err,
            "within": abs(err) <= args.tol, "oversubscribed": oversubscribed,
            "threads": run.threads, "other_threads": other_threads,
            "compute": compute, "other_compute": other_compute,
            "x_pred": speedup[0], "x_meas": speedup[1], "x_err": x_err,
            "x_within": abs(x_err) <= args.tol if math.isfinite(x_err) else None,
            "round_x": round_x, "err_at_round": (1.0 + err) / round_x - 1.0})
    cols = ["file", "mode", "target", "draft", "b", "K", "fanout", "fallback", "alpha", "r",
            "r_K", "p_hit", "T_p", "predicted", "measured", "rel_err", "within", "x_pred",
            "x_meas", "x_err", "round_x", "err_at_round"]
    for r in rows:
        for c, spec in (("alpha", ".3f"), ("r", ".2f"), ("r_K", ".2f"), ("p_hit", ".3f"),
                        ("T_p", ".2f"), ("predicted", ".1f"), ("measured", ".1f"),
                        ("rel_err", "+.1%"),
                        ("x_pred", ".3f"), ("x_meas", ".3f"), ("x_err", "+.1%"),
                        ("round_x", ".2f"), ("err_at_round", "+.1%")):
            r[c + "_txt"] = format_cell(r[c], spec)
        r["within_txt"] = ("n/a: ranks > CPUs" if r["oversubscribed"] else
                           f"n/a: {r['threads']} threads, file {file_threads}"
                           if r["other_threads"] else
                           f"n/a: {r['compute']} compute, file {file_compute}"
                           if r["other_compute"] else "yes" if r["within"] else "NO")
    header = {"characterize": f"{args.characterize} ({char.attrs.get('target')} + "
                              f"{char.attrs.get('draft')}, {char.attrs.get('backend')})",
              "inputs": "alpha, r, K, b, fan-out, fallback from each run, and the hit rates "
                        "and budget its rounds drew; step costs from the characterize file only",
              "r, r_K": "an SSD run's power law after a rejection and after all K accepted "
                        "(Theorem 18; run_law), which shape a geometric fan-out",
              "tolerance": f"{args.tol:.0%}",
              "x_pred, x_meas, x_err": "an SD/SSD run's speedup over the AR run of its own "
                                       "sweep, predicted and measured: the host's drift "
                                       "between characterize and the sweep cancels",
              "round_x, err_at_round": "an SD/SSD run's mean round (full-batch rounds) over "
                                       "the forecast's, and its error priced at that round "
                                       "time: what the round's time leaves of the error"}
    note = PI.steadiness_note(char)
    if note:
        header["steadiness"] = note
    emit_table(rows, cols, args.format, header, out)
    counted = [r for r in rows
               if not r["oversubscribed"] and not r["other_threads"] and not r["other_compute"]]
    n_ok = sum(r["within"] for r in counted)
    if args.format == "text":
        errs = np.abs([r["rel_err"] for r in counted]) if counted else np.array([math.nan])
        over = sum(r["oversubscribed"] for r in rows)
        other = sum(r["other_threads"] and not r["oversubscribed"] for r in rows)
        other_c = sum(r["other_compute"] and not r["other_threads"] and not r["oversubscribed"]
                      for r in rows)
        out(f"# {n_ok} of {len(counted)} runs within {args.tol:.0%} (median |error| "
            f"{np.nanmedian(errs):.1%}, max {np.nanmax(errs):.1%})"
            + (f"; {over} oversubscribed runs (more ranks than host CPUs) not counted"
               if over else "")
            + (f"; {other} runs on other threads per rank than the file's {file_threads} not "
               "counted" if other else "")
            + (f"; {other_c} runs in another compute than the file's {file_compute} not counted"
               if other_c else "")
            + ("" if n_ok == len(counted) else "; see analysis/README.md, 'predict', for why"))
        x = [r for r in counted if r["x_within"] is not None]
        if x:
            x_errs = np.abs([r["x_err"] for r in x])
            out(f"# speedup over the sweep's AR run: {sum(r['x_within'] for r in x)} of {len(x)} "
                f"SD/SSD runs within {args.tol:.0%} (median |error| {np.median(x_errs):.1%}, "
                f"max {np.max(x_errs):.1%})")
        timed = [r for r in counted if math.isfinite(r["err_at_round"])]
        if timed:
            at = np.abs([r["err_at_round"] for r in timed])
            out(f"# priced at its own rounds' time: {int(np.sum(at <= args.tol))} of {len(timed)} "
                f"SD/SSD runs within {args.tol:.0%} (median |error| {np.median(at):.1%}, max "
                f"{np.max(at):.1%}); the rest of their error is the round's time, the host's "
                "speed during the run against the characterize file's (round_x)")
    return 0 if rows else 2
