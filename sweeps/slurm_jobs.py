"""A sweep as Slurm job arrays (sweeps/run --slurm).

What is submitted, and why so:
- One array per rank count, so that every task asks for exactly the ranks its run needs (an AR
  run holds one slot, not the sweep's largest TP group).
- Each submission writes new run lists (slurm/array-SEQ-rR.runs) and never rewrites one, so a
  pending array's tasks always read the lines they were submitted with.
- OUT/slurm/jobs.json maps every submitted run to its array task. A run whose task is still
  pending or running in squeue is not submitted again; the whole submission holds a lock, so two
  sweeps/run started together cannot both submit it.
- Every task brings OUT/index.json up to date when its run ends (sweep.py update-index).
"""
import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

import sweep

# squeue states in which a task will still run (or runs) its line.
LIVE_STATES = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
               "REQUEUE_FED", "RESIZING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT"}
SWEEPS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(SWEEPS)


def default_template(runs):
    """The GPU array (one GPU per rank) for a sweep whose runs use the CUDA backend, else the
    CPU array (cores per rank, no GPU request: a CPU cluster rejects an unknown gres)."""
    gpu = any(r.flags.get("backend") == "cuda" for r in runs)
    return os.path.join(ROOT, "slurm", "sweep-array-gpu.sbatch" if gpu else
                        "sweep-array-cpu.sbatch")


def live_tasks(job_ids):
    """The array tasks ("JOB_TASK") among job_ids that Slurm will still run."""
    live = set()
    for job in sorted(job_ids):
        # One query per array: squeue fails as a whole when any id has left the queue.
        res = subprocess.run(["squeue", "-h", "-r", "-j", job, "-o", "%i %T"],
                             capture_output=True, text=True)
        if res.returncode != 0:
            if "Invalid job id" in res.stderr:
                continue  # finished and purged
            raise sweep.SweepError(f"squeue: {first_line(res.stderr)}")
        for line in res.stdout.split("\n"):
            task, _, state = line.strip().partition(" ")
            if state in LIVE_STATES:
                live.add(task)
    return live


def first_line(text):
    lines = [line.strip() for line in text.strip().split("\n") if line.strip()]
    return lines[0] if lines else "(no message)"


def node_sizes(partition):
    """'CPUS GRES' per node of the partition, for the hint when a request can never fit."""
    cmd = ["sinfo", "-h", "-o", "%c %G"] + (["-p", partition] if partition else [])
    res = subprocess.run(cmd, capture_output=True, text=True)
    sizes = sorted(set(res.stdout.split("\n")) - {""})
    return "; ".join(sizes) if res.returncode == 0 and sizes else "unknown"


class Lock:
    """An exclusive flock on OUT/slurm/.lock for the whole check-and-submit."""

    def __init__(self, directory):
        self.path = os.path.join(directory, ".lock")

    def __enter__(self):
        self.file = open(self.path, "w")
        fcntl.flock(self.file, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()


def read_jobs(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as e:
        raise sweep.SweepError(f"{path}: not valid JSON ({e}); remove it if no array of this "
                               "sweep is queued")


def write_json(path, value):
    with open(path + ".tmp", "w") as f:
        json.dump(value, f, indent=1)
    os.replace(path + ".tmp", path)


def next_sequence(directory):
    seqs = [int(name.split("-")[1]) for name in os.listdir(directory)
            if name.startswith("array-") and name.split("-")[1].isdigit()]
    return max(seqs, default=0) + 1


def render(template, name, runs_file, count, ranks, logs, out_dir):
    with open(template) as f:
        text = f.read()
    update = shlex.join([sys.executable, os.path.join(SWEEPS, "sweep.py"), "update-index",
                         os.path.abspath(out_dir)])
    for key, value in {"@NAME@": name, "@RUNS@": os.path.abspath(runs_file),
                       "@ARRAY@": f"0-{count - 1}", "@NTASKS@": str(ranks),
                       "@LOGS@": os.path.abspath(logs), "@UPDATE_INDEX@": update}.items():
        text = text.replace(key, value)
    return text


def sbatch(script, options, ranks, partition):
    """Submits one array; returns its job id. First asks sbatch --test-only whether the request
    can ever start: Slurm accepts a job larger than every node of the partition and leaves it
    pending forever (reason PartitionConfig) with no hint. A refusal becomes one line."""
    for test in (True, False):
        cmd = ["sbatch", *(["--test-only"] if test else ["--parsable"]), *options, script]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            message = first_line(res.stderr).removeprefix("sbatch: error: ")
            message = message.removeprefix("allocation failure: ")
            hint = ""
            if "node configuration is not available" in message:
                hint = (f" (each task asks for {ranks} ranks; nodes of partition "
                        f"{partition or '(default)'}, as 'CPUs GRES': {node_sizes(partition)})")
            raise sweep.SweepError(f"sbatch refused the {ranks}-rank array: {message}{hint}")
    return res.stdout.strip().split(";")[0]


def submit(doc, runs, out_dir, binary, template=None, options=(), partition=None, submit=True,
           log=sys.stdout):
    """Writes and submits the arrays for the runs that are neither complete nor queued; returns
    the job ids submitted. `options` go to sbatch before the script (they override its
    #SBATCH lines)."""
    slurm_dir = os.path.join(out_dir, "slurm")
    logs = os.path.join(out_dir, "logs")
    for d in (os.path.join(out_dir, "runs"), logs, slurm_dir):
        os.makedirs(d, exist_ok=True)
    template = template or default_template(runs)
    if submit and not shutil.which("sbatch"):
        raise sweep.SweepError("--slurm: sbatch not found on PATH (submit from a Slurm login "
                               "node, or use --no-submit to write the scripts only)")
    with Lock(slurm_dir):
        jobs_path = os.path.join(slurm_dir, "jobs.json")
        jobs = read_jobs(jobs_path)
        todo = [r for r in runs if not sweep.is_complete(r.out)]
        live = live_tasks({jobs[r.run_id].split("_")[0] for r in todo if r.run_id in jobs}) \
            if submit else set()
        queued = [r for r in todo if jobs.get(r.run_id) in live]
        todo = [r for r in todo if jobs.get(r.run_id) not in live]
        print(f"# sweep {doc['name']}: {len(runs)} runs, {len(runs) - len(todo) - len(queued)} "
              f"complete, {len(queued)} already queued, {len(todo)} to submit; results in "
              f"{out_dir}", file=log, flush=True)
        submitted = []
        seq = next_sequence(slurm_dir)
        for ranks in sorted({r.ranks for r in todo}):
            group = [r for r in todo if r.ranks == ranks]
            stem = os.path.join(slurm_dir, f"array-{seq}-r{ranks}")
            with open(stem + ".runs", "w") as f:
                f.write("".join(f"{ranks} {shlex.join(r.argv(binary))}\n" for r in group))
            with open(stem + ".sbatch", "w") as f:
                f.write(render(template, doc["name"], stem + ".runs", len(group), ranks, logs,
                               out_dir))
            if not submit:
                print(f"# wrote {stem}.sbatch: {len(group)} runs of {ranks} ranks", file=log)
                continue
            job = sbatch(stem + ".sbatch", options, ranks, partition)
            for i, r in enumerate(group):
                jobs[r.run_id] = f"{job}_{i}"
            write_json(jobs_path, jobs)  # after every array: a later failure loses none
            submitted.append(job)
            print(f"# submitted job {job}: {len(group)} runs of {ranks} ranks "
                  f"({os.path.basename(stem)}.runs)", file=log, flush=True)
        sweep.write_index(doc, runs, out_dir, jobs)
    return submitted


def wait(job_ids, timeout, poll=2.0):
    """Blocks until none of the arrays has a task Slurm will still run (tests, scripts)."""
    deadline = time.monotonic() + timeout
    while live_tasks(set(job_ids)):
        if time.monotonic() > deadline:
            raise sweep.SweepError(f"jobs {', '.join(job_ids)} still queued after {timeout} s")
        time.sleep(poll)
