"""`ssd-analyze compare FILES... --out DIR`: machines side by side.

FILES are characterize files and run files of one target/draft pair from any number of
machines (machine.py groups them by the /machine identity, never averaging two machines). Per
machine, from its characterize files: the host's read bandwidth (one rank alone, and every rank
of the node at once where the file has it) and copy bandwidth, the compute peak of
each compute mode (fp32 FMA, bf16 dot product; on a GPU the best GEMM), the AR step, the
verification of K+1 rows and of 16 rows in AR steps, the draft step in target steps, and the
communication characterize measured (draft<->target link, all-reduce); a machine's figures are
the mean over its characterize files. Then AR/SD/SSD tok/s at one K and batch, predicted by
predict.py's model from the machine's own (first) characterize file, the measured tok/s of its
run files of that K and batch beside, and each machine's ratio to the first machine.

Writes DIR/compare.csv (every column), DIR/compare.txt (the console's aligned text) and
DIR/roofline_machines.{png,pdf} (figures_compare.py). Files of two target/draft pairs: one
line on stderr, exit 2.
"""
import argparse
import math
import os
import sys

import numpy as np

from . import hardware as H
from . import io as sio
from . import machine as MC
from . import measured as MS
from . import predict as P
from . import predict_inputs as PI
from . import predict_validate as PV
from .tables import OneLineErrors, emit_table, format_cell

HARDWARE = [("machine", ""), ("cpu", ""), ("gpu", ""), ("driver", ""), ("cpus", ""),
            ("mem_GiB", ".0f"), ("hosts", ""), ("files", ""), ("read_GBps", ".1f"),
            ("node_read_GBps", ".1f"), ("node_latency_ns", ".0f"), ("copy_GBps", ".1f"),
            ("fp32_GFLOPs", ".1f"), ("bf16_GFLOPs", ".1f"), ("gemm_GFLOPs", ".1f"), ("AR_ms", ".3f"),
            ("verify_K+1_AR", ".2f"), ("verify_16_AR", ".2f"), ("draft_step_target", ".3f"),
            ("p2p_us", ".2f"), ("p2p_GBps", ".2f"), ("allreduce_us", ".2f"),
            ("allreduce_GBps", ".2f")]
SPEEDS = [("machine", ""), ("AR", ".1f"), ("AR_meas", ".1f"), ("SD", ".1f"), ("SD_meas", ".1f"),
          ("SSD", ".1f"), ("SSD_meas", ".1f"), ("AR/1st", ".2f"), ("SD/1st", ".2f"),
          ("SSD/1st", ".2f"), ("AR_meas/1st", ".2f"), ("SD_meas/1st", ".2f"),
          ("SSD_meas/1st", ".2f"), ("K_pred", ""), ("B", ""), ("fallback", "")]
MODES = ("AR", "SD", "SSD")


class CompareError(Exception):
    """Files that cannot be compared (the message is the one line printed)."""


def add_parser(sub, func):
    p = sub.add_parser("compare", help="machines side by side: table, roofline, forecast",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.__class__ = OneLineErrors
    p.add_argument("files", nargs="+", help="characterize and run files, any machines")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("-k", "--lookahead", type=int, help="K (default: the first characterize "
                   "file's lookahead)")
    p.add_argument("-b", "--batch-size", type=int, help="default: the first characterize "
                   "file's batch_size")
    p.add_argument("--context", type=int, help="tokens per sequence (default: the first "
                   "characterize file's context)")
    p.add_argument("--alpha", type=float, help="acceptance (default: predict's)")
    p.add_argument("--r", type=float, help="power-law exponent (default: predict's)")
    p.add_argument("--temperature", type=float, default=0.0)
    p.set_defaults(func=func)
    return p


def _spec(s):
    return str(s or "none").removeprefix("synthetic:")


def pair_of(run):
    """(target, draft) a file is about: a characterize file's two models, a run's target and
    (SD, SSD) draft; None for an AR run's draft, which any pair matches."""
    if run.is_characterize:
        specs = H.characterize_specs(run)
        return _spec(specs.get("target", run.target)), _spec(specs.get("draft", "none"))
    return _spec(run.target), (None if run.mode == "ar" else _spec(run.draft))


def check_one_pair(runs):
    """The one (target, draft) pair of `runs`; CompareError naming the first file that differs."""
    first = next((r for r in runs if r.is_characterize), runs[0])
    target, draft = pair_of(first)
    for r in runs:
        t, d = pair_of(r)
        if draft is None:
            draft = d
        if t != target or (d is not None and draft is not None and d != draft):
            raise CompareError(f"{r.name} is about {t}/{d or '-'}, {first.name} about "
                               f"{target}/{draft or '-'}: compare sets one target/draft pair "
                               "side by side")
    return target, draft


def _attr(char, *names):
    for n in names:
        v = char.attrs.get(n)
        if v is not None and v != "":
            return float(v)
    return math.nan


def char_figures(char, K):
    """The hardware table's measured figures of one characterize file at lookahead K."""
    a = char.attrs
    b = int(a.get("batch_size", 1))
    target = MS.MeasuredStep.from_characterize(char, "target")
    draft = MS.MeasuredStep.from_characterize(char, "draft")
    ar = target(b, b) if target is not None else math.nan
    gflops = np.asarray(char.gemm.get("gflops", []), float)
    return {
        "read_GBps": _attr(char, "host_read_gbps"), "node_read_GBps": _attr(char, "node_read_gbps"),
        "node_latency_ns": _attr(char, "node_latency_median_ns"),
        "copy_GBps": _attr(char, "bandwidth_gbps"),
        "fp32_GFLOPs": _attr(char, "host_fma_gflops"),
        "bf16_GFLOPs": _attr(char, "host_bf16_dot_gflops"),
        "gemm_GFLOPs": float(gflops.max()) if gflops.size else math.nan,
        "AR_ms": 1e3 * ar,
        "verify_K+1_AR": target(b * (K + 1), b) / ar if target is not None else math.nan,
        "verify_16_AR": target(16, b) / ar if target is not None else math.nan,
        "draft_step_target": draft(b, b) / ar if None not in (target, draft) else math.nan,
        "p2p_us": 1e6 * _attr(char, "p2p_latency_s"), "p2p_GBps": _attr(char, "p2p_bandwidth_gbps"),
        "allreduce_us": 1e6 * _attr(char, "all_reduce_latency_s"),
        "allreduce_GBps": _attr(char, "all_reduce_busbw_gbps")}


def forecast(char, target, draft, K, b, context, args):
    """({AR, SD, SSD: tok/s}, (alpha, r, sources)) at K and b from one characterize file's step
    costs (predict.py's model: SD with the draft collocated, SSD with one draft rank); AR alone
    and None for a file without a draft."""
    hw = MS.cpu_profile(char)
    if draft in (None, "none"):   # a file of the target alone: AR only
        lay = PI.pair_layout(target, target, char, hw, 1, 1, context)[0]
        return {"AR": P.predict_ar(lay, b, args.temperature).tok_s}, None
    lay = PI.pair_layout(target, draft, char, hw, 1, 1, context)[0]
    alpha, r, sources = PI.resolve(args, lay, None)
    ar = P.predict_ar(lay, b, args.temperature)
    sd = P.predict_sd(lay, b, K, alpha, args.temperature)
    ssd = P.predict_ssd(lay, b, K, alpha, r, temperature=args.temperature,
                        max_budget=PI.B_CAP)
    return ({"AR": ar.tok_s, "SD": sd.tok_s, "SSD": ssd.tok_s, "K_pred": K, "B": ssd.fanout_total,
             "fallback": ssd.fallback}, (alpha, r, sources))


def measured_speeds(files, K, b):
    """({mode: mean tok/s} of a machine's run files at K (SD, SSD) and batch b, [files left
    out, with why])."""
    speeds, left = {}, []
    for r in files:
        if r.is_characterize:
            continue
        mode = r.mode.upper()
        if r.batch_size != b or (mode != "AR" and r.lookahead != K):
            left.append(f"{r.name} ({r.mode}, K={r.lookahead}, b={r.batch_size})")
            continue
        speeds.setdefault(mode, []).append(r.tok_s)
    return {m: float(np.mean(v)) for m, v in speeds.items()}, left


def acceptance_inputs(runs, args):
    """args with --alpha and --r filled in, where not given, from the first SSD (else SD) run's
    rounds (predict_validate.run_inputs), so that forecast and measurement share the pair's
    acceptance, which does not depend on the machine; else as given (predict's defaults)."""
    spec = next((r for r in runs if r.mode == "ssd" and r.has_rounds), None) or \
        next((r for r in runs if r.mode == "sd" and r.has_rounds), None)
    if spec is None:
        return args, None
    alpha, r, _, _ = PV.run_inputs(spec)
    filled = argparse.Namespace(**vars(args))
    if args.alpha is None:
        filled.alpha = alpha
    if args.r is None and spec.mode == "ssd":
        filled.r = r
    return filled, spec.name


def machine_rows(machines, target, draft, K, b, context, args):
    """(rows, notes, inputs): one row per machine with both tables' columns."""
    rows, notes, inputs = [], [], {}
    for n, m in enumerate(machines):
        chars = [f for f in m.files if f.is_characterize]
        row = {"machine": f"{n + 1}: {m.label()}", "cpu": m.ident.get("cpu_model", "-"),
               "gpu": m.ident.get("gpu_name", "none"), "driver": m.details("cuda_driver"),
               "cpus": m.ident.get("cpus"), "mem_GiB": m.ident.get("memory_gib"),
               "hosts": m.details("hostname"), "files": len(m.files)}
        figs = [char_figures(c, K) for c in chars]
        for key, _ in HARDWARE[8:]:
            vals = [f[key] for f in figs if math.isfinite(f[key])]
            row[key] = float(np.mean(vals)) if vals else math.nan
        if chars:
            pred, used = forecast(chars[0], target, draft, K, b, context, args)
            row.update(pred)
            if used is not None:
                alpha, r, src = used
                inputs.setdefault("alpha", f"{alpha:.3f} ({src['alpha']})")
                inputs.setdefault("r", f"{r:.2f} ({src['r']})")
            if len(chars) > 1:
                notes.append(f"machine {n + 1}: the forecast is from {chars[0].name}; its "
                             f"table's figures are the mean of {len(chars)} characterize files")
            steady = PI.steadiness_note(chars[0])
            if steady:
                notes.append(f"machine {n + 1}: {chars[0].name}: {steady}")
        else:
            notes.append(f"machine {n + 1}: no characterize file, so no forecast")
        speeds, left = measured_speeds(m.files, K, b)
        for mode in MODES:
            row[f"{mode}_meas"] = speeds.get(mode)
        if left:
            notes.append(f"machine {n + 1}: runs not at K={K}, b={b}, not shown: "
                         + ", ".join(left))
        rows.append(row)
    for row in rows:
        for mode in MODES:
            for col in (mode, f"{mode}_meas"):
                first, mine = rows[0].get(col), row.get(col)
                ok = first is not None and mine is not None and first > 0
                row[f"{col}/1st"] = mine / first if ok else None
    return rows, notes, inputs


def _txt(rows, columns):
    for row in rows:
        for c, spec in columns:
            if spec:
                row[c + "_txt"] = format_cell(row.get(c), spec)


def compare(paths, args, out=print):
    """The whole command: returns the exit status."""
    runs, errors = sio.load_runs(paths)
    if errors:
        raise CompareError(errors[0])
    target, draft = check_one_pair(runs)
    chars = [r for r in runs if r.is_characterize]
    ref = chars[0].attrs if chars else {}
    K = args.lookahead or int(ref.get("lookahead", 4))
    b = args.batch_size or int(ref.get("batch_size", 1))
    context = args.context or int(ref.get("context", 128))
    machines, group_notes = MC.group(runs)
    args, source = acceptance_inputs(runs, args)
    rows, notes, inputs = machine_rows(machines, target, draft, K, b, context, args)
    _txt(rows, HARDWARE + SPEEDS)
    if source:
        inputs = {k: v.replace("(--alpha)", f"({source}'s rounds)").replace(
            "(--r)", f"({source}'s rounds)") for k, v in inputs.items()}
    header = {"pair": f"{target} / {draft or '-'}", "K": K, "batch": b, "context": context,
              "temperature": args.temperature, **inputs,
              "columns": "AR/SD/SSD: predicted tok/s (predict.py, the machine's own "
                         "characterize file; SD collocated, SSD on one draft rank, budget "
                         "and fallback searched); *_meas: mean measured tok/s of its runs at "
                         "this K and batch; */1st: ratio to machine 1; verify_*_AR: a target "
                         "step of K+1 (16) rows in AR steps; draft_step_target: the draft's "
                         "step in target AR steps"}
    os.makedirs(args.out, exist_ok=True)
    lines = []

    def both(line):
        lines.append(line)
        out(line)
    emit_table(rows, [c for c, _ in HARDWARE], "text", header, both)
    both("")
    emit_table(rows, [c for c, _ in SPEEDS], "text", {}, both)
    for note in group_notes + notes:
        both(f"# note: {note}")
    with open(os.path.join(args.out, "compare.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    columns = list(dict.fromkeys(c for c, _ in HARDWARE + SPEEDS))
    with open(os.path.join(args.out, "compare.csv"), "w") as f:
        emit_table(rows, columns, "csv", header, stream=f)
    written = ["compare.txt", "compare.csv"]
    if chars:
        from . import figures_compare
        written += figures_compare.save_roofline(machines, args.out)
    out(f"# written to {args.out}: {', '.join(written)}")
    return 0


def cmd_compare(args):
    try:
        return compare(args.files, args)
    except (CompareError, H.InputError, sio.AnalysisError) as e:
        print(f"ssd-analyze compare: {e}", file=sys.stderr)
        return 2
