// GEMM microbenchmarks: the batch-invariant kernel with fp32 and bf16 weights, packed (what the
// forward pass uses) and row-major, the bf16 x bf16 -> fp32 kernel of --compute bf16 (dot_bf16:
// activations rounded to bf16, AVX512_BF16's vdpbf16ps, on weights packed by
// pack_matrix_bf16_dot), and OpenBLAS sgemm (fp32), at llama-124m's, Llama-3.2-1B's and
// Qwen2.5-Coder-1.5B's and 0.5B's (the real pair: q1.5b.*, q0.5b.*) linear shapes and their
// untied heads (q*.head: 467 and 272 MB of bf16, the 0.5B draft's largest matrix), for the row
// counts decoding uses: 1 (AR), 2, 3 and 5 (K + 1 at K = 2, SSD's -k auto choice on the Qwen
// pair, and at K = 4), 4, 8, 10, 16 (batch x (K+1), SSD branches), 32, 80 (batch 16 x (K+1)) and
// 128 (prefill); and at the drafts' shapes (llama-12m, q0.5b) with 20 and 40 rows as well: an
// SSD cache build runs K batched steps of one row per branch, as many rows as the budget times
// the batch.
//
// Counters: FLOPS (2*M*in*out per call), weight_BW (in*out*element bytes per call), both rates,
// and peak_frac: FLOPS as a fraction of the host's measured peak of the kernel's compute (fp32
// FMAs for the f32 kernels, vdpbf16ps for dot_bf16; characterize's register-only probes,
// characterize/compute_peak.h, run once at start with the benchmarks' threads and printed in the
// context). Weights cycle through copies totalling >= 128 MiB (at most 64 copies) so that, as in
// a real decode step, matrices larger than a few MiB are read from memory, not from L3.
//
// openblas_batch_invariance/*: not a timing but a finding, whether OpenBLAS's sgemm gives row 0
// the same bits for 1 row as for 4 and 16 (label; counters row0_differ, of `out` outputs, and
// max_abs_diff). Many builds take a GEMV path for M=1 that rounds differently, which is why the
// forward pass defaults to matmul_invariant.
//
// Threads: SSD_BENCH_THREADS (default 1), e.g. SSD_BENCH_THREADS=2 ./bench_gemm.
// Compute: SSD_BENCH_COMPUTE=f32 (the fp32-FMA kernels and OpenBLAS), bf16 (dot_bf16), amx
// (amx_bf16: AMX's TDPBF16PS on weights packed by pack_matrix_bf16_amx) or both (every kernel,
// the default), as ssd-bench's --compute; without AVX512_BF16 or AMX, bf16 or amx has no kernel.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/run_benchmarks.h"
#include "characterize/compute_peak.h"
#include "kernels/cpu/cpu_backend.h"

namespace {

// All kernels take the weights as raw bytes of their element type.
using GemmFn = void (*)(float*, const float*, const void*, int, int, int, int);

void invariant_f32(float* y, const float* x, const void* w, int rows, int in, int out, int t) {
  ssd::matmul_invariant(y, x, static_cast<const float*>(w), rows, in, out, t);
}
void invariant_bf16(float* y, const float* x, const void* w, int rows, int in, int out, int t) {
  ssd::matmul_invariant_bf16(y, x, static_cast<const uint16_t*>(w), rows, in, out, t);
}
void packed_f32(float* y, const float* x, const void* w, int rows, int in, int out, int t) {
  ssd::matmul_packed(y, x, static_cast<const float*>(w), rows, in, out, t);
}
void packed_bf16(float* y, const float* x, const void* w, int rows, int in, int out, int t) {
  ssd::matmul_packed_bf16(y, x, static_cast<const uint16_t*>(w), rows, in, out, t);
}
void dot_bf16(float* y, const float* x, const void* w, int rows, int in, int out, int t) {
  ssd::matmul_bf16_dot(y, x, static_cast<const uint16_t*>(w), rows, in, out, t);
}
void amx_bf16(float* y, const float* x, const void* w, int rows, int in, int out, int t) {
  ssd::matmul_bf16_amx(y, x, static_cast<const uint16_t*>(w), rows, in, out, t);
}
void openblas_f32(float* y, const float* x, const void* w, int rows, int in, int out, int t) {
  ssd::matmul_openblas(y, x, static_cast<const float*>(w), rows, in, out, t);
}

// Storage as CpuBackend allocates weights and activations (allocate_cpu_memory). 64-byte
// aligned: std::vector's 16-byte alignment made every other 32-byte bf16 load and every 64-byte x
// load straddle two cache lines, which the forward pass never does. And the weight copies on 2 MiB
// pages, as the forward pass's weights are (this host's THP mode is "madvise", so plain
// allocations sit on 4 KiB pages). Measured with the dot GEMM, 1 thread, Zen 4, three interleaved
// passes of two repetitions, 2 MiB against 4 KiB pages: q1.5b.qo (a 4.7 MB matrix) 0.72-0.76 of
// the time at 1, 2, 8 and 16 rows, 0.90-0.94 at 3-5; q1.5b.gate and .down (27.5 MB) 0.84-1.07.
// On 4 KiB pages a 1-row call of q1.5b.qo read 19 GB/s where characterize's GEMM table (weights
// from the backend) read 26.
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(ssd::allocate_cpu_memory(n * sizeof(T), false)); }
  void deallocate(T* p, size_t) { std::free(p); }
  bool operator==(const CacheLineAllocator&) const { return true; }
};
template <typename T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

int bench_threads() {
  const char* env = std::getenv("SSD_BENCH_THREADS");
  const int threads = env ? std::atoi(env) : 1;
  return threads > 0 ? threads : 1;
}

// SSD_BENCH_COMPUTE: "f32", "bf16", "amx" or "both" (every kernel, the default); anything else
// is "".
std::string bench_compute() {
  const char* env = std::getenv("SSD_BENCH_COMPUTE");
  const std::string value = env ? env : "both";
  return value == "f32" || value == "bf16" || value == "amx" || value == "both" ? value : "";
}

template <typename Vector>
void fill(Vector& v, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = float(s >> 40) * (0.1f / 16777216.0f) - 0.05f;
  }
}

// How a kernel wants its weights: row-major, packed as CpuBackend::upload_matrix packs them for
// matmul_packed(_bf16), or packed for matmul_bf16_dot (bf16 only).
enum class Layout { RowMajor, Packed, PackedDot, PackedAmx };

// Weight copies for one [out, in] shape, element size and layout, made once and shared by every
// benchmark of the shape. bf16 copies hold the top halves of the fp32 values.
struct WeightSet {
  size_t stride = 0;  // bytes
  int copies = 1;
  AlignedVector<uint8_t> data;
};

const WeightSet& weights_for(int in, int out, int element, Layout layout) {
  static std::map<std::tuple<int, int, int, Layout>, WeightSet> cache;
  WeightSet& set = cache[{in, out, element, layout}];
  if (set.data.empty()) {
    const bool packed = layout != Layout::RowMajor;
    const size_t count = layout == Layout::PackedAmx ? ssd::amx_packed_matrix_count(out, in)
                         : packed                    ? ssd::packed_matrix_count(out, in)
                                                     : size_t(in) * out;
    set.stride = (count * element + 63) / 64 * 64;
    set.copies = int(std::min<size_t>(64, ((size_t(128) << 20) + set.stride - 1) / set.stride));
    std::vector<float> values(size_t(in) * out);
    fill(values, uint64_t(in) * 131 + out);
    std::vector<uint16_t> halves(values.size());
    for (size_t i = 0; i < values.size(); ++i) halves[i] = ssd::float_to_bf16(values[i]);
    std::vector<uint8_t> one(count * element);
    if (element == 4 && packed)
      ssd::pack_matrix(reinterpret_cast<float*>(one.data()), values.data(), out, in);
    else if (element == 4)
      std::memcpy(one.data(), values.data(), one.size());
    else if (layout == Layout::PackedAmx)
      ssd::pack_matrix_bf16_amx(reinterpret_cast<uint16_t*>(one.data()), halves.data(), out, in);
    else if (layout == Layout::PackedDot)
      ssd::pack_matrix_bf16_dot(reinterpret_cast<uint16_t*>(one.data()), halves.data(), out, in);
    else if (packed)
      ssd::pack_matrix_bf16(reinterpret_cast<uint16_t*>(one.data()), halves.data(), out, in);
    else
      std::memcpy(one.data(), halves.data(), one.size());
    set.data.resize(set.stride * set.copies);
    for (int c = 0; c < set.copies; ++c)
      std::memcpy(set.data.data() + set.stride * c, one.data(), one.size());
  }
  return set;
}

// peak_gflops: the host's peak of the kernel's compute, at `threads` threads.
void bm_gemm(benchmark::State& state, GemmFn fn, int element, Layout layout, int rows, int in,
             int out, int threads, double peak_gflops) {
  const WeightSet& w = weights_for(in, out, element, layout);
  AlignedVector<float> x(size_t(rows) * in), y(size_t(rows) * out);
  fill(x, 7);
  fn(y.data(), x.data(), w.data.data(), rows, in, out, threads);  // warm-up (thread pools)
  int64_t call = 0;
  // Timed here too: a kIsRate counter of a fraction would print as "0.7/s".
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    fn(y.data(), x.data(), w.data.data() + w.stride * size_t(++call % w.copies), rows, in, out,
       threads);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double calls = double(state.iterations());
  state.counters["FLOPS"] =
      benchmark::Counter(2.0 * rows * in * out * calls, benchmark::Counter::kIsRate,
                         benchmark::Counter::OneK::kIs1000);
  state.counters["weight_BW"] =
      benchmark::Counter(double(in) * out * element * calls, benchmark::Counter::kIsRate,
                         benchmark::Counter::OneK::kIs1000);
  state.counters["peak_frac"] = 2.0 * rows * in * out * calls / seconds / (peak_gflops * 1e9);
  state.counters["copies"] = w.copies;
}

// Row 0 of sgemm with `rows` rows against sgemm with one, at a llama-124m-like shape.
void bm_openblas_invariance(benchmark::State& state, int rows, int threads) {
  constexpr int in = 768, out = 2048;
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(size_t(16) * in), w(size_t(out) * in);
  for (float& v : x) v = dist(rng);
  rng.seed(32);
  for (float& v : w) v = dist(rng);
  std::vector<float> one(out), many(size_t(rows) * out);
  int differ = 0;
  double max_diff = 0;
  for (auto _ : state) {
    ssd::matmul_openblas(one.data(), x.data(), w.data(), 1, in, out, threads);
    ssd::matmul_openblas(many.data(), x.data(), w.data(), rows, in, out, threads);
    differ = 0;
    max_diff = 0;
    for (int j = 0; j < out; ++j) {
      if (std::memcmp(&one[j], &many[j], sizeof(float)) != 0) ++differ;
      max_diff = std::max(max_diff, double(std::fabs(one[j] - many[j])));
    }
  }
  state.SetLabel(differ == 0 ? "batch-invariant" : "NOT batch-invariant");
  state.counters["row0_differ"] = differ;
  state.counters["out"] = out;
  state.counters["max_abs_diff"] = max_diff;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = bench_threads();
  const std::string compute = bench_compute();
  if (compute.empty()) {
    std::fprintf(stderr, "bench_gemm: SSD_BENCH_COMPUTE=%s: expected f32, bf16, amx or both\n",
                 std::getenv("SSD_BENCH_COMPUTE"));
    return 1;
  }
  // Each compute's yardstick, measured once: the peak of the instruction its kernels multiply
  // with, on registers only.
  const double fma_peak = ssd::measure_host_fma(threads).gflops;
  const std::optional<ssd::HostPeakResult> dot_peak = ssd::measure_host_bf16_dot(threads);
  const std::optional<ssd::HostPeakResult> amx_peak = ssd::measure_host_amx_bf16(threads);
  benchmark::AddCustomContext("fp32_fma_peak_gflops", std::to_string(fma_peak));
  benchmark::AddCustomContext("amx_bf16_peak_gflops",
                              amx_peak ? std::to_string(amx_peak->gflops) : "none");
  benchmark::AddCustomContext("bf16_dot_peak_gflops",
                              dot_peak ? std::to_string(dot_peak->gflops) : "none");
  if ((compute == "bf16" || compute == "both") && !dot_peak)
    std::fprintf(stderr, "bench_gemm: this build or CPU has no AVX512_BF16: no dot_bf16\n");
  if ((compute == "amx" || compute == "both") && !amx_peak)
    std::fprintf(stderr, "bench_gemm: this build, CPU or OS has no AMX tiles: no amx_bf16\n");
  struct Shape {
    const char* name;
    int in, out;
    bool draft;  // the draft's: the cache build's row counts too
  };
  const Shape shapes[] = {{"124m.qo", 768, 768, false},       {"124m.kv", 768, 256, false},
                          {"124m.gate", 768, 2048, false},    {"124m.down", 2048, 768, false},
                          {"124m.head", 768, 32000, false},   {"12m.qo", 256, 256, true},
                          {"12m.kv", 256, 128, true},         {"12m.gate", 256, 688, true},
                          {"12m.down", 688, 256, true},       {"12m.head", 256, 32000, true},
                          {"1b.qo", 2048, 2048, false},       {"1b.gate", 2048, 8192, false},
                          {"1b.down", 8192, 2048, false},     {"q1.5b.qo", 1536, 1536, false},
                          {"q1.5b.kv", 1536, 256, false},     {"q1.5b.gate", 1536, 8960, false},
                          {"q1.5b.down", 8960, 1536, false},  {"q0.5b.qo", 896, 896, true},
                          {"q0.5b.kv", 896, 128, true},       {"q0.5b.gate", 896, 4864, true},
                          {"q0.5b.down", 4864, 896, true},    {"q0.5b.head", 896, 151936, true},
                          {"q1.5b.head", 1536, 151936, false}};
  const std::vector<int> target_rows = {1, 2, 3, 4, 5, 8, 10, 16, 32, 80, 128};
  const std::vector<int> draft_rows = {1, 2, 4, 5, 8, 10, 16, 20, 32, 40, 80, 128};
  struct Kernel {
    const char* name;
    GemmFn fn;
    int element;
    Layout layout;
    const char* compute;                                  // SSD_BENCH_COMPUTE that selects it
    const std::optional<ssd::HostPeakResult>* bf16_peak;  // the kernel's, if bf16 x bf16
  };
  // packed_*: what the forward pass runs under --compute f32 (CpuBackend packs every projection
  // and untied head), dot_bf16 under --compute bf16; invariant_*: the same sums as packed_* on
  // row-major weights (a tied head, tests, the GPU's reference).
  const Kernel kernels[] = {{"packed_f32", packed_f32, 4, Layout::Packed, "f32", nullptr},
                            {"packed_bf16", packed_bf16, 2, Layout::Packed, "f32", nullptr},
                            {"dot_bf16", dot_bf16, 2, Layout::PackedDot, "bf16", &dot_peak},
                            {"amx_bf16", amx_bf16, 2, Layout::PackedAmx, "amx", &amx_peak},
                            {"invariant_f32", invariant_f32, 4, Layout::RowMajor, "f32", nullptr},
                            {"invariant_bf16", invariant_bf16, 2, Layout::RowMajor, "f32", nullptr},
                            {"openblas_f32", openblas_f32, 4, Layout::RowMajor, "f32", nullptr}};
  // Kernel-major order: after an OpenBLAS call its pthreads busy-wait for ~0.1 s, which would
  // slow an OpenMP kernel measured right after it when threads > 1.
  for (const Kernel& k : kernels) {
    if ((compute != "both" && compute != k.compute) || (k.bf16_peak && !*k.bf16_peak)) continue;
    const double peak = k.bf16_peak ? (*k.bf16_peak)->gflops : fma_peak;
    for (const Shape& s : shapes) {
      for (int rows : s.draft ? draft_rows : target_rows) {
        const std::string name = std::string(k.name) + "/" + s.name + "/" + std::to_string(s.in) +
                                 "x" + std::to_string(s.out) + "/M:" + std::to_string(rows) +
                                 "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), bm_gemm, k.fn, k.element, k.layout, rows, s.in,
                                     s.out, threads, peak)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  if (compute == "f32" || compute == "both")  // a finding about OpenBLAS, fp32
    for (int t : {1, 2})
      for (int rows : {4, 16}) {
        const std::string name =
            "openblas_batch_invariance/768x2048/M:1_vs_M:" + std::to_string(rows) +
            "/threads:" + std::to_string(t);
        benchmark::RegisterBenchmark(name.c_str(), bm_openblas_invariance, rows, t)
            ->Iterations(1)
            ->Unit(benchmark::kMicrosecond);
      }
  return run_registered_benchmarks(argc, argv);
}
