#!/usr/bin/python3
"""SSD that degenerates into its fallback says so: one '# Warning:' line on the console and the
/summary attribute ssd_warning, naming the reason and the flag to try; a healthy run (and the
demo's SSD configuration, sweeps/fig7-speedup.toml) has neither."""
import os
import shutil
import sys
import unittest

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402

ARGS = None
TINY = ["--target", "synthetic:tiny-llama", "--draft", "synthetic:tiny-llama-other",
        "--num-prompts", "4", "--prompt-len", "6", "--max-new-tokens", "64", "--ignore-eos",
        "--threads", "1", "--reps", "1", "--warmup", "0", "-k", "3", "--fanout", "uniform:1",
        "--seed", "4"]
# sweeps/fig7-speedup.toml's SSD run, shortened.
DEMO = ["--target", "synthetic:llama-124m", "--draft", "synthetic:llama-12m", "--outcomes",
        "synthetic:alpha=0.8,r=0.6", "--max-new-tokens", "64", "--num-prompts", "1",
        "--prompt-len", "32", "--threads", "1", "--warmup", "0", "--reps", "1", "--ignore-eos",
        "-k", "4", "--fanout", "geometric", "--budget", "auto", "--fallback", "auto"]


def run_ssd(name, flags):
    path = os.path.join(ARGS.work, name + ".h5")
    proc = mpi_run.launch(ARGS, 2, ["--mode", "ssd", *flags, "--out", path])
    if proc.returncode != 0:
        raise AssertionError(f"{name}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    warnings = [l for l in proc.stdout.splitlines() if l.startswith("# Warning:")]
    with h5py.File(path, "r") as f:
        attr = f["/summary"].attrs["ssd_warning"]
        p_hit = float(f["/summary"].attrs["p_hit"])
    return warnings, attr.decode() if isinstance(attr, bytes) else str(attr), p_hit


class Degeneration(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        shutil.rmtree(ARGS.work, ignore_errors=True)
        os.makedirs(ARGS.work)

    def test_hardly_any_hit_warns(self):
        # r = r_b = 0.01: a one-token cache hits with probability 1 - 2^-0.01 = 0.7%.
        warnings, attr, p_hit = run_ssd(
            "no_hits", [*TINY, "--outcomes", "synthetic:alpha=0.8,r=0.01,r_b=0.01"])
        self.assertLess(p_hit, 0.03)
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("p_hit", warnings[0])
        self.assertIn("--budget", warnings[0])
        self.assertEqual(warnings[0], "# Warning: " + attr)

    def test_healthy_run_is_silent(self):
        warnings, attr, p_hit = run_ssd("hits", [*TINY, "--outcomes", "synthetic:alpha=0.8,r=1"])
        self.assertGreater(p_hit, 0.3)
        self.assertEqual(warnings, [])
        self.assertEqual(attr, "")

    def test_demo_is_silent(self):
        # --budget auto decides from the step times it measures: under the sanitizers those
        # are ASan's and UBSan's slow-downs, uneven across ops, not the build's. Its code runs
        # under them in py_test_ssd's geometric, --budget auto configurations.
        mpi_run.skip_if(mpi_run.UNDER_SANITIZERS and
                        "--budget auto's choice under the sanitizers is theirs, not the build's")
        warnings, attr, p_hit = run_ssd("demo", DEMO)
        print(f"\n  demo SSD: p_hit {p_hit:.3f}", end="", flush=True)
        self.assertEqual(warnings, [])
        self.assertEqual(attr, "")


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__])
