"""Shared by the Python tests that launch ssd-bench under mpiexec: the command line every such
test takes (tests/CMakeLists.txt passes --ssd-bench, --work and --mpiexec), and one launch."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest


def main(module, setup=None):
    """Parses --ssd-bench, --work and --mpiexec into module.ARGS, calls setup(ARGS) if given
    (helper modules that keep their own ARGS), and runs the module's unittests."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--ssd-bench", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--mpiexec", default=shutil.which("mpiexec") or "mpiexec")
    module.ARGS, rest = parser.parse_known_args()
    if setup:
        setup(module.ARGS)
    unittest.main(module=module, argv=[sys.argv[0], *rest], verbosity=2)


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
