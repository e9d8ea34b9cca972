"""Where `ssd-analyze predict`'s inputs come from, and what its search may and may not use.

alpha and r. The paper prints neither (its Appendix B.3 gives tok/s only), so:
  - for a setting of the paper's table (PAPER in predict_cli.py), alpha is the one that makes
    this model's SD/AR at the paper's K = 5 (Appendix B.2: "proposing 5 draft tokens per step")
    equal the paper's, at batch 1: the paper's own SD measurement read through this model's
    step costs. SD is then calibrated, not forecast; SSD/SD and SSD/AR remain forecasts.
  - elsewhere, alpha is the one measured on the Qwen2.5-Coder-1.5B/0.5B pair on coding prompts
    (results/qwen2.5-coder/numbers.txt, fig4-temperature's SD run, the capped-geometric MLE).
  - r is always the pair's (numbers.txt, fig3-fanout, after a primary speculation), at the
    nearer of the two temperatures measured.
  The band beside each forecast spans alpha +- ALPHA_HALF_WIDTH and r over R_RANGE.

Search caps. K is searched over 1..K_CAP and the budget up to --max-budget (default B_CAP):
ssd-bench's own -k auto and --budget auto stop there (ssd/lookahead.h kMaxAutoLookahead,
ssd/budget.h kMaxAutoBudget), so the forecast is a configuration the defaults can reach. Where
a cap binds, `cap_notes` says so and gives the uncapped optimum and the flags that run it.

Step costs. `load_characterize` reads --characterize FILE, `steadiness_note` is its own warning.
A model's step is that file's measurement where it timed the model on one rank (`steps_for`),
else hardware.RooflineStep; for the very pair it timed, also as the runs take them: side by side
(`beside_steps`), in SD's turns (`turns_steps`) and in SSD's round (`ssd_round_for`).
`layout_for` puts them into predict.Layout.
"""
from . import hardware as H
from . import io as sio
from . import measured as MS
from . import predict as P

PAPER_K = 5
K_CAP = 32          # ssd/lookahead.h kMaxAutoLookahead
B_CAP = 128         # ssd/budget.h kMaxAutoBudget
K_UNCAPPED = 64     # how far past K_CAP a binding cap is followed
ALPHA_HALF_WIDTH = 0.1
# (alpha, r) measured on the pair: results/qwen2.5-coder/numbers.txt (T = 0: SD alpha 0.862,
# primary r 2.22 over 106 lookups; T = 1: SD alpha 0.798, primary r 1.05 over 115; r by
# maximum likelihood on the ranks, metrics.fit_power_law_mle; bf16 compute since 2026-11-29,
# the fp32 set before had 0.871 / 2.30 and 0.825 / 1.26).
PAIR = {0.0: (0.86, 2.22), 1.0: (0.80, 1.05)}
PAIR_SOURCE = ("measured on Qwen2.5-Coder-1.5B/0.5B, code prompts, T = {t:g} "
               "(results/qwen2.5-coder/numbers.txt)")
R_RANGE = (0.4, PAIR[0.0][1])   # the low end of plausible r, and the pair's greedy r


def pair_inputs(temperature):
    """(alpha, r) measured on the pair at the nearer of T = 0 and T = 1."""
    t = min(PAIR, key=lambda x: abs(x - temperature))
    return PAIR[t], PAIR_SOURCE.format(t=t)


def implied_alpha(lay, sd_over_ar, temperature=0.0):
    """The alpha at which this model's SD/AR at K = PAPER_K and batch 1 equals `sd_over_ar`
    (bisection: SD's rate grows with alpha). Clipped to [0, 0.999] when out of reach."""
    ar = P.predict_ar(lay, 1, temperature).tok_s

    def ratio(a):
        return P.predict_sd(lay, 1, PAPER_K, a, temperature).tok_s / ar
    lo, hi = 0.0, 0.999
    if ratio(hi) <= sd_over_ar:
        return hi
    if ratio(lo) >= sd_over_ar:
        return lo
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ratio(mid) < sd_over_ar else (lo, mid)
    return (lo + hi) / 2


def resolve(args, lay, paper):
    """(alpha, r, {input: source}) for predict's grid: the flags where given, else the sources
    in this module's docstring. `paper`: (AR, SD, SSD) of the paper's table or None."""
    (pair_alpha, pair_r), pair_src = pair_inputs(args.temperature)
    sources = {}
    if args.alpha is not None:
        alpha, sources["alpha"] = args.alpha, "--alpha"
    elif paper is not None and args.temperature == 0:
        alpha = implied_alpha(lay, paper[1] / paper[0])
        sources["alpha"] = (f"implied by the paper's SD/AR {paper[1]:g}/{paper[0]:g} = "
                            f"{paper[1] / paper[0]:.2f} at K = {PAPER_K}, batch 1 (Appendix "
                            "B.3) under this model's step costs; the paper prints no alpha")
    else:
        alpha, sources["alpha"] = pair_alpha, pair_src
    if args.r is not None:
        r, sources["r"] = args.r, "--r"
    else:
        r, sources["r"] = pair_r, pair_src + ", after a primary speculation"
    return alpha, r, sources


def band(fn, alpha, r_range=R_RANGE):
    """(low, high) of fn(alpha, r) over alpha +- ALPHA_HALF_WIDTH and r over r_range: the
    rates grow with both, so the corners bound the band."""
    a_lo = max(alpha - ALPHA_HALF_WIDTH, 0.0)
    a_hi = min(alpha + ALPHA_HALF_WIDTH, 0.999)
    return fn(a_lo, r_range[0]), fn(a_hi, r_range[1])


def cap_notes(row, ssd, ks_given, ks, max_budget, uncapped_k, uncapped_b):
    """Lines saying which search cap the best SSD configuration sits on, with the uncapped
    optimum: uncapped_k() -> Prediction over K up to K_UNCAPPED, uncapped_b() -> Prediction
    with four times the budget. Marks the row's K and B cells with '*'."""
    notes = []
    where = f"b={row['b']} D={row['D']}"
    if not ks_given and ssd.K == max(ks):
        u = uncapped_k()
        if u.tok_s > ssd.tok_s * 1.005:
            row["K_txt"] = f"{ssd.K}*"
            notes.append(f"{where}: K = {ssd.K} is -k auto's cap (ssd/lookahead.h); the "
                         f"model's optimum is K = {u.K} at {u.tok_s:.1f} tok/s (run -k {u.K})")
    if ssd.fanout_total >= max_budget > 0:
        u = uncapped_b()
        if u.tok_s > ssd.tok_s * 1.005:
            row["B_txt"] = f"{ssd.fanout_total}*"
            notes.append(f"{where}: B = {ssd.fanout_total} is the budget cap; the model's "
                         f"optimum is B = {u.fanout_total} at {u.tok_s:.1f} tok/s, which only a "
                         f"fixed --budget {u.fanout_total} runs (--budget auto stops at {B_CAP}, "
                         "ssd/budget.h)")
    return notes


def paper_check(row, paper, t_step):
    """One line comparing a row with the paper's numbers for its setting: AR step, SD/AR and
    SSD/SD, so that a gap shows where it comes from."""
    ar_ms, model_ms = 1e3 / paper[0], t_step(1) * 1e3
    return (f"paper vs model at b=1: AR step {ar_ms:.1f} vs {model_ms:.1f} ms (the paper's "
            f"engine at {ar_ms / model_ms:.2f}x this roofline); SD/AR {paper[1] / paper[0]:.2f} "
            f"vs {row['SD'] / row['AR']:.2f}; SSD/SD {paper[2] / paper[1]:.2f} vs "
            f"{row['SSD'] / row['SD']:.2f}; SSD/AR {paper[2] / paper[0]:.2f} vs "
            f"{row['SSD'] / row['AR']:.2f}")


# Step times measured on one H100 80GB HBM3 by ssd-bench's own CUDA backend (docs/gpu-notes.md,
# "2026-11-26 (ninth session)": bench_decode, context 512, bf16, the faster of the CUDA-core
# and tensor-core invariant kernels at each row count), in ms per decode step.
GPU_STEPS_H100 = {("llama-3.2-1b", 1): 1.64, ("llama-3.2-1b", 5): 2.07,
                  ("llama-3.2-1b", 16): 3.26, ("llama-3.1-8b", 1): 6.63,
                  ("llama-3.1-8b", 5): 8.16, ("llama-3.1-8b", 16): 10.5}
GPU_TOL = 0.15


def gpu_step_check(out=print):
    """The h100-sxm roofline's step against the steps measured on an H100; returns how many
    land within GPU_TOL. A roofline is a floor: what it misses is the engine's own cost."""
    hw = H.PROFILES["h100-sxm"]
    out(f"{'model':<14} {'rows':>4} {'measured ms':>11} {'roofline ms':>11} {'error':>7}  "
        "within 15%")
    within = 0
    for (model, rows), ms in GPU_STEPS_H100.items():
        step = H.RooflineStep(H.shape_of(model), hw, 1, 512)(rows) * 1e3
        err = step / ms - 1
        within += abs(err) <= GPU_TOL
        out(f"{model:<14} {rows:>4} {ms:>11.2f} {step:>11.2f} {100 * err:>+6.0f}%  "
            f"{'yes' if abs(err) <= GPU_TOL else 'NO'}")
    return within


# --- step costs and layouts -----------------------------------------------------------------------

def load_characterize(path):
    """The characterize file at `path` (--characterize), None without one; InputError naming
    the flag when it cannot be read or is a run file."""
    if not path:
        return None
    try:
        c = sio.load_run(path)
    except sio.AnalysisError as e:
        raise H.InputError(f"--characterize: {e}")
    if not c.is_characterize:
        raise H.InputError(f"--characterize: {path} is a run file, not a characterize file")
    return c


def steadiness_note(char):
    """The characterize file's own warning (ssd-bench's unsteady_passes attribute): passes of more
    rows that timed clearly below passes of fewer, so the host was disturbed while it measured and
    predictions inherit that. None when the file has no such passes (or predates the check)."""
    if char is None:
        return None
    n = int(char.attrs.get("unsteady_passes", 0) or 0)
    if n == 0:
        return None
    return (f"WARNING: the file flags {n} unsteady pass(es), timed while its host was disturbed "
            f"(run characterize again): {char.attrs.get('unsteady', '')}")


def layout_for(t_step, d_step, hw, vocab, D, collocated=True, beside=(None, None),
               turns=(None, None), ssd_round=None):
    return P.Layout(t_step, d_step, hw.link_latency_s, hw.link_bw, vocab, D, collocated, hw,
                    *beside, *turns, ssd_round)


def pair_layout(target, draft, char, hw, tp, D, context):
    """(Layout, target step, target shape) of a target/draft pair: each model's step cost
    (steps_for), and for the very pair `char` timed, the costs as SSD overlaps them, as SD
    takes turns and as SSD's round took them."""
    t_step, t_shape = steps_for(target, char, hw, tp, context, "--target")
    d_step, _ = steps_for(draft, char, hw, 1, context, "--draft")
    lay = layout_for(t_step, d_step, hw, t_shape.vocab, D,
                     beside=beside_steps(target, draft, char, tp, D, context),
                     turns=turns_steps(target, draft, char, tp, t_step, d_step),
                     ssd_round=ssd_round_for(target, draft, char, tp, D))
    return lay, t_step, t_shape


def _same_pair(target, draft, char, tp):
    if char is None or tp != 1:
        return False
    specs = H.characterize_specs(char)
    return (_same_spec(specs.get("target", ""), target) and
            _same_spec(specs.get("draft", ""), draft))


def ssd_round_for(target, draft, char, tp, D):
    """SSD's round's (delta, build_factor) when the characterize file timed it for this very
    pair (measured.ssd_round_factors); else None."""
    return MS.ssd_round_factors(char) if D >= 1 and _same_pair(target, draft, char, tp) else None


def turns_steps(target, draft, char, tp, t_step, d_step):
    """(target, draft) costs as collocated SD takes turns: the steps plus what characterize
    measured them to cost more in SD's round for this very pair (measured.sd_round_extras);
    else (None, None)."""
    if not _same_pair(target, draft, char, tp):
        return None, None
    extras = MS.sd_round_extras(char)
    if extras is None:
        return None, None
    return MS.TakingTurns(t_step, extras[0]), MS.TakingTurns(d_step, extras[1])


def _same_spec(a, b):
    return a == b or a.removeprefix("synthetic:") == b.removeprefix("synthetic:")


def steps_for(spec, char, hw, tp, context, where):
    """A model's step cost: the characterize file's measurement (timed alone) when it measured
    that model (on one rank), else the roofline on `hw`."""
    if char is not None and tp == 1:
        for role, s in H.characterize_specs(char).items():
            if _same_spec(s, spec):
                step = MS.MeasuredStep.from_characterize(char, role, context=context)
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
    return tuple(MS.MeasuredStep.from_characterize(char, role, concurrent=True, context=context)
                 for role in ("target", "draft"))
