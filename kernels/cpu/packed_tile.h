// The packed GEMM's register tiles (matmul_packed.cpp): R rows of x against one panel over a
// range of k (panel_tile), one or two rows against two panels (two_panel_rows), and what every
// tile of one panel over one k-block shares (PanelPass, run_tile). How a call walks its rows,
// panels and k-blocks with them is matmul_packed.cpp's. Internal to kernels/cpu.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/interleaved_x.h"
#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/paired_bf16.h"
#include "kernels/cpu/simd.h"

namespace ssd::packed_tile {

using namespace simd;

using packed_layout::kPanel;

constexpr int kMaxTileRows = kRegisters >= 32 ? 5 : 2;

// Rows that two_panel_rows takes (x permitting, two_panel_x_bytes): two (20 accumulators; 3 rows
// would need 30 plus 3 of x and a weight). With 16 registers (AVX2) two rows spill some of the
// accumulators to L1, and still win: one core of that kind pulls more from memory the more
// streams it reads (a stand-alone probe on a Zen 3 core, paired bf16 tiles over 165 MB: one row
// 15, 20, 22, 24 GB/s from 1, 2, 3, 4 panels at once; two rows 14 and 18.5 from 1 and 2).
// bench_gemm on that core, 2 interleaved repetitions: q1.5b.gate 2 rows bf16 1.39 -> 1.23 ms,
// q1.5b.qo 247 -> 214 us, fp32 q1.5b.gate 2.92-3.07 -> 2.02-2.19 ms.
constexpr int kTwoPanelMaxRows = 2;

// The largest x (bytes of all its rows) with which two_panel_rows beats one panel's stream. With
// 32 registers (the AVX-512 hosts): kXBlockBytes, for one or two rows; above it two streams ran
// 1.4x slower there (1b.down, 32 KB of x). With 16 (Zen 3, the AVX2 build) one row of a down_proj
// still gains: bench_gemm, 3 interleaved repetitions, q1.5b.down one row bf16 1.38-1.41 -> 1.00-
// 1.05 ms (35 KB of x), q0.5b.down 435-454 -> 316-360 us, fp32 q1.5b.down 2.39-2.44 -> 1.78-1.94.
// Two rows of it measured level to 5% slower, so they keep the limit.
inline size_t two_panel_x_bytes(int rows, size_t x_block_bytes) {
  return kRegisters < 32 && rows == 1 ? 64 * 1024 : x_block_bytes;
}

// Panels one row (x permitting, two_panel_x_bytes) reads at once (panels_at_once). Three with 16
// registers (15 accumulators, the x and the weight spill a little): on the Zen 3 core above one
// row ran 25 -> 28 GB/s in the stand-alone probe, and bench_gemm, 3 interleaved repetitions,
// took bf16 q1.5b.qo 171-190 -> 147-155 us, q1.5b.gate 953-1104 -> 905-928, q1.5b.down 996-1095
// -> 893-987, q0.5b.gate 326-328 -> 268-292, q1.5b.head 17.1-17.8 -> 16.7-17.9 ms (fp32 3-12%
// less); AR on the pair 8.23, 8.30 -> 8.58, 8.60 tok/s. Two with 32 (as measured there).
constexpr int kOneRowPanels = kRegisters < 32 ? 3 : 2;

#if SSD_PAIRED_BF16
using packed_layout::kPairLanes;
#endif

// Where a tile's accumulators wait between k-blocks: kPanel vectors per row.
struct Saved {
  float* at;  // row r, column j at at[(r * kPanel + j) * kLanes]; unused with one k-block
  float* row(int r) const { return at + size_t(r) * kPanel * kLanes; }
};

// R rows of x against one panel, over the k-vectors [k0, k1) of the panel's in_vec: starts from
// zero at k0 == 0 (else from `saved`), writes columns [j0, j0 + columns) at k1 == in_vec (else
// saves the accumulators). columns < kPanel only in the last panel. Blocked is a template
// argument so that one pass (every call but k-blocked ones) compiles to the tile it was before
// k-blocks: its multi-row GEMMs measured 3-5% slower with k0, k1 and the prefetch distance read
// at run time.
template <int R, bool Blocked, bool Interleaved, typename W>
inline void panel_tile(float* out, const float* x, const float* x_interleaved, const W* panel,
                       int in, int out_dim, int r0, int j0, int columns, int k0, int k1,
                       Saved saved, size_t prefetch_ahead, [[maybe_unused]] PrefetchShare* share) {
  const int in_vec = in / kLanes * kLanes;
  if constexpr (!Blocked) k0 = 0, k1 = in_vec, prefetch_ahead = kPrefetchAhead;
  vec acc[R][kPanel];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < kPanel; ++j)
      acc[r][j] = !Blocked || k0 == 0 ? zero_vec() : load_vec(saved.row(r0 + r) + j * kLanes);
  const float* xrow[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) xrow[r] = x + size_t(r0 + r) * in;
  // Interleaved (the call is this one tile, r0 == 0): row r's k-vector at k lies at r * kLanes +
  // k * R (interleaved_x.h).
  const float* xload[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) xload[r] = Interleaved ? x_interleaved + r * kLanes : xrow[r];
  constexpr int kXStep = Interleaved ? R : 1;
  const W* wp = panel + size_t(k0) * kPanel;
  int k = k0;
#if SSD_PAIRED_BF16
  // Paired bf16 weights: the pairs, then an odd last k-vector below. (This build's tiles have at
  // most 2 rows, so k0 is 0: k-blocks and interleaved x come with 3 or more.)
  if constexpr (std::is_same_v<W, uint16_t> && !Interleaved)
    k = accumulate_pairs(acc, wp, xload, k, std::min(k1, in / kPairLanes * kPairLanes),
                         prefetch_ahead, share);
#endif
  for (; k < k1; k += kLanes, wp += kPanel * kLanes) {
    vec wv[kPanel];
#pragma GCC unroll 16
    for (int j = 0; j < kPanel; ++j) {
      // One row: the hardware prefetcher follows the single stream on its own (a software
      // prefetch measured level or slower). Several rows: the FMAs take longer than the
      // loads, and without a prefetch far ahead into L2 the stream stalls behind them (see
      // kPrefetchAhead); with k-blocks the stream goes on in the next panel, prefetch_ahead
      // bytes on.
      const size_t offset = size_t(j) * kLanes * sizeof(W);
      if constexpr (R > 1)
        if (offset % 64 == 0)
          __builtin_prefetch(reinterpret_cast<const char*>(wp) + offset + prefetch_ahead, 0, 1);
      wv[j] = load_vec(wp + j * kLanes);
      keep_in_register<R, W>(wv[j]);
    }
    accumulate(acc, wv, xload, k * kXStep);
  }
  if (Blocked && k1 < in_vec) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < kPanel; ++j) store_vec(saved.row(r0 + r) + j * kLanes, acc[r][j]);
    return;
  }
  const int tail = in - in_vec;
  const W* tail_part = panel + size_t(kPanel) * in_vec;
  // Every column is finished, the last panel's zero rows too, and only then are `columns` of them
  // written: indexing acc by the run-time column count made GCC keep all of acc on the stack
  // (stored at entry, stored and reloaded at the end), which cost 15-25% of an in-cache tile
  // (a 240 KB matrix, 4-16 rows: 169-193 -> 196-217 GFLOP/s).
  float sums[R][kPanel];
  reduce_vecs(acc, sums);
  if (tail > 0)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < kPanel; ++j)
        sums[r][j] = add_tail(sums[r][j], xrow[r] + in_vec, tail_part + size_t(j) * tail, tail);
  // Whole panels: a constant count. The run-time one made GCC call memcpy for each row's 20
  // bytes (memmove 1.7% of a 5-row step's perf samples, 0.5% without; time within the noise).
  if (columns == kPanel) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < kPanel; ++j) out[size_t(r0 + r) * out_dim + j0 + j] = sums[r][j];
    return;
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < columns; ++j) out[size_t(r0 + r) * out_dim + j0 + j] = sums[r][j];
}

// R rows of x (R = 1, 2) against S panels at once (two_panel_rows: two; kOneRowPanels), when the
// rows' x is small (two_panel_x_bytes): independent weight streams in flight instead of one.
// Two against one, bench_gemm bf16,
// one row, 3 interleaved repetitions: 124m.gate 85 -> 69 us, 124m.head 1.31 -> 1.08 ms, 1b.gate
// 0.88 -> 0.73 ms (fp32 5-10%). With a large x (1b.down, 32 KB) the two streams ran 1.4x slower, so
// such rows keep one stream (kXBlockBytes). Two rows too (a batch of 2 decoding, K = 1's
// verification; 20 accumulators): a 2-row tile of one panel with software prefetch streamed ~15%
// slower than one row, where two panels' streams keep up. bench_decode llama-124m, 2 rows of a
// sequence, 3 interleaved repetitions: bf16 6.23-6.33 -> 5.75-5.86 ms (1.16 -> 1.05 one-row steps),
// fp32 11.3-11.8 -> 10.8-11.2 ms. Each element is summed as in panel_tile: the same k order and
// finish.
template <int R, int S, typename W>
inline void panels_at_once(float* out, const float* x, const W* const (&panel)[S], int in,
                           int out_dim, const int (&first)[S], int columns_last) {
  const int in_vec = in / kLanes * kLanes;
  vec acc[S][R][kPanel];
#pragma GCC unroll 16
  for (int h = 0; h < S; ++h)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < kPanel; ++j) acc[h][r][j] = zero_vec();
  int k = 0;
#if SSD_PAIRED_BF16
  if constexpr (std::is_same_v<W, uint16_t>) {  // the pairs, then an odd last k-vector below
    const float* xrow[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) xrow[r] = x + size_t(r) * in;
    const int pairs_end = in / kPairLanes * kPairLanes;
    for (; k < pairs_end; k += kPairLanes)
#pragma GCC unroll 4
      for (int h = 0; h < S; ++h) accumulate_pair(acc[h], panel[h] + size_t(k) * kPanel, xrow, k);
  }
#endif
  for (; k < in_vec; k += kLanes) {
    vec xv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) xv[r] = load_vec(x + size_t(r) * in + k);
#pragma GCC unroll 4
    for (int h = 0; h < S; ++h)
#pragma GCC unroll 16
      for (int j = 0; j < kPanel; ++j) {
        vec wv = load_vec(panel[h] + size_t(k) * kPanel + j * kLanes);
        keep_in_register<R, W>(wv);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[h][r][j] = fma_vec(xv[r], wv, acc[h][r][j]);
      }
  }
  const int tail = in - in_vec;
#pragma GCC unroll 4
  for (int h = 0; h < S; ++h) {
    float sums[R][kPanel];  // as in panel_tile: acc stays in registers
    reduce_vecs(acc[h], sums);
    const W* tail_part = panel[h] + size_t(kPanel) * in_vec;
    const int columns = h == S - 1 ? columns_last : kPanel;
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < kPanel; ++j) {
        const float sum =
            add_tail(sums[r][j], x + size_t(r) * in + in_vec, tail_part + size_t(j) * tail, tail);
        if (j < columns) out[size_t(r) * out_dim + first[h] + j] = sum;
      }
  }
}

template <int R, typename W>
inline void two_panel_rows(float* out, const float* x, const W* panel_a, const W* panel_b, int in,
                           int out_dim, int j_a, int j_b, int columns_b) {
  const W* const panel[2] = {panel_a, panel_b};
  const int first[2] = {j_a, j_b};
  panels_at_once<R, 2>(out, x, panel, in, out_dim, first, columns_b);
}

// What every tile of one panel over one k-block shares.
template <typename W>
struct PanelPass {
  float* out;
  const float* x;
  const W* panel;
  int in, out_dim, j0, columns, k0, k1;
  Saved saved;
  size_t prefetch_ahead;
  bool blocked;
  const float* x_interleaved;  // the call's one tile's x (interleaved_x.h), or nullptr: row-major
  PrefetchShare* share = nullptr;  // paired bf16 over groups of panels, else none

  template <int R, bool Interleaved>
  void tile_with(int r0) const {
    if (blocked)
      panel_tile<R, true, Interleaved>(out, x, x_interleaved, panel, in, out_dim, r0, j0, columns,
                                       k0, k1, saved, prefetch_ahead, share);
    else
      panel_tile<R, false, Interleaved>(out, x, x_interleaved, panel, in, out_dim, r0, j0, columns,
                                        k0, k1, saved, prefetch_ahead, share);
  }
  template <int R>
  void tile(int r0) const {
    if constexpr (R >= 3)
      if (x_interleaved) return tile_with<R, true>(r0);
    tile_with<R, false>(r0);
  }
};

template <typename W>
void run_tile(const PanelPass<W>& pass, int r0, int tile_rows) {
  switch (tile_rows) {
    case 1:
      return pass.template tile<1>(r0);
    case 2:
      return pass.template tile<2>(r0);
    case 3:
      if constexpr (kMaxTileRows >= 3) return pass.template tile<3>(r0);
      break;
    case 4:
      if constexpr (kMaxTileRows >= 4) return pass.template tile<4>(r0);
      break;
    case 5:
      if constexpr (kMaxTileRows >= 5) return pass.template tile<5>(r0);
      break;
  }
}

}  // namespace ssd::packed_tile
