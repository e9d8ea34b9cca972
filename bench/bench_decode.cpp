// One AR decode step (batch 1, one token) of synthetic models on the CPU backend, after a
// 16-token prefill. The cache length is never committed, so every iteration rewrites slot 16
// and sees the same 16-token context: the step does not get slower as the benchmark runs.
//
// Counters: tok_s (steps per second) and weight_BW (bytes one decode step must read: every
// fp32 weight except the unread rows of an untied embedding table, per second).
//
// Models: tiny-llama, llama-124m (0.5 GB fp32) and llama-3.2-1b (1.24B parameters, 4.9 GB
// fp32). Synthetic weights are generated on first use of each model, which for llama-3.2-1b
// takes tens of seconds (not timed); --benchmark_filter='tiny|124m' skips it.
//
// Threads: SSD_BENCH_THREADS, a comma-separated list (default 1), e.g. SSD_BENCH_THREADS=1,2.
// Each thread count loads its own copy of the model (one model is held at a time).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/weights.h"

namespace {

constexpr int kPrefillTokens = 16;

std::vector<int> bench_threads() {
  std::vector<int> threads;
  const char* env = std::getenv("SSD_BENCH_THREADS");
  std::stringstream list(env ? env : "1");
  for (std::string item; std::getline(list, item, ',');)
    if (const int t = std::atoi(item.c_str()); t > 0) threads.push_back(t);
  if (threads.empty()) threads.push_back(1);
  return threads;
}

// Bytes one decode step reads: all weights but the embedding rows of other tokens (a tied
// table is the LM head and is read whole).
double decode_bytes(const ssd::ModelConfig& c) {
  int64_t params = c.parameter_count();
  if (!c.tie_word_embeddings) params -= int64_t(c.vocab_size - 1) * c.hidden_size;
  return double(params) * sizeof(float);
}

// The loaded model, prefilled with 16 tokens; one at a time, replaced when another is asked for.
struct Loaded {
  std::string spec;
  int threads = 0;
  std::unique_ptr<ssd::CpuBackend> backend;
  ssd::Model model;
  ssd::KVCache cache;
  ssd::Activations acts;
  std::vector<float> logits;
  int32_t next_token = 0;

  ~Loaded() { release(); }
  void release() {
    if (!backend) return;
    ssd::release_activations(acts, *backend);
    ssd::release_kv_cache(cache, *backend);
    ssd::release_model(model);
    backend.reset();
  }
};

Loaded& load(const std::string& spec, int threads) {
  static Loaded loaded;
  if (loaded.backend && loaded.spec == spec && loaded.threads == threads) return loaded;
  loaded.release();
  std::unique_ptr<ssd::WeightSource> source = ssd::open_weight_source(spec, 0);
  loaded.spec = spec;
  loaded.threads = threads;
  loaded.backend = std::make_unique<ssd::CpuBackend>(threads);
  loaded.model = ssd::load_model(*source, *loaded.backend);
  loaded.cache = ssd::create_kv_cache(loaded.model, 1, kPrefillTokens + 1);
  const int vocab = loaded.model.config.vocab_size;
  std::vector<int32_t> prompt(kPrefillTokens);
  for (int i = 0; i < kPrefillTokens; ++i) prompt[i] = int32_t((7919LL * i + 3) % vocab);
  ssd::ForwardBatch prefill;
  prefill.add_causal(0, 0, prompt, ssd::ForwardBatch::Logits::Last);
  ssd::forward(loaded.model, loaded.cache, prefill, loaded.acts, loaded.logits);
  loaded.cache.length[0] = kPrefillTokens;
  loaded.next_token =
      int32_t(std::max_element(loaded.logits.begin(), loaded.logits.end()) - loaded.logits.begin());
  return loaded;
}

void bm_decode_step(benchmark::State& state, const std::string& spec) {
  Loaded& m = load(spec, int(state.range(0)));
  ssd::ForwardBatch batch;
  batch.add_causal(0, m.cache.length[0], {m.next_token}, ssd::ForwardBatch::Logits::Last);
  ssd::forward(m.model, m.cache, batch, m.acts, m.logits);  // warm-up
  for (auto _ : state) {
    ssd::forward(m.model, m.cache, batch, m.acts, m.logits);
    benchmark::DoNotOptimize(m.logits.data());
  }
  const double steps = double(state.iterations());
  state.counters["tok_s"] = benchmark::Counter(steps, benchmark::Counter::kIsRate);
  state.counters["weight_BW"] =
      benchmark::Counter(decode_bytes(m.model.config) * steps, benchmark::Counter::kIsRate,
                         benchmark::Counter::OneK::kIs1000);
  state.SetLabel(spec);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<int> threads = bench_threads();
  for (const char* preset : {"tiny-llama", "llama-124m", "llama-3.2-1b"}) {
    const std::string spec = std::string("synthetic:") + preset;
    auto* b = benchmark::RegisterBenchmark((std::string("decode_step/") + preset).c_str(),
                                           bm_decode_step, spec);
    b->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();
    for (int t : threads) b->Arg(t);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
