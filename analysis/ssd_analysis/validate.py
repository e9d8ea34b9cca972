"""`ssd-analyze validate`: predicted vs measured speedup over AR for every SD and SSD run.

Runs are grouped into sweeps by (target, batch size, temperature, max new tokens, prompt
tokens); the AR run of a group is its baseline; `measured = run decode tok/s / AR decode tok/s`
(the /summary means). Three predictions per run:

  model   (always checked) The paper's speedup model -- SD: E_SD / (1 + T_SD); SSD: Corollary
          16 at the run's batch size (Theorem 7 at b = 1): a round costs max(verify, build) when
          every row hit and also the fallback when any missed -- evaluated with the run's own
          component times (verification + accept, draft, cache build, fallback, lookup and
          message transit) and hit statistics, never with its round wall times. What it tests is
          the latency structure: which work overlaps and which serializes. The first round of
          each batch group (no cache yet, draft start-up) is charged at its measured wall time;
          occupancy and token-limit truncation scale the tokens; tok/s is predicted per
          repetition and averaged like the summary. (For collocated SD a round is draft +
          verify by construction, so there this row is close to bookkeeping.)
  paper   The formulas as printed, in AR-step units: Theorem 7 / Corollary 16 with p_hit, E_hit,
          E_miss, T_p, T_b, and E_SD / (1 + T_SD), divided by verify_rel = mean verification /
          mean AR step time (the paper's unit; a K+1-token verification costs more than one AR
          step on a CPU), i.e. SD: E_SD / (verify_rel + T_SD_rel). Checked only when the
          paper's assumptions hold: T_p <= 1, hits iid across the batch, timing not noisy, same
          threads as the AR run, and its simplifications (start-up rounds, partly empty batch,
          token-limit truncation, lookup/transit or communication, AR averaging) together
          cost less than tol / 2 of the speed. Otherwise the violated assumptions are listed.
  accounting  tokens per round / measured round wall time (end_s - start_s): the rounds
          account for all decode time. Bookkeeping, not a test of the formula.

Also: Equation (1) (with the backup's share of misses, for --fallback auto) against the measured
p_hit within tol or two standard errors, its chain run over the run's own sequences from a
primary start (metrics.eq1_finite; the stationary value is printed beside), Corollary 9's
bounds against the SD run of the group, Theorem 17's b*. Exit status: 0 all checks pass, 1 some do not, 2 a speculative run has no AR
baseline or a file cannot be read.
"""
import math
from dataclasses import dataclass, field

import numpy as np

from . import metrics as M
from . import timing as T
from .runstats import ar_baseline, cv, group_runs, ssd_stats, theorem17  # noqa: F401


NOISY = 0.15   # coefficient of variation of decode tok/s over reps above which timing is noisy


@dataclass
class Check:
    name: str
    predicted: float
    measured: float
    checked: bool = True
    slack: float = 0.0   # relative sampling error allowed beyond the tolerance (2 std. errors)

    @property
    def error(self):
        return M.relative_error(self.predicted, self.measured)

    def ok(self, tol):
        e = self.error
        return math.isfinite(e) and abs(e) <= max(tol, self.slack)


@dataclass
class Report:
    run: object
    lines: list = field(default_factory=list)
    checks: list = field(default_factory=list)
    violations: list = field(default_factory=list)   # the paper's assumptions that fail
    effects: dict = field(default_factory=dict)      # simplification -> fraction of speed
    notes: list = field(default_factory=list)        # generalisations applied, caveats


def fmt(x, spec=".3f"):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a" if x is None or math.isnan(x) else ("inf" if x > 0 else "-inf")
    return format(x, spec)


def _per_rep_prediction(br, model):
    """Mean over repetitions of predicted tok/s (like the summary's mean of per-rep tok/s):
    first rounds at their measured wall time and tokens (plus round 1's wait for the first
    round's cache build: start-up), steady rounds at model(rep, steady) = (seconds per round,
    tokens per live row) from that repetition's own records."""
    rates = []
    for rep in np.unique(br["rep"]):
        in_rep = br["rep"] == rep
        first = in_rep & (br["round"] == 0)
        steady = in_rep & (br["round"] > 0)
        time = br["wall"][first].sum() + br["overhang"][in_rep & (br["round"] == 1)].sum()
        tokens = br["tokens"][first].sum()
        if np.any(steady):
            latency, per_row = model(rep, steady)
            time += steady.sum() * latency
            tokens += br["rows"][steady].sum() * per_row
        rates.append(tokens / time if time > 0 else math.nan)
    return float(np.mean(rates))


def _accounting(br):
    rates = [br["tokens"][br["rep"] == r].sum() / br["wall"][br["rep"] == r].sum()
             for r in np.unique(br["rep"])]
    return float(np.mean(rates))


def _common(run, ar, br, rep):
    """Shared SD/SSD quantities and assumption checks; returns (dict, steady selection)."""
    steady = br["round"] > 0
    tau = br["tokens"][steady].sum() / max(br["tokens_full"][steady].sum(), 1)
    occupancy = float(np.mean(br["rows"])) / max(run.batch_size, 1)
    startup = (br["wall"][~steady].sum() + br["overhang"][br["round"] == 1].sum()) / \
        max(br["wall"].sum(), 1e-30)
    base = ar_baseline(ar)
    c = {"tau": tau, "occupancy": occupancy, "startup": startup, "t_ar": base["t_ar"],
         "verify_rel": T.mean(br["verify"]) / base["t_ar"]}
    v, notes = rep.violations, rep.notes
    if abs(c["verify_rel"] - 1.0) > 0.1:
        notes.append(f"verification = {fmt(c['verify_rel'], '.2f')} AR steps (paper: 1); the "
                     "paper column divides by it")
    # Simplifications of the paper, as the fraction of decode speed each one costs (Theorem 7
    # describes an endless stream of rounds, all batch rows live, nothing but the model's terms)
    ar_rate = base["rows"] / base["t_ar"] if base["steps"] else math.nan
    rep.effects.update({
        "first rounds (start-up)": startup,
        "batch not full": 1 - occupancy,
        "token limit cuts rounds": 1 - tau,
        "AR mean step vs AR tok/s": abs(ar_rate / ar.tok_s - 1) if math.isfinite(ar_rate)
        else 0.0})
    for who, r in (("run", run), ("AR baseline", ar)):
        if cv(r) > NOISY:
            v.append(f"noisy timing: {who} decode tok/s varies {100 * cv(r):.0f}% over reps")
    if ar.threads and run.threads and ar.threads != run.threads:
        v.append(f"AR baseline ran {ar.threads} threads, this run's target {run.threads}")
    if run.synthetic_outcomes:
        notes.append("synthetic verification outcomes (drawn, not computed; the formulas apply)")
    if not run.summary.get("tokens_identical_across_reps", 1):
        notes.append("repetitions generated different tokens (the run's own check FAILED)")
    return c, steady


def _judge(rep, tol):
    """The paper formula's row is checked when its assumptions hold: no violation, and the
    simplifications together cost less than tol / 2 of the speed (the rest is left to noise)."""
    total = sum(rep.effects.values())
    if total > tol / 2:
        big = [f"{k} {100 * x:.1f}%" for k, x in rep.effects.items() if x > tol / 20]
        rep.violations.append(f"the paper's simplifications cost {100 * total:.1f}% of the speed "
                              f"(> {100 * tol / 2:g}%): " + ", ".join(big))
    for ch in rep.checks:
        if ch.checked is None:
            ch.checked = not rep.violations


def analyze_sd(run, ar, tol=0.1):
    rep = Report(run)
    br = T.batch_rounds(run.rounds)
    c, steady = _common(run, ar, br, rep)
    e = M.e_sd(run.rounds["accepted"])
    e_steady = br["tokens_full"][steady].sum() / max(br["rows"][steady].sum(), 1)
    t_sd = T.mean(br["draft"]) / T.mean(br["verify"])
    measured = run.tok_s / ar.tok_s
    model = _per_rep_prediction(
        br, lambda rep, sel: (T.sd_round_latency(br, sel), e_steady * c["tau"])) / ar.tok_s
    paper = M.sd_speedup(e, t_sd, c["verify_rel"])
    acc = _accounting(br) / ar.tok_s
    rep.effects["communication"] = T.mean(br["comm"]) / T.mean(br["wall"])
    rep.lines.append(
        f"E_SD {fmt(e)} (steady rounds {fmt(e_steady)})  T_SD {fmt(t_sd)}  (AR units: "
        f"verify_rel {fmt(c['verify_rel'])}, T_SD_rel {fmt(t_sd * c['verify_rel'])}; "
        f"t_AR {fmt(1e3 * c['t_ar'], '.4f')} ms)")
    rep.checks += [Check("model: E_SD/(1+T_SD), run's component times", model, measured),
                   Check("paper: E_SD/(verify_rel+T_SD_rel)", paper, measured, checked=None),
                   Check("accounting: tokens / round wall time", acc, measured, checked=False)]
    _judge(rep, tol)
    rep.sd_stats = {"e_sd": e, "t_sd": t_sd, "verify": T.mean(br["verify"])}
    return rep


def analyze_ssd(run, ar, sd=None, tol=0.1):
    rep = Report(run)
    br = T.batch_rounds(run.rounds)
    c, steady = _common(run, ar, br, rep)
    s = ssd_stats(run)
    p, b = s["p"], run.batch_size
    e_hit = s["e_hit"] if math.isfinite(s["e_hit"]) else s["e_miss"]
    e_miss = s["e_miss"] if math.isfinite(s["e_miss"]) else e_hit
    n_tok = M.expected_tokens(p, e_hit, e_miss)
    measured = run.tok_s / ar.tok_s
    lat_ss, parts = T.ssd_round_latency(br, steady, p)
    r = run.rounds

    def per_rep(rep, sel):
        # the hit statistics of this repetition (--budget auto makes them timing-dependent)
        rows = r["rep"] == rep
        p_r = M.p_hit(r["outcome_hit"][rows])
        e_h = M.e_hit(r["accepted"][rows], r["source"][rows])
        e_m = M.e_miss(r["accepted"][rows], r["source"][rows], r["round"][rows])
        p_r, e_h, e_m = [x if math.isfinite(x) else d for x, d in
                         ((p_r, p), (e_h, e_hit), (e_m, e_miss))]
        tau = br["tokens"][sel].sum() / max(br["tokens_full"][sel].sum(), 1)
        return (T.ssd_round_latency(br, sel, p_r)[0],
                M.expected_tokens(p_r, e_h, e_m) * tau)
    model = _per_rep_prediction(br, per_rep) / ar.tok_s
    thm7 = M.theorem7_speedup(p, e_hit, e_miss, s["t_p"], s["t_b"], c["verify_rel"])
    cor16 = M.corollary16_speedup(p, e_hit, e_miss, s["t_p"], s["t_b"], b, c["verify_rel"])
    acc = _accounting(br) / ar.tok_s
    eq1 = M.eq1_p_hit(s["pp"], s["pb"]) if s["n_b"] else math.nan
    eq1q = M.eq1_mixed(s["pp"], s["pb"], s["q"]) if s["n_b"] else math.nan
    eq1n = M.eq1_finite(s["pp"], s["pb"], s["q"], s["chain_lengths"]) if s["n_b"] else math.nan
    chain = float(np.mean(s["chain_lengths"])) if s["chain_lengths"] else 0.0
    steady_tokens = br["tokens_full"][steady].sum() / br["rows"][steady].sum()
    rep.lines.append(
        f"p_hit {fmt(p)} (p_hit,p {fmt(s['pp'])} over {s['n_p']}, p_hit,b {fmt(s['pb'])} over "
        f"{s['n_b']}; Eq.(1) {fmt(eq1)}, with backup share q={fmt(s['q'], '.2f')} of misses "
        f"{fmt(eq1q)}, over these sequences' {chain:.0f} lookups each from a primary start "
        f"{fmt(eq1n)})  E_hit {fmt(e_hit)}  E_miss {fmt(e_miss)}  "
        f"T_p {fmt(s['t_p'])}  T_b {fmt(s['t_b'])}  verify_rel {fmt(c['verify_rel'])}")
    rep.lines.append(
        f"steady round latency (ms): max(verify + transit {fmt(1e3 * parts['transit'])}, build) "
        f"{fmt(1e3 * parts['max_v_B'])} + (1 - p^b) fallback "
        f"{fmt(1e3 * (1 - parts['P_all']) * parts['F'])} + lookup {fmt(1e3 * parts['O'])} = "
        f"model {fmt(1e3 * lat_ss)}, measured wall "
        f"{fmt(1e3 * T.mean(br['wall'] - br['overhang'] * (br['round'] == 1), steady))} "
        "(round 1's wait for the first build is start-up)")
    rep.lines.append(
        f"tokens/round: p E_hit + (1-p) E_miss = {fmt(n_tok)}, measured {fmt(steady_tokens)};  "
        f"all-hit rounds: p^b {fmt(parts['P_all'])}, measured {fmt(parts['P_all_measured'])}")
    rep.checks += [
        Check(f"model: Cor.16 @b={b}, run's component times", model, measured),
        Check("paper: Theorem 7 (b=1)", thm7, measured, checked=False),
        Check(f"paper: Corollary 16 @b={b}", cor16, measured, checked=None),
        Check("accounting: tokens / round wall time", acc, measured, checked=False)]
    if s["n_b"]:
        name = "Eq.(1) p_hit" if s["q"] == 1 else f"Eq.(1) p_hit, backup share q={s['q']:.2f}"
        # Equation (1)'s chain over the run's own sequences (its stationary value is the limit
        # of sequences much longer than a stay in one state; these are tens of lookups long),
        # within two standard errors of the measured p_hit, relative like every other check (an
        # absolute 0.1 let 0.159 pass against 0.111: +43%); with no hit at all a relative error
        # has no meaning, and the row is shown unchecked
        se = math.sqrt(max(p * (1 - p), 0.0) / max(s["lookups"], 1))
        rep.checks.append(Check(name + ", finite", eq1n, p, checked=p > 0,
                                slack=2 * se / p if p else 0.0))
    v = rep.violations
    if s["t_p"] > 1:
        v.append(f"T_p = {fmt(s['t_p'], '.2f')} > 1: the cache build is not hidden by "
                 "verification (Theorem 7 / Appendix A assume T_p < 1; misses then also wait "
                 "for the build)")
    ideal, _ = T.ssd_round_latency(br, steady, p, include_overheads=False)
    rep.effects["lookup + message transit"] = 1 - ideal / lat_ss
    if b > 1 and abs(parts["P_all"] - parts["P_all_measured"]) > 0.1:
        v.append(f"hits not iid across the batch (Cor.16): all-hit fraction "
                 f"{fmt(parts['P_all_measured'])} vs p^b {fmt(parts['P_all'])}")
    if s["n_b"] and abs(s["pp"] - s["pb"]) >= 1:
        v.append("|p_hit,p - p_hit,b| = 1: Equation (1) does not converge")
    if sd is not None and T.mean(br["verify"]) > 1.2 * sd.sd_stats["verify"]:
        rep.notes.append(
            f"verification takes {T.mean(br['verify']) / sd.sd_stats['verify']:.2f}x as long "
            f"as in {sd.run.name}: the draft's cache build competes for the same CPU (the "
            "paper puts the draft on separate hardware)")
    _judge(rep, tol)
    bstar, _ = theorem17([s])
    verdict = (" (needs misses drafted both just in time and by the backup in one run; "
               "`figures` pools the fallback sweep)" if math.isnan(bstar) else
               ": the backup is better at every batch size" if bstar == 0 else
               ": the primary is better at every batch size" if bstar == math.inf else
               " (primary fallback below it, backup from it)")
    rep.lines.append(
        f"Theorem 17: b* = {fmt(bstar, '.2f')}" + verdict
        + f"; this run: fallback={run.fallback}, backup={run.backup}, b={b}")
    if sd is not None:
        lo, hi = M.corollary9_bounds(sd.sd_stats["t_sd"], e_hit, sd.sd_stats["e_sd"], p)
        ratio = run.tok_s / sd.run.tok_s
        where = "inside" if lo <= ratio <= hi else "OUTSIDE"
        holds = s["t_p"] < 1 and s["t_b"] < 0.05
        rep.lines.append(
            f"Corollary 9 vs {sd.run.name}: {fmt(lo)} <= SSD/SD {fmt(ratio)} <= {fmt(hi)}: "
            f"{where}" + ("" if holds else " (its premises T_p < 1, T_b = 0 do not hold)"))
    rep.ssd_stats = s
    return rep


def validate(runs, tol, out):
    """Prints the report to `out` (a callable taking one line); returns the exit status."""
    status = 0
    rows = []
    for key, members in group_runs(runs).items():
        target, b, temp, n, digest = key
        ars = [r for r in members if r.mode == "ar"]
        out(f"== sweep: target {target}, batch {b}, temperature {temp:g}, "
            f"max_new_tokens {n}, prompts {digest}")
        spec = [r for r in members if r.mode in ("sd", "ssd")]
        if not ars:
            for r in spec:
                out(f"error: {r.name} ({r.mode}) has no AR baseline in this sweep")
            status = max(status, 2) if spec else status
            continue
        ar = ars[0]
        base = ar_baseline(ar)
        out(f"   AR baseline {ar.name}: {fmt(ar.tok_s, '.1f')} +- {fmt(ar.tok_s_std, '.1f')} "
            f"tok/s, t_AR {fmt(1e3 * base['t_ar'], '.4f')} ms/step over {base['steps']} steps"
            + (f" (other AR runs ignored: {', '.join(r.name for r in ars[1:])})"
               if len(ars) > 1 else ""))
        sds = {}
        for r in sorted(spec, key=lambda r: r.mode):   # SD first: SSD compares against it
            if not r.has_rounds:
                out(f"   {r.name}: no /rounds records; skipped")
                continue
            if r.mode == "sd":
                rep = analyze_sd(r, ar, tol)
                sds.setdefault((r.draft, r.lookahead), rep)
            else:
                sd = sds.get((r.draft, r.lookahead)) or next(iter(sds.values()), None)
                rep = analyze_ssd(r, ar, sd, tol)
            out(f"-- {r.name}: {r.label()}, draft {r.draft}"
                + (", synthetic outcomes" if r.synthetic_outcomes else ""))
            for line in rep.lines:
                out("   " + line)
            out(f"   {'speedup over AR':<46} {'predicted':>9} {'measured':>9} {'error':>8}")
            for ch in rep.checks:
                err = ch.error
                mark = ("PASS" if ch.ok(tol) else "FAIL") if ch.checked else ""
                err_s = f"{100 * err:+.1f}%" if math.isfinite(err) else "n/a"
                out(f"   {ch.name:<46} {fmt(ch.predicted):>9} {fmt(ch.measured):>9} "
                    f"{err_s:>8} {mark}")
                if ch.checked and not ch.ok(tol):
                    status = max(status, 1)
            eff = ", ".join(f"{k} {100 * x:.1f}%" for k, x in rep.effects.items() if x >= 0.001)
            out(f"   simplifications (cost in speed): {eff or 'none'}; total "
                f"{100 * sum(rep.effects.values()):.1f}%")
            out("   assumptions violated: " + (
                "none, so the paper formula is checked too" if not rep.violations else
                "(so the paper formula is not checked)"))
            for v in rep.violations:
                out("     - " + v)
            for v in rep.notes:
                out("   note: " + v)
            rows.append(rep)
    if rows:
        out("== summary: speedup over AR (relative error); * = checked, ! = outside tolerance")
        out(f"   {'file':<22} {'mode':<4} {'b':>3} {'measured':>9} {'model':>17} {'paper':>17}")
        for rep in rows:
            def cell(ch):
                mark = ("!" if not ch.ok(tol) else "*") if ch.checked else " "
                return f"{fmt(ch.predicted)} ({100 * ch.error:+.1f}%){mark}"
            model = rep.checks[0]
            paper = next(c for c in rep.checks
                         if c.name.startswith(("paper: E_SD", "paper: Corollary 16")))
            out(f"   {rep.run.name:<22} {rep.run.mode:<4} {rep.run.batch_size:>3} "
                f"{fmt(model.measured):>9} {cell(model):>17} {cell(paper):>17}")
    checked = [c for rep in rows for c in rep.checks if c.checked]
    failed = [c for c in checked if not c.ok(tol)]
    out(f"== {len(rows)} speculative runs, {len(checked)} checks, {len(failed)} outside "
        f"tolerance {tol:g}" + (" (and runs without an AR baseline)" if status == 2 else ""))
    return status
