"""`ssd-analyze predict`: flags, output and validation for predict.py's model."""
import argparse
import csv
import json
import math
import os
import re
import sys

import numpy as np

from . import hardware as H
from . import io as sio
from . import metrics as M
from . import predict as P

# Throughputs the paper reports (decode tok/s, greedy, batch 1, target TP=4 on H100s, SSD's
# draft on one more H100): Appendix B.3's table, "Average" rows (the same numbers as Figure 1
# right and Figure 7 left). Printed beside the predictions for comparison only, never an input.
# Figure 6 (right), SSD vs draft GPUs at batch 16, is a projection shown only as a plot: no
# numbers in the text, so nothing is printed for it.
PAPER = {  # (target, draft, hardware, target TP, batch, draft ranks) -> (AR, SD, SSD)
    ("llama-3.1-70b", "llama-3.2-1b", "h100-sxm", 4, 1, 1): (54.7, 161.8, 255.8),
    ("qwen3-32b", "qwen3-0.6b", "h100-sxm", 4, 1, 1): (88.8, 136.8, 203.8),
}

COLUMNS = ["b", "D", "AR", "SD", "K_sd", "SSD", "K", "B_win", "B", "shape", "p_hit", "T_p",
           "fallback", "b*", "SSD/SD", "SSD/AR", "paper_AR", "paper_SD", "paper_SSD"]


class _Parser(argparse.ArgumentParser):
    def error(self, message):   # one line, exit 2 (no usage dump)
        print(f"ssd-analyze predict: {message}", file=sys.stderr)
        sys.exit(2)


def _int_list(flag, lo=1):
    def parse(text):
        try:
            vals = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected integers like 1,2,4, got '{text}'")
        if not vals or min(vals) < lo:
            raise argparse.ArgumentTypeError(f"every value must be >= {lo}")
        return vals
    return parse


def _float_in(flag, lo, hi):
    def parse(text):
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got '{text}'")
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"must be in [{lo}, {hi}], got {v:g}")
        return v
    return parse


def add_parser(sub, func):
    p = sub.add_parser("predict", help="first-principles AR/SD/SSD tok/s model",
                       description=P.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.__class__ = _Parser
    p.add_argument("--target", help="preset (default llama-3.1-70b, or the characterize "
                   "file's target)")
    p.add_argument("--draft", help="preset (default llama-3.2-1b, or the file's draft)")
    p.add_argument("--target-tp", type=_int_list("--target-tp"), help="default 4 (GPU), 1 (cpu)")
    p.add_argument("--draft-ranks", type=_int_list("--draft-ranks"), default=[1],
                   help="list, e.g. 1,2,3,4")
    p.add_argument("--batch-size", "-b", type=_int_list("--batch-size"), default=[1, 16])
    p.add_argument("--alpha", type=_float_in("--alpha", 0.0, 0.999), default=0.8,
                   help="per-token acceptance rate of the draft")
    p.add_argument("--r", type=_float_in("--r", 0.01, 50.0), default=0.7,
                   help="power-law exponent, miss(F) = (F+1)^-r")
    p.add_argument("-k", "--lookahead", type=_int_list("--lookahead"),
                   help="K (list); default: the best of 1..8")
    p.add_argument("--fallback", choices=["auto", "primary", "backup"], default="auto")
    p.add_argument("--alpha-backup", type=_float_in("--alpha-backup", 0.0, 0.999), default=0.0,
                   help="acceptance of the backup speculator (0: random tokens)")
    p.add_argument("--max-budget", type=_int_list("--max-budget", 0), default=[64],
                   help="largest per-sequence budget searched (64: ssd-bench's scratch)")
    p.add_argument("--temperature", type=_float_in("--temperature", 0.0, 10.0), default=0.0)
    p.add_argument("--context", type=_int_list("--context"), default=[1024],
                   help="tokens per sequence (KV cache read by each step)")
    p.add_argument("--hardware", help=f"{', '.join(H.PROFILES)} or cpu (default h100-sxm; "
                   "with --characterize: its measured step costs)")
    p.add_argument("--characterize", help="ssd-bench characterize --out FILE")
    p.add_argument("--validate", nargs="+", metavar="RUN", help="predict each run file "
                   "(needs --characterize) and compare with its measured tok/s")
    p.add_argument("--tol", type=_float_in("--tol", 0.0, 10.0), default=0.10)
    p.add_argument("--format", choices=["text", "csv", "json"], default="text")
    p.set_defaults(func=func)
    return p


def _fmt(v, spec):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-" if not (isinstance(v, float) and math.isinf(v)) else "inf"
    return format(v, spec)


def _emit(rows, columns, fmt, header, out=print, stream=None):
    if fmt == "json":
        json.dump({"inputs": header, "rows": rows}, stream or sys.stdout, indent=1,
                  default=lambda x: None)
        (stream or sys.stdout).write("\n")
        return
    if fmt == "csv":
        w = csv.DictWriter(stream or sys.stdout, fieldnames=columns, lineterminator="\n",
                           extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: ("" if r.get(c) is None else r.get(c)) for c in columns})
        return
    for k, v in header.items():
        out(f"# {k}: {v}")
    text = [{c: r.get(c + "_txt", _fmt(r.get(c), "")) for c in columns} for r in rows]
    width = {c: max([len(c)] + [len(t[c]) for t in text]) for c in columns}
    out("  ".join(c.rjust(width[c]) for c in columns).rstrip())
    for t in text:
        out("  ".join(t[c].rjust(width[c]) for c in columns).rstrip())


# --- layouts ----------------------------------------------------------------------------------

def layout_for(t_step, d_step, hw, vocab, D, collocated=True, beside=(None, None)):
    return P.Layout(t_step, d_step, hw.link_latency_s, hw.link_bw, vocab, D, collocated, hw,
                    *beside)


def _same_spec(a, b):
    return a == b or a.removeprefix("synthetic:") == b.removeprefix("synthetic:")


def steps_for(spec, char, hw, tp, context, where):
    """A model's step cost: the characterize file's measurement (timed alone) when it measured
    that model (on one rank), else the roofline on `hw`."""
    if char is not None and tp == 1:
        for role, s in H.characterize_specs(char).items():
            if _same_spec(s, spec):
                step = H.MeasuredStep.from_characterize(char, role, context=context)
                if step is not None:
                    return step, step.shape or H.shape_of(spec, where)
    shape = H.shape_of(spec, where)
    return H.RooflineStep(shape, hw, tp, context), shape


def beside_steps(target, draft, char, tp, D, context=None):
    """(target, draft) costs timed side by side, as SSD overlaps them, when the characterize
    file measured this very pair with a separate draft rank; else (None, None): how much two
    ranks slow each other depends on which two models share the memory."""
    if char is None or tp != 1 or D < 1:
        return None, None
    specs = H.characterize_specs(char)
    if not (_same_spec(specs.get("target", ""), target) and
            _same_spec(specs.get("draft", ""), draft)):
        return None, None
    return tuple(H.MeasuredStep.from_characterize(char, role, concurrent=True, context=context)
                 for role in ("target", "draft"))


def cmd_predict(args):
    try:
        if args.validate:
            return validate(args)
        return predict_grid(args)
    except (H.InputError, sio.AnalysisError) as e:
        print(f"ssd-analyze predict: {e}", file=sys.stderr)
        return 2


def _load_char(path):
    if not path:
        return None
    try:
        c = sio.load_run(path)
    except sio.AnalysisError as e:
        raise H.InputError(f"--characterize: {e}")
    if not c.is_characterize:
        raise H.InputError(f"--characterize: {path} is a run file, not a characterize file")
    return c


def predict_grid(args, out=print):
    char = _load_char(args.characterize)
    hw_name = args.hardware or ("cpu" if char is not None else "h100-sxm")
    hw = H.profile(hw_name, char)
    specs = H.characterize_specs(char) if char is not None else {}
    target = args.target or (specs.get("target") if hw_name == "cpu" else None) or "llama-3.1-70b"
    draft = args.draft or (specs.get("draft") if hw_name == "cpu" else None) or "llama-3.2-1b"
    tps = args.target_tp or [1 if hw_name == "cpu" else 4]
    ks = args.lookahead or list(range(1, 9))
    ctx, maxb = args.context[0], args.max_budget[0]
    header = {"hardware": f"{hw.name} ({hw.source}): {hw.mem_bw / 1e9:.0f} GB/s x "
                          f"{hw.mem_eff:g}, {hw.peak_flops / 1e12:.3g} TFLOP/s x {hw.gemm_eff:g},"
                          f" link {hw.link_latency_s * 1e6:.2g} us + {hw.link_bw / 1e9:.3g} GB/s",
              "target": f"{target}, TP {','.join(map(str, tps))}", "draft": draft,
              "alpha": args.alpha, "r": args.r, "K": ",".join(map(str, ks)),
              "fallback": args.fallback, "alpha_backup": args.alpha_backup,
              "temperature": args.temperature, "context": ctx, "max_budget": maxb,
              "columns": "tok/s; K/B/fallback/shape = the best SSD config (Corollary 16); "
                         "B_win = per-sequence budget hidden by verification; "
                         "b* = Theorem 17; paper_* = Appendix B.3 (comparison only)"}
    rows = []
    for tp in tps:
        t_step, t_shape = steps_for(target, char, hw, tp, ctx, "--target")
        d_step, _ = steps_for(draft, char, hw, 1, ctx, "--draft")
        for b in args.batch_size:
            for D in args.draft_ranks:
                lay = layout_for(t_step, d_step, hw, t_shape.vocab, D,
                                 beside=beside_steps(target, draft, char, tp, D, ctx))
                ar = P.predict_ar(lay, b, args.temperature)
                sd = P.best_over_k(lambda k: P.predict_sd(lay, b, k, args.alpha,
                                                          args.temperature), ks)
                ssd = P.best_over_k(lambda k: P.predict_ssd(
                    lay, b, k, args.alpha, args.r, args.fallback, temperature=args.temperature,
                    alpha_b=args.alpha_backup, max_budget=maxb), ks)
                key = (target.removeprefix("synthetic:"), draft.removeprefix("synthetic:"),
                       hw.name, tp, b, D)
                paper = PAPER.get(key, (None, None, None))
                rows.append({"target_tp": tp, "b": b, "D": D, "AR": ar.tok_s, "SD": sd.tok_s,
                             "K_sd": sd.K, "SSD": ssd.tok_s, "K": ssd.K,
                             "B_win": ssd.window_budget, "B": ssd.budget,
                             "shape": "/".join(map(str, ssd.shape)), "p_hit": ssd.p_hit,
                             "T_p": ssd.t_p, "fallback": ssd.fallback, "b*": ssd.b_star,
                             "SSD/SD": ssd.tok_s / sd.tok_s, "SSD/AR": ssd.tok_s / ar.tok_s,
                             "paper_AR": paper[0], "paper_SD": paper[1], "paper_SSD": paper[2]})
    for r in rows:
        for c, spec in (("AR", ".1f"), ("SD", ".1f"), ("SSD", ".1f"), ("p_hit", ".3f"),
                        ("T_p", ".2f"), ("b*", ".1f"), ("SSD/SD", ".2f"), ("SSD/AR", ".2f"),
                        ("paper_AR", ".1f"), ("paper_SD", ".1f"), ("paper_SSD", ".1f")):
            r[c + "_txt"] = _fmt(r[c], spec)
    cols = COLUMNS if len(tps) == 1 else ["target_tp"] + COLUMNS
    _emit(rows, cols, args.format, header, out)
    return 0


# --- validation against this project's runs ---------------------------------------------------

def run_inputs(run):
    """alpha, r, alpha_b, r_b of a run: the acceptance rate realised in its /rounds (maximum
    likelihood of the capped geometric model: accepted / (accepted + rounds with a rejection),
    over rounds the primary drafted; over the backup's rounds for alpha_b), r from the
    synthetic outcome law when the run drew its outcomes, else fitted to its bonus ranks."""
    rd = run.rounds
    cfg = dict(re.findall(r"(\w+)=([\d.]+)", run.config.get("outcomes", "")))
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
        ranks = rd["bonus_rank"][rd["outcome_hit"] >= 0]
        F = np.arange(1, 33)
        r = M.fit_power_law(F, M.miss_rate_curve(ranks, F), np.full(F.size, ranks.size))
        r = 0.7 if not math.isfinite(r) else r
    else:
        r = 0.7
    r_b = float(cfg["r_b"]) if "r_b" in cfg else None
    return alpha, r, alpha_b, r_b


def prepared_branches(run):
    """Mean branches per sequence a run's caches really held (/rounds/fanout, Definition 10's
    prepared fan-out, summed over k), or None. Below the configured shape when Saguaro's C < 1
    spares the branch of the draft's own token (fig5: 5.5 of uniform:2's 8 at C = 0.75)."""
    fanout = run.rounds.get("fanout")
    if fanout is None or np.ndim(fanout) != 2:
        return None
    looked = np.asarray(fanout)[np.asarray(fanout)[:, 0] >= 0]
    return float(looked.sum(axis=1).mean()) if len(looked) else None


def predict_run(run, char):
    """Predicted decode tok/s of one run file from the characterize file's step costs."""
    hw = H.cpu_profile(char)
    b, K, mnt = run.batch_size, run.lookahead, run.max_new_tokens
    ctx = int(float(run.config.get("prompt_len", 16) or 16)) + mnt // 2
    t_spec = run.target
    d_spec = t_spec if run.draft.startswith("perturb:") else run.draft
    t_step, shape = steps_for(t_spec, char, hw, int(run.config.get("target_tp", 1)), ctx,
                               f"{run.name}: target")
    if run.mode == "ar":
        return P.predict_ar(layout_for(t_step, t_step, hw, shape.vocab, 1), b, run.temperature), {}
    d_step, _ = steps_for(d_spec, char, hw, 1, ctx, f"{run.name}: draft")
    D = max(int(run.config.get("draft_ranks", 1) or 0), 0)
    tp = int(run.config.get("target_tp", 1))
    lay = layout_for(t_step, d_step, hw, shape.vocab, max(D, 1), collocated=(D == 0),
                     beside=beside_steps(t_spec, d_spec, char, tp, D, ctx))
    alpha, r, alpha_b, r_b = run_inputs(run)
    info = {"alpha": alpha, "r": r}
    if run.mode == "sd":
        pred = P.predict_sd(lay, b, K, alpha, run.temperature)
    else:
        budget = run.config.get("budget", "auto")
        budget = int(budget) if budget.isdigit() else None
        shape_ = P.parse_shape(run.fanout, K, alpha, r, budget)
        bshape = P.parse_shape(run.config.get("fanout_backup", "uniform:1"), K, alpha_b,
                               r_b or 1.0, budget or 1)
        pred = P.predict_ssd(lay, b, K, alpha, r, run.fallback, shape=shape_,
                             temperature=run.temperature, alpha_b=alpha_b, r_b=r_b,
                             backup_shape=bshape, max_budget=64,
                             built=prepared_branches(run) if shape_ else None)
    # the token limit cuts each sequence's last round short: half a round is lost on average
    if run.mode == "ar":
        return pred, info
    e = P.tokens_per_round(alpha, K)
    n = max(mnt - 1, 1)
    pred.tok_s *= (n / e) / (n / e + 0.5)
    return pred, info


def validate(args, out=print):
    if not args.characterize:
        raise H.InputError("--validate: needs --characterize FILE (the machine's step costs)")
    char = _load_char(args.characterize)
    runs, errors = sio.load_runs(args.validate)
    for e in errors:
        print(f"ssd-analyze predict: {e}", file=sys.stderr)
    # The AR run of each SD/SSD run's own sweep (same folder, same sweep key), for speedups.
    baselines = {}
    for run in runs:
        if not run.is_characterize and run.mode == "ar":
            baselines.setdefault((os.path.dirname(run.path), run.sweep_key()), run)
    rows = []
    for run in runs:
        if run.is_characterize:
            continue
        try:
            pred, info = predict_run(run, char)
            base = baselines.get((os.path.dirname(run.path), run.sweep_key()))
            speedup = (pred.tok_s / predict_run(base, char)[0].tok_s, run.tok_s / base.tok_s) \
                if base is not None and run.mode != "ar" else (math.nan, math.nan)
        except H.InputError as e:
            print(f"ssd-analyze predict: {e}", file=sys.stderr)
            continue
        err = M.relative_error(pred.tok_s, run.tok_s)
        x_err = M.relative_error(*speedup)
        # More ranks than the host has CPUs: the draft ranks took the target's cores, which the
        # model (every rank on hardware of its own) does not describe; shown, not counted.
        ranks = int(run.config.get("target_tp", 1) or 1) + max(
            int(run.config.get("draft_ranks", 0) or 0), 0)
        cpus = run.attrs.get("host_cpus")
        oversubscribed = cpus is not None and ranks > int(cpus)
        rows.append({"file": run.name, "mode": run.mode, "target": run.target.removeprefix(
            "synthetic:"), "draft": run.draft.removeprefix("synthetic:"), "b": run.batch_size,
            "K": run.lookahead or None, "fanout": run.fanout, "fallback": pred.fallback,
            "alpha": info.get("alpha"), "r": info.get("r"), "p_hit": pred.p_hit,
            "T_p": pred.t_p, "predicted": pred.tok_s, "measured": run.tok_s, "rel_err": err,
            "within": abs(err) <= args.tol, "oversubscribed": oversubscribed,
            "x_pred": speedup[0], "x_meas": speedup[1], "x_err": x_err,
            "x_within": abs(x_err) <= args.tol if math.isfinite(x_err) else None})
    cols = ["file", "mode", "target", "draft", "b", "K", "fanout", "fallback", "alpha", "r",
            "p_hit", "T_p", "predicted", "measured", "rel_err", "within", "x_pred", "x_meas",
            "x_err"]
    for r in rows:
        for c, spec in (("alpha", ".3f"), ("r", ".2f"), ("p_hit", ".3f"), ("T_p", ".2f"),
                        ("predicted", ".1f"), ("measured", ".1f"), ("rel_err", "+.1%"),
                        ("x_pred", ".3f"), ("x_meas", ".3f"), ("x_err", "+.1%")):
            r[c + "_txt"] = _fmt(r[c], spec)
        r["within_txt"] = ("n/a: ranks > CPUs" if r["oversubscribed"] else
                           "yes" if r["within"] else "NO")
    header = {"characterize": f"{args.characterize} ({char.attrs.get('target')} + "
                              f"{char.attrs.get('draft')}, {char.attrs.get('backend')})",
              "inputs": "alpha, r, K, b, fan-out, fallback from each run; step costs from "
                        "the characterize file only", "tolerance": f"{args.tol:.0%}",
              "x_pred, x_meas, x_err": "an SD/SSD run's speedup over the AR run of its own "
                                       "sweep, predicted and measured: the host's drift "
                                       "between characterize and the sweep cancels"}
    _emit(rows, cols, args.format, header, out)
    counted = [r for r in rows if not r["oversubscribed"]]
    n_ok = sum(r["within"] for r in counted)
    if args.format == "text":
        errs = np.abs([r["rel_err"] for r in counted]) if counted else np.array([math.nan])
        skipped = len(rows) - len(counted)
        out(f"# {n_ok} of {len(counted)} runs within {args.tol:.0%} (median |error| "
            f"{np.nanmedian(errs):.1%}, max {np.nanmax(errs):.1%})"
            + (f"; {skipped} oversubscribed runs (more ranks than host CPUs) not counted"
               if skipped else "")
            + ("" if n_ok == len(counted) else "; see analysis/README.md, 'predict', for why"))
        x = [r for r in counted if r["x_within"] is not None]
        if x:
            x_errs = np.abs([r["x_err"] for r in x])
            out(f"# speedup over the sweep's AR run: {sum(r['x_within'] for r in x)} of {len(x)} "
                f"SD/SSD runs within {args.tol:.0%} (median |error| {np.median(x_errs):.1%}, "
                f"max {np.max(x_errs):.1%})")
    return 0 if rows else 2
