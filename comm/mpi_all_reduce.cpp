#include "comm/mpi_all_reduce.h"

#include <limits>
#include <stdexcept>

namespace ssd {

// MPI_Allreduce may pick its algorithm (and so the order in which ranks' values are added)
// by message size, which would make a row's result depend on how many rows share the call
// and break greedy SD == AR at TP >= 3. We gather every rank's partial sums and add them in
// rank order instead: the same bits on every rank, for any message size.
void MpiAllReduce::sum(Buffer& buffer, size_t count) {
  if (count * size_t(size_) > size_t(std::numeric_limits<int>::max()))
    throw std::length_error("MpiAllReduce: buffer too large for one MPI call");
  const double start = MPI_Wtime();
  gathered_.resize(count * size_t(size_));
  MPI_Allgather(buffer.data, int(count), MPI_FLOAT, gathered_.data(), int(count), MPI_FLOAT, comm_);
  float* out = static_cast<float*>(buffer.data);
  for (size_t i = 0; i < count; ++i) {
    float total = gathered_[i];
    for (int r = 1; r < size_; ++r) total += gathered_[size_t(r) * count + i];
    out[i] = total;
  }
  stats_.seconds += MPI_Wtime() - start;
  stats_.calls += 1;
  stats_.bytes += int64_t(count * sizeof(float));
}

}  // namespace ssd
