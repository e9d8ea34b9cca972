// GEMMs for the CPU backend.
//
// matmul_invariant computes every output element as one dot product with a fixed summation
// order: an 8-lane accumulator walks k in steps of 8, the lanes are reduced in a fixed tree,
// then the k % 8 tail is added in order. Tiling only decides which dot products run together
// (to reuse loads), never how one is summed, so a row's result does not depend on how many
// rows share the call. Threads split the output columns, which does not change sums either.
//
// Weights are fp32 or bf16. A bf16 weight is widened to fp32 in registers (a 16-bit shift,
// exact) and then enters the same fused multiply-adds as an fp32 one, so bf16 storage gives
// bit for bit the results of fp32 storage of the same (bf16-valued) weights, at half the bytes
// a decode step streams.
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace ssd {
namespace {

#if defined(__AVX2__) && defined(__FMA__)
typedef __m256 v8;
inline v8 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
inline v8 load8(const uint16_t* p) {  // 8 bf16 -> 8 fp32: zero-extend, shift into the top half
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
inline v8 zero8() {
  return _mm256_setzero_ps();
}
inline v8 fma8(v8 a, v8 b, v8 acc) {
  return _mm256_fmadd_ps(a, b, acc);
}
#else
// Portable fallback: the same 8-lane order with GCC vector extensions. These helpers are
// internal and inlined, so GCC's note that 32-byte vectors pass differently without AVX
// (-Wpsabi) concerns no ABI anyone links against.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v8 __attribute__((vector_size(32)));
inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline v8 load8(const uint16_t* p) {
  v8 v;
  for (int i = 0; i < 8; ++i) v[i] = bf16_to_float(p[i]);
  return v;
}
inline v8 zero8() {
  return v8{};
}
inline v8 fma8(v8 a, v8 b, v8 acc) {
  return acc + a * b;
}
#endif

inline float widen(float w) {
  return w;
}
inline float widen(uint16_t w) {
  return bf16_to_float(w);
}

// The lanes' fixed tree ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)), in vector registers: the
// halves add lane-wise (l_i + l_{i+4}), then the upper pair onto the lower, then the two left.
#if defined(__AVX2__) && defined(__FMA__)
inline float reduce8(v8 a) {
  const __m128 quad = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1)));
}
#else
inline float reduce8(v8 a) {
  const float l0 = a[0] + a[4], l1 = a[1] + a[5], l2 = a[2] + a[6], l3 = a[3] + a[7];
  return (l0 + l2) + (l1 + l3);
}
#endif

// bf16 rows advance half as many bytes per step as fp32 ones, and the hardware prefetcher
// alone kept too few of their lines in flight: each row asks for the line 1 KiB ahead once per
// 64 bytes (measured with bench_gemm: 5-row bf16 GEMMs went from ~6 to ~7-9 GB/s; no gain for
// fp32, so it is not done there).
constexpr int kPrefetchBytes = 1024;

// R rows of x against J rows of w, columns [j0, j0 + J). Each weight row is read once for all
// R rows; R * J accumulators are independent FMA chains.
template <int R, int J, typename W>
inline void tile(float* out, const float* x, const W* w, int in, int out_dim, int r0, int j0) {
  v8 acc[R][J];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) acc[r][j] = zero8();
  const W* wrow[J];
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) wrow[j] = w + size_t(j0 + j) * in;
  const float* xrow[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) xrow[r] = x + size_t(r0 + r) * in;
  const int in8 = in & ~7;
  for (int k = 0; k < in8; k += 8) {
    v8 wv[J];
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      if constexpr (sizeof(W) == 2)
        if ((k & 31) == 0)
          __builtin_prefetch(reinterpret_cast<const char*>(wrow[j] + k) + kPrefetchBytes);
      wv[j] = load8(wrow[j] + k);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const v8 xv = load8(xrow[r] + k);
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) acc[r][j] = fma8(xv, wv[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < J; ++j) {
      float sum = reduce8(acc[r][j]);
      // An explicit fma: whether the compiler contracts a * b + c may differ between weight
      // types, and the tail must round the same way for both.
      for (int k = in8; k < in; ++k) sum = std::fma(xrow[r][k], widen(wrow[j][k]), sum);
      out[size_t(r0 + r) * out_dim + j0 + j] = sum;
    }
  }
}

// The register budget picks the shape (16 vector registers on AVX2: R * J accumulators, J
// weight vectors, one x vector), and every pass over a column block should run at least 8
// independent accumulators (an FMA's latency is 4 cycles, two issue per cycle): one row, 8
// columns (the weight loads fold into the FMAs); 2 rows, 4; 3, 3; 4, 3; 5 or 6, 2; 7 as 4 + 3
// rows of 3 columns; 8 and more, 3 columns by tiles of 4 rows. A leftover tile of one row
// would run 3 chains at a quarter of the FMA rate, so rows % 4 == 1 ends 2 + 3 instead of 4 + 1.
// Only which dot products run together changes, never a sum.
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
      return blocked_tiles<8, 1>(out, x, w, in, out_dim, threads);
    case 2:
      return blocked_tiles<4, 2>(out, x, w, in, out_dim, threads);
    case 3:
      return blocked_tiles<3, 3>(out, x, w, in, out_dim, threads);
    case 4:
      return blocked_tiles<3, 4>(out, x, w, in, out_dim, threads);
    case 5:
      return blocked_tiles<2, 5>(out, x, w, in, out_dim, threads);
    case 6:
      return blocked_tiles<2, 6>(out, x, w, in, out_dim, threads);
  }
  const int blocks = out_dim / 3;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int b = 0; b < blocks; ++b) rows_by_fours<3>(out, x, w, rows, in, out_dim, b * 3);
  for (int j = blocks * 3; j < out_dim; ++j) rows_by_fours<1>(out, x, w, rows, in, out_dim, j);
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
