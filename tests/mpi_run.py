"""Shared by the Python tests: the command line every test takes (tests/CMakeLists.txt passes
--ssd-bench, --work and --mpiexec) and the run of its unittests, what this machine lacks (a
skip with the reason; the CPU's bf16 dot product), and one ssd-bench launch under mpiexec."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

# Set by tests/CMakeLists.txt for a build with -DSSD_SANITIZE: ssd-bench there runs 5-20x
# slower, unevenly across ops, so a test leaves out what asserts a decision taken from
# measured step times. (Not the sampled runs' N: at 400 instead of 1200, py_test_ssd's chi-square
# test of tokens 4-5 pooled every tuple into one cell, df 0, and asserted nothing.)
UNDER_SANITIZERS = os.environ.get("SSD_TESTS_UNDER_SANITIZERS") == "1"


def main(module, setup=None, fresh_work=False):
    """Parses --ssd-bench, --work and --mpiexec into module.ARGS (--work made absolute, created
    if missing; emptied first with fresh_work), calls setup(ARGS) if given (helper modules that
    keep their own ARGS), and runs the module's unittests."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--ssd-bench", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--mpiexec", default=shutil.which("mpiexec") or "mpiexec")
    module.ARGS, rest = parser.parse_known_args()
    module.ARGS.work = os.path.abspath(module.ARGS.work)
    if fresh_work:
        shutil.rmtree(module.ARGS.work, ignore_errors=True)
    os.makedirs(module.ARGS.work, exist_ok=True)
    if setup:
        setup(module.ARGS)
    unittest.main(module=module, argv=[sys.argv[0], *rest], verbosity=2)


def skip_if(reason):
    """Skips the calling test (from setUpClass, its whole class) when `reason` says why it cannot
    run here; returns when it is empty or None."""
    if reason:
        raise unittest.SkipTest(reason)


def cpu_flag(flag):
    """Whether /proc/cpuinfo lists `flag`."""
    try:
        with open("/proc/cpuinfo") as f:
            return flag in f.read().split()
    except OSError:
        return False


def cpu_has_bf16():
    """Whether this CPU has AVX512_BF16 (--compute bf16's vdpbf16ps)."""
    return cpu_flag("avx512_bf16")


def cpu_has_amx_bf16():
    """Whether this CPU has AMX tiles with bf16 (--compute amx's TDPBF16PS). The binary asks the
    OS for them too: where it refuses, --compute amx fails and auto takes bf16."""
    return cpu_flag("amx_bf16") and cpu_flag("amx_tile")


def launch(args, ranks, flags, timeout=300, env=None, quiet=False):
    """ssd-bench with `flags` on `ranks` ranks, `env` added to the environment (mpiexec -q when
    quiet); returns the CompletedProcess. A private Open MPI session directory per launch:
    launches at the same moment otherwise race to create its session directory ("orte_session_dir
    failed ... File exists"), under /tmp or under the test's OMPI_MCA_orte_tmpdir_base alike."""
    with tempfile.TemporaryDirectory(prefix="ompi-") as session:
        full_env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **(env or {}),
                        OMPI_MCA_orte_tmpdir_base=session)
        cmd = [args.mpiexec, *(["-q"] if quiet else []), "--oversubscribe", "--bind-to", "none",
               "-np", str(ranks), args.ssd_bench, *flags]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)
