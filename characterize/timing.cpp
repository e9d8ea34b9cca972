// Measurement primitives of `ssd-bench characterize`: random data, and timing a
// call on a backend.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "characterize/parts.h"

namespace ssd {

std::vector<float> random_floats(size_t count, uint64_t seed, int threads) {
  std::vector<float> v(count);
  float* p = v.data();
  constexpr size_t kBlock = 1 << 16;
  const int64_t blocks = int64_t((count + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t b = 0; b < blocks; ++b) {
    // xorshift per block, seeded from (seed, block): the same values for any thread count.
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + uint64_t(b) * 0xBF58476D1CE4E5B9ull + 1;
    const size_t end = std::min(count, size_t(b + 1) * kBlock);
    for (size_t i = size_t(b) * kBlock; i < end; ++i) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      p[i] = float(s >> 40) * (0.1f / 16777216.0f) - 0.05f;
    }
  }
  return v;
}

Timing time_calls(Backend& backend, const std::function<void()>& call, double min_time) {
  // Five batches: the median is what a pass costs with one slow moment left out. With three
  // batches and their mean, one slow batch moved a 4-row pass 18% above its neighbours' trend.
  constexpr int kBatches = 5;
  constexpr int kMaxPerBatch = 1000;  // bounds tiny calls on a fast device
  call();  // warm-up: first-touch page faults, lazy GPU module loading, thread pools
  backend.synchronize();
  double start = MPI_Wtime();
  call();
  backend.synchronize();
  const double one = std::max(MPI_Wtime() - start, 1e-9);
  const int per_batch =
      int(std::clamp(std::ceil(min_time / kBatches / one), 1.0, double(kMaxPerBatch)));
  Timing t;
  double total = 0.0;
  std::vector<double> per_call(kBatches);
  for (double& seconds : per_call) {
    start = MPI_Wtime();
    for (int i = 0; i < per_batch; ++i) call();
    backend.synchronize();
    const double elapsed = MPI_Wtime() - start;
    total += elapsed;
    seconds = elapsed / per_batch;
  }
  std::sort(per_call.begin(), per_call.end());
  t.calls = kBatches * per_batch;
  t.mean_s = total / t.calls;
  t.median_s = per_call[kBatches / 2];
  t.best_s = per_call.front();
  return t;
}

}  // namespace ssd
