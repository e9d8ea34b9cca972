// The bf16 GEMM's k-blocked walk (matmul_bf16_dot.cpp): how a call of wide x, or of many rows,
// takes k in blocks with dot_tile.h's tiles, and the row tiles it takes them in. Internal to
// kernels/cpu, and only for builds with AVX512_BF16 (included there under the same condition).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/dot_tile.h"
#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/simd.h"

namespace ssd::dot_tile {

// The row tiles of the k-blocked walk: none of five. A tile of five rows (31 registers) taking
// k-blocks with the weights prefetched ran slower than tiles of three and two taking the same
// blocks, where the whole-x tile of five, on the hardware prefetcher's stream, does not
// (matmul_bf16_dot.cpp's one_tile_per_panel).
// bench_gemm, 1 thread, Zen 4, three interleaved passes, 5 rows of wide x, a tile of five in
// blocks of 8 KiB against 3 + 2 in blocks of up to 16 KiB (row_tiles_over_k_blocks): q1.5b.gate
// 1122-1158 -> 866-965 us (4 rows: 971-1040), q1.5b.qo 201-208 -> 159-176, q1.5b.down 1290-1356
// -> 1003-1048, q0.5b.down 396-435 -> 332-383, 1b.gate 1443-1499 -> 1112-1157, 1b.down
// 1469-1630 -> 1203-1266, 1b.qo 364-366 -> 276-302, 124m.down 138-143 -> 109-116. 3 + 2 in 8 KiB
// blocks took about half of that gain, a tile of five in 16 KiB blocks none. 10 rows as 4 + 3 + 3
// against 5 + 5: q1.5b.down 1561-1664 -> 1509-1538, q1.5b.gate, .qo and q0.5b.down level.
//
// Zen 4, 3 and 4 rows of wide x (SSD's verification at K = 2 and 3, the down_proj's; 1536-wide x
// of 3-4 rows stays whole): one tile of 3 or 4 in 8 KiB blocks ran 1.5-1.9x one row's time, as
// 2 + 1 and 2 + 2 in the walk's 16 KiB blocks 1.1-1.3x. The tile's block size was not the cause
// (one tile of 3 or 4 in blocks of 16-85 k-vectors: all as slow), nor x whole from L2 beside a
// 32 KiB prefetch (as slow); the number of tiles that ask for each weight line was: a second
// prefetch of every line one panel on (a temporary patch) made one tile of 3 0.79-0.88 of the
// time, and two tiles, each prefetching, 0.63-0.75. So the one-row tile of 2 + 1 prefetches too
// (dot_tile.h). bench_gemm, 1 thread, Zen 4, three interleaved passes, one binary switched by an
// environment variable, against one tile in 8 KiB blocks: 3 rows q1.5b.down 1610-1887 ->
// 1191-1575 us (one row 973-1412 on a noisy host), 1b.down 1904-2057 -> 1191-1795; 4 rows
// q1.5b.down 1439-1650 -> 1083-1298, 1b.gate 1611-1984 -> 1387-1665, 1b.qo 420-462 -> 315-365,
// q0.5b.down 489-530 -> 312-354, 124m.down 164-180 -> 130-144. Zen 5 takes 3-5 rows whole
// (one_tile_per_panel) and never this split.
template <typename F>
void for_each_blocked_row_tile(int rows, bool eight_in_threes, F&& f) {
  if (rows == 3 || rows == 4) {
    f(0, 2);
    f(2, rows - 2);
  } else if (rows == 5) {
    f(0, 3);
    f(3, 2);
  } else if (rows == 8 && eight_in_threes) {
    // Zen 5: 4 + 4 ran 1.15-1.26x slower than 3 + 3 + 2 (also than 2 + 3 + 3, 3 + 2 + 3, 5 + 3
    // and 3 + 5, which were level with it), q1.5b.gate 1334-1369 -> 1057-1106 us, q1.5b.down
    // 1330-1344 -> 1135-1178, q1.5b.qo 233-240 -> 180-187 (three interleaved passes; again in
    // a second run, six splits side by side). Zen 4 keeps 4 + 4: 3 + 3 + 2 was level to 1.09x
    // slower there (dot_tuning.h).
    f(0, 3);
    f(3, 3);
    f(6, 2);
  } else if (rows == 10) {
    f(0, 4);
    f(4, 3);
    f(7, 3);
  } else {
    for_each_row_tile<kMaxTileRows>(rows, f);  // 6-9 rows in tiles of 2-4
  }
}

// The k-blocked walk (one_tile_per_panel's wide x, row_tiles_over_k_blocks, and many rows of
// wide x): the panels in groups of group_panels, k in blocks of `block` elements (a multiple of
// kDotLanes), and for each block every panel of the group, every row tile of the call
// (for_each_tile(rows, f)) taking the panel's block in turn, its accumulators waiting in a
// per-thread scratch between blocks. Every tile asks for the weights two panels on, where the
// block's slice of the panel after next lies: what the tile reads next.
template <typename ForEachTile, Prefetch Hint = Prefetch::Plain>
void k_blocked_walk(float* out, const RoundedX& x, const uint16_t* w, int rows, int in, int out_dim,
                    int threads, int block, int group_panels, ForEachTile&& for_each_tile) {
  const int count = packed_layout::panels(out_dim), in_vec = in / kDotLanes * kDotLanes;
  const size_t ahead = 2 * size_t(kPanel) * in * sizeof(uint16_t);
  const int groups = (count + group_panels - 1) / group_panels;
  const size_t saved_per_row = size_t(kPanel) * simd::kLanes;
  const size_t saved_per_panel = size_t(rows) * saved_per_row;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::vector<float> scratch(group_panels * saved_per_panel + 16);
    float* saved = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) &
                                            ~uintptr_t(63));
#pragma omp for schedule(static)
    for (int g = 0; g < groups; ++g) {
      const int first = g * group_panels, last = std::min(count, first + group_panels);
      for (int k0 = 0; k0 < in_vec; k0 += block) {
        const int k1 = std::min(k0 + block, in_vec);
        for (int p = first; p < last; ++p) {
          const PanelRef ref[1] = {panel_ref(w, p, in, out_dim)};
          float* panel_saved = saved + size_t(p - first) * saved_per_panel;
          for_each_tile(rows, [&](int r0, int tile_rows) {
            const KBlock b{k0, k1, panel_saved + size_t(r0) * saved_per_row};
            run_tile<1, true, Hint>(out, x, r0, tile_rows, ref, in, out_dim, ahead, b);
          });
        }
      }
    }
  }
}

}  // namespace ssd::dot_tile
