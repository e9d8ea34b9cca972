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

std::vector<Timing> time_calls_interleaved(Backend& backend,
                                           const std::vector<std::function<void()>>& calls,
                                           double min_time) {
  // Five batches: the median is what a pass costs with one slow moment left out. With three
  // batches and their mean, one slow batch moved a 4-row pass 18% above its neighbours' trend.
  constexpr int kBatches = 5;
  constexpr int kMaxPerBatch = 1000;  // bounds tiny calls on a fast device
  const size_t n = calls.size();
  std::vector<int> per_batch(n);
  for (size_t i = 0; i < n; ++i) {
    calls[i]();  // warm-up: first-touch page faults, lazy GPU module loading, thread pools
    backend.synchronize();
    const double start = MPI_Wtime();
    calls[i]();
    backend.synchronize();
    const double one = std::max(MPI_Wtime() - start, 1e-9);
    per_batch[i] = int(std::clamp(std::ceil(min_time / kBatches / one), 1.0, double(kMaxPerBatch)));
  }
  // Batch b of every call, then batch b + 1 of every call: a host that speeds up or slows down
  // during the measurement moves every call's batches alike, so the ratios between the calls
  // (a verification in AR steps, a branch step in draft steps) stay put. Six characterize runs
  // each way, alternated on a shared 2-core Zen 4 host: a llama-124m verification took 1.26-1.81
  // AR steps timed one kind after the other, 1.41-1.56 in turns in five runs (the sixth, 1.30,
  // had its whole alone phase disturbed: 2 rows slower than 3); beside the draft 0.93-1.57
  // against 1.51-1.62.
  std::vector<std::vector<double>> per_call(n, std::vector<double>(kBatches));
  std::vector<double> total(n, 0.0);
  for (int b = 0; b < kBatches; ++b)
    for (size_t i = 0; i < n; ++i) {
      const double start = MPI_Wtime();
      for (int c = 0; c < per_batch[i]; ++c) calls[i]();
      backend.synchronize();
      const double elapsed = MPI_Wtime() - start;
      total[i] += elapsed;
      per_call[i][size_t(b)] = elapsed / per_batch[i];
    }
  std::vector<Timing> out(n);
  for (size_t i = 0; i < n; ++i) {
    std::sort(per_call[i].begin(), per_call[i].end());
    out[i].calls = kBatches * per_batch[i];
    out[i].mean_s = total[i] / out[i].calls;
    out[i].median_s = per_call[i][kBatches / 2];
    out[i].best_s = per_call[i].front();
  }
  return out;
}

Timing time_calls(Backend& backend, const std::function<void()>& call, double min_time) {
  return time_calls_interleaved(backend, {call}, min_time).front();
}

}  // namespace ssd
