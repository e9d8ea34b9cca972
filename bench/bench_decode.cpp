// One AR decode step (batch 1, one token) of synthetic models, after a prefill of `context`
// tokens; with SSD_BENCH_ROWS, steps of several tokens of the one sequence as well (K + 1 = 5 is
// SD's verification of K = 4 drafted tokens, logits for every row). The cache length is never
// committed, so every iteration rewrites the slot after the context and sees the same context: the
// step does not get slower as the benchmark runs.
//
// Counters: tok_s (steps per second, whatever their rows) and weight_BW (bytes one decode step must
// read: every weight in the format it is kept in -- the benchmark's weight dtype on cpu, bf16 on
// cuda -- except the unread rows of an untied embedding table, per second). Compare weight_BW with
// the read bandwidth that `ssd-bench characterize` measures. Steps of several rows also report
// ar_steps, their cost in AR steps: every iteration times a one-row step just before the step of
// `rows`, and ar_steps is the median of the iterations' ratios (ar_ms: the one-row steps' median).
// So the two sides of a ratio are a step apart, not a benchmark apart: on a shared Zen 5 host whose
// speed moved 1.3x within minutes, llama-3.2-1b bf16's 5-row step measured 0.97-1.18 AR steps in
// seven runs timed one benchmark after the other, and 1.153-1.157 in three repetitions this way.
// The Time column is the step of `rows` alone (manual time), as before.
//
// Weight dtypes: SSD_BENCH_DTYPES, a comma-separated list of f32, bf16, auto (default f32,bf16;
// bf16 alone on cuda, which keeps every weight in bf16, and with SSD_BENCH_COMPUTE=bf16 or amx),
// as ssd-bench's --weight-dtype.
//
// Models: tiny-llama, llama-124m (0.5 GB fp32) and llama-3.2-1b (1.24B parameters, 4.9 GB
// fp32). Synthetic weights are generated on first use of each model, which for llama-3.2-1b
// takes tens of seconds (not timed); --benchmark_filter='tiny|124m' skips it.
// SSD_BENCH_MODELS replaces the list (comma-separated presets, e.g. llama-3.1-8b on a GPU).
//
// Backend: SSD_BENCH_BACKEND=cpu (default), cuda or auto, as ssd-bench's --backend; GEMM:
// SSD_BENCH_GEMM (default invariant), as its --gemm (e.g. invariant-tc on cuda); compute:
// SSD_BENCH_COMPUTE (default f32), as its --compute (bf16: the CPU's vdpbf16ps GEMM; amx: its
// AMX tiles).
// Threads: SSD_BENCH_THREADS, a comma-separated list (default 1), e.g. SSD_BENCH_THREADS=1,2.
// Each thread count loads its own copy of the model (one model is held at a time).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/run_benchmarks.h"
#include "harness/backend_select.h"
#include "model/model.h"
#include "model/weights.h"

namespace {

// The comma-separated items of environment variable `name`, or of `fallback` when it is unset.
std::vector<std::string> env_list(const char* name, const char* fallback) {
  const char* env = std::getenv(name);
  std::stringstream list(env ? env : fallback);
  std::vector<std::string> items;
  for (std::string item; std::getline(list, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

// The positive integers of env_list(name, ...); `fallback` alone when it holds none.
std::vector<int> env_positive_ints(const char* name, int fallback) {
  std::vector<int> values;
  for (const std::string& item : env_list(name, ""))
    if (const int v = std::atoi(item.c_str()); v > 0) values.push_back(v);
  if (values.empty()) values.push_back(fallback);
  return values;
}

// Threads per backend: SSD_BENCH_THREADS (default 1).
std::vector<int> bench_threads() {
  return env_positive_ints("SSD_BENCH_THREADS", 1);
}

std::vector<std::string> bench_models() {
  return env_list("SSD_BENCH_MODELS", "tiny-llama,llama-124m,llama-3.2-1b");
}

// Context lengths (tokens in the KV cache) at which the step is timed: SSD_BENCH_CONTEXTS,
// comma-separated (default 16). Longer contexts show what attention adds per step.
std::vector<int> bench_contexts() {
  return env_positive_ints("SSD_BENCH_CONTEXTS", 16);
}

// Tokens of the one sequence each step decodes, causally: SSD_BENCH_ROWS, comma-separated
// (default 1, an AR step); K + 1 rows are SD's verification of K drafted tokens.
std::vector<int> bench_rows() {
  return env_positive_ints("SSD_BENCH_ROWS", 1);
}

std::string bench_backend() {
  const char* env = std::getenv("SSD_BENCH_BACKEND");
  return env ? env : "cpu";
}

std::string bench_gemm() {
  const char* env = std::getenv("SSD_BENCH_GEMM");
  return env ? env : "invariant";
}

std::string bench_compute() {
  const char* env = std::getenv("SSD_BENCH_COMPUTE");
  return env ? env : "f32";
}

// Bytes one decode step reads: all weights but the embedding rows of other tokens (a tied
// table is the LM head and is read whole), at the bytes per parameter the backend stores.
double decode_bytes(const ssd::Model& m) {
  const ssd::ModelConfig& c = m.config;
  const double per_param = double(ssd::dtype_size(m.weights.dtype));
  int64_t params = c.parameter_count();
  if (!c.tie_word_embeddings) params -= int64_t(c.vocab_size - 1) * c.hidden_size;
  return double(params) * per_param;
}

// The loaded model and its prefilled cache; one model at a time, replaced when another is asked
// for; a new context length keeps the model and prefills a new cache.
struct Loaded {
  std::string spec;
  std::string dtype;
  int threads = 0;
  int context = 0;
  int rows = 0;
  std::unique_ptr<ssd::Backend> backend;
  ssd::Model model;
  ssd::KVCache cache;
  ssd::Activations acts;
  std::vector<float> logits;
  int32_t next_token = 0;

  ~Loaded() { release(); }
  void release_cache() {
    if (!backend) return;
    ssd::release_activations(acts, *backend);
    ssd::release_kv_cache(cache, *backend);
    context = 0;
  }
  void release() {
    if (!backend) return;
    release_cache();
    ssd::release_model(model);
    backend.reset();
  }
};

Loaded& load(const std::string& spec, const std::string& dtype, int threads, int context,
             int rows) {
  static Loaded loaded;
  if (loaded.backend && loaded.spec == spec && loaded.dtype == dtype && loaded.threads == threads) {
    if (loaded.context == context && loaded.rows == rows) return loaded;
    loaded.release_cache();
  } else {
    loaded.release();
    std::unique_ptr<ssd::WeightSource> source = ssd::open_weight_source(spec, 0);
    loaded.spec = spec;
    loaded.dtype = dtype;
    loaded.threads = threads;
    loaded.backend =
        ssd::make_backend(bench_backend(), threads, bench_gemm(), bench_compute(), "").backend;
    loaded.model =
        ssd::load_model(*source, *loaded.backend, {}, nullptr,
                        loaded.backend->weight_storage(ssd::resolve_weight_dtype(dtype, *source)));
  }
  loaded.context = context;
  loaded.rows = rows;
  // As a run keeps its steps batch-invariant (a CUDA step past 64 rows too; its prefill above).
  loaded.backend->keep_batch_invariant_up_to(rows);
  loaded.cache = ssd::create_kv_cache(loaded.model, 1, context + rows);
  const int vocab = loaded.model.config.vocab_size;
  std::vector<int32_t> prompt(context);
  for (int i = 0; i < context; ++i) prompt[i] = int32_t((7919LL * i + 3) % vocab);
  ssd::ForwardBatch prefill;
  prefill.add_causal(0, 0, prompt, ssd::ForwardBatch::Logits::Last);
  ssd::forward(loaded.model, loaded.cache, prefill, loaded.acts, loaded.logits);
  loaded.cache.length[0] = context;
  loaded.next_token =
      int32_t(std::max_element(loaded.logits.begin(), loaded.logits.end()) - loaded.logits.begin());
  return loaded;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bm_decode_step(benchmark::State& state, const std::string& spec, const std::string& dtype) {
  const int rows = int(state.range(2));
  Loaded& m = load(spec, dtype, int(state.range(0)), int(state.range(1)), rows);
  ssd::ForwardBatch batch;
  batch.add_causal(0, m.cache.length[0], std::vector<int32_t>(size_t(rows), m.next_token),
                   ssd::ForwardBatch::Logits::All);
  // The one-row step beside it (ar_steps): the first of the rows, at the same place in the cache.
  ssd::ForwardBatch ar_batch;
  ar_batch.add_causal(0, m.cache.length[0], {m.next_token}, ssd::ForwardBatch::Logits::All);
  ssd::forward(m.model, m.cache, batch, m.acts, m.logits);  // warm-up
  // forward() returns the logits on the host, so each step is complete when it returns.
  const auto timed_step = [&m](const ssd::ForwardBatch& b) {
    const auto start = std::chrono::steady_clock::now();
    ssd::forward(m.model, m.cache, b, m.acts, m.logits);
    benchmark::DoNotOptimize(m.logits.data());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<double> ar_seconds, ratios;
  for (auto _ : state) {
    if (rows > 1) {
      state.PauseTiming();  // outside the manual time anyway; keeps the CPU time column honest
      ar_seconds.push_back(timed_step(ar_batch));
      state.ResumeTiming();
    }
    const double seconds = timed_step(batch);
    state.SetIterationTime(seconds);
    if (rows > 1) ratios.push_back(seconds / ar_seconds.back());
  }
  if (rows > 1) {
    state.counters["ar_steps"] = median(ratios);
    state.counters["ar_ms"] = median(ar_seconds) * 1e3;
  }
  const double steps = double(state.iterations());
  state.counters["tok_s"] = benchmark::Counter(steps, benchmark::Counter::kIsRate);
  state.counters["weight_BW"] =
      benchmark::Counter(decode_bytes(m.model) * steps, benchmark::Counter::kIsRate,
                         benchmark::Counter::OneK::kIs1000);
  state.SetLabel(spec + " " + ssd::dtype_name(m.model.weights.dtype) + " on " +
                 m.backend->device_name() + ", --gemm " + bench_gemm() + ", compute " +
                 m.backend->compute_for(m.model.weights.dtype));
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<int> threads = bench_threads();
  const std::vector<int> contexts = bench_contexts();
  const std::vector<int> rows = bench_rows();
  if (const int longest = *std::max_element(contexts.begin(), contexts.end()); longest > 1 << 16) {
    std::fprintf(stderr, "bench_decode: SSD_BENCH_CONTEXTS: %d tokens is more than 65536\n",
                 longest);
    return 1;
  }
  // The CUDA backend keeps every weight in bf16 whatever the dtype asked for, so its default is
  // bf16 alone: f32 would time the same steps again (and generate an 8B model twice). bf16 and
  // amx compute refuse fp32 weights, so their default is bf16 alone too.
  std::string default_dtypes = "f32,bf16";
  try {
    if (ssd::make_backend(bench_backend(), threads[0], bench_gemm(), bench_compute(), "")
                .backend->name() == "cuda" ||
        bench_compute() == "bf16" || bench_compute() == "amx")
      default_dtypes = "bf16";
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "bench_decode: SSD_BENCH_BACKEND=%s SSD_BENCH_GEMM=%s SSD_BENCH_COMPUTE=%s: %s\n",
                 bench_backend().c_str(), bench_gemm().c_str(), bench_compute().c_str(), e.what());
    return 1;
  }
  for (const std::string& preset : bench_models()) {
    for (const std::string& dtype : env_list("SSD_BENCH_DTYPES", default_dtypes.c_str())) {
      const std::string spec = "synthetic:" + preset;
      auto* b = benchmark::RegisterBenchmark(("decode_step/" + preset + "/" + dtype).c_str(),
                                             bm_decode_step, spec, dtype);
      b->ArgNames({"threads", "context", "rows"})->Unit(benchmark::kMillisecond)->UseManualTime();
      for (int t : threads)
        for (int c : contexts)
          for (int r : rows) b->Args({t, c, r});
    }
  }
  return run_registered_benchmarks(argc, argv);
}
