// The host CPU's fp32 FMA peak: independent fused multiply-adds on registers only, at the
// build's vector width. The CPU GEMMs widen every weight to fp32 and multiply with fp32 FMAs
// (exact, batch-invariant), so this is the compute roof of a CPU step, as the read loop
// (memory.cpp) is its memory roof: a verification of R rows can take no less than
// max(weight bytes / read bandwidth, 2 R P / FMA peak). The best GEMM measured is not that
// roof: it includes the kernel's loads, widening and reductions, which is what the roof is for
// judging.
#include <omp.h>

#if defined(__AVX512F__) || defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include <algorithm>

#include "characterize/parts.h"

namespace ssd {
namespace {

#if defined(__AVX512F__)
constexpr int kLanes = 16;
typedef __m512 Vec;
inline Vec splat(float v) {
  return _mm512_set1_ps(v);
}
inline Vec fma(Vec a, Vec b, Vec c) {
  return _mm512_fmadd_ps(a, b, c);
}
inline float lane_sum(Vec v) {
  alignas(64) float l[16];
  _mm512_store_ps(l, v);
  float sum = 0.0f;
  for (float x : l) sum += x;
  return sum;
}
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kLanes = 8;
typedef __m256 Vec;
inline Vec splat(float v) {
  return _mm256_set1_ps(v);
}
inline Vec fma(Vec a, Vec b, Vec c) {
  return _mm256_fmadd_ps(a, b, c);
}
inline float lane_sum(Vec v) {
  alignas(32) float l[8];
  _mm256_store_ps(l, v);
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}
#else
// No FMA instructions in this build: a multiply and an add, as the GEMMs then do.
constexpr int kLanes = 4;
struct Vec {
  float l[4];
};
inline Vec splat(float v) {
  return Vec{{v, v, v, v}};
}
inline Vec fma(Vec a, Vec b, Vec c) {
  for (int i = 0; i < 4; ++i) a.l[i] = a.l[i] * b.l[i] + c.l[i];
  return a;
}
inline float lane_sum(Vec v) {
  return (v.l[0] + v.l[1]) + (v.l[2] + v.l[3]);
}
#endif

// Twelve independent chains: enough to cover an FMA latency of 4-6 cycles on two pipes, and
// few enough for 16 vector registers.
constexpr int kChains = 12;
constexpr long kStepsPerPass = 20'000'000;
constexpr int kPasses = 3;

volatile float g_fma_sink;

// GFLOP/s (2 per lane per FMA) of the best of kPasses passes, every thread running its chains.
double fma_gflops(int threads) {
  double best = 0.0;
  for (int pass = 0; pass <= kPasses; ++pass) {  // pass 0 warms the threads and the clock up
    float total = 0.0f;
    const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      // b just below 1 and c small keep the chains finite and out of subnormals.
      const Vec b = splat(0.999999f), c = splat(1e-6f);
      Vec a[kChains];
      for (int i = 0; i < kChains; ++i) a[i] = splat(float(i + omp_get_thread_num()));
      for (long s = 0; s < kStepsPerPass; ++s)
#pragma GCC unroll 12
        for (int i = 0; i < kChains; ++i) a[i] = fma(a[i], b, c);
      for (int i = 0; i < kChains; ++i) total += lane_sum(a[i]);
    }
    const double seconds = omp_get_wtime() - t0;
    g_fma_sink = total;
    if (pass > 0)
      best =
          std::max(best, 2.0 * kLanes * kChains * double(kStepsPerPass) * threads / seconds / 1e9);
  }
  return best;
}

}  // namespace

HostFmaResult measure_host_fma(int threads) {
  HostFmaResult r;
  r.threads = threads;
  r.lanes = kLanes;
  r.one_thread_gflops = fma_gflops(1);
  r.gflops = threads == 1 ? r.one_thread_gflops : fma_gflops(threads);
  return r;
}

}  // namespace ssd
