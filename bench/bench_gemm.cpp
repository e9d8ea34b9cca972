// GEMM microbenchmarks: the batch-invariant kernel (what the forward pass uses) against OpenBLAS
// sgemm, at a tiny test shape and at Llama-3.2-1B's linear shapes, for M = 1, 4, 16, 128 rows.
//
// Counters: FLOPS (2*M*in*out per call) and weight_BW (in*out*4 weight bytes per call), both
// rates. Weights cycle through copies totalling >= 128 MiB (at most 64 copies) so that, as in
// a real decode step, matrices larger than a few MiB are read from memory, not from L3.
//
// Threads: SSD_BENCH_THREADS (default 1), e.g. SSD_BENCH_THREADS=2 ./bench_gemm.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace {

using GemmFn = void (*)(float*, const float*, const float*, int, int, int, int);

int bench_threads() {
  const char* env = std::getenv("SSD_BENCH_THREADS");
  const int threads = env ? std::atoi(env) : 1;
  return threads > 0 ? threads : 1;
}

void fill(std::vector<float>& v, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = float(s >> 40) * (0.1f / 16777216.0f) - 0.05f;
  }
}

// Weight copies for one [out, in] shape, made once and shared by every benchmark of the shape.
struct WeightSet {
  size_t stride = 0;
  int copies = 1;
  std::vector<float> data;
};

const WeightSet& weights_for(int in, int out) {
  static std::map<std::pair<int, int>, WeightSet> cache;
  WeightSet& set = cache[{in, out}];
  if (set.data.empty()) {
    set.stride = (size_t(in) * out + 15) / 16 * 16;
    const size_t bytes = set.stride * sizeof(float);
    set.copies = int(std::min<size_t>(64, ((size_t(128) << 20) + bytes - 1) / bytes));
    set.data.resize(set.stride * set.copies);
    fill(set.data, uint64_t(in) * 131 + out);
  }
  return set;
}

void bm_gemm(benchmark::State& state, GemmFn fn, int rows, int in, int out, int threads) {
  const WeightSet& w = weights_for(in, out);
  std::vector<float> x(size_t(rows) * in), y(size_t(rows) * out);
  fill(x, 7);
  fn(y.data(), x.data(), w.data.data(), rows, in, out, threads);  // warm-up (thread pools)
  int64_t call = 0;
  for (auto _ : state) {
    fn(y.data(), x.data(), w.data.data() + w.stride * size_t(++call % w.copies), rows, in, out,
       threads);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double calls = double(state.iterations());
  state.counters["FLOPS"] =
      benchmark::Counter(2.0 * rows * in * out * calls, benchmark::Counter::kIsRate,
                         benchmark::Counter::OneK::kIs1000);
  state.counters["weight_BW"] =
      benchmark::Counter(double(in) * out * sizeof(float) * calls, benchmark::Counter::kIsRate,
                         benchmark::Counter::OneK::kIs1000);
  state.counters["copies"] = w.copies;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = bench_threads();
  struct Shape {
    const char* name;
    int in, out;
  };
  const Shape shapes[] = {{"tiny", 64, 64},        {"tiny", 64, 160},     // tiny-llama q/o, gate/up
                          {"1b.qo", 2048, 2048},   {"1b.kv", 2048, 512},  // llama-3.2-1b attention
                          {"1b.gate", 2048, 8192}, {"1b.down", 8192, 2048}};  // llama-3.2-1b MLP
  const std::pair<const char*, GemmFn> kernels[] = {{"invariant", ssd::matmul_invariant},
                                                    {"openblas", ssd::matmul_openblas}};
  // Kernel-major order: after an OpenBLAS call its pthreads busy-wait for ~0.1 s, which would
  // slow an OpenMP kernel measured right after it when threads > 1.
  for (const auto& [kernel, fn] : kernels) {
    for (const Shape& s : shapes) {
      for (int rows : {1, 4, 16, 128}) {
        const std::string name = std::string(kernel) + "/" + s.name + "/" + std::to_string(s.in) +
                                 "x" + std::to_string(s.out) + "/M:" + std::to_string(rows) +
                                 "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), bm_gemm, fn, rows, s.in, s.out, threads)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
