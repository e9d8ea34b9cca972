// The host work of turning one logits row into tokens, which the decoding loops do for every
// row beside the forward pass: argmax (greedy tokens and verification), softmax at temperature
// 1 and a draw from it (sampled tokens and verification), and top_tokens(row, 64), the
// candidate list SSD's draft takes for every drafted and branch token
// (ssd/saguaro_drafter.cpp). Each on two kinds of rows:
//   model  - every position's logits of a synthetic model's forward pass over a 64-token prompt;
//   random - as many rows of iid uniform floats.
// One iteration is one row, the rows taken in turn (64 of them: 8 MB at a 32k vocabulary), so
// each comes from the last-level cache, as the rows of a cache build do. `ssd-bench
// characterize` times the same calls the same way (model "host" in /forward).
//
// Models: SSD_BENCH_MODELS, comma-separated presets (default llama-12m,llama-124m).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/run_benchmarks.h"
#include "harness/backend_select.h"
#include "model/model.h"
#include "model/weights.h"
#include "ssd/saguaro_sampling.h"
#include "ssd/sampling.h"

namespace {

constexpr int kListLength = 64;  // the draft's candidate list (ssd/saguaro_drafter.h)
constexpr int kRows = 64;        // logits rows per model

std::vector<std::string> bench_models() {
  const char* env = std::getenv("SSD_BENCH_MODELS");
  std::stringstream list(env ? env : "llama-12m,llama-124m");
  std::vector<std::string> items;
  for (std::string item; std::getline(list, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

// Every position's logits of a forward pass over a kRows-token prompt.
std::vector<float> model_logits(const std::string& preset, int& vocab) {
  std::unique_ptr<ssd::WeightSource> source = ssd::open_weight_source("synthetic:" + preset, 0);
  std::unique_ptr<ssd::Backend> backend =
      ssd::make_backend("cpu", 1, "invariant", "f32", "").backend;
  ssd::Model model =
      ssd::load_model(*source, *backend, {}, nullptr,
                      backend->weight_storage(ssd::resolve_weight_dtype("auto", *source)));
  vocab = model.config.vocab_size;
  ssd::KVCache cache = ssd::create_kv_cache(model, 1, kRows);
  std::vector<int32_t> prompt(kRows);
  for (int i = 0; i < kRows; ++i) prompt[size_t(i)] = int32_t((7919LL * i + 3) % vocab);
  ssd::ForwardBatch batch;
  batch.add_causal(0, 0, prompt, ssd::ForwardBatch::Logits::All);
  ssd::Activations acts;
  std::vector<float> logits;
  ssd::forward(model, cache, batch, acts, logits);
  ssd::release_activations(acts, *backend);
  ssd::release_kv_cache(cache, *backend);
  ssd::release_model(model);
  return logits;
}

std::vector<float> random_rows(int vocab) {
  std::vector<float> rows(size_t(kRows) * size_t(vocab));
  std::mt19937 gen(17);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& v : rows) v = uniform(gen);
  return rows;
}

template <typename Select>
void bm_rows(benchmark::State& state, const std::vector<float>* rows, int vocab, Select select) {
  size_t row = 0;
  for (auto _ : state) {
    auto selected = select(rows->data() + row * size_t(vocab), vocab);
    benchmark::DoNotOptimize(selected);
    row = (row + 1) % kRows;
  }
}

int32_t argmax_row(const float* row, int vocab) {
  return ssd::argmax(row, vocab);
}

int32_t sample_row(const float* row, int vocab) {
  thread_local std::vector<float> probs;
  ssd::softmax(row, vocab, 1.0, probs);
  return ssd::sample_from(probs, 0.37);
}

std::vector<int32_t> candidates_row(const float* row, int vocab) {
  return ssd::top_tokens(row, vocab, kListLength, -1);
}

}  // namespace

int main(int argc, char** argv) {
  static std::vector<std::vector<float>> data;  // outlives the registered benchmarks
  const std::vector<std::string> models = bench_models();
  data.reserve(2 * models.size());
  for (const std::string& preset : models) {
    int vocab = 0;
    const std::vector<float>* model = &data.emplace_back(model_logits(preset, vocab));
    const std::vector<float>* random = &data.emplace_back(random_rows(vocab));
    for (const auto& [kind, rows] : {std::pair{"model", model}, std::pair{"random", random}}) {
      const std::string suffix = "/" + preset + "/" + kind;
      benchmark::RegisterBenchmark(("argmax" + suffix).c_str(), bm_rows<decltype(&argmax_row)>,
                                   rows, vocab, &argmax_row)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("sample" + suffix).c_str(), bm_rows<decltype(&sample_row)>,
                                   rows, vocab, &sample_row)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("candidates" + suffix).c_str(),
                                   bm_rows<decltype(&candidates_row)>, rows, vocab, &candidates_row)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return run_registered_benchmarks(argc, argv);
}
