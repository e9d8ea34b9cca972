// Choosing this rank's compute backend (--backend cpu|cuda|auto, --devices) and the all-reduce
// that fits it.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"

namespace ssd {

// This rank's compute backend and what goes with it. Move-only; make_all_reduce may refer to
// *backend, so call it only while backend lives.
struct BackendSetup {
  std::unique_ptr<Backend> backend;
  // The tensor-parallel all-reduce that fits backend: MpiAllReduce (host buffers) for cpu,
  // NcclAllReduce (device buffers, deterministic rank-order sum) for cuda, an identity for cuda
  // on a one-rank group (no NCCL set-up for TP = 1). Collective over `group` for cuda with more
  // than one rank. Throws ssd::InputError for cuda with more than one rank in a build without
  // NCCL.
  std::function<std::unique_ptr<AllReduce>(MPI_Comm group)> make_all_reduce;
  // {name, version} of the libraries behind backend and its all-reduce, for the header and the
  // result file's /libraries: backend->library_versions(), plus {"nccl", "2.28.9"} for cuda in
  // a build with NCCL; empty for cpu.
  std::vector<std::pair<std::string, std::string>> libraries;
};

// Creates this rank's backend.
//   name     "cpu":  CpuBackend(threads, gemm, compute).
//            "cuda": CudaBackend on this rank's GPU: devices[local rank] when `devices` is given,
//                    else GPU (local rank % visible GPUs). The local rank is the rank among the
//                    ranks on this node (MPI_Comm_split_type SHARED over MPI_COMM_WORLD; 0 when
//                    MPI is not initialised).
//            "auto": "cuda" when this build has CUDA and a GPU is visible, else "cpu" (decided
//                    per rank).
//   threads  CPU threads (>= 1) for cpu; only reported by cuda.
//   gemm     cpu:  "invariant" (batch-invariant, the default) | "openblas";
//            cuda: "invariant" (batch-invariant kernel up to 64 rows or the run's largest step
//                  (Backend::keep_batch_invariant_up_to), cuBLAS above: prefill) |
//                  "invariant-tc" (the same with the tensor-core invariant kernel) |
//                  "cublas" (cuBLAS for every call; not batch-invariant).
//   compute  what the GEMMs multiply bf16 weights in (--compute; Backend::compute_for says
//            what a model got): "f32" | "bf16" | "amx" | "auto".
//            cpu:  CpuCompute::F32 / BF16 / Auto (kernels/cpu/cpu_backend.h); bf16 needs
//                  AVX512_BF16 and gemm "invariant";
//            cuda: --gemm decides (every CUDA kernel takes bf16 activations): bf16 needs
//                  "invariant-tc" or "cublas"; f32 and auto take any gemm.
//   devices  "" or comma-separated GPU indices, one per node-local rank, e.g. "0,1,2".
// Throws ssd::InputError (one line naming the flag) for an unknown name, gemm or compute, a
// compute the backend cannot run with this gemm or CPU ("--compute bf16: ..."), a malformed
// --devices, too few --devices entries or a device that does not exist, "cuda" in a build
// without CUDA ("--backend cuda: this build has no CUDA backend (configure with
// -DSSD_CUDA=ON)"), or no usable GPU ("--backend cuda: no usable GPU on HOST
// (cudaGetDeviceCount: ...)").
// Collective over MPI_COMM_WORLD when MPI is initialised, the build has CUDA and name is "cuda"
// or "auto": every rank must call it, with the same name and devices. Argument errors are
// thrown before the collective step, identically on every rank.
BackendSetup make_backend(const std::string& name, int threads, const std::string& gemm,
                          const std::string& compute, const std::string& devices);

}  // namespace ssd
