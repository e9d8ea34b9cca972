// The bf16 GEMM's register tile (matmul_bf16_dot.cpp): x of a call rounded to bf16 and laid out
// for the tiles (RoundedX), and R rows of it against P panels of packed weights (tile), in one
// pass over k or in blocks of it (KBlock). How a call walks its rows, panels and k-blocks with
// these tiles is matmul_bf16_dot.cpp's. Internal to kernels/cpu, and only for builds with
// AVX512_BF16 (included there under the same condition).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/simd.h"
#include "kernels/dtype.h"

namespace ssd::dot_tile {

using packed_layout::kDotLanes;
using packed_layout::kPanel;
using simd::vec;

constexpr int kMaxTileRows = 5;  // 5 x 5 accumulators + 5 rows of x + a weight: 31 registers

inline __m512bh as_bf16(__m512i v) {
  return (__m512bh)v;  // the same 512 bits, typed as 32 bf16 (a vector cast, no instruction)
}

// x of a call, rounded to bf16 (vcvtne2ps2bf16: nearest even, as the GPU rounds) and laid out for
// the tiles: the vector part in chunks of rows, each chunk interleaved by row, [k-vector][row of
// the chunk][kDotLanes], so that a tile's rows at one k-vector are one contiguous run and its
// k-vectors follow one another; the k tail past in_vec per row, as the fp32 values of the rounded
// bf16. A tile's rows must lie in one chunk. One chunk of every row (build without chunks) serves
// any tiles; chunks of the walk's own row tiles keep each tile's x one contiguous run, where one
// chunk of many rows puts a tile's k-vectors rows * 64 bytes apart, a multiple of 4 KiB for 64
// or 128 rows, and so on a few of L1's 64 sets (conflict misses; row_tiles_over_groups).
// Kept per thread, so a call allocates nothing once its size has been seen.
class RoundedX {
 public:
  void build(const float* x, int rows, int in) {
    build(x, rows, in, [rows](auto&& chunk) { chunk(0, rows); });
  }
  // for_each_chunk(f) calls f(r0, n) for chunks of rows that cover [0, rows) in order.
  template <typename ForEachChunk>
  void build(const float* x, int rows, int in, ForEachChunk&& for_each_chunk) {
    in_vec_ = in / kDotLanes * kDotLanes;
    tail_ = in - in_vec_;
    vectors_.resize(size_t(rows) * in_vec_ + 32);
    tails_.resize(size_t(rows) * tail_);
    offset_.resize(rows);
    step_.resize(rows);
    for_each_chunk([&](int r0, int n) {
      for (int r = r0; r < r0 + n; ++r) {
        offset_[r] = size_t(r0) * in_vec_ + size_t(r - r0) * kDotLanes;
        step_[r] = size_t(n) * kDotLanes;
      }
    });
    uint16_t* base = aligned();
    for (int r = 0; r < rows; ++r) {
      const float* row = x + size_t(r) * in;
      uint16_t* dst = base + offset_[r];
      for (int k = 0; k < in_vec_; k += kDotLanes, dst += step_[r]) {
        const __m512bh pair =
            _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + k + 16), _mm512_loadu_ps(row + k));
        _mm512_store_si512(dst, (__m512i)pair);
      }
      if (tail_ > 0) {  // the same instruction rounds the tail
        const __mmask32 keep = (__mmask32(1) << tail_) - 1;
        const __m512 lo = _mm512_maskz_loadu_ps(__mmask16(keep), row + in_vec_);
        const __m512 hi = _mm512_maskz_loadu_ps(__mmask16(keep >> 16), row + in_vec_ + 16);
        const __m512bh pair = _mm512_cvtne2ps_pbh(hi, lo);
        alignas(64) uint16_t bits[kDotLanes];
        _mm512_store_si512(bits, (__m512i)pair);
        for (int t = 0; t < tail_; ++t) tails_[size_t(r) * tail_ + t] = bf16_to_float(bits[t]);
      }
    }
  }
  // Row r's k-vectors: the one at k lies at vectors(r) + k / kDotLanes * step(r); row r + 1's of
  // the same chunk kDotLanes after row r's.
  const uint16_t* vectors(int r) const { return aligned() + offset_[r]; }
  size_t step(int r) const { return step_[r]; }
  const float* tail(int r) const { return tails_.data() + size_t(r) * tail_; }

 private:
  uint16_t* aligned() const {
    return reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(vectors_.data()) + 63) &
                                       ~uintptr_t(63));
  }
  int in_vec_ = 0, tail_ = 0;
  mutable std::vector<uint16_t> vectors_;
  std::vector<float> tails_;
  std::vector<size_t> offset_, step_;  // per row: where its k-vectors start, and their stride
};

// Where the tile writes, and which part of the weights it reads.
struct PanelRef {
  const uint16_t* panel;
  int j0, columns;  // output columns [j0, j0 + columns); columns < kPanel in the last panel only
};

// R rows of x (from row r0) against P panels side by side. P = 2 for one or two rows: two weight
// streams in flight where one row's dot products leave the core waiting on one (as the fp32
// GEMM's two_panel_rows). prefetch_ahead: how far ahead of its reads the tile asks for the weight
// stream (kOneRowPrefetchAhead for one row), with the Prefetch hint; 0 for none (one row in the
// last, lone panel, and on Zen 4 3-5 rows with x whole, whose one sequential stream the hardware
// prefetcher follows).
//
// Blocked (one panel, see KBlock): the k-vectors [block.k0, block.k1) only, from the accumulators
// block.saved holds unless k0 is 0, saving them there unless k1 ends the vector part. Storing an
// accumulator and loading it back is exact, so the sums are bit for bit those of one pass. A
// template argument, so that one pass compiles without the run-time range (the fp32 GEMM's tiles
// measured 3-5% slower with it).
struct KBlock {
  int k0 = 0, k1 = 0;
  float* saved = nullptr;  // row r, column j at saved[(r * kPanel + j) * 16]
};

// A tile's accumulators: [panel][row][column], 16 fp32 lanes each. The pieces of tile below
// take them by reference and are forced inline, so that they stay in registers as one function's
// would (a call would put them on the stack).
template <int R, int P>
using TileAccumulators = vec[P][R][kPanel];

// Zero, or the sums a blocked tile saved at its previous block.
template <int R, int P, bool Blocked>
[[gnu::always_inline]] inline void start_accumulators(TileAccumulators<R, P>& acc,
                                                      const KBlock& block) {
#pragma GCC unroll 16
  for (int h = 0; h < P; ++h)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < kPanel; ++j)
        acc[h][r][j] = !Blocked || block.k0 == 0
                           ? simd::zero_vec()
                           : simd::load_vec(block.saved + (r * kPanel + j) * simd::kLanes);
}

// How a tile asks for the weights ahead of its reads: a plain prefetch (locality 1, prefetcht2),
// or prefetchnta, with which, measured on Zen 5, the weight stream no longer evicts x from L1
// (matmul_bf16_dot.cpp's one_tile_per_panel).
enum class Prefetch { Plain, NonTemporal };

// The k-vectors [k0, k1): one weight load per column feeds every row's vdpbf16ps. A tile of one
// row and one panel prefetches only when blocked: the one-row tile of a blocked 2 + 1
// (matmul_bf16_dot.cpp's for_each_blocked_row_tile), where every tile asks for each weight line
// because one tile asking alone was the slow one. Unblocked it is two_panel_rows' lone last
// panel, which asks for nothing.
template <int R, int P, bool Blocked, Prefetch Hint>
[[gnu::always_inline]] inline void multiply_k_vectors(TileAccumulators<R, P>& acc,
                                                      const RoundedX& x, int r0,
                                                      const PanelRef (&ref)[P], int k0, int k1,
                                                      size_t prefetch_ahead) {
  const size_t x_step = x.step(r0);  // rows r0 .. r0 + R - 1 lie in one chunk (RoundedX)
  const uint16_t* xp = x.vectors(r0) + size_t(k0 / kDotLanes) * x_step;
  for (int k = k0; k < k1; k += kDotLanes, xp += x_step) {
    __m512bh xv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) xv[r] = as_bf16(_mm512_load_si512(xp + r * kDotLanes));
#pragma GCC unroll 2
    for (int h = 0; h < P; ++h) {
      const uint16_t* wp = ref[h].panel + size_t(k) * kPanel;
#pragma GCC unroll 16
      for (int j = 0; j < kPanel; ++j) {
        if (R > 1 || P > 1 || Blocked)
          if (prefetch_ahead > 0)
            __builtin_prefetch(reinterpret_cast<const char*>(wp + j * kDotLanes) + prefetch_ahead,
                               0, Hint == Prefetch::NonTemporal ? 0 : 1);
        __m512i wv = _mm512_loadu_si512(wp + j * kDotLanes);  // panels of odd `in` are not aligned
        // Several rows: one load for all of them, not one folded into each vdpbf16ps.
        if constexpr (R > 1) asm("" : "+v"(wv));
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          acc[h][r][j] = _mm512_dpbf16_ps(acc[h][r][j], xv[r], as_bf16(wv));
      }
    }
  }
}

// One panel's sums: its lanes reduced, the k tail added in fp32 FMAs, then every column
// finished before `columns` of them are written (a run-time index into acc makes GCC keep acc
// on the stack: packed_tile.h's panel_tile).
template <int R, bool Blocked>
[[gnu::always_inline]] inline void write_panel(float* out, const vec (&acc)[R][kPanel],
                                               const RoundedX& x, int r0, const PanelRef& ref,
                                               int in_vec, int tail, int out_dim) {
  float sums[R][kPanel];
  // A blocked tile with reduce_vecs out of line (GCC's choice once the file held more tiles) kept
  // its accumulators on the stack at every block's end: forced inline there.
  if constexpr (Blocked)
    simd::reduce_vecs_inlined(acc, sums);
  else
    simd::reduce_vecs(acc, sums);
  const uint16_t* tail_part = ref.panel + size_t(kPanel) * in_vec;
  if (tail > 0)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < kPanel; ++j)
        for (int t = 0; t < tail; ++t)
          sums[r][j] =
              std::fma(x.tail(r0 + r)[t], bf16_to_float(tail_part[j * tail + t]), sums[r][j]);
  float* o = out + size_t(r0) * out_dim + ref.j0;
  if (ref.columns == kPanel) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < kPanel; ++j) o[size_t(r) * out_dim + j] = sums[r][j];
  } else {
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < ref.columns; ++j) o[size_t(r) * out_dim + j] = sums[r][j];
  }
}

template <int R, int P, bool Blocked, Prefetch Hint>
inline void tile(float* out, const RoundedX& x, int r0, const PanelRef (&ref)[P], int in,
                 int out_dim, size_t prefetch_ahead, KBlock block) {
  static_assert(!Blocked || P == 1);
  const int in_vec = in / kDotLanes * kDotLanes, tail = in - in_vec;
  if constexpr (!Blocked) block.k0 = 0, block.k1 = in_vec;
  TileAccumulators<R, P> acc;
  start_accumulators<R, P, Blocked>(acc, block);
  multiply_k_vectors<R, P, Blocked, Hint>(acc, x, r0, ref, block.k0, block.k1, prefetch_ahead);
  if (Blocked && block.k1 < in_vec) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < kPanel; ++j)
        simd::store_vec(block.saved + (r * kPanel + j) * simd::kLanes, acc[0][r][j]);
    return;
  }
#pragma GCC unroll 2
  for (int h = 0; h < P; ++h)
    write_panel<R, Blocked>(out, acc[h], x, r0, ref[h], in_vec, tail, out_dim);
}

inline PanelRef panel_ref(const uint16_t* w, int p, int in, int out_dim) {
  return {w + size_t(p) * kPanel * in, p * kPanel, std::min(kPanel, out_dim - p * kPanel)};
}

template <int P, bool Blocked = false, Prefetch Hint = Prefetch::Plain>
void run_tile(float* out, const RoundedX& x, int r0, int tile_rows, const PanelRef (&ref)[P],
              int in, int out_dim, size_t ahead, KBlock block = {}) {
  switch (tile_rows) {
    case 1:
      return tile<1, P, Blocked, Hint>(out, x, r0, ref, in, out_dim, ahead, block);
    case 2:
      return tile<2, P, Blocked, Hint>(out, x, r0, ref, in, out_dim, ahead, block);
    case 3:
      if constexpr (P == 1)
        return tile<3, 1, Blocked, Hint>(out, x, r0, ref, in, out_dim, ahead, block);
      break;
    case 4:
      if constexpr (P == 1)
        return tile<4, 1, Blocked, Hint>(out, x, r0, ref, in, out_dim, ahead, block);
      break;
    case 5:
      if constexpr (P == 1)
        return tile<5, 1, Blocked, Hint>(out, x, r0, ref, in, out_dim, ahead, block);
      break;
  }
  // Unreachable: every caller splits rows into tiles of 1 to 5 (a throw here, inside an OpenMP
  // region, would end the process).
  throw std::logic_error("matmul_bf16_dot: no tile of that shape");
}

}  // namespace ssd::dot_tile
