"""`ssd-analyze predict`: flags and output of predict.py's model (its inputs, step costs and
layouts: predict_inputs.py; validation: predict_validate.py)."""
import argparse
import sys

from . import hardware as H
from . import io as sio
from . import measured as MS
from . import predict as P
from . import predict_inputs as PI
from . import predict_validate as PV
from .tables import OneLineErrors, emit_table, format_cell

# Throughputs the paper reports (decode tok/s, greedy, batch 1, target TP=4 on H100s, SSD's
# draft on one more H100): Appendix B.3's table, "Average" rows (the same numbers as Figure 1
# right and Figure 7 left). Printed beside the predictions for comparison only, never an input.
# Figure 6 (right), SSD vs draft GPUs at batch 16, is a projection shown only as a plot: no
# numbers in the text, so nothing is printed for it.
PAPER = {  # (target, draft, hardware, target TP, batch, draft ranks) -> (AR, SD, SSD)
    ("llama-3.1-70b", "llama-3.2-1b", "h100-sxm", 4, 1, 1): (54.7, 161.8, 255.8),
    ("qwen3-32b", "qwen3-0.6b", "h100-sxm", 4, 1, 1): (88.8, 136.8, 203.8),
}

COLUMNS = ["b", "D", "AR", "SD", "SD_band", "K_sd", "SSD", "SSD_band", "K", "B_win", "B", "shape",
           "p_hit", "T_p", "fallback", "b*", "SSD/SD", "SSD/AR", "paper_AR", "paper_SD",
           "paper_SSD"]


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
    p.__class__ = OneLineErrors
    p.add_argument("--target", help="preset (default llama-3.1-70b, or the characterize "
                   "file's target)")
    p.add_argument("--draft", help="preset (default llama-3.2-1b, or the file's draft)")
    p.add_argument("--target-tp", type=_int_list("--target-tp"), help="default 4 (GPU), 1 (cpu)")
    p.add_argument("--draft-ranks", type=_int_list("--draft-ranks"), default=[1],
                   help="list, e.g. 1,2,3,4")
    p.add_argument("--batch-size", "-b", type=_int_list("--batch-size"), default=[1, 16])
    p.add_argument("--alpha", type=_float_in("--alpha", 0.0, 0.999),
                   help="per-token acceptance rate of the draft (default: implied by the "
                   "paper's SD/AR for its settings, else measured on the Qwen2.5-Coder pair)")
    p.add_argument("--r", type=_float_in("--r", 0.01, 50.0),
                   help="power-law exponent, miss(F) = (F+1)^-r (default: measured on the "
                   "Qwen2.5-Coder pair)")
    p.add_argument("--r-all", type=_float_in("--r-all", 0.01, 50.0),
                   help="exponent after all K drafted tokens are accepted, where Theorem 18 "
                   "lets the curve differ (ssd-bench fits both; default: --r's, Theorem 12's "
                   "one law)")
    p.add_argument("-k", "--lookahead", type=_int_list("--lookahead"),
                   help=f"K (list); default: the best of 1..{PI.K_CAP} (-k auto's range)")
    p.add_argument("--fallback", choices=["auto", "primary", "backup"], default="auto")
    p.add_argument("--alpha-backup", type=_float_in("--alpha-backup", 0.0, 0.999), default=0.0,
                   help="acceptance of the backup speculator (0: random tokens)")
    p.add_argument("--max-budget", type=_int_list("--max-budget", 0), default=[PI.B_CAP],
                   help=f"largest per-sequence budget searched ({PI.B_CAP}: --budget auto's "
                   "cap; above it only a fixed --budget runs)")
    p.add_argument("--temperature", type=_float_in("--temperature", 0.0, 10.0), default=0.0)
    p.add_argument("--context", type=_int_list("--context"), default=[1024],
                   help="tokens per sequence (KV cache read by each step)")
    p.add_argument("--hardware", help=f"{', '.join(H.PROFILES)} or cpu (default h100-sxm; "
                   "with --characterize: its measured step costs)")
    p.add_argument("--characterize", help="ssd-bench characterize --out FILE")
    p.add_argument("--validate", nargs="+", metavar="RUN", help="predict each run file "
                   "(needs --characterize) and compare with its measured tok/s")
    p.add_argument("--tol", type=_float_in("--tol", 0.0, 10.0), default=0.10)
    p.add_argument("--gpu-steps", action="store_true", help="compare the h100-sxm roofline's "
                   "step times with ssd-bench's measured on an H100 (docs/gpu-notes.md)")
    p.add_argument("--format", choices=["text", "csv", "json"], default="text")
    p.set_defaults(func=func)
    return p


def cmd_predict(args):
    try:
        if args.validate:
            return PV.validate(args)
        if args.gpu_steps:
            n = PI.gpu_step_check()
            print(f"# {n} of {len(PI.GPU_STEPS_H100)} steps within "
                  f"{100 * PI.GPU_TOL:.0f}% of the roofline (analysis/README.md, 'predict on "
                  "GPUs', says why the rest are not)")
            return 0
        return predict_grid(args)
    except (H.InputError, sio.AnalysisError) as e:
        print(f"ssd-analyze predict: {e}", file=sys.stderr)
        return 2


def predict_grid(args, out=print):
    char = PI.load_characterize(args.characterize)
    hw_name = args.hardware or ("cpu" if char is not None else "h100-sxm")
    hw = MS.profile(hw_name, char)
    specs = H.characterize_specs(char) if char is not None else {}
    target = args.target or (specs.get("target") if hw_name == "cpu" else None) or "llama-3.1-70b"
    draft = args.draft or (specs.get("draft") if hw_name == "cpu" else None) or "llama-3.2-1b"
    tps = args.target_tp or [1 if hw_name == "cpu" else 4]
    ks = args.lookahead or list(range(1, PI.K_CAP + 1))
    ctx, maxb = args.context[0], args.max_budget[0]
    header = {"hardware": f"{hw.name} ({hw.source}): {hw.mem_bw / 1e9:.0f} GB/s x "
                          f"{hw.mem_eff:g}, {hw.peak_flops / 1e12:.3g} TFLOP/s x {hw.gemm_eff:g},"
                          f" link {hw.link_latency_s * 1e6:.2g} us + {hw.link_bw / 1e9:.3g} GB/s",
              "target": f"{target}, TP {','.join(map(str, tps))}", "draft": draft}
    rows, notes, inputs = [], [], {}
    short = (target.removeprefix("synthetic:"), draft.removeprefix("synthetic:"), hw.name)
    for tp in tps:
        t_step = PI.pair_layout(target, draft, char, hw, tp, 1, ctx)[1]

        def lay_for(D):
            return PI.pair_layout(target, draft, char, hw, tp, D, ctx)[0]
        paper_b1 = PAPER.get((*short, tp, 1, 1))
        alpha, r, sources = PI.resolve(args, lay_for(1), paper_b1)
        inputs.setdefault("alpha", []).append(f"{alpha:.3f} ({sources['alpha']})")
        inputs.setdefault("r", []).append(f"{r:.2f} ({sources['r']})")
        if args.r_all is not None:
            inputs.setdefault("r_all", []).append(f"{args.r_all:.2f} (--r-all)")
        for b in args.batch_size:
            for D in args.draft_ranks:
                lay = lay_for(D)
                row, ssd = _predict_row(args, lay, b, D, alpha, r, ks, maxb)
                row["target_tp"] = tp
                paper = PAPER.get((*short, tp, b, D))
                row.update(zip(("paper_AR", "paper_SD", "paper_SSD"), paper or (None,) * 3))
                rows.append(row)
                notes += PI.cap_notes(
                    row, ssd, args.lookahead is not None, ks, maxb,
                    lambda: _best_ssd(args, lay, b, alpha, r, range(1, PI.K_UNCAPPED + 1), maxb),
                    lambda: _best_ssd(args, lay, b, alpha, r, [ssd.K], 4 * maxb))
                if paper is not None:
                    notes.append(PI.paper_check(row, paper, t_step))
    header.update({k: "; ".join(dict.fromkeys(v)) for k, v in inputs.items()})
    header.update({
        "band": f"SD_band, SSD_band: the forecast over alpha +- {PI.ALPHA_HALF_WIDTH:g} and r "
                f"{PI.R_RANGE[0]:g}-{PI.R_RANGE[1]:g}",
        "K": ",".join(map(str, ks)), "fallback": args.fallback,
        "alpha_backup": args.alpha_backup, "temperature": args.temperature, "context": ctx,
        "max_budget": maxb if maxb <= PI.B_CAP else
        f"{maxb} (above {PI.B_CAP}, --budget auto's cap: such budgets run only as a fixed "
        "--budget)",
        "columns": "tok/s; K/B/fallback/shape = the best SSD config (Corollary 16); "
                   "B_win = per-sequence budget hidden by verification; b* = Theorem 17; "
                   "paper_* = Appendix B.3 (comparison only); * = at a search cap (notes)"})
    note = PI.steadiness_note(char)
    if note:
        header["steadiness"] = note
    if args.format == "json":
        header["notes"] = notes
    for row in rows:
        for c, spec in (("AR", ".1f"), ("SD", ".1f"), ("SSD", ".1f"), ("p_hit", ".3f"),
                        ("T_p", ".2f"), ("b*", ".1f"), ("SSD/SD", ".2f"), ("SSD/AR", ".2f"),
                        ("paper_AR", ".1f"), ("paper_SD", ".1f"), ("paper_SSD", ".1f")):
            row[c + "_txt"] = format_cell(row[c], spec)
    cols = COLUMNS if len(tps) == 1 else ["target_tp"] + COLUMNS
    emit_table(rows, cols, args.format, header, out)
    if args.format == "text":
        for n in notes:
            out(f"# note: {n}")
    return 0


def _best_ssd(args, lay, b, alpha, r, ks, max_budget):
    return P.best_over_k(lambda k: P.predict_ssd(
        lay, b, k, alpha, r, args.fallback, temperature=args.temperature,
        alpha_b=args.alpha_backup, max_budget=max_budget, r_all=args.r_all), ks)


def _predict_row(args, lay, b, D, alpha, r, ks, maxb):
    """One row of the grid: AR, the best SD and SSD over ks at (alpha, r), and their bands."""
    def sd_at(a):
        return P.best_over_k(lambda k: P.predict_sd(lay, b, k, a, args.temperature), ks)
    ar = P.predict_ar(lay, b, args.temperature)
    sd, ssd = sd_at(alpha), _best_ssd(args, lay, b, alpha, r, ks, maxb)
    sd_band = PI.band(lambda a, _: sd_at(a).tok_s, alpha)
    ssd_band = PI.band(lambda a, r_: _best_ssd(args, lay, b, a, r_, ks, maxb).tok_s, alpha)
    row = {"b": b, "D": D, "AR": ar.tok_s, "SD": sd.tok_s, "K_sd": sd.K, "SSD": ssd.tok_s,
           "K": ssd.K, "B_win": ssd.window_fanout_limit, "B": ssd.fanout_total,
           "shape": "/".join(map(str, ssd.shape)), "p_hit": ssd.p_hit, "T_p": ssd.t_p,
           "fallback": ssd.fallback, "b*": ssd.b_star, "SSD/SD": ssd.tok_s / sd.tok_s,
           "SSD/AR": ssd.tok_s / ar.tok_s, "SD_band": f"{sd_band[0]:.0f}-{sd_band[1]:.0f}",
           "SSD_band": f"{ssd_band[0]:.0f}-{ssd_band[1]:.0f}"}
    return row, ssd
