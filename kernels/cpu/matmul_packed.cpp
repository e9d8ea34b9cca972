// The batch-invariant GEMM on weights laid out for it (CpuBackend::upload_matrix).
//
// Row-major [out][in] weights make a tile of J output columns read J rows at once: J short
// streams that jump ahead by J rows at every column block. One core's hardware prefetcher
// follows that less well than one sequential stream: bench_decode (llama-124m, one thread,
// row-major and packed interleaved, 4 repetitions) ran bf16 decode steps at 89-113 tok/s
// row-major, 87-124 packed (median 91 -> 117), fp32 at 49-55 and 55-59. So each matrix is
// stored as panels of kPanel output rows, a panel as its kLanes-wide k-vectors interleaved
// across the panel's rows:
//
//   panel p = rows [p*kPanel, p*kPanel + kPanel), zero rows past out_dim
//   vector part: for each k-vector kb, for each row j: w[j][kb*kLanes .. kb*kLanes + kLanes)
//   tail part:   for each row j: w[j][in_vec .. in)        (in_vec = in rounded down to kLanes)
//
// and a tile reads its panel front to back, once for all of its rows. Every dot product is
// summed exactly as matmul_invariant sums it (the same simd.h accumulate and finish_dot),
// so a packed matrix gives matmul_invariant's bits, for any number of rows and threads.
#include <omp.h>

#include <cmath>
#include <cstdint>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/simd.h"

namespace ssd {
namespace {

using namespace simd;

// Output rows per panel: the tile's column count, fixed by the layout for every row count.
// Five columns fit 32 registers with up to 5 rows (5 x 5 accumulators + 5 weights + 1 x), 16
// registers with up to 2 (2 x 5 + 5 + 1). Measured against 4 (bench_gemm, 3 repetitions):
// bf16 5-row tiles 15 -> 20 GB/s and 16-row ones level with row-major, where 4 columns lost a
// quarter at 16 rows.
constexpr int kPanel = 5;
constexpr int kMaxTileRows = kRegisters >= 32 ? 5 : 2;

int panels(int out_dim) {
  return (out_dim + kPanel - 1) / kPanel;
}

template <typename W>
void pack(W* dst, const W* w, int out_dim, int in) {
  const int in_vec = in / kLanes * kLanes, tail = in - in_vec;
  for (int p = 0; p < panels(out_dim); ++p) {
    W* panel = dst + size_t(p) * kPanel * in;
    for (int j = 0; j < kPanel; ++j) {
      const int row = p * kPanel + j;
      for (int k = 0; k < in; ++k) {
        const W value = row < out_dim ? w[size_t(row) * in + k] : W(0);
        const size_t at = k < in_vec ? (size_t(k / kLanes) * kPanel + j) * kLanes + k % kLanes
                                     : size_t(kPanel) * in_vec + size_t(j) * tail + (k - in_vec);
        panel[at] = value;
      }
    }
  }
}

// R rows of x against one panel; writes columns [j0, j0 + columns) (columns < kPanel only in
// the last panel).
template <int R, typename W>
inline void panel_tile(float* out, const float* x, const W* panel, int in, int out_dim, int r0,
                       int j0, int columns) {
  vec acc[R][kPanel];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < kPanel; ++j) acc[r][j] = zero_vec();
  const float* xrow[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) xrow[r] = x + size_t(r0 + r) * in;
  const int in_vec = in / kLanes * kLanes;
  const W* wp = panel;
  for (int k = 0; k < in_vec; k += kLanes, wp += kPanel * kLanes) {
    vec wv[kPanel];
#pragma GCC unroll 16
    for (int j = 0; j < kPanel; ++j) {
      // One row: the hardware prefetcher follows the single stream on its own (a software
      // prefetch measured level or slower). Several rows: the FMAs take longer than the
      // loads, and without a prefetch far ahead into L2 the stream stalls behind them (see
      // kPrefetchAhead).
      const size_t offset = size_t(j) * kLanes * sizeof(W);
      if constexpr (R > 1)
        if (offset % 64 == 0)
          __builtin_prefetch(reinterpret_cast<const char*>(wp) + offset + kPrefetchAhead, 0, 1);
      wv[j] = load_vec(wp + j * kLanes);
      keep_in_register<R, W>(wv[j]);
    }
    accumulate(acc, wv, xrow, k);
  }
  const int tail = in - in_vec;
  const W* tail_part = panel + size_t(kPanel) * in_vec;
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < columns; ++j)
      out[size_t(r0 + r) * out_dim + j0 + j] =
          finish_dot(acc[r][j], xrow[r] + in_vec, tail_part + size_t(j) * tail, tail);
}

// All rows against one panel, in tiles of at most kMaxTileRows. With 32 registers, more than
// 5 rows run as tiles of 4 (a leftover single row would run at a quarter of the FMA rate, so
// rows % 4 == 1 ends 2 + 3); with 16, as tiles of 2 and a last 1.
template <typename W>
void panel_rows(float* out, const float* x, const W* panel, int rows, int in, int out_dim, int j0,
                int columns) {
  if constexpr (kMaxTileRows >= 5) {
    switch (rows) {
      case 1:
        return panel_tile<1>(out, x, panel, in, out_dim, 0, j0, columns);
      case 2:
        return panel_tile<2>(out, x, panel, in, out_dim, 0, j0, columns);
      case 3:
        return panel_tile<3>(out, x, panel, in, out_dim, 0, j0, columns);
      case 4:
        return panel_tile<4>(out, x, panel, in, out_dim, 0, j0, columns);
      case 5:
        return panel_tile<5>(out, x, panel, in, out_dim, 0, j0, columns);
    }
    int r = 0;
    const int fours = rows % 4 == 1 ? rows / 4 - 1 : rows / 4;
    for (int t = 0; t < fours; ++t, r += 4)
      panel_tile<4>(out, x, panel, in, out_dim, r, j0, columns);
    switch (rows - r) {
      case 5:
        panel_tile<2>(out, x, panel, in, out_dim, r, j0, columns);
        panel_tile<3>(out, x, panel, in, out_dim, r + 2, j0, columns);
        break;
      case 3:
        panel_tile<3>(out, x, panel, in, out_dim, r, j0, columns);
        break;
      case 2:
        panel_tile<2>(out, x, panel, in, out_dim, r, j0, columns);
        break;
    }
  } else {
    int r = 0;
    for (; r + 2 <= rows; r += 2) panel_tile<2>(out, x, panel, in, out_dim, r, j0, columns);
    if (r < rows) panel_tile<1>(out, x, panel, in, out_dim, r, j0, columns);
  }
}

template <typename W>
void packed(float* out, const float* x, const W* w, int rows, int in, int out_dim, int threads) {
  const int count = panels(out_dim);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int p = 0; p < count; ++p) {
    const int j0 = p * kPanel;
    const int columns = out_dim - j0 < kPanel ? out_dim - j0 : kPanel;
    panel_rows(out, x, w + size_t(p) * kPanel * in, rows, in, out_dim, j0, columns);
  }
}

// Row `row` of a packed matrix, widened to fp32, read from its panel's interleaved vectors and
// tail.
template <typename W>
void unpack_row(float* dst, const W* w, int row, int in) {
  const int in_vec = in / kLanes * kLanes, tail = in - in_vec, j = row % kPanel;
  const W* panel = w + size_t(row / kPanel) * kPanel * in;
  for (int k = 0; k < in_vec; ++k)
    dst[k] = widen(panel[(size_t(k / kLanes) * kPanel + j) * kLanes + k % kLanes]);
  for (int t = 0; t < tail; ++t)
    dst[in_vec + t] = widen(panel[size_t(kPanel) * in_vec + size_t(j) * tail + t]);
}

}  // namespace

void packed_matrix_row(float* dst, const float* w, int row, int in) {
  unpack_row(dst, w, row, in);
}

void packed_matrix_row_bf16(float* dst, const uint16_t* w, int row, int in) {
  unpack_row(dst, w, row, in);
}

size_t packed_matrix_count(int out_dim, int in) {
  return size_t(panels(out_dim)) * kPanel * size_t(in);
}

void pack_matrix(float* dst, const float* w, int out_dim, int in) {
  pack(dst, w, out_dim, in);
}

void pack_matrix_bf16(uint16_t* dst, const uint16_t* w, int out_dim, int in) {
  pack(dst, w, out_dim, in);
}

void matmul_packed(float* out, const float* x, const float* w, int rows, int in, int out_dim,
                   int threads) {
  packed(out, x, w, rows, in, out_dim, threads);
}

void matmul_packed_bf16(float* out, const float* x, const uint16_t* w, int rows, int in,
                        int out_dim, int threads) {
  packed(out, x, w, rows, in, out_dim, threads);
}

}  // namespace ssd
