// GEMMs for the CPU backend.
//
// matmul_invariant computes every output element as one dot product with a fixed summation
// order: a kLanes-lane accumulator (16 with AVX-512, else 8) walks k in steps of kLanes, the
// lanes are reduced in a fixed tree, then the k % kLanes tail is added in order. Tiling only
// decides which dot products run together (to reuse loads), never how one is summed, so a row's
// result does not depend on how many rows share the call. Threads split the output columns, which
// does not change sums either.
//
// Weights are fp32 or bf16. A bf16 weight is widened to fp32 in registers (a 16-bit shift,
// exact) and then enters the same fused multiply-adds as an fp32 one, so bf16 storage gives
// bit for bit the results of fp32 storage of the same (bf16-valued) weights, at half the bytes
// a decode step streams.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/simd.h"

namespace ssd {
namespace {

using namespace simd;

// R rows of x against J rows of w, columns [j0, j0 + J). Each weight row is read once for all
// R rows; R * J accumulators are independent FMA chains.
template <int R, int J, typename W>
inline void tile(float* out, const float* x, const W* w, int in, int out_dim, int r0, int j0) {
  vec acc[R][J];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) acc[r][j] = zero_vec();
  const W* wrow[J];
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) wrow[j] = w + size_t(j0 + j) * in;
  const float* xrow[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) xrow[r] = x + size_t(r0 + r) * in;
  const int in_vec = in / kLanes * kLanes;
  for (int k = 0; k < in_vec; k += kLanes) {
    vec wv[J];
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      // Column blocks follow each other in memory, so the weights are one stream: ask for the
      // next block's lines in step with this block's loads. A prefetch past the matrix's end is
      // harmless: prefetches never fault.
      // - One row: the next block into L1 (prefetcht0). The hardware prefetcher alone, tracking
      //   J short rows, left bf16 rows at 22-26 GB/s where fp32 reached 35.
      // - Several rows: kPrefetchAhead bytes further, into L2 (prefetcht2). The one-row rule
      //   left the memory stream waiting on the FMAs: 5-row fp32 GEMMs streamed 11-12 GB/s
      //   from memory where the same tile runs at 31 from L3 (bench_gemm, 768 x 2048); with
      //   this, 18-21. For one row the far prefetch measured level in bench_gemm but 5-15%
      //   slower in whole bf16 decode steps, so one row keeps the near one.
      const size_t ahead = (size_t(k) * J + size_t(j) * kLanes) * sizeof(W);
      const uintptr_t next_block =
          reinterpret_cast<uintptr_t>(w + size_t(j0) * in) + size_t(J) * in * sizeof(W);
      if (ahead % 64 == 0) {
        if constexpr (R == 1)
          __builtin_prefetch(reinterpret_cast<const void*>(next_block + ahead), 0, 3);
        else
          __builtin_prefetch(reinterpret_cast<const void*>(next_block + kPrefetchAhead + ahead), 0,
                             1);
      }
      wv[j] = load_vec(wrow[j] + k);
      keep_in_register<R, W>(wv[j]);
    }
    accumulate(acc, wv, xrow, k);
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j)
      out[size_t(r0 + r) * out_dim + j0 + j] =
          finish_dot(acc[r][j], xrow[r] + in_vec, wrow[j] + in_vec, in - in_vec);
}

// The register budget picks the shape: R * J accumulators, J weight vectors and one x vector
// fit in kRegisters. With 16 registers (AVX2), every pass over a column block runs at least 8
// independent accumulators (an FMA's latency is 4 cycles, two issue per cycle): one row, 8
// columns (the weight loads fold into the FMAs); 2 rows, 4; 3, 3; 4, 3; 5 or 6, 2; 7 and more,
// 3 columns by tiles of 4 rows. With 32 (AVX-512), measured with bench_gemm on a Zen-class
// host, fp32 rows stream faster with fewer concurrent weight rows: one row, 4 columns (36-40
// GB/s against 35 with 8); 2 rows, 8; 3, 6; 4, 5; 5, 5 (27-28 GB/s against 20-22 with 4); 6, 4;
// 7 and more, 5 by tiles of 4 rows. bf16 rows measured level or better with one row, 8
// columns and 5 rows, 4 (the rest as fp32). A leftover tile of one row would run J chains at a
// quarter of the FMA rate, so rows % 4 == 1 ends 2 + 3 instead of 4 + 1. Only which dot products
// run together changes, never a sum.
template <typename W>
constexpr int columns_for(int rows) {
  constexpr int narrow[] = {8, 4, 3, 3, 2, 2};
  constexpr int wide_f32[] = {4, 8, 6, 5, 5, 4};
  constexpr int wide_bf16[] = {8, 8, 6, 5, 4, 4};
  const int row = rows < 6 ? rows - 1 : 3;  // 7 and more rows run as tiles of 4 (and 2, 3)
  if (kRegisters < 32) return narrow[row];
  return sizeof(W) == 4 ? wide_f32[row] : wide_bf16[row];
}

template <int J, typename W>
inline void rows_by_fours(float* out, const float* x, const W* w, int rows, int in, int out_dim,
                          int j0) {
  int r = 0;
  const int fours = rows % 4 == 1 ? rows / 4 - 1 : rows / 4;
  for (int t = 0; t < fours; ++t, r += 4) tile<4, J>(out, x, w, in, out_dim, r, j0);
  switch (rows - r) {
    case 5:
      tile<2, J>(out, x, w, in, out_dim, r, j0);
      tile<3, J>(out, x, w, in, out_dim, r + 2, j0);
      break;
    case 3:
      tile<3, J>(out, x, w, in, out_dim, r, j0);
      break;
    case 2:
      tile<2, J>(out, x, w, in, out_dim, r, j0);
      break;
    case 1:
      tile<1, J>(out, x, w, in, out_dim, r, j0);
      break;
  }
}

template <int J, int T, typename W>
void blocked_tiles(float* out, const float* x, const W* w, int in, int out_dim, int threads) {
  const int blocks = out_dim / J;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int b = 0; b < blocks; ++b) tile<T, J>(out, x, w, in, out_dim, 0, b * J);
  for (int j = blocks * J; j < out_dim; ++j) tile<T, 1>(out, x, w, in, out_dim, 0, j);
}

template <typename W>
void invariant(float* out, const float* x, const W* w, int rows, int in, int out_dim, int threads) {
  switch (rows) {
    case 1:
      return blocked_tiles<columns_for<W>(1), 1>(out, x, w, in, out_dim, threads);
    case 2:
      return blocked_tiles<columns_for<W>(2), 2>(out, x, w, in, out_dim, threads);
    case 3:
      return blocked_tiles<columns_for<W>(3), 3>(out, x, w, in, out_dim, threads);
    case 4:
      return blocked_tiles<columns_for<W>(4), 4>(out, x, w, in, out_dim, threads);
    case 5:
      return blocked_tiles<columns_for<W>(5), 5>(out, x, w, in, out_dim, threads);
    case 6:
      return blocked_tiles<columns_for<W>(6), 6>(out, x, w, in, out_dim, threads);
  }
  constexpr int J = columns_for<W>(7);
  const int blocks = out_dim / J;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int b = 0; b < blocks; ++b) rows_by_fours<J>(out, x, w, rows, in, out_dim, b * J);
  for (int j = blocks * J; j < out_dim; ++j) rows_by_fours<1>(out, x, w, rows, in, out_dim, j);
}

}  // namespace

void matmul_invariant(float* out, const float* x, const float* w, int rows, int in, int out_dim,
                      int threads) {
  invariant(out, x, w, rows, in, out_dim, threads);
}

void matmul_invariant_bf16(float* out, const float* x, const uint16_t* w, int rows, int in,
                           int out_dim, int threads) {
  invariant(out, x, w, rows, in, out_dim, threads);
}

void matmul_openblas(float* out, const float* x, const float* w, int rows, int in, int out_dim,
                     int threads) {
  openblas_set_num_threads(threads);
  if (rows == 1) {  // sgemm at M=1 packs the whole weight matrix first: use the GEMV path
    cblas_sgemv(CblasRowMajor, CblasNoTrans, out_dim, in, 1.0f, w, in, x, 1, 0.0f, out, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out_dim, in, 1.0f, x, in, w, in, 0.0f,
              out, out_dim);
}

}  // namespace ssd
