// Tensor parallelism over MPI, launched as `mpiexec -np 2`: a model sharded over two ranks
// (Megatron split, MpiAllReduce, driven through a ModelGroup) computes the same logits as the
// whole model on one rank, and stays batch-invariant across the all-reduce (a K+1-token
// verification call equals K+1 one-token decode calls bit for bit).
//
// Every rank runs every test in the same order; rank 0 leads the group and checks, the other
// rank serves (tests/mpi_test_main.cpp: only rank 0 prints gtest's report, other ranks their own
// failures; nonzero exit when any rank failed).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/mpi_all_reduce.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/weights.h"
#include "ssd/model_group.h"
#include "ssd/sampling.h"
#include "tests/bitwise_compare.h"

namespace ssd {
namespace {

using Logits = ForwardBatch::Logits;
using Tokens = std::vector<int32_t>;

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// This rank's shard of `preset` in a TP group over MPI_COMM_WORLD, driven by a ModelGroup.
struct Sharded {
  std::unique_ptr<WeightSource> source;
  CpuBackend backend{1};
  MpiAllReduce all_reduce{MPI_COMM_WORLD};
  Model model;
  std::unique_ptr<ModelGroup> group;
  explicit Sharded(const std::string& preset)
      : source(open_weight_source("synthetic:" + preset, 5)),
        model(load_model(*source, backend, Shard{world_rank(), world_size()}, &all_reduce)),
        group(std::make_unique<ModelGroup>(model, MPI_COMM_WORLD)) {}
  ~Sharded() {
    group.reset();
    release_model(model);
  }
};

// The whole model on this rank alone, with its own cache.
struct Single {
  std::unique_ptr<WeightSource> source;
  CpuBackend backend{1};
  Model model;
  KVCache cache;
  Activations acts;
  Single(const std::string& preset, int sequences, int capacity)
      : source(open_weight_source("synthetic:" + preset, 5)),
        model(load_model(*source, backend)),
        cache(create_kv_cache(model, sequences, capacity)) {}
  ~Single() {
    release_activations(acts, backend);
    release_kv_cache(cache, backend);
    release_model(model);
  }
  std::vector<float> run(const ForwardBatch& batch) {
    std::vector<float> logits;
    forward(model, cache, batch, acts, logits);
    return logits;
  }
};

// Releases the followers from serve() however the leader's test body returns.
struct StopOnExit {
  ModelGroup& group;
  ~StopOnExit() { group.stop(); }
};

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

Tokens prompt(int s, int length, int vocab) {
  Tokens t{1};
  for (int i = 1; i < length; ++i) t.push_back(int32_t((s * 37 + i * 11 + 3) % vocab));
  return t;
}

class TensorParallel : public ::testing::TestWithParam<std::string> {};

// Prefill 8 tokens for two sequences, then 8 greedy decode steps: TP=2 logits agree with the
// whole model's to 1e-4.
TEST_P(TensorParallel, MatchesSingleRank) {
  ASSERT_EQ(world_size(), 2) << "launch with mpiexec -np 2";
  Sharded tp(GetParam());
  if (world_rank() != 0) {
    tp.group->serve();
    return;
  }
  StopOnExit stop{*tp.group};
  constexpr int kSequences = 2, kPrompt = 8, kSteps = 8, kCapacity = 32;
  Single one(GetParam(), kSequences, kCapacity);
  const int vocab = one.model.config.vocab_size;
  tp.group->reset_cache(kSequences, kCapacity);

  ForwardBatch prefill;
  for (int s = 0; s < kSequences; ++s)
    prefill.add_causal(s, 0, prompt(s, kPrompt, vocab), Logits::Last);
  std::vector<float> got, want = one.run(prefill);
  tp.group->forward(prefill, got);
  for (int s = 0; s < kSequences; ++s) {
    one.cache.length[s] = kPrompt;
    tp.group->lengths()[s] = kPrompt;
  }
  ASSERT_EQ(got.size(), want.size());
  double worst = max_abs_diff(got, want);
  EXPECT_LT(worst, 1e-4) << "prefill";

  for (int step = 0; step < kSteps; ++step) {
    ForwardBatch decode;
    for (int s = 0; s < kSequences; ++s) {
      // Both follow the whole model's greedy choice so they never diverge.
      const int32_t next = argmax(want.data() + size_t(s) * vocab, vocab);
      decode.add_causal(s, one.cache.length[s], {next}, Logits::Last);
    }
    want = one.run(decode);
    tp.group->forward(decode, got);
    for (int s = 0; s < kSequences; ++s) {
      one.cache.length[s] += 1;
      tp.group->lengths()[s] += 1;
    }
    ASSERT_EQ(got.size(), want.size());
    const double diff = max_abs_diff(got, want);
    EXPECT_LT(diff, 1e-4) << "decode step " << step;
    worst = std::max(worst, diff);
  }
  std::printf("  %s: max |logit diff| TP=2 vs TP=1 over prefill + %d decode steps: %.3g\n",
              GetParam().c_str(), kSteps, worst);
}

// A K+1 = 5-token verification call equals 5 one-token decode calls bit for bit under TP=2.
TEST_P(TensorParallel, VerifyCallEqualsDecodeStepsBitExactly) {
  ASSERT_EQ(world_size(), 2) << "launch with mpiexec -np 2";
  Sharded tp(GetParam());
  if (world_rank() != 0) {
    tp.group->serve();
    return;
  }
  StopOnExit stop{*tp.group};
  constexpr int kPrompt = 8, kNew = 5, kCapacity = 32;
  const int vocab = tp.model.config.vocab_size;
  // Sequence 0 takes the verification call, sequence 1 the decode steps; sequence 2 rides along
  // in every call so that each batch has more rows than the one it is compared with.
  tp.group->reset_cache(3, kCapacity);
  const Tokens p = prompt(4, kPrompt, vocab);
  ForwardBatch prefill;
  for (int s = 0; s < 3; ++s)
    prefill.add_causal(s, 0, s == 2 ? prompt(9, kPrompt, vocab) : p, Logits::None);
  std::vector<float> unused;
  tp.group->forward(prefill, unused);
  std::vector<int>& length = tp.group->lengths();
  for (int s = 0; s < 3; ++s) length[s] = kPrompt;

  const Tokens draft{17, 200, 3, 3, 99};
  ForwardBatch verify;
  verify.add_causal(0, length[0], draft, Logits::All);
  verify.add_causal(2, length[2], {42, 43}, Logits::All);
  std::vector<float> verified;
  tp.group->forward(verify, verified);
  ASSERT_EQ(verified.size(), size_t(kNew + 2) * vocab);

  for (int i = 0; i < kNew; ++i) {
    ForwardBatch decode;
    decode.add_causal(1, length[1], {draft[i]}, Logits::Last);
    std::vector<float> got;
    tp.group->forward(decode, got);
    length[1] += 1;
    test::expect_bitwise_equal(got, test::row_of(verified, i, vocab), "token " + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, TensorParallel,
                         ::testing::Values("tiny-llama", "tiny-qwen3", "tiny-qwen3-untied",
                                           "tiny-qwen2"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace ssd
