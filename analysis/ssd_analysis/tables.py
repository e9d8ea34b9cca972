"""Rows of values as an aligned text table, CSV or JSON: the output of `ssd-analyze predict`
(predict_cli.py) and of its --validate (predict_validate.py); and the argument parser of the
subcommands that print them (OneLineErrors)."""
import argparse
import csv
import json
import math
import sys


class OneLineErrors(argparse.ArgumentParser):
    """A subcommand's parser whose errors are one line, "<prog>: <message>", and exit 2 (no
    usage dump): set as a subparser's class (`p.__class__ = OneLineErrors`)."""

    def error(self, message):
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


def format_cell(v, spec):
    """`v` formatted by `spec`; "-" for None or NaN, "inf" for an infinity."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-" if not (isinstance(v, float) and math.isinf(v)) else "inf"
    return format(v, spec)


def emit_table(rows, columns, fmt, header, out=print, stream=None):
    """`rows` (dicts) as `fmt`: "json" ({"inputs": header, "rows": rows}) or "csv" (`columns`)
    to `stream` (default stdout), else as text through `out`: "# key: value" lines of `header`,
    then `columns` right-aligned, each cell its row's COLUMN_txt string where the row has one,
    else format_cell(value, "")."""
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
    text = [{c: r.get(c + "_txt", format_cell(r.get(c), "")) for c in columns} for r in rows]
    width = {c: max([len(c)] + [len(t[c]) for t in text]) for c in columns}
    out("  ".join(c.rjust(width[c]) for c in columns).rstrip())
    for t in text:
        out("  ".join(t[c].rjust(width[c]) for c in columns).rstrip())
