"""`ssd-analyze summary`: one row per run, aligned text or CSV."""
import csv
import math

COLUMNS = ["file", "mode", "target", "draft", "K", "fanout", "C", "fallback", "batch", "temp",
           "threads", "tok/s", "+-", "xAR", "xAR=", "acc.len", "acc.rate", "p_hit", "synthetic"]
# threads: per rank, "1+1" for a target rank and a draft rank of one thread each. xAR: over the
# mean of the AR runs of the same target, batch, temperature, token limit and prompts whose
# rank has as many threads as this run's target rank (SSD in the paper's layout: the draft's
# hardware added); xAR=: over those whose rank has as many threads as this run has in all
# (equal hardware). "-" where no such AR run is among the files.


def _num(x, spec):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return format(x, spec)


def rank_threads(run):
    """Threads of every rank, in rank order (the leader's alone for files without /ranks)."""
    threads = [int(run.ranks[r].get("threads", 0)) for r in sorted(run.ranks)]
    return [t for t in threads if t > 0] or [run.threads]


def ar_speedups(run, runs):
    """(xAR, xAR=) of `run` among `runs`: NaN where no comparable AR run is there."""
    if run.is_characterize or run.mode == "ar":
        return math.nan, math.nan

    def over(threads):
        ar = [r.tok_s for r in runs if r.mode == "ar" and not r.is_characterize
              and r.sweep_key() == run.sweep_key() and rank_threads(r) == [threads]]
        return run.tok_s / (sum(ar) / len(ar)) if ar else math.nan
    return over(run.threads), over(sum(rank_threads(run)))


def row(run, runs=()):
    """The summary row of one run as a dict of strings (keys: COLUMNS); `runs`: the files it
    is printed with, where its AR baselines are found."""
    s = run.summary
    spec = run.mode in ("sd", "ssd")
    if run.is_characterize:
        return {c: "-" for c in COLUMNS} | {
            "file": run.name, "mode": "characterize", "target": run.attrs.get("target", "?"),
            "tok/s": _num(run.attrs.get("ar_bound_tok_s"), ".2f") + " (AR bound)"}
    speedups = ar_speedups(run, runs)
    return {
        "file": run.name,
        "mode": run.mode,
        "target": run.target.removeprefix("synthetic:"),
        "draft": run.draft.removeprefix("synthetic:"),
        "K": str(run.lookahead) if spec else "-",
        "fanout": run.fanout,
        "C": _num(run.saguaro_c, "g") if run.mode == "ssd" else "-",
        "fallback": run.fallback,
        "batch": str(run.batch_size),
        "temp": _num(run.temperature, "g"),
        "threads": "+".join(str(t) for t in rank_threads(run)),
        "tok/s": _num(run.tok_s, ".2f"),
        "+-": _num(run.tok_s_std, ".2f"),
        "xAR": _num(speedups[0], ".2f"),
        "xAR=": _num(speedups[1], ".2f"),
        "acc.len": _num(s.get("mean_acceptance_length"), ".3f") if spec else "-",
        "acc.rate": _num(s.get("acceptance_rate"), ".3f") if spec else "-",
        "p_hit": _num(s.get("p_hit"), ".3f") if run.mode == "ssd" else "-",
        "synthetic": str(run.synthetic_outcomes),
    }


def print_summary(runs, out, as_csv=False, stream=None):
    rows = [row(r, runs) for r in runs]
    if as_csv:
        w = csv.DictWriter(stream, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(r)
        return
    widths = {c: max([len(c)] + [len(r[c]) for r in rows]) for c in COLUMNS}
    left = {"file", "mode", "target", "draft", "fanout", "fallback"}

    def line(values):
        return "  ".join(values[c].ljust(widths[c]) if c in left else values[c].rjust(widths[c])
                         for c in COLUMNS).rstrip()
    out(line({c: c for c in COLUMNS}))
    for r in rows:
        out(line(r))
