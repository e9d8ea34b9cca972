#!/usr/bin/python3
"""slurm/ and `sweeps/run --slurm` against a real Slurm: the one-node cluster of
scripts/slurm-local.sh (CI starts it; labelled slurm, these tests skip with the reason where no
Slurm answers). Each CPU template; the GPU templates' rank layout on the node's dummy GPUs; a
sweep submitted end to end whose jobs keep index.json current; a second submission while the
first is queued, which submits nothing twice; a run killed by its time limit, and the resume.
"""
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402

ARGS = None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWEEPS_RUN = os.path.join(ROOT, "sweeps", "run")
sys.path.insert(0, os.path.join(ROOT, "sweeps"))
import slurm_jobs  # noqa: E402
from sweep import is_complete  # noqa: E402

# Per rank: Slurm's task id, node-local id, GPUs and the CPUs it may run on, then ssd-bench.
WRAPPER = """#!/bin/bash
echo "task $SLURM_PROCID local $SLURM_LOCALID gpus ${CUDA_VISIBLE_DEVICES:-none} \
cpus $(taskset -pc $$ | sed 's/.*: //')" >> "$(dirname "$0")/tasks.txt"
exec "%s" "$@"
"""


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def digest(path):
    return hashlib.sha1(read(path, "rb")).hexdigest()


def slurm_unavailable():
    if not shutil.which("sbatch"):
        return "no sbatch on PATH (scripts/slurm-local.sh installs and starts a local Slurm)"
    res = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    states = res.stdout.split()
    if res.returncode != 0:
        return f"Slurm does not answer: {slurm_jobs.first_line(res.stderr)}"
    if not any(s.rstrip("*").startswith(("idle", "mixed", "alloc")) for s in states):
        return f"no usable Slurm node (states: {states})"
    return None


def node_gpus():
    res = subprocess.run(["sinfo", "-h", "-o", "%G"], capture_output=True, text=True)
    m = re.search(r"gpu(?::[^:(,]+)?:(\d+)", res.stdout)
    return int(m.group(1)) if m else 0


class SlurmCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        mpi_run.skip_if(slurm_unavailable())

    def setUp(self):
        self.work = os.path.join(ARGS.work, self._testMethodName)
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.jobs = []

    def tearDown(self):
        if self.jobs:  # nothing of a failed test left in the queue
            subprocess.run(["scancel", *self.jobs], capture_output=True)

    def wrapper(self):
        path = os.path.join(self.work, "ssd-bench")
        with open(path, "w") as f:
            f.write(WRAPPER % os.path.abspath(ARGS.ssd_bench))
        os.chmod(path, 0o755)
        return path

    def tasks(self):
        with open(os.path.join(self.work, "tasks.txt")) as f:
            rows = [line.split() for line in f]
        return {int(r[1]): {"gpus": r[5], "cpus": r[7]} for r in rows}

    def sbatch_wait(self, options, template, flags, env=None, timeout=300):
        """sbatch --wait; returns the job's log text."""
        log = os.path.join(self.work, "job.log")
        cmd = ["sbatch", "--wait", "--parsable", f"--output={log}", *options,
               os.path.join(ROOT, "slurm", template), *flags]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.work,
                             env=dict(os.environ, SSD_BENCH=self.wrapper(), **(env or {})))
        self.jobs.append(res.stdout.strip().split(";")[0])
        text = read(log) if os.path.exists(log) else ""
        self.assertEqual(res.returncode, 0, res.stderr + text)
        return text

    def layout(self, text):
        """{rank: role} from ssd-bench's rank-layout table."""
        return {int(m.group(1)): m.group(2) for m in
                re.finditer(r"^#\s+(\d+)\s+(target tp \d+/\d+|draft \d+/\d+)", text, re.M)}

    def sweep_cmd(self, sweep_file, out, *extra):
        return [SWEEPS_RUN, sweep_file, "--out", out, "--ssd-bench", ARGS.ssd_bench, "--slurm",
                *extra]

    def submit(self, sweep_file, out, *extra):
        res = subprocess.run(self.sweep_cmd(sweep_file, out, *extra), capture_output=True,
                             text=True, timeout=120)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        jobs = re.findall(r"^# submitted job (\d+)", res.stdout, re.M)
        self.jobs += jobs
        return res.stdout, jobs

    def index(self, out):
        with open(os.path.join(out, "index.json")) as f:
            return json.load(f)["runs"]


class Templates(SlurmCase):
    def test_cpu_node(self):
        text = self.sbatch_wait(
            ["--ntasks=2", "--cpus-per-task=1"], "cpu-node.sbatch",
            ["--mode", "ssd", "--target", "synthetic:tiny-llama", "--draft", "perturb:0.1",
             "--max-new-tokens", "16", "--reps", "1", "--warmup", "0",
             "--out", os.path.join(self.work, "ssd.h5")])
        self.assertTrue(is_complete(os.path.join(self.work, "ssd.h5")), text)
        self.assertEqual(self.layout(text), {0: "target tp 0/1", 1: "draft 0/1"})
        self.assertIn("threads=1", text)
        # Slurm bound each rank to a core of its own (--cpu-bind=cores, task/affinity).
        cpus = [t["cpus"] for t in self.tasks().values()]
        self.assertEqual(len(set(cpus)), 2, cpus)

    def fake_gpu_layout(self, template, tp, options, env):
        ranks = tp + 1
        if node_gpus() < ranks:
            self.skipTest(f"the Slurm node has {node_gpus()} GPUs in its gres, {ranks} needed")
        # More ranks than this 2-core node has cores: --overcommit lets them share, and
        # --exclusive gives them both cores rather than one. (Slurm
        # 22.05 then refuses --nodes=1 with 5 GPU tasks, hence --nodes=1-3 on this one-node
        # cluster; and --ntasks-per-node with more than 2 GPU tasks, hence TP 1 for the
        # multi-node template.)
        model = "synthetic:llama-124m" if tp == 4 else "synthetic:tiny-llama"
        text = self.sbatch_wait(
            ["--overcommit", "--exclusive", "--nodes=1-3", "--cpus-per-task=1", *options], template,
            ["--mode", "ssd", "--target", model, "--draft", "perturb:0.1",
             "--max-new-tokens", "4", "--prompt-len", "8", "--reps", "1", "--warmup", "0",
             "--out", os.path.join(self.work, "tp.h5")], env=dict(env, SSD_BACKEND="cpu"))
        self.assertTrue(is_complete(os.path.join(self.work, "tp.h5")), text)
        expected = {i: f"target tp {i}/{tp}" for i in range(tp)}
        expected[tp] = "draft 0/1"
        self.assertEqual(self.layout(text), expected)
        gpus = {rank: t["gpus"] for rank, t in self.tasks().items()}
        self.assertEqual(sorted(gpus), list(range(ranks)))
        self.assertEqual(len(set(gpus.values())), ranks, f"each rank its own GPU: {gpus}")

    def test_one_node_gpu_layout(self):  # the paper's layout: TP 4 + 1 draft GPU
        self.fake_gpu_layout("one-node-gpu.sbatch", 4, [], {})

    def test_multi_node_gpu_layout(self):
        self.fake_gpu_layout("multi-node-gpu.sbatch", 1, ["--ntasks=2", "--ntasks-per-node=2"],
                             {"TARGET_TP": "1"})


    def test_draft_ranks_template(self):
        """Figure 6 (right)'s job: AR and SD on the TP 4 group, then SSD with 1 draft rank."""
        if node_gpus() < 5:
            self.skipTest(f"the Slurm node has {node_gpus()} GPUs in its gres, 5 needed")
        out = os.path.join(self.work, "out")
        text = self.sbatch_wait(
            ["--overcommit", "--exclusive", "--nodes=1-3", "--ntasks=5", "--cpus-per-task=1"],
            "draft-ranks-gpu.sbatch",
            [out, "--target", "synthetic:llama-124m", "--max-new-tokens", "4", "--num-prompts",
             "4", "--prompt-len", "8", "--reps", "1", "--warmup", "0"],
            env={"DRAFT": "perturb:0.1", "SPEC_FLAGS": "-k 3", "DRAFT_RANKS_LIST": "1",
                 "BATCH_SIZE": "4", "SSD_BACKEND": "cpu"})
        for name in ("ar", "sd", "ssd-d1"):
            self.assertTrue(is_complete(os.path.join(out, f"{name}.h5")), f"{name}\n{text}")
        self.assertRegex(text, r"#\s+4\s+draft 0/1")


class Sweeps(SlurmCase):
    def wait_index(self, out, timeout=300):
        """Until every run in index.json is complete, as the jobs themselves write it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(r["complete"] for r in self.index(out)):
                return
            time.sleep(1)
        self.fail(f"index.json not complete after {timeout} s: {self.index(out)}")

    def test_sweep_end_to_end_and_double_submission(self):
        out = os.path.join(self.work, "smoke")
        smoke = os.path.join(ROOT, "sweeps", "smoke.toml")
        first, jobs = self.submit(smoke, out, "--sbatch-arg=--hold")
        self.assertIn("6 to submit", first)
        self.assertEqual(len(jobs), 2, first)  # one array per rank count: AR/SD 1, SSD 2
        lists = sorted(glob.glob(os.path.join(out, "slurm", "array-*.runs")))
        digests = [digest(p) for p in lists]
        sizes = {os.path.basename(p): len(read(p).splitlines()) for p in lists}
        self.assertEqual(sizes, {"array-1-r1.runs": 4, "array-1-r2.runs": 2}, sizes)
        # Each array asks for the ranks of its runs, not the sweep's largest.
        for job, ranks in zip(jobs, (1, 2)):
            info = subprocess.run(["scontrol", "show", "job", job], capture_output=True,
                                  text=True).stdout
            self.assertRegex(info, rf"NumTasks={ranks}\b")

        second, again = self.submit(smoke, out)
        self.assertEqual(again, [], second)
        self.assertIn("6 already queued, 0 to submit", second)
        self.assertEqual(lists, sorted(glob.glob(os.path.join(out, "slurm", "array-*.runs"))))
        self.assertEqual(digests, [digest(p) for p in lists])

        subprocess.run(["scontrol", "release", *jobs], check=True)
        self.wait_index(out)  # written by the jobs: sweeps/run is not run again
        logs = glob.glob(os.path.join(out, "logs", "*.log"))
        self.assertEqual(len(logs), 6, logs)  # every run ran exactly once
        for r in self.index(out):
            self.assertTrue(is_complete(os.path.join(out, r["file"])), r)
            self.assertRegex(r["slurm_job"], r"^\d+_\d+$")
        third, none = self.submit(smoke, out)
        self.assertEqual(none, [])
        self.assertIn("6 complete, 0 already queued, 0 to submit", third)

    def test_gpu_sweep_array(self):
        if node_gpus() < 2:
            self.skipTest(f"the Slurm node has {node_gpus()} GPUs in its gres, 2 needed")
        out = os.path.join(self.work, "smoke")
        template = os.path.join(ROOT, "slurm", "sweep-array-gpu.sbatch")
        res = subprocess.run(
            [SWEEPS_RUN, os.path.join(ROOT, "sweeps", "smoke.toml"), "--out", out,
             "--ssd-bench", self.wrapper(), "--slurm", "--template", template,
             "--sbatch-arg=--cpus-per-task=1", "--wait"],
            capture_output=True, text=True, timeout=300)
        self.jobs += re.findall(r"^# submitted job (\d+)", res.stdout, re.M)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertIn("6 of 6 runs complete", res.stdout)
        rows = [line.split() for line in read(os.path.join(self.work, "tasks.txt")).splitlines()]
        # The SSD runs' two ranks each got a GPU of their own; AR and SD ranks one each.
        two_rank = [r for r in rows if r[3] == "1"]
        self.assertEqual(len(rows), 8, rows)
        self.assertEqual(len(two_rank), 2, rows)
        self.assertTrue(all(r[5] != "none" for r in rows), rows)

    def decode_rate(self):
        """This host's llama-124m AR tok/s on one core, now (beside whatever else runs)."""
        proc = subprocess.run([ARGS.ssd_bench, "--target", "synthetic:llama-124m",
                               "--max-new-tokens", "128", "--prompt-len", "8", "--reps", "1",
                               "--warmup", "0", "--threads", "1", "--ignore-eos"],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return float(re.search(r"^# Avg decode throughput: ([\d.]+) tok/s", proc.stdout,
                               re.M).group(1))

    def test_time_limit_kill_and_resume(self):
        out = os.path.join(self.work, "long")
        path = os.path.join(self.work, "long.toml")
        # One AR run on one core: Slurm's TERM, due 60 s before a 1-minute limit, arrives
        # within its ~30 s check interval, so the run must last well past 30 s. Its length is
        # set from this host's rate measured just before, to ~80 s (2.5x for the load to
        # change; 10 repetitions of up to 3000 tokens, within llama-124m's 4096 positions).
        # A fixed 10 x 1000 tokens (50 s at 200 tok/s, the fastest host until then) took
        # ~167 s alone at 50-60 tok/s on a slow host, and the resume runs it all again.
        tokens = min(3000, max(200, int(self.decode_rate() * 80 / 10)))
        with open(path, "w") as f:
            f.write('name = "long"\n[defaults]\nmode = "ar"\ntarget = "synthetic:llama-124m"\n'
                    f"max-new-tokens = {tokens}\nprompt-len = 8\nreps = 10\nwarmup = 0\n"
                    "threads = 1\nignore-eos = true\n")
        _, jobs = self.submit(path, out, "--time=1",
                              "--sbatch-arg=--export=ALL,SSD_MAX_REQUEUES=0")
        slurm_jobs.wait(jobs, timeout=240)
        (log,) = glob.glob(os.path.join(out, "logs", "*.log"))
        text = read(log)
        self.assertIn("stopped by SIGTERM", text)
        run = self.index(out)[0]  # the job itself wrote it: incomplete, and no partial file
        self.assertFalse(run["complete"], run)
        self.assertFalse(os.path.exists(os.path.join(out, run["file"])), text)

        resumed, jobs = self.submit(path, out)
        self.assertIn("0 complete, 0 already queued, 1 to submit", resumed)
        self.assertIn("array-2-r1.runs", resumed)
        self.wait_index(out, timeout=400)
        self.assertTrue(is_complete(os.path.join(out, run["file"])))


class PaperSweepArrays(unittest.TestCase):
    """Needs no Slurm: the GPU sweep's arrays as written, one per rank count."""

    def test_paper_sweep_writes_gpu_arrays(self):
        out = os.path.join(ARGS.work, "paper")
        shutil.rmtree(out, ignore_errors=True)
        res = subprocess.run([SWEEPS_RUN, os.path.join(ROOT, "sweeps", "paper-llama70b.toml"),
                              "--out", out, "--ssd-bench", ARGS.ssd_bench, "--slurm",
                              "--no-submit"], capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        # AR and collocated SD on the TP 4 group; SSD adds its draft rank.
        self.assertIn("array-1-r4.sbatch: 10 runs of 4 ranks", res.stdout)
        self.assertIn("array-1-r5.sbatch: 5 runs of 5 ranks", res.stdout)
        script = read(os.path.join(out, "slurm", "array-1-r5.sbatch"))
        self.assertIn("#SBATCH --ntasks=5\n", script)
        self.assertIn("#SBATCH --gpus-per-task=1\n", script)
        self.assertIn("srun --mpi=pmix", script)
        self.assertIn("--backend cuda", read(os.path.join(out, "slurm", "array-1-r5.runs")))


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__])
