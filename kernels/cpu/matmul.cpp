// GEMMs for the CPU backend.
//
// matmul_invariant computes every output element as one dot product with a fixed summation
// order: an 8-lane accumulator walks k in steps of 8, the lanes are reduced in a fixed tree,
// then the k % 8 tail is added in order. Tiling only decides which dot products run together
// (to reuse loads), never how one is summed, so a row's result does not depend on how many
// rows share the call. Threads split the output columns, which does not change sums either.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_backend.h"

namespace ssd {
namespace {

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 v8;
inline v8 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
inline v8 zero8() {
  return _mm256_setzero_ps();
}
inline v8 fma8(v8 a, v8 b, v8 acc) {
  return _mm256_fmadd_ps(a, b, acc);
}
inline float lane(v8 a, int i) {
  alignas(32) float l[8];
  _mm256_store_ps(l, a);
  return l[i];
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
inline v8 zero8() {
  return v8{};
}
inline v8 fma8(v8 a, v8 b, v8 acc) {
  return acc + a * b;
}
inline float lane(v8 a, int i) {
  return a[i];
}
#endif

inline float reduce8(v8 a) {
  alignas(32) float l[8];
  for (int i = 0; i < 8; ++i) l[i] = lane(a, i);
  float l0 = l[0] + l[4], l1 = l[1] + l[5], l2 = l[2] + l[6], l3 = l[3] + l[7];
  return (l0 + l2) + (l1 + l3);
}

// R rows of x against J rows of w, columns [j0, j0 + J).
template <int R, int J>
inline void tile(float* out, const float* x, const float* w, int in, int out_dim, int r0, int j0) {
  v8 acc[R][J];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) acc[r][j] = zero8();
  const float* wrow[J];
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) wrow[j] = w + size_t(j0 + j) * in;
  const float* xrow[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) xrow[r] = x + size_t(r0 + r) * in;
  const int in8 = in & ~7;
  for (int k = 0; k < in8; k += 8) {
    v8 wv[J];
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) wv[j] = load8(wrow[j] + k);
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
      for (int k = in8; k < in; ++k) sum += xrow[r][k] * wrow[j][k];
      out[size_t(r0 + r) * out_dim + j0 + j] = sum;
    }
  }
}

// All rows against weight rows [j0, j0 + J): row tiles of 4, remainder one at a time.
template <int J>
inline void column_block(float* out, const float* x, const float* w, int rows, int in, int out_dim,
                         int j0) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) tile<4, J>(out, x, w, in, out_dim, r, j0);
  for (; r + 2 <= rows; r += 2) tile<2, J>(out, x, w, in, out_dim, r, j0);
  for (; r < rows; ++r) tile<1, J>(out, x, w, in, out_dim, r, j0);
}

}  // namespace

void matmul_invariant(float* out, const float* x, const float* w, int rows, int in, int out_dim,
                      int threads) {
  // Few rows: memory bound; 8 weight rows at once (contiguous in memory) give 8 independent
  // FMA chains and keep enough loads in flight to approach the core's read bandwidth.
  // Many rows: compute bound, 3 weight rows x 4 x-rows keeps 12 accumulators in registers.
  const int block = rows < 4 ? 8 : 3;
  const int blocks = out_dim / block;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int b = 0; b < blocks; ++b) {
    if (block == 8)
      column_block<8>(out, x, w, rows, in, out_dim, b * block);
    else
      column_block<3>(out, x, w, rows, in, out_dim, b * block);
  }
  for (int j = blocks * block; j < out_dim; ++j) column_block<1>(out, x, w, rows, in, out_dim, j);
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
