"""`ssd-analyze summary`: one row per run, aligned text or CSV."""
import csv
import math

COLUMNS = ["file", "mode", "target", "draft", "K", "fanout", "C", "fallback", "batch", "temp",
           "tok/s", "+-", "acc.len", "acc.rate", "p_hit", "synthetic"]


def _num(x, spec):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return format(x, spec)


def row(run):
    """The summary row of one run as a dict of strings (keys: COLUMNS)."""
    s = run.summary
    spec = run.mode in ("sd", "ssd")
    if run.is_characterize:
        return {c: "-" for c in COLUMNS} | {
            "file": run.name, "mode": "characterize", "target": run.attrs.get("target", "?"),
            "tok/s": _num(run.attrs.get("ar_bound_tok_s"), ".2f") + " (AR bound)"}
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
        "tok/s": _num(run.tok_s, ".2f"),
        "+-": _num(run.tok_s_std, ".2f"),
        "acc.len": _num(s.get("mean_acceptance_length"), ".3f") if spec else "-",
        "acc.rate": _num(s.get("acceptance_rate"), ".3f") if spec else "-",
        "p_hit": _num(s.get("p_hit"), ".3f") if run.mode == "ssd" else "-",
        "synthetic": str(run.synthetic_outcomes),
    }


def print_summary(runs, out, as_csv=False, stream=None):
    rows = [row(r) for r in runs]
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
