// Attention microbenchmarks: the CPU backend's attention (kernels/cpu/attention.cpp) for one
// layer of one sequence, at llama-124m's and Llama-3.2-1B's head shapes, for the row counts
// decoding uses: 1 (AR), 5 (K + 1 = 5 verification: causal rows after the context), 16, and SSD
// branches (5 rows, each seeing the context and its own 4-slot path, as a branch step does).
//
// Counters: FLOPS (q.k and p.v multiply-adds, 4 * rows * heads * head_dim per visible slot) and
// KV_BW (the K and V rows of the context, read once per call however many rows share them). As
// in a decode step, where a layer's K/V were last read a whole step (every weight) ago, the
// cache cycles through copies totalling >= 128 MiB, so that K/V come from memory, not from L3.
//
// SSD_BENCH_KV_IN_CACHE=1 keeps one copy instead, in L1/L2 after the first call: the difference
// is what reading K/V from memory costs.
//
// Threads: SSD_BENCH_THREADS (default 1).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "bench/run_benchmarks.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"

namespace {

int bench_threads() {
  const char* env = std::getenv("SSD_BENCH_THREADS");
  const int threads = env ? std::atoi(env) : 1;
  return threads > 0 ? threads : 1;
}

bool kv_in_cache() {
  const char* env = std::getenv("SSD_BENCH_KV_IN_CACHE");
  return env && std::atoi(env) != 0;
}

void fill(std::span<float> v, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = float(s >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }
}

// The KV cache copies from CpuBackend::alloc, as a model's KV cache is allocated: on 2 MiB
// transparent huge pages (on 4 KiB pages 16 rows at a context of 128 took 1.3x as long, 116-119
// us against 87-90, in page walks that the forward pass does not make).
struct KVCopies {
  ssd::CpuBackend& backend;
  ssd::Buffer buffer;
  KVCopies(ssd::CpuBackend& b, size_t count) : backend(b), buffer(b.alloc(count)) {}
  ~KVCopies() { backend.release(buffer); }
  KVCopies(const KVCopies&) = delete;
  KVCopies& operator=(const KVCopies&) = delete;
  std::span<float> values() const { return {static_cast<float*>(buffer.data), buffer.count}; }
};

struct HeadShape {
  const char* name;
  int heads, kv_heads, head_dim;
};

// The rows of one call and the slots each sees (backend.h's AttentionMask), kept together.
struct Rows {
  std::vector<int32_t> seq, slot, prefix, extra_begin{0}, extra_slots;
  int count = 0;  // visible slots summed over the rows
  ssd::AttentionMask mask() const {
    return {int(seq.size()), seq.data(),         slot.data(),
            prefix.data(),   extra_begin.data(), extra_slots.data()};
  }
};

// `rows` causal rows after `context` slots: row r sees [0, context + r].
Rows causal_rows(int context, int rows) {
  Rows m;
  for (int r = 0; r < rows; ++r) {
    m.seq.push_back(0);
    m.slot.push_back(context + r);
    m.prefix.push_back(context + r + 1);
    m.extra_begin.push_back(0);
    m.count += context + r + 1;
  }
  return m;
}

// `branches` SSD branch rows at depth `depth`: each sees the context and its own path of
// `depth` slots past the rows before it (saguaro_drafter.h), the last of them its own.
Rows branch_rows(int context, int branches, int depth) {
  Rows m;
  for (int b = 0; b < branches; ++b) {
    m.seq.push_back(0);
    m.slot.push_back(context + b * depth + depth - 1);
    m.prefix.push_back(context);
    for (int d = 0; d < depth; ++d) m.extra_slots.push_back(context + b * depth + d);
    m.extra_begin.push_back(int32_t(m.extra_slots.size()));
    m.count += context + depth;
  }
  return m;
}

void bm_attention(benchmark::State& state, HeadShape shape, Rows rows, int context, int threads) {
  const int n = int(rows.seq.size());
  ssd::KVLayout layout;
  layout.sequences = 1;
  layout.capacity = context + 4 * n + 1;
  layout.kv_heads = shape.kv_heads;
  layout.head_dim = shape.head_dim;
  const size_t kv = layout.elements();
  const size_t bytes_per_copy = 2 * kv * sizeof(float);
  const int copies =
      kv_in_cache() ? 1 : int(std::clamp<size_t>((size_t(128) << 20) / bytes_per_copy, 1, 256));
  ssd::CpuBackend backend(threads);
  KVCopies k(backend, kv * copies), v(backend, kv * copies);
  fill(k.values(), 1);
  fill(v.values(), 2);
  const size_t q_floats = size_t(n) * shape.heads * shape.head_dim;
  std::vector<float> q(q_floats), out(q_floats);
  fill(q, 3);
  const ssd::AttentionMask mask = rows.mask();
  int64_t call = 0;
  for (auto _ : state) {
    const size_t at = kv * size_t(++call % copies);
    ssd::attention_cpu(out.data(), q.data(), k.values().data() + at, v.values().data() + at, layout,
                       shape.heads, mask, threads);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double calls = double(state.iterations());
  state.counters["FLOPS"] =
      benchmark::Counter(4.0 * rows.count * shape.heads * shape.head_dim * calls,
                         benchmark::Counter::kIsRate, benchmark::Counter::OneK::kIs1000);
  state.counters["KV_BW"] =
      benchmark::Counter(2.0 * context * shape.kv_heads * shape.head_dim * sizeof(float) * calls,
                         benchmark::Counter::kIsRate, benchmark::Counter::OneK::kIs1000);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = bench_threads();
  const HeadShape shapes[] = {{"124m", 12, 4, 64}, {"1b", 32, 8, 64}};
  for (const HeadShape& s : shapes)
    for (int context : {128, 512, 2048}) {
      const auto add = [&](const std::string& what, const Rows& rows) {
        const std::string name = std::string("attention/") + s.name + "/" + what +
                                 "/context:" + std::to_string(context) +
                                 "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), bm_attention, s, rows, context, threads)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      };
      for (int rows : {1, 5, 16}) add("rows:" + std::to_string(rows), causal_rows(context, rows));
      add("branches:5x4", branch_rows(context, 5, 4));
    }
  return run_registered_benchmarks(argc, argv);
}
