// CUDA graphs (CudaBackend::run_recorded, label `gpu`): a forward pass replayed from a captured
// graph gives the logits of the same pass run op by op, bit for bit, for decode steps whose
// context grows across attention splits, verification windows, SSD-style branch batches, two
// KV caches on one backend and activations that grow; and the graphs are actually used.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "model/model.h"
#include "model/weights.h"
#include "tests/cuda_test_support.h"
#include "tests/test_support.h"

namespace ssd {
namespace {

using namespace cuda_test;

// One model on one CUDA backend, graphs on or off.
struct Engine {
  std::unique_ptr<WeightSource> source;
  CudaBackend* cuda = nullptr;
  std::unique_ptr<Backend> backend;
  Model model;
  Engine(const std::string& preset, bool graphs)
      : source(open_weight_source("synthetic:" + preset, 5)) {
    auto be = std::make_unique<CudaBackend>(0);
    be->set_graphs(graphs);
    cuda = be.get();
    backend = std::move(be);
    model = load_model(*source, *backend);
  }
  ~Engine() { release_model(model); }
};

using Cache = test::ForwardSession;  // one KV cache and its activations

// The same script of forward passes on both engines, every pass's logits compared.
struct Pair {
  Engine graphs, op_by_op;
  Cache g, o;
  Pair(const std::string& preset, int sequences, int capacity)
      : graphs(preset, true),
        op_by_op(preset, false),
        g(graphs.model, sequences, capacity),
        o(op_by_op.model, sequences, capacity) {}
  void run(const ForwardBatch& batch, const std::string& what) {
    expect_bitwise_equal(g.run(batch), o.run(batch), what);
  }
};

// Decode steps: the context crosses 32, 64 and 128 cache entries (attention splits 1 -> 8).
void check_decode(const std::string& preset) {
  Pair p(preset, 1, 192);
  ForwardBatch prompt;
  prompt.add_causal(0, 0, {1, 17, 200, 3, 45, 99, 250}, ForwardBatch::Logits::Last);
  p.run(prompt, preset + " prompt");
  int length = 7;
  for (int step = 0; step < 150; ++step) {
    ForwardBatch b;
    b.add_causal(0, length, {int32_t((step * 37 + 11) % 250)}, ForwardBatch::Logits::Last);
    p.run(b, preset + " decode step " + std::to_string(step));
    ++length;
  }
  const CudaBackend::GraphStats s = p.graphs.cuda->graph_stats();
  EXPECT_GE(s.captures, 1);
  // Graphs are replayed for most steps: a new capture only where the split count doubles (4
  // shapes, each run once op by op and captured at its second step: 142 replays).
  EXPECT_GE(s.replays, 130) << "captures " << s.captures << ", op by op " << s.op_by_op;
  EXPECT_EQ(p.op_by_op.cuda->graph_stats().replays, 0);
}

TEST(CudaGraphs, DecodeStepsEqualOpByOp) {
  if (!no_gpu_reason().empty()) GTEST_SKIP() << "no GPU visible: " << no_gpu_reason();
  check_decode("tiny-llama");
  check_decode("tiny-qwen3");
}

// Verification windows of 5 rows and branch batches (explicit extra slots, as SSD's cache
// builder sends), repeated with new tokens; two caches take turns on one backend.
TEST(CudaGraphs, VerifyAndBranchBatchesEqualOpByOp) {
  if (!no_gpu_reason().empty()) GTEST_SKIP() << "no GPU visible: " << no_gpu_reason();
  Pair p("tiny-llama", 3, 96);
  Cache g2(p.graphs.model, 2, 64), o2(p.op_by_op.model, 2, 64);
  int length[3] = {0, 0, 0};
  ForwardBatch prompt;
  for (int s = 0; s < 3; ++s) {
    prompt.add_causal(s, 0, {int32_t(4 + s), 5, 6, int32_t(70 + s)}, ForwardBatch::Logits::Last);
    length[s] = 4;
  }
  p.run(prompt, "prompt");
  ForwardBatch other_prompt;
  other_prompt.add_causal(1, 0, {9, 8, 7}, ForwardBatch::Logits::All);
  expect_bitwise_equal(g2.run(other_prompt), o2.run(other_prompt), "second cache prompt");
  for (int round = 0; round < 6; ++round) {
    const std::string r = " round " + std::to_string(round);
    // Verification: 5 rows per sequence, 3 sequences.
    ForwardBatch verify;
    for (int s = 0; s < 3; ++s) {
      std::vector<int32_t> window;
      for (int i = 0; i < 5; ++i) window.push_back(int32_t((round * 31 + s * 7 + i * 3) % 250));
      verify.add_causal(s, length[s], window, ForwardBatch::Logits::All);
    }
    p.run(verify, "verify" + r);
    for (int s = 0; s < 3; ++s) length[s] += 2;  // two accepted: the rest is overwritten later
    // Branches: two candidates of two tokens after sequence 0's committed prefix, in scratch
    // slots past it (each sees the prefix and its own path).
    ForwardBatch branch;
    const int base = length[0] + 8;
    for (int c = 0; c < 2; ++c) {
      const int s0 = base + 2 * c;
      branch.add_token(0, int32_t(10 + c + round), length[0], s0, length[0], {s0}, true);
      branch.add_token(0, int32_t(20 + c + round), length[0] + 1, s0 + 1, length[0], {s0, s0 + 1},
                       true);
    }
    p.run(branch, "branch" + r);
    // The other cache, one decode step.
    ForwardBatch step;
    step.add_causal(1, 3 + round, {int32_t(100 + round)}, ForwardBatch::Logits::Last);
    expect_bitwise_equal(g2.run(step), o2.run(step), "second cache step" + r);
  }
  const CudaBackend::GraphStats s = p.graphs.cuda->graph_stats();
  EXPECT_GE(s.captures, 3) << "verify, branch and the second cache's step";
  EXPECT_GE(s.replays, 9);
}

// The first forward pass of a shape runs op by op, a prefill over cuBLAS always does, and a
// run with graphs off never records.
TEST(CudaGraphs, PrefillAndFirstSightingRunOpByOp) {
  if (!no_gpu_reason().empty()) GTEST_SKIP() << "no GPU visible: " << no_gpu_reason();
  Engine e("tiny-llama", true);
  Cache c(e.model, 1, 256);
  ForwardBatch prefill;
  std::vector<int32_t> tokens;
  for (int i = 0; i < 80; ++i) tokens.push_back(int32_t(i % 250));
  prefill.add_causal(0, 0, tokens, ForwardBatch::Logits::Last);  // 80 rows: cuBLAS
  c.run(prefill);
  EXPECT_EQ(e.cuda->graph_stats().op_by_op, 1);
  EXPECT_EQ(e.cuda->graph_stats().captures, 0);
  ForwardBatch step;
  step.add_causal(0, 80, {3}, ForwardBatch::Logits::Last);
  c.run(step);
  EXPECT_EQ(e.cuda->graph_stats().op_by_op, 2);
  EXPECT_EQ(e.cuda->graph_stats().captures, 0);
  ForwardBatch next;
  next.add_causal(0, 81, {4}, ForwardBatch::Logits::Last);
  c.run(next);
  EXPECT_EQ(e.cuda->graph_stats().captures, 1);
}

}  // namespace
}  // namespace ssd
