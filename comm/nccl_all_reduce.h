// NCCL for the CUDA backend: the tensor-parallel all-reduce over device bf16 buffers (draft<->
// target messages go over MPI, comm/peer_link.h, on every backend). Built only with CUDA and NCCL
// (target ssd_comm_nccl, defined in kernels/cuda/CMakeLists.txt; harness code sees SSD_HAVE_NCCL=1
// then).
//
// Streams: each communicator has its own CUDA stream. Every operation is ordered after all work
// enqueued so far on the backend's stream (an event the NCCL stream waits for), and the
// backend's later work is ordered after the operation (the reverse), so callers use it exactly
// like a backend op: no host synchronisation, no races on the buffers.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace ssd {

class CudaBackend;

// The NCCL library's version, "2.28.9".
std::string nccl_version();

// One NCCL communicator bound to one CudaBackend (its device and stream).
class NcclComm {
 public:
  // Collective over `comm`: rank 0 creates the ncclUniqueId and broadcasts it over MPI, then
  // every rank joins as its MPI rank on backend's device. Throws std::runtime_error (on every
  // rank) when NCCL cannot start.
  NcclComm(MPI_Comm comm, CudaBackend& backend);
  // One process driving several GPUs (tests): communicator i is rank i, on backends[i]'s
  // device (ncclCommInitAll). Each backend must be on a different device.
  static std::vector<std::unique_ptr<NcclComm>> create_local(
      const std::vector<CudaBackend*>& backends);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const;
  int size() const;
  CudaBackend& backend() const;
  cudaStream_t stream() const;

  // Waits for everything enqueued on the communicator's stream.
  void synchronize();

  struct Impl;  // ncclComm_t, stream, events (nccl_all_reduce.cpp)

 private:
  friend class NcclAllReduce;
  explicit NcclComm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The tensor-parallel all-reduce on device bf16 buffers.
//
// Deterministic by construction: ncclAllReduce picks its algorithm (ring, tree, NVLS), protocol
// and channel count by message size and topology, and with them the order in which the ranks'
// values are added (and, for bf16, where intermediate sums are rounded). A row's result would
// then depend on how many rows share the call, breaking greedy SD == AR under tensor
// parallelism. So sum() gathers every rank's partial (ncclAllGather) into scratch and adds them
// in rank order in fp32 with one rounding to bf16 (like MpiAllReduce): the same bits on every
// rank, for every message size. It moves (TP - 1) / TP more bytes than a ring all-reduce; at
// decode sizes latency dominates anyway.
class NcclAllReduce final : public AllReduce {
 public:
  NcclAllReduce(MPI_Comm comm, CudaBackend& backend);
  explicit NcclAllReduce(std::unique_ptr<NcclComm> comm);
  ~NcclAllReduce() override;
  NcclAllReduce(const NcclAllReduce&) = delete;
  NcclAllReduce& operator=(const NcclAllReduce&) = delete;

  // buffer[0, count) (bf16, on the backend's device) = the sum over ranks. Asynchronous.
  void sum(Buffer& buffer, size_t count) override;
  // calls and bytes; seconds stays 0 (the work is asynchronous on the GPU: time it with
  // CudaTimer on the backend's stream).
  CommStats stats() const override { return stats_; }
  NcclComm& comm() { return *comm_; }

 private:
  std::unique_ptr<NcclComm> comm_;
  void* gathered_ = nullptr;  // device scratch, size * count bf16
  size_t gathered_bytes_ = 0;
  CommStats stats_;
};

}  // namespace ssd
