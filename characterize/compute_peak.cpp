// The host CPU's fp32 FMA peak: independent fused multiply-adds on registers only, at the
// build's vector width. The CPU GEMMs widen every weight to fp32 and multiply with fp32 FMAs
// (exact, batch-invariant), so this is the compute roof of a CPU step, as the read loop
// (memory.cpp) is its memory roof: a verification of R rows can take no less than
// max(weight bytes / read bandwidth, 2 R P / FMA peak). The best GEMM measured is not that
// roof: it includes the kernel's loads, widening and reductions, which is what the roof is for
// judging.
#include <omp.h>

#include <algorithm>

#include "characterize/parts.h"
#include "kernels/cpu/simd.h"

namespace ssd {
namespace {

// The GEMMs' own vector type and FMA (kernels/cpu/simd.h): the peak of exactly the instructions
// they multiply with, at their width (16 lanes with AVX-512, else 8).
using simd::fma_vec;
using simd::kLanes;
using simd::vec;

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
      const vec b = simd::broadcast_vec(0.999999f), c = simd::broadcast_vec(1e-6f);
      vec a[kChains];
      for (int i = 0; i < kChains; ++i) a[i] = simd::broadcast_vec(float(i + omp_get_thread_num()));
      for (long s = 0; s < kStepsPerPass; ++s)
#pragma GCC unroll 12
        for (int i = 0; i < kChains; ++i) a[i] = fma_vec(a[i], b, c);
      for (int i = 0; i < kChains; ++i) total += simd::reduce_vec(a[i]);
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
