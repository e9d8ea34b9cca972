// Bringing a layer's K (or V) rows into L2 before attention reads them. Internal to kernels/cpu
// (attention.cpp).
//
// In a decode step the rows come from memory (the step's weights have gone through L3 since they
// were last read), and attention's passes read them in blocks, head group by head group, an
// order the hardware prefetchers follow poorly: at a context of 512 a one-row llama-124m layer
// took 66 us with K/V in memory against 20 us with them in L2, and software prefetches one to
// eight blocks ahead (prefetcht0, t1, t2) gained 0-6%. One sequential sweep of loads, one per
// cache line in address order, brings the rows in at nearly the stream's rate: 66 -> 42 us, at
// 128 slots 17.6 -> 11.4 (bench_attention). The loads feed four chains of adds, which pace them:
// loads each into an empty asm, unpaced, measured 15.3 us at 128 slots and 58 at 512; one chain
// 11.9 and 46. With the rows already in L1 or L2 a sweep costs 1 us at 128 slots, 4 at 512.
// Nothing is computed from the values.
#pragma once

#include <algorithm>
#include <cstddef>

namespace ssd {
namespace kv_sweep {

// Rows per sweep: about kBytes of them, so that a sweep's rows are still in L2 when the pass
// reaches them. Swept whole, a context of 2048 went from memory to L2 and on to L3 before its
// use: bench_attention, one llama-124m row, 205-214 us swept whole, 164-165 in sweeps of 64 KB
// (128-512 KB alike or a little slower), 256-262 not swept; Llama-3.2-1B 498-525, 358-372,
// 555-585.
constexpr size_t kBytes = 64 * 1024;

// Rows of `used` floats per sweep, a multiple of `multiple`.
inline int rows_per_sweep(size_t used, int multiple) {
  return std::max(multiple, int(kBytes / (used * sizeof(float))) / multiple * multiple);
}

// Loads floats [first, last) of rows [from, to) of `cache` (rows `stride` floats apart), one
// per cache line.
inline void sweep(const float* cache, size_t stride, int from, int to, size_t first, size_t last) {
  constexpr size_t kLine = 64 / sizeof(float);
  float sink[4] = {};
  for (int s = from; s < to; ++s) {
    const float* row = cache + size_t(s) * stride;
    size_t at = first;
    for (; at + 3 * kLine < last; at += 4 * kLine) {
      sink[0] += row[at];
      sink[1] += row[at + kLine];
      sink[2] += row[at + 2 * kLine];
      sink[3] += row[at + 3 * kLine];
    }
    for (; at < last; at += kLine) sink[0] += row[at];
  }
  // The loads are the point: keep them. (Loads whose values go nowhere are dead code; GCC even
  // deleted calls to a function of prefetches alone, which it had found "pure".)
  asm volatile("" : : "g"(sink[0]), "g"(sink[1]), "g"(sink[2]), "g"(sink[3]));
}

}  // namespace kv_sweep
}  // namespace ssd
