// The host CPU's compute peaks: independent chains of one multiply-add instruction on registers
// only, at the build's vector width. Under --compute f32 the CPU GEMMs widen every weight to
// fp32 and multiply with fp32 FMAs (exact, batch-invariant); under --compute bf16 they round the
// activations to bf16 and multiply in AVX512_BF16's vdpbf16ps. The peak of the GEMMs' own
// instruction is the compute roof of a CPU step, as the read loop (memory.cpp) is its memory
// roof: a verification of R rows can take no less than max(weight bytes / read bandwidth,
// 2 R P / peak). The best GEMM measured is not that roof: it includes the kernel's loads,
// widening or rounding and reductions, which is what the roof is for judging.
#include "characterize/compute_peak.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/amx_tile_config.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/simd.h"

namespace ssd {
namespace {

// The GEMMs' own vector type and FMA (kernels/cpu/simd.h): the peak of exactly the instructions
// they multiply with, at their width (16 lanes with AVX-512, else 8).
using simd::fma_vec;
using simd::kLanes;
using simd::vec;

// Twelve independent chains: enough to cover a latency of 4-6 cycles on two pipes, and few
// enough for 16 vector registers.
constexpr int kChains = 12;
constexpr long kStepsPerPass = 20'000'000;
constexpr int kPasses = 3;

volatile float g_peak_sink;

// GFLOP/s of the best of kPasses passes, every thread running kChains chains a = step(a), each
// step `flops` FLOPs. The chains start apart (i + thread) so no two are the same computation.
template <typename Step>
double chains_gflops(int threads, double flops, Step step) {
  double best = 0.0;
  for (int pass = 0; pass <= kPasses; ++pass) {  // pass 0 warms the threads and the clock up
    float total = 0.0f;
    const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      vec a[kChains];
      for (int i = 0; i < kChains; ++i) a[i] = simd::broadcast_vec(float(i + omp_get_thread_num()));
      for (long s = 0; s < kStepsPerPass; ++s)
#pragma GCC unroll 12
        for (int i = 0; i < kChains; ++i) a[i] = step(a[i]);
      for (int i = 0; i < kChains; ++i) total += simd::reduce_vec(a[i]);
    }
    const double seconds = omp_get_wtime() - t0;
    g_peak_sink = total;
    if (pass > 0)
      best = std::max(best, flops * kChains * double(kStepsPerPass) * threads / seconds / 1e9);
  }
  return best;
}

template <typename Step>
HostPeakResult measure(int threads, double flops, Step step) {
  HostPeakResult r;
  r.threads = threads;
  r.lanes = kLanes;
  r.one_thread_gflops = chains_gflops(1, flops, step);
  r.gflops = threads == 1 ? r.one_thread_gflops : chains_gflops(threads, flops, step);
  return r;
}

}  // namespace

HostPeakResult measure_host_fma(int threads) {
  // b just below 1 and c small keep the chains finite and out of subnormals.
  const vec b = simd::broadcast_vec(0.999999f), c = simd::broadcast_vec(1e-6f);
  return measure(threads, 2.0 * kLanes, [b, c](vec a) { return fma_vec(a, b, c); });
}

std::optional<HostPeakResult> measure_host_bf16_dot(int threads) {
#if defined(__AVX512BF16__)
  // The build has the instruction; the CPU running it may not (a binary moved to another host).
  if (!cpu_has_bf16_dot()) return std::nullopt;
  // Each step adds 2e-6 to every lane: the chains stay finite and out of subnormals.
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-6f), _mm512_set1_ps(1e-6f));
  const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1.0f), _mm512_set1_ps(1.0f));
  return measure(threads, 4.0 * kLanes, [x, y](vec a) { return _mm512_dpbf16_ps(a, x, y); });
#else
  (void)threads;
  return std::nullopt;
#endif
}

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
namespace {

// GFLOP/s of TDPBF16PS on four independent accumulator tiles (16 x 16 fp32 each, from a 16 x 32
// bf16 tile against a 32 x 16 one: 16384 FLOPs an instruction), the best of kPasses passes.
double amx_gflops(int threads) {
  constexpr long kTileSteps = 2'000'000;
  constexpr double kFlopsPerTile = 2.0 * 16 * 16 * 32;
  double best = 0.0;
  for (int pass = 0; pass <= kPasses; ++pass) {
    const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads)
    {
      AmxTileConfig config;
      for (int t = 0; t < 6; ++t) config.set(t, 16, 64);
      _tile_loadconfig(&config);
      alignas(64) uint16_t ones[16 * 32];
      for (uint16_t& v : ones) v = 0x3400;  // 2^-23 (bf16): the sums stay small and exact
      _tile_zero(0);                        // tile numbers are immediates
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      _tile_loadd(4, ones, 64);
      _tile_loadd(5, ones, 64);
      for (long s = 0; s < kTileSteps; ++s) {
        _tile_dpbf16ps(0, 4, 5);
        _tile_dpbf16ps(1, 4, 5);
        _tile_dpbf16ps(2, 4, 5);
        _tile_dpbf16ps(3, 4, 5);
      }
      alignas(64) float sums[16 * 16];
      _tile_stored(0, sums, 64);
      g_peak_sink = sums[0];
      _tile_release();
    }
    const double seconds = omp_get_wtime() - t0;
    if (pass > 0) best = std::max(best, kFlopsPerTile * 4 * kTileSteps * threads / seconds / 1e9);
  }
  return best;
}

}  // namespace
#endif

std::optional<HostPeakResult> measure_host_amx_bf16(int threads) {
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
  if (!cpu_has_amx_bf16()) return std::nullopt;
  HostPeakResult r;
  r.threads = threads;
  r.lanes = 16 * 16;  // fp32 accumulators per instruction
  r.one_thread_gflops = amx_gflops(1);
  r.gflops = threads == 1 ? r.one_thread_gflops : amx_gflops(threads);
  return r;
#else
  (void)threads;
  return std::nullopt;
#endif
}

}  // namespace ssd
