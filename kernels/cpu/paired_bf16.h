// The AVX2 build's paired bf16 GEMM pieces (packed_layout.h's kPairedBf16), for matmul_packed.cpp:
// a tile's multiply-adds over one pair of k-vectors, and a row tile's share of the prefetch of
// the next panel group. Internal to kernels/cpu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/simd.h"

namespace ssd {

#if SSD_PAIRED_BF16
// One pair of k-vectors [k, k + 2 kLanes) of a tile of R rows against a panel of paired bf16
// weights (packed_layout.h), `w` at the pair's block of row 0: each accumulator takes k-vector k,
// then k + kLanes, as accumulate() would. The weights are widened one at a time, rows inside:
// with the rows' x, one weight and the zero of the widening live beside 2 x 5 accumulators, a
// 2-row tile fits AVX2's 16 registers.
template <int R>
inline void accumulate_pair(simd::vec (&acc)[R][packed_layout::kPanel], const uint16_t* w,
                            const float* const (&xrow)[R], int k) {
  using namespace simd;
  using packed_layout::kPairLanes;
  using packed_layout::kPanel;
  vec xv[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) xv[r] = load_vec(xrow[r] + k);
#pragma GCC unroll 16
  for (int j = 0; j < kPanel; ++j) {
    const vec wv = load_pair_lo(w + j * kPairLanes);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r][j] = fma_vec(xv[r], wv, acc[r][j]);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) xv[r] = load_vec(xrow[r] + k + kLanes);
#pragma GCC unroll 16
  for (int j = 0; j < kPanel; ++j) {
    const vec wv = load_pair_hi(w + j * kPairLanes);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r][j] = fma_vec(xv[r], wv, acc[r][j]);
  }
}
#endif

// A row tile's share of the next panel group, which it asks for evenly while it reads the current
// group (row_tiles_over_groups, paired bf16). Each tile's share follows its rows, so the memory
// stream runs beside every tile's FMAs. Before, the later tiles fetched the whole next group at
// the pace they read: a 5-row call (tiles of 2, 2 and 1) spent its last tile waiting on memory
// and its first reading L2. bench_gemm bf16 on a Zen 3 core, q1.5b shapes, medians of 3-4
// interleaved repetitions: 3 rows 1.14-1.17x faster, 4-32 rows 1.22-1.40x (gate, 5 rows: 3.10
// -> 2.37-2.54 ms, 0.43 -> 0.54-0.57 of the FMA peak; 16 rows 0.54 -> 0.75). 1 and 2 rows do
// not come here.
struct PrefetchShare {
  const char* next = nullptr;  // the next line to ask for
  size_t share = 0;            // bytes of the share
  size_t reading = 1;          // bytes the tile reads in the current group
  size_t credit = 0;           // share x bytes read so far, less reading x bytes asked for

  // The share of rows [r0, r0 + tile_rows) of a call of `rows`, in whole lines, of the next
  // group's `next_bytes` at `next_group` (0 past the matrix), for a tile reading `reading` bytes.
  static PrefetchShare of_rows(const void* next_group, size_t next_bytes, size_t reading, int r0,
                               int tile_rows, int rows) {
    const size_t begin = next_bytes * r0 / rows / 64 * 64;
    const size_t end =
        r0 + tile_rows == rows ? next_bytes : next_bytes * (r0 + tile_rows) / rows / 64 * 64;
    return {static_cast<const char*>(next_group) + begin, end - begin, reading, 0};
  }
  void read(size_t bytes) {
    credit += bytes * share;
    for (; credit >= 64 * reading; credit -= 64 * reading, next += 64)
      __builtin_prefetch(next, 0, 1);
  }
};

#if SSD_PAIRED_BF16
// The pairs of k-vectors from k up to pairs_end of an R-row tile (packed_tile.h's panel_tile),
// `wp` at k's pair block and moved past the last. The tile prefetches its own stream
// prefetch_ahead on (several rows), or, with a share, asks for its part of the next group first
// and then has no pairs left for the second loop. Returns the k past the pairs.
template <int R>
[[gnu::always_inline]] inline int accumulate_pairs(simd::vec (&acc)[R][packed_layout::kPanel],
                                                   const uint16_t*& wp,
                                                   const float* const (&xload)[R], int k,
                                                   int pairs_end, size_t prefetch_ahead,
                                                   PrefetchShare* share) {
  using packed_layout::kPairLanes;
  using packed_layout::kPanel;
  if (share) {  // its copy, so that its counters stay in registers over the loop
    PrefetchShare next_group = *share;
    for (; k + kPairLanes <= pairs_end; k += kPairLanes, wp += kPanel * kPairLanes) {
      next_group.read(kPanel * kPairLanes * sizeof(uint16_t));
      accumulate_pair(acc, wp, xload, k);
    }
    *share = next_group;
  }
  for (; k + kPairLanes <= pairs_end; k += kPairLanes, wp += kPanel * kPairLanes) {
    if constexpr (R > 1)
#pragma GCC unroll 4
      for (int line = 0; line < kPanel * kPairLanes * 2; line += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(wp) + line + prefetch_ahead, 0, 1);
    accumulate_pair(acc, wp, xload, k);
  }
  return k;
}
#endif

}  // namespace ssd
