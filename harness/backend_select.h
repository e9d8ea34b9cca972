// Choosing and describing this rank's compute backend (--backend cpu|cuda|auto, --devices).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/mpi_all_reduce.h"  // CommStats
#include "kernels/backend.h"

namespace ssd {

// Whether this binary contains the CUDA backend (configured with SSD_CUDA=AUTO/ON and nvcc).
bool cuda_backend_built();

// Creates this rank's backend.
//   name     "cpu":  CpuBackend(threads, gemm).
//            "cuda": CudaBackend on this rank's GPU: devices[local rank] when `devices` is given,
//                    else GPU (local rank % visible GPUs). The local rank is the rank among the
//                    ranks on this node (MPI_Comm_split_type SHARED over MPI_COMM_WORLD; 0 when
//                    MPI is not initialised).
//            "auto": "cuda" when this build has CUDA and a GPU is visible, else "cpu" (decided
//                    per rank).
//   threads  CPU threads (>= 1) for cpu; only reported by cuda.
//   gemm     cpu:  "invariant" (batch-invariant, the default) | "openblas";
//            cuda: "invariant" (batch-invariant kernel up to 64 rows, cuBLAS above: prefill) |
//                  "cublas" (cuBLAS for every call; not batch-invariant).
//   devices  "" or comma-separated GPU indices, one per node-local rank, e.g. "0,1,2".
// Throws ssd::InputError (one line naming the flag) for an unknown name or gemm, a malformed
// --devices, too few --devices entries or a device that does not exist, "cuda" in a build
// without CUDA ("--backend cuda: this build has no CUDA backend (configure with
// -DSSD_CUDA=ON)"), or no usable GPU ("--backend cuda: no usable GPU on HOST
// (cudaGetDeviceCount: ...)").
// Collective over MPI_COMM_WORLD when MPI is initialised, the build has CUDA and name is "cuda"
// or "auto": every rank must call it, with the same name and devices. Argument errors are
// thrown before the collective step, identically on every rank.
std::unique_ptr<Backend> make_backend(const std::string& name, int threads, const std::string& gemm,
                                      const std::string& devices);

// For the header: the CPU model (cpu), or "GPU name (cuda:N, PCI 0000:1B:00.0, cc 9.0)".
std::string backend_device_description(Backend& backend);

// For HDF5 attributes: {"cuda_driver", "13.0"}, {"cuda_runtime", "13.0"}, {"cublas", "13.0.2"},
// {"nccl", "2.28.9"} (when built with NCCL) for a CUDA backend; empty for cpu.
std::vector<std::pair<std::string, std::string>> backend_versions(Backend& backend);

// The tensor-parallel all-reduce that fits `backend`: MpiAllReduce (host buffers) for cpu,
// NcclAllReduce (device buffers, deterministic rank-order sum) for cuda, an identity for cuda
// on a one-rank group (no NCCL set-up for TP = 1). Collective over `group` for cuda with more
// than one rank. Throws ssd::InputError for cuda with more than one rank in a build without
// NCCL.
std::unique_ptr<AllReduce> make_all_reduce(Backend& backend, MPI_Comm group);

// Calls, bytes and (MPI only) seconds of an all-reduce made by make_all_reduce.
CommStats all_reduce_stats(const AllReduce& all_reduce);

}  // namespace ssd
