#!/usr/bin/python3
"""sweeps/run's launcher binds each rank to cores of its own: --map-by slot:PE=threads
--bind-to core where the sweep's ranks x threads fit the host's cores, --oversubscribe
--bind-to none where they do not (or the threads are left to ssd-bench), a sweep file's own
[launcher] mpiexec_args first. On this host: the ranks mpiexec starts with that prefix get the
CPUs it promises (Open MPI's default bound a one-rank --threads 2 run to one core), and a sweep
of AR on 2 threads and SSD on 1 thread per rank records them in /ranks."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402

ARGS = None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "sweeps"))
import sweep  # noqa: E402

PE = ["--map-by", "slot:PE={}", "--bind-to", "core"]
NONE = ["--oversubscribe", "--bind-to", "none"]


def pe(threads):
    return [a.format(threads) for a in PE]


def expand_cpus(text):
    """"0-2,5" -> {0, 1, 2, 5}."""
    out = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        out.update(range(int(first), int(last or first) + 1))
    return out


class Prefix(unittest.TestCase):
    """launcher_prefix on a host of a given number of cores."""

    def prefix(self, ranks, threads, cores, doc=None):
        prefix = sweep.launcher_prefix(doc or {"name": "t"}, ranks, "mpiexec", threads, cores)
        prefix = [a for a in prefix if a != "--allow-run-as-root"]
        self.assertEqual(prefix[:3], ["mpiexec", "-np", str(ranks)])
        return prefix[3:]

    def test_own_cores_where_they_fit(self):
        self.assertEqual(self.prefix(1, 2, 2), pe(2))  # AR/SD on 2 threads: both cores
        self.assertEqual(self.prefix(2, 1, 2), pe(1))  # SSD's two ranks: a core each
        self.assertEqual(self.prefix(1, 1, 2), pe(1))
        self.assertEqual(self.prefix(3, 4, 16), pe(4))
        self.assertEqual(self.prefix(4, 4, 16), pe(4))

    def test_anywhere_where_they_do_not(self):
        self.assertEqual(self.prefix(2, 2, 2), NONE)
        self.assertEqual(self.prefix(3, 1, 2), NONE)  # fig6's D = 2
        self.assertEqual(self.prefix(1, 2, 1), NONE)
        self.assertEqual(self.prefix(5, 4, 16), NONE)

    def test_anywhere_where_ssd_bench_picks_the_threads(self):
        self.assertEqual(self.prefix(1, None, 64), NONE)
        self.assertEqual(self.prefix(2, None, 2), NONE)

    def test_the_sweep_files_arguments_win(self):
        doc = sweep.load(os.path.join(ROOT, "sweeps", "fig6-draft-ranks.toml"))
        given = doc["launcher"]["mpiexec_args"]
        self.assertEqual(self.prefix(1, 1, 64, doc), given)
        self.assertEqual(self.prefix(3, 1, 2, doc), given)
        self.assertEqual(self.prefix(2, 1, 2, {"name": "t", "launcher": {"mpiexec_args": []}}),
                         [])

    def test_runs_carry_their_threads(self):
        doc = {"name": "t", "defaults": {"threads": 2},
               "grid": {"mode": ["ar", "ssd"]}, "runs": [{"mode": "ar", "threads": 0}]}
        runs = sweep.expand(doc, "/nonexistent")
        self.assertEqual([(r.flags.get("mode"), r.ranks, r.threads) for r in runs],
                         [("ar", 1, 2), ("ssd", 2, 2), ("ar", 1, None)])
        self.assertIsNone(sweep.expand({"name": "t"}, "/nonexistent")[0].threads)

    def test_host_cores(self):
        cores = sweep.host_cores()
        self.assertGreaterEqual(cores, 1)
        self.assertLessEqual(cores, len(os.sched_getaffinity(0)))


class OnThisHost(unittest.TestCase):
    """What mpiexec gives the ranks with the prefix the launcher picks here."""

    def setUp(self):
        if sweep.host_cores() < 2:
            self.skipTest(f"{sweep.host_cores()} core: no layout of two cores to check")
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    def cpus_of_ranks(self, ranks, threads):
        """{rank: its Cpus_allowed_list} of `ranks` ranks started with the launcher's prefix."""
        prefix = sweep.launcher_prefix({"name": "t"}, ranks, ARGS.mpiexec, threads)
        self.assertIn(f"slot:PE={threads}", prefix)
        with tempfile.TemporaryDirectory(prefix="ompi-") as session:
            proc = subprocess.run(
                [*prefix, "sh", "-c", 'echo "$OMPI_COMM_WORLD_RANK $(grep Cpus_allowed_list: '
                 '/proc/self/status | cut -f2)"'], capture_output=True, text=True, timeout=60,
                env=dict(self.env, OMPI_MCA_orte_tmpdir_base=session))
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        rows = dict(line.split() for line in proc.stdout.splitlines())
        self.assertEqual(sorted(rows), [str(r) for r in range(ranks)], proc.stdout)
        return {int(r): expand_cpus(c) for r, c in rows.items()}

    def test_one_rank_of_two_threads_gets_two_cpus(self):
        # Two cores: 2 CPUs, or their hardware threads. Open MPI's default: one core.
        cpus = self.cpus_of_ranks(1, 2)
        self.assertGreaterEqual(len(cpus[0]), 2, cpus)

    def test_two_ranks_of_one_thread_get_a_cpu_each(self):
        cpus = self.cpus_of_ranks(2, 1)
        self.assertTrue(cpus[0] and cpus[1], cpus)
        self.assertFalse(cpus[0] & cpus[1], cpus)

    def test_a_sweep_records_the_cpus_each_rank_ran_on(self):
        shutil.rmtree(ARGS.work, ignore_errors=True)
        os.makedirs(ARGS.work)
        path = os.path.join(ARGS.work, "bind.toml")
        with open(path, "w") as f:
            f.write('name = "bind"\n[defaults]\ntarget = "synthetic:tiny-llama"\n'
                    'draft = "perturb:0.1"\nmax-new-tokens = 4\nwarmup = 0\nreps = 1\n'
                    '[[runs]]\nmode = "ar"\nthreads = 2\n[[runs]]\nmode = "ssd"\nthreads = 1\n')
        out = os.path.join(ARGS.work, "out")
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "sweeps", "run"), path,
                               "--out", out, "--ssd-bench", ARGS.ssd_bench, "--mpiexec",
                               ARGS.mpiexec], capture_output=True, text=True, timeout=300,
                              env=self.env)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        files = sorted(os.path.join(out, "runs", f) for f in os.listdir(os.path.join(out, "runs")))
        ranks = {}
        for file in files:
            with h5py.File(file, "r") as f:
                self.assertEqual(int(f.attrs["oversubscribed_ranks"]), 0, file)
                ranks[f.attrs["mode"]] = [
                    (int(f[f"ranks/{r}"].attrs["threads"]), str(f[f"ranks/{r}"].attrs["cpus"]))
                    for r in sorted(f["ranks"], key=int)]
        self.assertEqual(sorted(ranks), ["ar", "ssd"])
        (threads, cpus), = ranks["ar"]
        self.assertEqual(threads, 2, ranks)
        self.assertGreaterEqual(len(expand_cpus(cpus)), 2, ranks)
        self.assertEqual([t for t, _ in ranks["ssd"]], [1, 1], ranks)
        target, draft = (expand_cpus(c) for _, c in ranks["ssd"])
        self.assertTrue(target and draft, ranks)
        self.assertFalse(target & draft, ranks)
        with open(os.path.join(out, "logs", os.listdir(os.path.join(out, "logs"))[0])) as f:
            self.assertRegex(f.readline(), r"^# \S*mpiexec .*--map-by slot:PE=[12] --bind-to core ")


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__])
