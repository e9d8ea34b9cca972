// Properties of forward() that speculative decoding relies on, checked bit for bit on synthetic
// tiny models: branch (tree) masks equal running each branch alone (on every backend this build
// has; the GPU's case skips, with the reason, where none is visible), batching and multi-token
// verification do not change a row's logits, KV rollback forgets rejected tokens, and bad
// batches throw instead of crashing.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/weights.h"
#include "tests/bitwise_compare.h"
#include "tests/test_support.h"
#if defined(SSD_HAVE_CUDA)
#include "kernels/cuda/cuda_backend.h"
#include "tests/cuda_test_support.h"
#endif

namespace ssd {
namespace {

using Logits = ForwardBatch::Logits;
using test::expect_bitwise_equal;
using test::row_of;
using Tokens = std::vector<int32_t>;

struct Loaded {
  std::unique_ptr<WeightSource> source;
  std::unique_ptr<Backend> backend;
  Model model;
  // storage BF16 with a backend whose compute_for(BF16) is "bf16": the weights multiplied in bf16.
  Loaded(const std::string& preset, std::unique_ptr<Backend> be, DType storage = DType::F32)
      : source(open_weight_source("synthetic:" + preset, 5)),
        backend(std::move(be)),
        model(load_model(*source, *backend, {}, nullptr, storage)) {}
  Loaded(const std::string& preset, int threads)
      : Loaded(preset, std::make_unique<CpuBackend>(threads)) {}
  // bf16 weights under --compute bf16 and amx (CpuCompute::BF16, Amx).
  Loaded(const std::string& preset, int threads, CpuCompute compute)
      : Loaded(preset, std::make_unique<CpuBackend>(threads, GemmKind::Invariant, compute),
               compute == CpuCompute::F32 ? DType::F32 : DType::BF16) {}
  ~Loaded() { release_model(model); }
  int vocab() const { return model.config.vocab_size; }
};

// One KV cache and its activations (tests/test_support.h) over a Loaded model.
struct Session : test::ForwardSession {
  Session(Loaded& loaded, int sequences, int capacity)
      : ForwardSession(loaded.model, sequences, capacity) {}
};

const Tokens kPrefix = {1, 17, 200, 3, 45, 99, 250};  // P = 7
const Tokens kOther = {8, 9, 10, 11, 12};             // another sequence's prompt
// Four branches of different lengths; the last two share their first token, as sibling
// branches of a draft tree do.
const std::vector<Tokens> kBranches = {{11}, {12, 40}, {13, 41, 90}, {13, 77, 5}};
constexpr int kDepthMax = 3;

// SSD branch decoding: branches live in scratch slots past the committed prefix of sequence 1
// (sequence 0 holds an unrelated prompt, so per-sequence addressing matters), each token at
// position P + depth, seeing the prefix plus its own path. Either every depth in one forward
// call, or one depth per call as the drafter extends its branches step by step.
void check_branches(const std::string& preset, std::unique_ptr<Backend> backend, bool one_call,
                    DType storage) {
  Loaded m(preset, std::move(backend), storage);
  const int vocab = m.vocab(), P = int(kPrefix.size());
  const int capacity = P + int(kBranches.size()) * kDepthMax + 4;
  const auto slot = [&](size_t b, int d) { return P + int(b) * kDepthMax + d; };

  Session tree(m, 2, capacity);
  ForwardBatch prefill;
  prefill.add_causal(0, 0, kOther, Logits::None);
  prefill.add_causal(1, 0, kPrefix, Logits::Last);
  tree.run(prefill);
  tree.cache.length = {int(kOther.size()), P};

  std::vector<std::vector<std::vector<float>>> got(kBranches.size());
  const auto add_row = [&](ForwardBatch& batch, size_t b, int d) {
    Tokens extra;
    for (int e = 0; e <= d; ++e) extra.push_back(slot(b, e));
    batch.add_token(1, kBranches[b][d], P + d, slot(b, d), P, extra, true);
  };
  if (one_call) {
    ForwardBatch batch;
    std::vector<std::pair<size_t, int>> order;
    // Deepest rows first, so a row's path is written by rows later in the same call.
    for (int d = kDepthMax - 1; d >= 0; --d)
      for (size_t b = 0; b < kBranches.size(); ++b)
        if (d < int(kBranches[b].size())) {
          add_row(batch, b, d);
          order.emplace_back(b, d);
        }
    const std::vector<float> logits = tree.run(batch);
    for (auto& b : got) b.resize(kDepthMax);
    for (size_t i = 0; i < order.size(); ++i)
      got[order[i].first][order[i].second] = row_of(logits, int(i), vocab);
  } else {
    for (int d = 0; d < kDepthMax; ++d) {
      ForwardBatch batch;
      std::vector<size_t> which;
      for (size_t b = 0; b < kBranches.size(); ++b)
        if (d < int(kBranches[b].size())) {
          add_row(batch, b, d);
          which.push_back(b);
        }
      const std::vector<float> logits = tree.run(batch);
      for (size_t i = 0; i < which.size(); ++i)
        got[which[i]].push_back(row_of(logits, int(i), vocab));
    }
  }

  for (size_t b = 0; b < kBranches.size(); ++b) {
    Session alone(m, 1, capacity);
    alone.append(0, kPrefix);
    for (size_t d = 0; d < kBranches[b].size(); ++d)
      expect_bitwise_equal(got[b][d], alone.append(0, {kBranches[b][d]}),
                           preset + " branch " + std::to_string(b) + " depth " + std::to_string(d) +
                               (one_call ? " (one call)" : " (stepwise)"));
  }

  // Accept branch 2: move its K/V from scratch into the committed region, then keep decoding;
  // this must equal a cache that decoded prefix + branch causally.
  const size_t accepted = 2;
  const int n = int(kBranches[accepted].size());
  for (size_t l = 0; l < tree.cache.k.size(); ++l)
    m.backend->kv_move(tree.cache.k[l], tree.cache.v[l], tree.cache.layout, 1, slot(accepted, 0), 1,
                       P, n);
  tree.cache.length[1] = P + n;
  Session causal(m, 1, capacity);
  causal.append(0, kPrefix);
  causal.append(0, kBranches[accepted]);
  for (int32_t token : {60, 61})
    expect_bitwise_equal(tree.append(1, {token}), causal.append(0, {token}),
                         preset + " after accepting a branch, token " + std::to_string(token));
}

// Branch decoding on each backend this build has, by name: "cpu" always, "cpu_bf16" (bf16
// weights under --compute bf16; skipped without AVX512_BF16), "cuda" in CUDA builds.
class ForwardBranches : public ::testing::TestWithParam<std::string> {
 public:
  static std::vector<std::string> backends() {
#if defined(SSD_HAVE_CUDA)
    return {"cpu", "cpu_bf16", "cpu_amx", "cuda"};
#else
    return {"cpu", "cpu_bf16", "cpu_amx"};
#endif
  }

 protected:
  void SetUp() override {
    if (GetParam() == "cpu_bf16" && !cpu_has_bf16_dot())
      GTEST_SKIP() << "no AVX512_BF16 on this CPU or in this build";
    if (GetParam() == "cpu_amx" && !cpu_has_amx_bf16())
      GTEST_SKIP() << "no AMX-BF16 tiles on this CPU, in this build or from this OS";
#if defined(SSD_HAVE_CUDA)
    if (GetParam() == "cuda")
      if (const std::string why = cuda_test::no_gpu_reason(); !why.empty())
        GTEST_SKIP() << "no GPU visible: " << why;
#endif
  }
  void check(const std::string& preset, bool one_call) {
    check_branches(preset, new_backend(), one_call,
                   GetParam() == "cpu_bf16" || GetParam() == "cpu_amx" ? DType::BF16 : DType::F32);
  }

 private:
  std::unique_ptr<Backend> new_backend() const {
#if defined(SSD_HAVE_CUDA)
    // GPU 0 with the default GEMM choice: no call here has more than 64 rows, so every one
    // takes the batch-invariant kernel.
    if (GetParam() == "cuda") return std::make_unique<CudaBackend>(0);
#endif
    if (GetParam() == "cpu_bf16")
      return std::make_unique<CpuBackend>(2, GemmKind::Invariant, CpuCompute::BF16);
    if (GetParam() == "cpu_amx")
      return std::make_unique<CpuBackend>(2, GemmKind::Invariant, CpuCompute::Amx);
    return std::make_unique<CpuBackend>(2);
  }
};

TEST_P(ForwardBranches, LlamaOneCallEqualsSeparateBranches) {
  check("tiny-llama", true);
}
TEST_P(ForwardBranches, LlamaStepwiseEqualsSeparateBranches) {
  check("tiny-llama", false);
}
TEST_P(ForwardBranches, Qwen3OneCallEqualsSeparateBranches) {
  check("tiny-qwen3", true);
}
TEST_P(ForwardBranches, Qwen3StepwiseEqualsSeparateBranches) {
  check("tiny-qwen3", false);
}
TEST_P(ForwardBranches, Qwen2OneCallEqualsSeparateBranches) {
  check("tiny-qwen2", true);
}
INSTANTIATE_TEST_SUITE_P(Backends, ForwardBranches,
                         ::testing::ValuesIn(ForwardBranches::backends()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// A sequence decoded alone gives the same bits as in a batch of three (prefilled together,
// with different prompt lengths, then decoded one token per sequence per call).
void check_batch_invariance(const std::string& preset, CpuCompute compute = CpuCompute::F32) {
  Loaded m(preset, 2, compute);
  const int vocab = m.vocab();
  const std::vector<Tokens> prompts = {{4, 5, 6}, {1, 17, 200, 3, 45, 99, 250, 31, 2}, {77}};
  const std::vector<Tokens> steps = {{20, 21, 22}, {30, 31, 32}, {40, 41, 42}, {50, 51, 52}};

  Session batched(m, 3, 32);
  ForwardBatch prefill;
  for (int s = 0; s < 3; ++s) prefill.add_causal(s, 0, prompts[s], Logits::Last);
  const std::vector<float> prefill_logits = batched.run(prefill);
  for (int s = 0; s < 3; ++s) batched.cache.length[s] = int(prompts[s].size());

  for (int s = 0; s < 3; ++s) {
    Session alone(m, 1, 32);
    expect_bitwise_equal(row_of(prefill_logits, s, vocab), alone.append(0, prompts[s]),
                         preset + " prefill of sequence " + std::to_string(s));
  }

  Session alone(m, 1, 32);
  alone.append(0, prompts[1]);
  for (size_t i = 0; i < steps.size(); ++i) {
    ForwardBatch step;
    for (int s = 0; s < 3; ++s)
      step.add_causal(s, batched.cache.length[s], {steps[i][s]}, Logits::Last);
    const std::vector<float> logits = batched.run(step);
    for (int s = 0; s < 3; ++s) batched.cache.length[s] += 1;
    expect_bitwise_equal(row_of(logits, 1, vocab), alone.append(0, {steps[i][1]}),
                         preset + " decode step " + std::to_string(i));
  }
}

TEST(ForwardBatchInvariance, LlamaAloneEqualsBatched) {
  check_batch_invariance("tiny-llama");
}
TEST(ForwardBatchInvariance, Qwen3AloneEqualsBatched) {
  check_batch_invariance("tiny-qwen3");
}
TEST(ForwardBatchInvariance, Qwen2AloneEqualsBatched) {
  check_batch_invariance("tiny-qwen2");
}

// A (K+1)-token causal verify call gives each position the same bits as K+1 one-token decode
// calls: the property that makes greedy SD produce exactly the AR output.
void check_verify(const std::string& preset, CpuCompute compute = CpuCompute::F32) {
  Loaded m(preset, 2, compute);
  const int vocab = m.vocab();
  const Tokens draft = {5, 250, 7, 7, 130};  // K = 4, plus the bonus position
  Session verify(m, 1, 32), ar(m, 1, 32);
  verify.append(0, kPrefix);
  ar.append(0, kPrefix);
  ForwardBatch batch;
  batch.add_causal(0, verify.cache.length[0], draft, Logits::All);
  const std::vector<float> logits = verify.run(batch);
  ASSERT_EQ(logits.size(), draft.size() * size_t(vocab));
  for (size_t i = 0; i < draft.size(); ++i)
    expect_bitwise_equal(row_of(logits, int(i), vocab), ar.append(0, {draft[i]}),
                         preset + " verify position " + std::to_string(i));
}

TEST(ForwardBatchInvariance, LlamaVerifyEqualsStepwise) {
  check_verify("tiny-llama");
}
TEST(ForwardBatchInvariance, Qwen3VerifyEqualsStepwise) {
  check_verify("tiny-qwen3");
}
TEST(ForwardBatchInvariance, Qwen2VerifyEqualsStepwise) {
  check_verify("tiny-qwen2");
}
TEST(ForwardBatchInvariance, LlamaTiedVerifyEqualsStepwise) {
  check_verify("tiny-llama-tied");
}

// The same under --compute bf16: rounding x to bf16 is per row, and the bf16 GEMM sums each
// element in one order for any row count, so batching still changes no bit.
class ForwardBf16Compute : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has_bf16_dot()) GTEST_SKIP() << "no AVX512_BF16 on this CPU or in this build";
  }
};
TEST_F(ForwardBf16Compute, AloneEqualsBatched) {
  for (const char* preset : {"tiny-llama", "tiny-qwen3", "tiny-qwen2"})
    check_batch_invariance(preset, CpuCompute::BF16);
}
TEST_F(ForwardBf16Compute, VerifyEqualsStepwise) {
  for (const char* preset : {"tiny-llama", "tiny-qwen3", "tiny-qwen2", "tiny-llama-tied"})
    check_verify(preset, CpuCompute::BF16);
}

// And under --compute amx: each element summed by TDPBF16PS in k order, whichever rows share a
// tile.
class ForwardAmxCompute : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has_amx_bf16())
      GTEST_SKIP() << "no AMX-BF16 tiles on this CPU, in this build or from this OS";
  }
};
TEST_F(ForwardAmxCompute, AloneEqualsBatched) {
  for (const char* preset : {"tiny-llama", "tiny-qwen3", "tiny-qwen2"})
    check_batch_invariance(preset, CpuCompute::Amx);
}
TEST_F(ForwardAmxCompute, VerifyEqualsStepwise) {
  for (const char* preset : {"tiny-llama", "tiny-qwen3", "tiny-qwen2", "tiny-llama-tied"})
    check_verify(preset, CpuCompute::Amx);
}

TEST(ForwardRollback, RolledBackTokensAreForgotten) {
  for (const std::string preset : {"tiny-llama", "tiny-qwen3"}) {
    Loaded m(preset, 1);
    Session rolled(m, 1, 32), fresh(m, 1, 32);
    rolled.append(0, kPrefix);
    rolled.append(0, {100, 101, 102});
    rolled.cache.length[0] -= 2;  // keep 100, reject 101 and 102
    fresh.append(0, kPrefix);
    fresh.append(0, {100});
    for (int32_t token : {7, 8, 9})
      expect_bitwise_equal(rolled.append(0, {token}), fresh.append(0, {token}),
                           preset + " after rollback, token " + std::to_string(token));
  }
}

TEST(ForwardRollback, MultiTokenAppendAfterRollback) {
  Loaded m("tiny-llama", 1);
  Session rolled(m, 1, 32), fresh(m, 1, 32);
  rolled.append(0, kPrefix);
  rolled.append(0, {100, 101, 102, 103});
  rolled.cache.length[0] -= 3;
  fresh.append(0, kPrefix);
  fresh.append(0, {100});
  expect_bitwise_equal(rolled.append(0, {40, 41, 42}), fresh.append(0, {40, 41, 42}),
                       "three tokens after rolling back three");
}

// Invalid batches throw (std::out_of_range / std::invalid_argument) before touching the cache,
// and the model keeps working afterwards.
class ForwardErrors : public ::testing::Test {
 protected:
  Loaded m{"tiny-llama", 1};
  Session s{m, 2, 16};

  static ForwardBatch one(int seq, int32_t token, int slot, int prefix, const Tokens& extra) {
    ForwardBatch b;
    b.add_token(seq, token, slot, slot, prefix, extra, true);
    return b;
  }
  void expect_throws(const ForwardBatch& batch, const std::string& what) {
    EXPECT_THROW(s.run(batch), std::exception) << what;
  }
  void TearDown() override {
    Session fresh(m, 1, 16);
    expect_bitwise_equal(s.append(0, {3, 4}), fresh.append(0, {3, 4}), "after errors");
  }
};

TEST_F(ForwardErrors, RejectsBadTokensAndSlots) {
  expect_throws(one(0, m.vocab(), 0, 1, {}), "token == vocab");
  expect_throws(one(0, -1, 0, 1, {}), "negative token");
  expect_throws(one(0, 3, 16, 16, {}), "slot == capacity");
  expect_throws(one(0, 3, -1, 0, {}), "negative slot");
  expect_throws(one(2, 3, 0, 1, {}), "sequence == sequences");
  expect_throws(one(-1, 3, 0, 1, {}), "negative sequence");
  expect_throws(one(0, 3, 0, 17, {}), "prefix > capacity");
  ForwardBatch ragged = one(0, 3, 0, 1, {});
  ragged.position.pop_back();
  expect_throws(ragged, "arrays of different lengths");
  ForwardBatch bad_logit = one(0, 3, 0, 1, {});
  bad_logit.logit_rows = {1};
  expect_throws(bad_logit, "logit row out of range");
}

// The explicit visible slots of branch decoding are cache slots too.
TEST_F(ForwardErrors, RejectsBadExtraSlots) {
  expect_throws(one(0, 3, 5, 5, {5, 16}), "extra slot == capacity");
  expect_throws(one(0, 3, 5, 5, {-1, 5}), "negative extra slot");
  ForwardBatch past_end = one(0, 3, 0, 1, {});
  past_end.extra_begin.back() = 4;  // past the end of extra_slots
  expect_throws(past_end, "extra_begin past the end of extra_slots");
  ForwardBatch decreasing = one(0, 3, 5, 5, {5});
  decreasing.extra_begin.front() = 1;  // {1, 0}: a negative count
  expect_throws(decreasing, "decreasing extra_begin");
}

}  // namespace
}  // namespace ssd
