"""`ssd-analyze traffic RUNS... [--characterize FILE]`: the weight bytes each run read per token.

At batch 1 every forward pass reads the whole model's weights once, whatever its rows, so a
decode's weight traffic is its forward passes times each model's weight bytes (/reps
target_forward_passes and draft_forward_passes, counted by ssd-bench since 2026-12-03, times
/models/<role> weight_bytes_per_token; the K/V cache's reads, a few MB a pass at the contexts of
the shipped runs, are left out). Per run: the passes per generated token, the GB per token and
the rate the run read them at; with a characterize file, that rate as a fraction of what the
cores it ran on read together (node_read_gbps where it used two or more cores, host_read_gbps
for one; not for runs on GPUs, whose HBM those host rates do not describe).

Why: on one host SD and SSD share one memory system. SSD's draft passes once more per round
than SD's at the same K (the cache build's glue step and K branch steps against SD's K steps),
and then its cache must fit beside the verification, so it reads more bytes per token. Where
both read at the node's rate, tok/s = GB/s / (GB/token) splits SSD/SD exactly into those two
ratios: printed for every SSD run against each SD run of the same target, draft, prompts,
batch, temperature and token limit. At equal hardware the line also gives SSD's ceiling where
both read at one rate: 1 - d/2 of SD, d the draft's weight bytes over the target's, for every K,
acceptance and fan-out (docs/pair-measurements.md, "At equal hardware"); only a faster read rate
takes SSD past it.
"""
import argparse
import math
import sys

import numpy as np

from . import io as sio
from .tables import OneLineErrors, emit_table

COLUMNS = ["file", "mode", "K", "cores", "gpus", "tok_s", "target_passes_per_tok",
           "draft_passes_per_tok", "GB_per_tok", "GBps", "of_read"]
FORMATS = {"tok_s": ".1f", "target_passes_per_tok": ".3f", "draft_passes_per_tok": ".3f",
           "GB_per_tok": ".4g", "GBps": ".1f", "of_read": ".2f"}


class TrafficError(Exception):
    """A file that cannot be measured (the message is the one line printed)."""


def add_parser(sub, func):
    p = sub.add_parser("traffic", help="weight bytes per token and the rate they were read at",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.__class__ = OneLineErrors
    p.add_argument("files", nargs="+", help="run files (ssd-bench run)")
    p.add_argument("--characterize", help="a characterize file of the same host: the read rates")
    p.add_argument("--format", choices=("text", "csv", "json"), default="text")
    p.set_defaults(func=func)


def cores(run):
    """CPU cores (threads) over the ranks that ran a model."""
    return sum(int(a.get("threads", 1)) for a in run.ranks.values()) or max(run.threads, 1)


def gpus(run):
    """GPUs the ranks ran on: distinct (host, device) pairs among the ranks whose device is a CUDA
    GPU (its name carries the index and PCI address), 0 for CPU runs."""
    return len({(a.get("host"), a.get("device")) for a in run.ranks.values()
                if "(cuda:" in str(a.get("device", ""))})


def hardware(row):
    """What a row's run ran on, for the SSD/SD lines: its GPUs where it had any, else its cores."""
    return (row["gpus"], "GPU") if row["gpus"] else (row["cores"], "core")


def hardware_text(ssd, sd):
    """"equal hardware", "2 cores against 1" or "2 GPUs against 1 core"."""
    (n_ssd, unit), (n_sd, unit_sd) = hardware(ssd), hardware(sd)
    if (n_ssd, unit) == (n_sd, unit_sd):
        return "equal hardware"
    ssd_text = f"{n_ssd} {unit}{'s' * (n_ssd != 1)}"
    if unit == unit_sd:
        return f"{ssd_text} against {n_sd}"
    return f"{ssd_text} against {n_sd} {unit_sd}{'s' * (n_sd != 1)}"


def traffic(run):
    """The run's decode traffic, summed over its repetitions; TrafficError where it was written
    before the passes were counted."""
    reps = run.reps
    if "target_forward_passes" not in reps:
        raise TrafficError(f"{run.name}: no /reps target_forward_passes (written before "
                           "ssd-bench counted forward passes, 2026-12-03)")
    target_bytes = float(run.models.get("target", {}).get("weight_bytes_per_token", math.nan))
    draft_bytes = float(run.models.get("draft", {}).get("weight_bytes_per_token", 0.0))
    tokens = float(sum(reps["decode_tokens"]))
    seconds = float(sum(reps["decode_time_s"]))
    target_passes = float(sum(reps["target_forward_passes"]))
    draft_passes = float(sum(reps.get("draft_forward_passes", [0])))
    total = target_passes * target_bytes + draft_passes * draft_bytes
    return {"file": run.name, "mode": run.mode, "K": run.lookahead, "cores": cores(run),
            "gpus": gpus(run),
            "tok_s": tokens / seconds if seconds > 0 else math.nan,
            "target_passes_per_tok": target_passes / tokens if tokens else math.nan,
            "draft_passes_per_tok": draft_passes / tokens if tokens else math.nan,
            "GB_per_tok": total / tokens / 1e9 if tokens else math.nan,
            "GBps": total / seconds / 1e9 if seconds > 0 else math.nan,
            "draft_over_target": draft_bytes / target_bytes if target_bytes > 0 else math.nan,
            "key": run.sweep_key() + (run.draft,)}


def read_rates(char):
    """(one core alone, every core of the node at once) in GB/s from a characterize file."""
    one = float(char.attrs.get("host_read_gbps", math.nan))
    node = float(char.attrs.get("node_read_gbps", math.nan))
    return one, node


def node_passes(char):
    """The node read's passes (/node_read, files since 2026-12-03): their range of GB/s and of
    the one-way latency between the node's cores measured before each, or "" without them. On a
    VM whose vCPUs the hypervisor moves between dies, the two move together."""
    t = char.tables.get("node_read") or {}
    if len(t.get("gbps", [])) == 0:
        return ""
    g, lat = t["gbps"], t.get("latency_ns", [])
    text = f"{len(g)} passes {min(g):.1f}-{max(g):.1f} GB/s (median {float(np.median(g)):.1f})"
    if len(lat):
        text += f", the cores {min(lat):.0f}-{max(lat):.0f} ns apart"
    return text


def equal_rate_ceiling(d):
    """The most SSD on 1 + 1 can reach of SD on the same two cores, batch 1, where a pass reads
    its model's weights once and both modes read at one rate: 1 - d/2, d = draft bytes / target
    bytes. Per round SD takes (1 + K d) / 2 target passes, SSD max(1, (K + 1) d) (the glue step
    and K branch steps beside one verification), both for at most the same tokens at the same K,
    so SSD/SD <= (1 + K d) / (2 max(1, (K + 1) d)), largest at (K + 1) d = 1."""
    return 1.0 - d / 2.0


def split_lines(rows):
    """SSD/SD for every SSD row against each comparable SD row: the bytes and the rate parts,
    and at equal hardware the ceiling at one read rate."""
    lines = []
    for ssd in (r for r in rows if r["mode"] == "ssd"):
        for sd in (r for r in rows if r["mode"] == "sd" and r["key"] == ssd["key"]):
            speed = ssd["tok_s"] / sd["tok_s"]
            fewer_bytes = sd["GB_per_tok"] / ssd["GB_per_tok"]
            rate = ssd["GBps"] / sd["GBps"]
            where = hardware_text(ssd, sd)
            line = (f"{ssd['file']} / {sd['file']} ({where}): SSD/SD {speed:.3f} = bytes "
                    f"per token {fewer_bytes:.3f} (SD's {sd['GB_per_tok']:.3f} GB over "
                    f"SSD's {ssd['GB_per_tok']:.3f}) x read rate {rate:.3f} "
                    f"({ssd['GBps']:.1f} over {sd['GBps']:.1f} GB/s)")
            d = ssd["draft_over_target"]
            if where == "equal hardware" and math.isfinite(d) and d > 0:
                line += (f"; at one read rate at most {equal_rate_ceiling(d):.3f} "
                         f"(1 - d/2, d = draft/target bytes {d:.3f})")
            lines.append(line)
    return lines


def cmd_traffic(args, out=print):
    runs, errors = sio.load_runs(args.files)
    for e in errors:
        print(f"ssd-analyze traffic: {e}", file=sys.stderr)
    if errors:
        return 2
    one = node = math.nan
    if args.characterize:
        chars, errors = sio.load_runs([args.characterize])
        if errors or not chars[0].is_characterize:
            print(f"ssd-analyze traffic: --characterize {args.characterize}: "
                  f"{errors[0] if errors else 'not a characterize file'}", file=sys.stderr)
            return 2
        one, node = read_rates(chars[0])
    rows = []
    try:
        for run in runs:
            if run.is_characterize:
                raise TrafficError(f"{run.name}: a characterize file, not a run (pass it as "
                                   "--characterize)")
            rows.append(traffic(run))
    except TrafficError as e:
        print(f"ssd-analyze traffic: {e}", file=sys.stderr)
        return 2
    for r in rows:
        r["of_read"] = math.nan if r["gpus"] else r["GBps"] / (node if r["cores"] > 1 else one)
        for c, spec in FORMATS.items():
            r[c + "_txt"] = format(r[c], spec) if math.isfinite(r[c]) else "-"
    header = {"weight traffic": "forward passes x each model's weight bytes, decode only"}
    if args.characterize:
        node_text = (f"{node:.1f} GB/s" if math.isfinite(node) else "not measured (a file from "
                     "before characterize read with every rank at once)")
        header["read rates"] = (f"{one:.1f} GB/s one core alone, every core of the node at once "
                                f"{node_text} ({args.characterize})")
        if node_passes(chars[0]):
            header["node read"] = node_passes(chars[0])
    emit_table(rows, COLUMNS, args.format, header, out=out)
    if args.format == "text":
        for line in split_lines(rows):
            out(line)
    return 0
