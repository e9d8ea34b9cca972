#!/usr/bin/python3
"""End to end test of analysis/ssd-analyze: runs a tiny sweep (AR, collocated SD, SSD on two
MPI ranks; tiny-llama; batch 1 and 2; 2 repetitions; plus a few SSD variants and a
characterize file so that every figure has its inputs), then checks that `summary` prints every
run, `validate` exits 0, and `figures` writes every figure as a non-empty PNG and PDF. Also runs
the pure-python unit tests of analysis/tests.

  /usr/bin/python3 tests/py_test_analysis.py --ssd-bench PATH --work DIR --mpiexec PATH
"""
import csv
import io
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANALYZE = os.path.join(ROOT, "analysis", "ssd-analyze")
ARGS = None

COMMON = ["--target", "synthetic:tiny-llama", "--max-new-tokens", "16", "--prompt-len", "8",
          "--num-prompts", "2", "--threads", "1", "--warmup", "0", "--reps", "2",
          "--ignore-eos"]
SPEC = ["--draft", "perturb:0.1", "-k", "3"]
# name -> (ranks, flags)
RUNS = {
    "ar_b1": (1, ["--mode", "ar", "--batch-size", "1"]),
    "ar_b2": (1, ["--mode", "ar", "--batch-size", "2"]),
    "sd_b1": (1, ["--mode", "sd", *SPEC, "--batch-size", "1"]),
    "sd_b2": (1, ["--mode", "sd", *SPEC, "--batch-size", "2"]),
    "ssd_backup_b1": (2, ["--mode", "ssd", *SPEC, "--batch-size", "1", "--fanout", "uniform:2",
                          "--fallback", "backup", "--backup", "ngram"]),
    "ssd_backup_b2": (2, ["--mode", "ssd", *SPEC, "--batch-size", "2", "--fanout", "uniform:2",
                          "--fallback", "backup", "--backup", "ngram"]),
    "ssd_primary_b1": (2, ["--mode", "ssd", *SPEC, "--batch-size", "1", "--fanout", "geometric",
                           "--fallback", "primary"]),
    "ssd_primary_b2": (2, ["--mode", "ssd", *SPEC, "--batch-size", "2", "--fanout", "geometric",
                           "--fallback", "primary"]),
    # temperature 1 (Figures 4 and 5): its own sweep group, with its own AR baseline
    "ar_t1": (1, ["--mode", "ar", "--batch-size", "2", "--temperature", "1"]),
    "ssd_t1": (2, ["--mode", "ssd", *SPEC, "--batch-size", "2", "--temperature", "1",
                   "--fanout", "uniform:2", "--fallback", "auto"]),
    "ssd_t1_c05": (2, ["--mode", "ssd", *SPEC, "--batch-size", "2", "--temperature", "1",
                       "--fanout", "uniform:2", "--fallback", "auto", "--saguaro-c", "0.5"]),
}
FIGURES = ["fig7_speedup", "fig7_pareto", "fig3_fanout", "fig4_temperature", "fig5_saguaro_c",
           "fig6_fallback", "timeline", "roofline"]


def run(cmd, check=True):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def analyze(*args):
    return run(["/usr/bin/python3", ANALYZE, *args], check=False)


class Sweep(unittest.TestCase):
    files = {}

    @classmethod
    def setUpClass(cls):
        env_mpi = [ARGS.mpiexec, "-np", "2", "--allow-run-as-root", "--oversubscribe"]
        for name, (ranks, flags) in RUNS.items():
            path = os.path.join(ARGS.work, name + ".h5")
            cmd = [ARGS.ssd_bench, *flags, *COMMON, "--out", path]
            run(env_mpi + cmd if ranks == 2 else cmd)
            cls.files[name] = path
        char = os.path.join(ARGS.work, "characterize.h5")
        run([ARGS.ssd_bench, "characterize", "--target", "synthetic:tiny-llama", "--threads",
             "1", "--rows", "8", "--out", char])
        cls.files["characterize"] = char
        cls.paths = list(cls.files.values())

    def test_summary(self):
        proc = analyze("summary", *self.paths)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = proc.stdout.splitlines()
        self.assertTrue(lines[0].split()[:2] == ["file", "mode"], lines[0])
        for name in RUNS:
            self.assertTrue(any(line.startswith(name + ".h5") for line in lines), name)
        proc = analyze("summary", "--csv", *self.paths)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        rows = list(csv.DictReader(io.StringIO(proc.stdout)))
        self.assertEqual(len(rows), len(self.paths))
        by_file = {r["file"]: r for r in rows}
        self.assertEqual(by_file["ssd_t1.h5"]["mode"], "ssd")
        self.assertEqual(by_file["ssd_t1.h5"]["synthetic"], "0")
        self.assertEqual(by_file["ssd_t1_c05.h5"]["C"], "0.5")
        self.assertEqual(by_file["sd_b2.h5"]["K"], "3")
        self.assertGreater(float(by_file["ar_b1.h5"]["tok/s"]), 0)
        self.assertNotEqual(by_file["ssd_backup_b2.h5"]["p_hit"], "-")

    def test_validate(self):
        proc = analyze("validate", *self.paths)
        # Exit 1 says a check fell outside the tolerance. The speed checks compare runs timed
        # minutes apart (each SSD run against the AR baseline's t_AR), and ctest runs this beside
        # other tests on two cores, so their errors follow the load, not the code: a timed test.
        # They may fail; the checks that do not depend on the clock (Eq. (1)'s hit rate) may not.
        self.assertIn(proc.returncode, (0, 1), proc.stdout + proc.stderr)
        failed = [line for line in proc.stdout.splitlines() if line.endswith(" FAIL")]
        self.assertEqual(proc.returncode == 1, bool(failed), proc.stdout)
        for line in failed:
            self.assertTrue(line.strip().startswith("model: "), line)
        self.assertIn("PASS", proc.stdout)
        self.assertIn("model: Cor.16 @b=2", proc.stdout)
        self.assertIn("assumptions violated", proc.stdout)
        # every speculative run is reported with a predicted and a measured speedup
        for name in RUNS:
            if not name.startswith("ar"):
                self.assertIn(f"-- {name}.h5", proc.stdout)

    def test_validate_without_baseline(self):
        proc = analyze("validate", self.files["sd_b1"], self.files["ssd_backup_b2"])
        self.assertEqual(proc.returncode, 2, proc.stdout)
        self.assertIn("no AR baseline", proc.stdout)

    def test_figures(self):
        out = os.path.join(ARGS.work, "figures")
        proc = analyze("figures", *self.paths, "--out", out)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        for name in FIGURES:
            for ext in ("png", "pdf"):
                path = os.path.join(out, f"{name}.{ext}")
                self.assertTrue(os.path.isfile(path), f"{path} missing:\n{proc.stdout}")
                self.assertGreater(os.path.getsize(path), 1000, path)
                self.assertIn(path, proc.stdout)

    def test_figures_skip_missing_inputs(self):
        out = os.path.join(ARGS.work, "figures_ar_only")
        proc = analyze("figures", self.files["ar_b1"], "--out", out)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        for name in FIGURES:
            self.assertIn(f"{name}: skipped (", proc.stdout)
        self.assertIn("roofline: skipped (no characterize file", proc.stdout)


def unit_tests():
    """analysis/tests/test_*.py, so that ctest runs them too."""
    return unittest.defaultTestLoader.discover(os.path.join(ROOT, "analysis", "tests"),
                                               top_level_dir=os.path.join(ROOT, "analysis",
                                                                          "tests"))


def load_tests(loader, tests, pattern):
    suite = unittest.TestSuite()
    suite.addTests(unit_tests())
    suite.addTests(loader.loadTestsFromTestCase(Sweep))
    return suite


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__], fresh_work=True)
