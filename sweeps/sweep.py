"""Sweep files: a TOML grid of ssd-bench runs, expanded, run locally with mpirun or as one
Slurm job array, resumable. See sweeps/README.md for the file format."""
import fcntl
import hashlib
import itertools
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field

import h5py

# Flags that only mean something for some modes; dropped elsewhere so that, e.g., an AR run
# is not repeated once per lookahead of the grid.
SPECULATIVE_ONLY = {"draft", "lookahead", "draft-temperature", "draft-placement", "draft-ranks",
                    "outcomes"}
SSD_ONLY = {"fanout", "fanout-backup", "fanout-alpha", "fanout-r", "budget", "saguaro-c",
            "fallback", "backup"}
SWEEP_KEYS = {"name", "description", "defaults", "grid", "runs", "launcher"}


class SweepError(Exception):
    pass


@dataclass
class Run:
    flags: dict
    ranks: int
    run_id: str = ""
    out: str = ""
    label: str = ""
    extra: dict = field(default_factory=dict)

    def argv(self, binary):
        args = [binary]
        for key, value in self.flags.items():
            if isinstance(value, bool):
                if value:
                    args.append(f"--{key}")
            else:
                args += [f"--{key}", str(value)]
        return args + ["--out", self.out, "--overwrite"]

    @property
    def threads(self):
        """--threads of each rank, or None where the flags leave it to ssd-bench."""
        value = int(self.flags.get("threads", 0) or 0)
        return value if value > 0 else None


def load(path):
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise SweepError(f"{path}: no such sweep file")
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{path}: not valid TOML: {e}")
    unknown = set(doc) - SWEEP_KEYS
    if unknown:
        raise SweepError(f"{path}: unknown top-level keys {sorted(unknown)} "
                         f"(expected {sorted(SWEEP_KEYS)})")
    if "name" not in doc:
        raise SweepError(f"{path}: missing 'name'")
    for key, values in doc.get("grid", {}).items():
        if not isinstance(values, list) or not values:
            raise SweepError(f"{path}: grid.{key} must be a non-empty list")
    return doc


def ranks_for(flags):
    """MPI ranks a run needs: the target's TP group, plus its draft ranks (default 1) when the
    draft is separate."""
    tp = int(flags.get("target-tp", 1))
    mode = flags.get("mode", "ar")
    placement = flags.get("draft-placement", "auto")
    separate = mode == "ssd" or (mode == "sd" and placement == "separate")
    return tp + (int(flags.get("draft-ranks", 1)) if separate else 0)


def normalise(flags):
    mode = flags.get("mode", "ar")
    out = {}
    for key, value in flags.items():
        if mode == "ar" and (key in SPECULATIVE_ONLY or key in SSD_ONLY):
            continue
        if mode == "sd" and key in SSD_ONLY:
            continue
        out[key] = value
    return out


def expand(doc, out_dir):
    defaults = doc.get("defaults", {})
    grid = doc.get("grid", {})
    keys = list(grid)
    # No grid: only the [[runs]] (or, with neither, the defaults alone).
    combos = [dict(zip(keys, values)) for values in itertools.product(*(grid[k] for k in keys))
              ] if grid else []
    combos += doc.get("runs", [])
    runs, seen = [], set()
    for combo in combos or [{}]:
        flags = normalise({**defaults, **combo})
        key = json.dumps(flags, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        run_id = hashlib.sha1(key.encode()).hexdigest()[:10]
        label = " ".join(f"{k}={v}" for k, v in combo.items() if k in flags)
        runs.append(Run(flags, ranks_for(flags), run_id,
                        os.path.join(out_dir, "runs", f"{run_id}.h5"), label))
    return runs


def is_complete(path):
    """A result file counts only if the writer committed it (root attribute complete == 1)."""
    try:
        with h5py.File(path, "r") as f:
            return int(f.attrs.get("complete", 0)) == 1
    except (OSError, KeyError):
        return False


def write_index(doc, runs, out_dir, jobs=None):
    """OUT/index.json: every run with its flags, whether its file is complete, and (for Slurm)
    the array task that runs it."""
    entries = []
    for r in runs:
        entry = {"id": r.run_id, "file": os.path.relpath(r.out, out_dir), "ranks": r.ranks,
                 "flags": r.flags, "complete": is_complete(r.out)}
        if jobs and r.run_id in jobs:
            entry["slurm_job"] = jobs[r.run_id]
        entries.append(entry)
    index = {"name": doc["name"], "description": doc.get("description", ""), "runs": entries}
    return save_index(out_dir, index)


def save_index(out_dir, index):
    """Atomic, and serialised with the other writers (array tasks ending at once)."""
    path = os.path.join(out_dir, "index.json")
    with open(os.path.join(out_dir, ".index.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(path + ".tmp", "w") as f:
            json.dump(index, f, indent=1)
        os.replace(path + ".tmp", path)
    return path


def update_index(out_dir):
    """Re-reads every run's completeness into OUT/index.json: what each Slurm array task runs
    when its run ends, so the index is current without running sweeps/run again."""
    path = os.path.join(out_dir, "index.json")
    with open(path) as f:
        index = json.load(f)
    for entry in index["runs"]:
        entry["complete"] = is_complete(os.path.join(out_dir, entry["file"]))
    return save_index(out_dir, index)


def host_cores():
    """Cores among this process's CPUs (os.sched_getaffinity): what Open MPI counts its slots
    and --map-by slot:PE=N's processing elements in (a core's hardware threads are one)."""
    cores = set()
    for cpu in os.sched_getaffinity(0):
        try:  # a core: the CPUs that share it (core_id repeats across packages and dies)
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as f:
                cores.add(f.read().strip())
        except OSError:
            cores.add(str(cpu))
    return len(cores)


def default_binding(ranks, threads, cores):
    """mpiexec arguments placing `ranks` ranks of `threads` threads on `cores` cores: each rank
    on `threads` cores of its own where they fit, else anywhere. Open MPI's own default binds a
    rank to one core for -np <= 2, where a --threads 2 rank's threads took turns on one core."""
    if threads and ranks * threads <= cores:
        return ["--map-by", f"slot:PE={threads}", "--bind-to", "core"]
    return ["--oversubscribe", "--bind-to", "none"]


def launcher_prefix(doc, ranks, mpiexec, threads=None, cores=None):
    """mpiexec -np RANKS with the sweep's [launcher] mpiexec_args, or by default
    default_binding(ranks, threads, cores) (cores: host_cores() when not given); threads None:
    ssd-bench picks its own, so the ranks are not bound."""
    launcher = doc.get("launcher", {})
    extra = launcher.get("mpiexec_args")
    if extra is None:
        extra = default_binding(ranks, threads, host_cores() if cores is None else cores)
    prefix = [mpiexec, "-np", str(ranks), *extra]
    if os.geteuid() == 0 and "--allow-run-as-root" not in prefix:
        prefix.insert(1, "--allow-run-as-root")
    return prefix


def fmt_seconds(s):
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class StopRequest:
    """SIGTERM or SIGINT (Slurm's time limit, Ctrl-C, kill) while a sweep runs: passed on to the
    running ssd-bench (which stops every rank and removes its partial file), and the sweep stops
    after it with the index written, so running the same command again continues with the runs
    that are not complete."""

    def __init__(self):
        self.signal = 0
        self.child = None
        self.previous = {s: signal.signal(s, self.handle) for s in (signal.SIGTERM, signal.SIGINT)}

    def handle(self, sig, _frame):
        self.signal = self.signal or sig
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(sig)

    def call(self, cmd, **kwargs):
        self.child = subprocess.Popen(cmd, **kwargs)
        if self.signal:  # arrived between two runs
            self.child.send_signal(self.signal)
        code = self.child.wait()
        self.child = None
        return code

    def restore(self):
        for s, handler in self.previous.items():
            signal.signal(s, handler)


def run_local(doc, runs, out_dir, binary, mpiexec, dry_run=False, log=sys.stdout):
    os.makedirs(os.path.join(out_dir, "runs"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "logs"), exist_ok=True)
    todo = [r for r in runs if not is_complete(r.out)]
    print(f"# sweep {doc['name']}: {len(runs)} runs, {len(runs) - len(todo)} already complete, "
          f"{len(todo)} to run; results in {out_dir}", file=log, flush=True)
    failures, started = 0, time.time()
    stop = StopRequest()
    for i, run in enumerate(todo, 1):
        cmd = launcher_prefix(doc, run.ranks, mpiexec, run.threads) + run.argv(binary)
        if dry_run:
            print(shlex.join(cmd), file=log)
            continue
        t0 = time.time()
        log_path = os.path.join(out_dir, "logs", f"{run.run_id}.log")
        with open(log_path, "w") as out:
            out.write("# " + shlex.join(cmd) + "\n")
            out.flush()
            code = stop.call(cmd, stdout=out, stderr=subprocess.STDOUT)
        if stop.signal:
            index = write_index(doc, runs, out_dir)
            done = sum(is_complete(r.out) for r in runs)
            print(f"# sweep stopped by {signal.Signals(stop.signal).name}: {done} of {len(runs)} "
                  f"runs complete; run the same command again to continue; index: {index}",
                  file=log, flush=True)
            stop.restore()
            raise SystemExit(128 + stop.signal)
        elapsed = time.time() - started
        eta = elapsed / i * (len(todo) - i)
        status = "ok" if code == 0 and is_complete(run.out) else f"FAILED (exit {code}, {log_path})"
        failures += status != "ok"
        print(f"[{i}/{len(todo)}] {run.run_id} {run.label or '(defaults)'}: {status} in "
              f"{time.time() - t0:.1f} s; elapsed {fmt_seconds(elapsed)}, ETA {fmt_seconds(eta)}",
              file=log, flush=True)
    stop.restore()
    index = write_index(doc, runs, out_dir)
    print(f"# index: {index}; {failures} failed", file=log, flush=True)
    return failures


if __name__ == "__main__":
    # sweep.py update-index OUT: run by every Slurm array task at its end.
    if len(sys.argv) != 3 or sys.argv[1] != "update-index":
        sys.exit("usage: sweep.py update-index OUT_DIR")
    try:
        update_index(sys.argv[2])
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"sweep.py update-index: error: {sys.argv[2]}: {e}")
