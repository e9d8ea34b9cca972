#!/usr/bin/env bash
# The GPU acceptance check, for a node with an NVIDIA GPU and a CUDA build of ssd-bench:
#   scripts/gpu-check.sh BUILD_DIR OUT_DIR [STEPS]
# STEPS (default "tests sanitize bench") is any of:
#   tests     the gpu-labelled GoogleTests (CUDA ops, sampling, models, graphs), test_forward's cuda instances and
#             tests/py_test_gpu_decode.py (greedy SD/SSD == AR)
#   sanitize  compute-sanitizer memcheck over the CUDA kernel and model tests, racecheck over the GEMM tests
#   bench     bench_decode on the GPU (tok/s, weight bandwidth), characterize, and AR/SD/SSD
#             runs of llama-3.2-1b / llama-3.1-8b shaped synthetic models and of the real
#             pair's shapes (qwen2.5-coder-1.5b / -0.5b)
# Logs and result files go to OUT_DIR; a summary is printed last. A step that fails is
# reported and the others still run; the exit status is non-zero if any failed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "$1" && pwd)"
out="$2"
steps="${3:-tests sanitize bench}"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
python="${SSD_PYTHON:-python3}"
bench="$build/ssd-bench"
failed=()
summary=()

step() {  # step NAME TIMEOUT_S COMMAND... ; log in $out/NAME.log
  local name="$1" limit="$2"
  shift 2
  local t0=$SECONDS
  echo "=== $name: $*"
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$out/$name.log"
  summary+=("$(printf '%-28s rc=%-4s %5ss' "$name" "$rc" "$((SECONDS - t0))")")
  [ "$rc" -eq 0 ] || failed+=("$name")
}

nvidia-smi --query-gpu=name,pci.bus_id,driver_version,memory.total,clocks.max.sm,clocks.max.memory \
  --format=csv | tee "$out/gpu.txt"

memcheck_tries() {  # memcheck_tries N PROGRAM ARGS...: memcheck's verdict, N tries at most
  local tries="$1" rc=0
  shift
  for ((try = 1; try <= tries; ++try)); do
    compute-sanitizer --tool memcheck --error-exitcode 9 "$@"
    rc=$?
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 9 ]; then return "$rc"; fi
    echo "gpu-check: try $try of $tries ended with exit $rc, not a memcheck verdict"
  done
  return "$rc"
}
export -f memcheck_tries  # for `step`, whose timeout runs a program

if [[ " $steps " == *" tests "* ]]; then
  step gtest_cuda_ops 600 "$build/tests/test_cuda_ops" --gtest_brief=1
  step gtest_cuda_gemm 600 "$build/tests/test_cuda_gemm" --gtest_brief=1
  step gtest_cuda_sampling 600 "$build/tests/test_cuda_sampling" --gtest_brief=1
  step gtest_cuda_model 600 "$build/tests/test_cuda_model" --gtest_brief=1
  step gtest_cuda_graphs 600 "$build/tests/test_cuda_graphs" --gtest_brief=1
  # Branch decoding is one test over every backend; these are its GPU instances.
  step gtest_forward_cuda 600 "$build/tests/test_forward" --gtest_brief=1 --gtest_filter='*/cuda'
  step py_test_gpu_decode 600 "$python" "$root/tests/py_test_gpu_decode.py" --ssd-bench "$bench" \
    --work "$out/gpu_decode.work" --mpiexec mpirun
fi

if [[ " $steps " == *" sanitize "* ]]; then
  # The kernel and model tests; the larger cuBLAS and batch-invariance sweeps are left out to
  # keep the (50x slower) instrumented run short.
  step memcheck_ops 600 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$build/tests/test_cuda_ops" --gtest_brief=1
  step memcheck_gemm 600 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$build/tests/test_cuda_gemm" --gtest_brief=1
  # The tensor-core GEMM shares its cp.async ring, and then its partial sums, through shared
  # memory: racecheck over the GEMM tests (~30 s on an H200).
  step racecheck_gemm 600 compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$build/tests/test_cuda_gemm" --gtest_brief=1 \
    --gtest_filter='CudaMatmul.InvariantMatmul*:CudaMatmul.KeepBatch*'
  step memcheck_sampling 600 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$build/tests/test_cuda_sampling" --gtest_brief=1
  step memcheck_model 600 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$build/tests/test_cuda_model" --gtest_brief=1 \
    --gtest_filter='CudaModel.LlamaLogitsMatchCpu:CudaModel.Qwen3LogitsMatchCpu:CudaModel.Qwen2LogitsMatchCpu'
  step memcheck_graphs 600 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$build/tests/test_cuda_graphs" --gtest_brief=1 \
    --gtest_filter='CudaGraphs.Verify*:CudaGraphs.Prefill*'
  # One process per case, up to 3 tries each. compute-sanitizer (CUDA 13.0, driver 580)
  # sometimes crashes inside its own cudaGraphLaunch hook: a host SIGSEGV (exit 11) under
  # libsanitizer-public.so with 0 errors reported before it. It was seen with two of these
  # cases in one process, and since the exact 3- and 5-row GEMM tiles with Qwen3Stepwise alone
  # (4 of 14 runs on an H100, 0 of 13 on the commit before; never with SSD_CUDA_GRAPHS=0 or
  # without the sanitizer; racecheck and synccheck clean); docs/gpu-notes.md has the runs. So a try that
  # ends any other way than memcheck's own verdict (0, or 9 for errors found) is tried again.
  for case in LlamaOneCall LlamaStepwise Qwen3OneCall Qwen3Stepwise; do
    step "memcheck_branches_$case" 600 bash -c 'memcheck_tries "$@"' memcheck_tries 3 \
      "$build/tests/test_forward" \
      --gtest_brief=1 --gtest_filter="Backends/ForwardBranches.${case}EqualsSeparateBranches/cuda"
  done
fi


if [[ " $steps " == *" bench "* ]]; then
  step bench_decode 600 env SSD_BENCH_BACKEND=cuda SSD_BENCH_MODELS=llama-3.2-1b,llama-3.1-8b SSD_BENCH_CONTEXTS=16,512 \
    "$build/bench/bench_decode" --benchmark_min_time=1
  # Both invariant GEMMs at the multi-row steps' row counts (80 = batch 16 x (K + 1): past the
  # default 64 rows, kept batch-invariant as a run keeps it), and cuBLAS beside them.
  for gemm in invariant invariant-tc cublas; do
    step "bench_decode_rows_$gemm" 600 env SSD_BENCH_BACKEND=cuda SSD_BENCH_GEMM=$gemm \
      SSD_BENCH_MODELS=llama-3.2-1b,llama-3.1-8b SSD_BENCH_CONTEXTS=512 \
      SSD_BENCH_ROWS=1,2,4,5,8,16,32,80 "$build/bench/bench_decode" --benchmark_min_time=0.3
  done
  # HBM bandwidth, cuBLAS GEMM throughput at both models' shapes, forward-pass kinds and the
  # verification window, on the GPU (NCCL all-reduce figures need a TP group of >= 2 GPUs).
  step characterize 600 "$bench" characterize --backend cuda --target synthetic:llama-3.1-8b \
    --draft synthetic:llama-3.2-1b --out "$out/characterize.h5"
  common=(--backend cuda --num-prompts 4 --prompt-len 64 -n 128 --ignore-eos --reps 3 --warmup 1)
  step ar_1b 300 "$bench" "${common[@]}" --target synthetic:llama-3.2-1b --out "$out/ar_1b.h5"
  step ar_8b 300 "$bench" "${common[@]}" --target synthetic:llama-3.1-8b --out "$out/ar_8b.h5"
  # An 8B target with a 1B draft (the same vocabulary); the synthetic weights share nothing, so
  # acceptance comes from the outcome model (alpha 0.8) while every forward pass stays real.
  sd=(--target synthetic:llama-3.1-8b --draft synthetic:llama-3.2-1b --outcomes synthetic:alpha=0.8,r=0.7)
  step sd_8b_1b 300 "$bench" "${common[@]}" "${sd[@]}" --mode sd -k 4 --draft-placement collocated \
    --out "$out/sd_8b_1b.h5"
  step ssd_8b_1b 300 mpirun -np 2 --bind-to none "$bench" "${common[@]}" "${sd[@]}" --mode ssd -k 4 \
    --out "$out/ssd_8b_1b.h5"
  # The real pair's shapes (its weights do not travel to a GPU node), with outcomes at its
  # measured greedy constants: alpha 0.862, r 2.22 after a rejection and 2.40 after all K
  # accepted (results/qwen2.5-coder). SSD as a user runs it (-k auto, --budget auto), then with
  # MPS, which lets the two ranks' kernels share the GPU instead of taking turns.
  pair=(--target synthetic:qwen2.5-coder-1.5b --draft synthetic:qwen2.5-coder-0.5b
    --outcomes synthetic:alpha=0.862,r=2.22,r_b=2.40)
  step ar_pair 300 "$bench" "${common[@]}" --target synthetic:qwen2.5-coder-1.5b \
    --out "$out/ar_pair.h5"
  step sd_pair 300 "$bench" "${common[@]}" "${pair[@]}" --mode sd -k 4 --draft-placement collocated \
    --out "$out/sd_pair.h5"
  step ssd_pair 300 mpirun -np 2 --bind-to none "$bench" "${common[@]}" "${pair[@]}" --mode ssd \
    --out "$out/ssd_pair.h5"
  if nvidia-cuda-mps-control -d; then
    step ssd_pair_mps 300 mpirun -np 2 --bind-to none "$bench" "${common[@]}" "${pair[@]}" \
      --mode ssd --out "$out/ssd_pair_mps.h5"
    echo quit | nvidia-cuda-mps-control
  fi
fi

echo "=== summary"
printf '%s\n' "${summary[@]}"
for f in "$out"/ar_*.log "$out"/sd_*.log "$out"/ssd_*.log; do
  [ -f "$f" ] && grep -H "Avg decode throughput" "$f"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-check: failed: ${failed[*]}"
  exit 1
fi
echo "gpu-check: all steps passed"
