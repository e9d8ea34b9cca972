// The CPU GEMMs' vector type, shared by the row-major kernel (matmul.cpp) and the packed one
// (matmul_packed.cpp): both must sum every dot product in exactly the same order, so both take
// their lane count, loads and reduction tree from here. Internal to kernels/cpu, and
// characterize's FMA-peak probe (characterize/compute_peak.cpp), which times these FMAs.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/dtype.h"

namespace ssd {
namespace simd {

// One vector of kLanes fp32 lanes: 16 with AVX-512 (32 registers), else 8 (AVX2 or GCC's
// portable vectors, 16 registers). The lane count fixes every dot product's summation order, so
// it is a property of the build, never of a call.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
constexpr int kRegisters = 32;
typedef __m512 vec;
inline vec load_vec(const float* p) {
  return _mm512_loadu_ps(p);
}
// The all-lanes masked forms: GCC 12 reports the unmasked ones' _mm512_undefined_* source as
// uninitialized (its bug 105593); the instructions are the same.
constexpr __mmask16 kAll16 = 0xFFFF;
inline vec load_vec(const uint16_t* p) {  // 16 bf16 -> 16 fp32: zero-extend, shift to the top
  const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m512i wide = _mm512_maskz_cvtepu16_epi32(kAll16, half);
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll16, wide, 16));
}
inline void store_vec(float* p, vec v) {
  _mm512_storeu_ps(p, v);
}
inline vec zero_vec() {
  return _mm512_setzero_ps();
}
inline vec broadcast_vec(float v) {
  return _mm512_set1_ps(v);
}
inline vec fma_vec(vec a, vec b, vec acc) {
  return _mm512_fmadd_ps(a, b, acc);
}
// Fixed tree: the 256-bit halves add lane-wise (l_i + l_{i+8}), then as the 8-lane tree below.
inline float reduce_vec(vec a) {
  const __m256d lower = _mm512_maskz_extractf64x4_pd(0xFF, _mm512_castps_pd(a), 0);
  const __m256d upper = _mm512_maskz_extractf64x4_pd(0xFF, _mm512_castps_pd(a), 1);
  const __m256 half = _mm256_add_ps(_mm256_castpd_ps(lower), _mm256_castpd_ps(upper));
  const __m128 quad = _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
  const __m128 pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1)));
}
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kLanes = 8;
constexpr int kRegisters = 16;
typedef __m256 vec;
inline vec load_vec(const float* p) {
  return _mm256_loadu_ps(p);
}
inline vec load_vec(const uint16_t* p) {  // 8 bf16 -> 8 fp32: zero-extend, shift to the top
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
// A pair of bf16 k-vectors in packed_layout.h's paired block (16 values, k 0-3, 8-11, 4-7,
// 12-15): zero words interleaved below each value's give k 0-7 (lo) and k 8-15 (hi) as fp32.
inline vec load_pair_lo(const uint16_t* p) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), v));
}
inline vec load_pair_hi(const uint16_t* p) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), v));
}
inline void store_vec(float* p, vec v) {
  _mm256_storeu_ps(p, v);
}
inline vec zero_vec() {
  return _mm256_setzero_ps();
}
inline vec broadcast_vec(float v) {
  return _mm256_set1_ps(v);
}
inline vec fma_vec(vec a, vec b, vec acc) {
  return _mm256_fmadd_ps(a, b, acc);
}
// The lanes' fixed tree ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)), in vector registers: the
// halves add lane-wise (l_i + l_{i+4}), then the upper pair onto the lower, then the two left.
inline float reduce_vec(vec a) {
  const __m128 quad = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1)));
}
#else
// Portable fallback: the AVX2 path's 8-lane order with GCC vector extensions. These helpers
// are internal and inlined, so GCC's note that 32-byte vectors pass differently without AVX
// (-Wpsabi) concerns no ABI anyone links against.
#pragma GCC diagnostic ignored "-Wpsabi"
constexpr int kLanes = 8;
constexpr int kRegisters = 16;
typedef float vec __attribute__((vector_size(32)));
inline vec load_vec(const float* p) {
  vec v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline vec load_vec(const uint16_t* p) {
  vec v;
  for (int i = 0; i < 8; ++i) v[i] = bf16_to_float(p[i]);
  return v;
}
inline void store_vec(float* p, vec v) {
  std::memcpy(p, &v, sizeof(v));
}
inline vec zero_vec() {
  return vec{};
}
inline vec broadcast_vec(float v) {
  return vec{v, v, v, v, v, v, v, v};
}
inline vec fma_vec(vec a, vec b, vec acc) {
  return acc + a * b;
}
inline float reduce_vec(vec a) {
  const float l0 = a[0] + a[4], l1 = a[1] + a[5], l2 = a[2] + a[6], l3 = a[3] + a[7];
  return (l0 + l2) + (l1 + l3);
}
#endif

inline float widen(float w) {
  return w;
}
inline float widen(uint16_t w) {
  return bf16_to_float(w);
}

// One k-step of a tile, the same in every GEMM so that they all sum alike: for each of R rows,
// load x's kLanes values at k and fuse them into that row's J accumulators.
template <int R, int J>
inline void accumulate(vec (&acc)[R][J], const vec (&wv)[J], const float* const (&xrow)[R], int k) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const vec xv = load_vec(xrow[r] + k);
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) acc[r][j] = fma_vec(xv, wv[j], acc[r][j]);
  }
}

// With several rows, keep an fp32 weight vector in a register: GCC otherwise folds its load into
// each row's FMA, loading it R times, and the load ports (one 512-bit load a cycle here) then
// bound the tile: 16-row fp32 GEMMs ran at 8.5 GB/s, with this 19.5.
template <int R, typename W>
inline void keep_in_register([[maybe_unused]] vec& weights) {
#if defined(__AVX2__) || defined(__AVX512F__)
  if constexpr (sizeof(W) == 4 && R > 1) asm("" : "+v"(weights));
#endif
}

// The `tail` products past the last whole vector, added to `sum` in k order.
template <typename W>
inline float add_tail(float sum, const float* x_tail, const W* w_tail, int tail) {
  for (int t = 0; t < tail; ++t) sum = std::fma(x_tail[t], widen(w_tail[t]), sum);
  return sum;
}

#if defined(__AVX512F__)
// The sum of two selections of 128-bit quarters from a and b (vshuff32x4 immediates First and
// Second), and of two selections of lanes within each quarter (vshufps immediates).
template <int First, int Second>
inline vec add_selected_quarters(vec a, vec b) {
  return _mm512_maskz_add_ps(kAll16, _mm512_maskz_shuffle_f32x4(kAll16, a, b, First),
                             _mm512_maskz_shuffle_f32x4(kAll16, a, b, Second));
}
template <int First, int Second>
inline vec add_selected_lanes(vec a, vec b) {
  return _mm512_maskz_add_ps(kAll16, _mm512_maskz_shuffle_ps(kAll16, a, b, First),
                             _mm512_maskz_shuffle_ps(kAll16, a, b, Second));
}
#endif

// reduce_vec of each of R x J accumulators, into sums. With AVX-512, sixteen at a time: each
// step adds, for all of them at once, the same two partial sums that reduce_vec adds for one
// (halves, then quarters, then pairs, then the last two), so the bits are reduce_vec's; it takes
// 3 instructions per accumulator where reduce_vec takes 9, which a tile of 25 accumulators over a
// 768-wide panel pays once per 48 k-steps. reduce_vecs_inlined is the same, forced inline where
// the caller must keep its accumulators in registers (dot_tile.h's blocked tiles).
template <int R, int J>
[[gnu::always_inline]] inline void reduce_vecs_inlined(const vec (&acc)[R][J],
                                                       float (&sums)[R][J]) {
#if defined(__AVX512F__)
  constexpr int N = R * J;
#pragma GCC unroll 4
  for (int first = 0; first < N; first += 16) {
    vec a[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      a[i] = first + i < N ? acc[(first + i) / J][(first + i) % J] : zero_vec();
    // a_i + a_{i+8} for two accumulators per vector, lanes [A's 8 | B's 8].
    vec halves[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      halves[i] = add_selected_quarters<0x44, 0xEE>(a[2 * i], a[2 * i + 1]);
    // h_i + h_{i+4}: four accumulators per vector, [A's 4 | B's 4 | C's 4 | D's 4].
    vec quarters[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
      quarters[i] = add_selected_quarters<0x88, 0xDD>(halves[2 * i], halves[2 * i + 1]);
    // q_0 + q_2 and q_1 + q_3: per 128-bit lane [X's 2 | Y's 2].
    vec pairs[2];
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i)
      pairs[i] = add_selected_lanes<0x44, 0xEE>(quarters[2 * i], quarters[2 * i + 1]);
    // p_0 + p_1: lane 4l + m holds accumulator 4m + l; the permutation puts i at lane i.
    const vec totals = add_selected_lanes<0x88, 0xDD>(pairs[0], pairs[1]);
    const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, _mm512_maskz_permutexvar_ps(kAll16, order, totals));
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      if (first + i < N) sums[(first + i) / J][(first + i) % J] = lanes[i];
  }
#else
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) sums[r][j] = reduce_vec(acc[r][j]);
#endif
}

template <int R, int J>
inline void reduce_vecs(const vec (&acc)[R][J], float (&sums)[R][J]) {
  reduce_vecs_inlined(acc, sums);
}

// One output element from its accumulator: the lanes in the fixed tree, then the `tail` values
// of k past the last whole vector in k order, each with an explicit fma (whether the compiler
// contracts a * b + c may differ between weight types, and the tail must round the same way for
// both).
template <typename W>
inline float finish_dot(vec acc, const float* x_tail, const W* w_tail, int tail) {
  return add_tail(reduce_vec(acc), x_tail, w_tail, tail);
}

// How far beyond the next weights a multi-row tile prefetches the weight stream (the fp32 GEMM's
// multi-row tiles; the bf16 GEMM's blocked 3-5-row and 6+-row ones, whose reads jump or revisit):
// 16-64 KiB measured alike on this project's AVX-512 host (8 KiB and less, or into L1, did not hide
// the memory latency behind the tile's FMAs); 32 KiB stays well inside a 1 MiB L2.
constexpr size_t kPrefetchAhead = 32 * 1024;

}  // namespace simd
}  // namespace ssd
