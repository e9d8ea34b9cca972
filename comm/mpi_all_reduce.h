// The tensor-parallel all-reduce over MPI (host buffers; the CPU backend's Buffers are host
// memory). Counts calls, bytes and time so reports can show communication cost.
#pragma once

#include <mpi.h>

#include <vector>

#include "kernels/backend.h"

namespace ssd {

class MpiAllReduce final : public AllReduce {
 public:
  explicit MpiAllReduce(MPI_Comm comm) : comm_(comm) { MPI_Comm_size(comm, &size_); }
  void sum(Buffer& buffer, size_t count) override;
  CommStats stats() const override { return stats_; }

 private:
  MPI_Comm comm_;
  int size_ = 1;
  std::vector<float> gathered_;
  CommStats stats_;
};

}  // namespace ssd
