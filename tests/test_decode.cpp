// The decode core in process, no mpirun: AR, SD and SSD loops on a tiny model with a draft
// that agrees with it most of the time (perturb:0.02, so rounds accept several tokens and
// SSD's cache hits). Greedy SD and SSD must reproduce AR token for token, AR must not depend
// on the batch size, and the Recorder's totals and records must agree with each other.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <set>
#include <tuple>
#include <vector>

#include "comm/clock.h"
#include "comm/peer_link.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/weights.h"
#include "ssd/decode.h"
#include "ssd/drafter.h"
#include "ssd/saguaro_drafter.h"
#include "tests/mpi_environment.h"  // MPI for the code under test

namespace ssd {
namespace {

// SSD's draft rank in process: answer the outcome, then build the next round's cache at once
// (the target's verification follows instead of overlapping it).
class InProcessSaguaro final : public DraftEndpoint {
 public:
  explicit InProcessSaguaro(SaguaroDrafter& drafter) : drafter_(drafter) {}
  void start(const StartMessage& m) override { drafter_.start(m); }
  SpeculationMessage exchange(const OutcomeMessage& m, ExchangeTiming& timing) override {
    timing = ExchangeTiming{};
    timing.draft.draft_start_s = global_now();
    SpeculationMessage spec = drafter_.respond(m, timing.draft);
    timing.draft.draft_end_s = global_now();
    timing.draft_s = timing.draft.draft_end_s - timing.draft.draft_start_s;
    drafter_.build_cache(link_, global_now());
    return spec;
  }
  void finish_group(const OutcomeMessage&) override {}
  void shutdown() override {}

 private:
  SaguaroDrafter& drafter_;
  PeerLink link_{MPI_COMM_SELF, 0};  // only polled: nothing ever arrives
};

class Decode : public ::testing::Test {
 protected:
  Decode() {
    target_source_ = open_weight_source("synthetic:tiny-llama", 3);
    target_ = load_model(*target_source_, backend_);
    draft_source_ = perturb_weight_source(open_weight_source("synthetic:tiny-llama", 3), 0.02, 9);
    draft_ = load_model(*draft_source_, backend_);
    settings_.limits.max_new_tokens = 24;
    settings_.limits.ignore_eos = true;
    settings_.batch_size = 2;
    settings_.lookahead = 4;
  }
  ~Decode() override {
    release_model(target_);
    release_model(draft_);
  }

  // One repetition; `draft` null for AR.
  TokenLists run(DraftEndpoint* draft, RunRecords* records = nullptr) {
    ModelGroup target(target_, MPI_COMM_NULL);
    Recorder recorder(0, global_now(), records);
    TokenLists generated;
    const RepTotals totals =
        decode_repetition(target, draft, prompts_, settings_, recorder, generated);
    if (records) records->reps.push_back(totals);
    return generated;
  }
  TokenLists run_sd(RunRecords* records = nullptr) {
    ModelGroup group(draft_, MPI_COMM_NULL);
    Drafter drafter(group, 0.0, settings_.limits.seed);
    LocalDraft endpoint(drafter);
    return run(&endpoint, records);
  }
  TokenLists run_ssd(RunRecords* records = nullptr) {
    ModelGroup group(draft_, MPI_COMM_NULL);
    SaguaroSettings s;
    s.budget_setting = 8;
    SaguaroDrafter drafter(group, s);
    InProcessSaguaro endpoint(drafter);
    return run(&endpoint, records);
  }

  CpuBackend backend_{1};
  std::unique_ptr<WeightSource> target_source_, draft_source_;
  Model target_, draft_;
  DecodeSettings settings_;
  TokenLists prompts_ = {{1, 17, 5, 9}, {1, 3, 33, 2, 8, 4}, {1, 40, 41}};
};

TEST_F(Decode, AutoregressiveDoesNotDependOnTheBatchSize) {
  settings_.batch_size = 1;
  const TokenLists one = run(nullptr);
  settings_.batch_size = 3;
  EXPECT_EQ(run(nullptr), one);
  ASSERT_EQ(one.size(), prompts_.size());
  for (const auto& tokens : one) EXPECT_EQ(int(tokens.size()), settings_.limits.max_new_tokens);
}

TEST_F(Decode, GreedySpeculativeEqualsAutoregressive) {
  const TokenLists ar = run(nullptr);
  RunRecords records;
  EXPECT_EQ(run_sd(&records), ar);
  // The calibration draft agrees often: rounds accept more than nothing on average.
  const RepTotals& t = records.reps.at(0);
  EXPECT_GT(t.accepted, t.rounds);
}

TEST_F(Decode, GreedySsdEqualsAutoregressiveAndHitsItsCache) {
  const TokenLists ar = run(nullptr);
  RunRecords records;
  EXPECT_EQ(run_ssd(&records), ar);
  int looked_up = 0, hits = 0;
  for (const RoundRecord& r : records.rounds) {
    looked_up += r.outcome_hit >= 0 ? 1 : 0;
    hits += r.outcome_hit == 1 ? 1 : 0;
  }
  EXPECT_GT(looked_up, 0);
  EXPECT_GT(hits, 0);
}

// -k auto chooses K again after the warm-up, so one drafter can see a new K between
// repetitions: its tokens stay AR's, and it starts learning afresh, its first cache at K = 3
// the one guess per position (K + 1 outcomes per sequence). (On this tiny pair the budget
// predicted from the K = 1 rounds happens to be K + 1 too, so that check alone does not tell
// a drafter that kept the old K's state from one that starts afresh.)
TEST_F(Decode, SsdDrafterStaysLosslessAndStartsAfreshAtANewK) {
  const TokenLists ar = run(nullptr);
  ModelGroup group(draft_, MPI_COMM_NULL);
  SaguaroDrafter drafter(group, SaguaroSettings{});  // --budget auto
  InProcessSaguaro endpoint(drafter);
  settings_.lookahead = 1;
  EXPECT_EQ(run(&endpoint), ar);
  settings_.lookahead = 3;
  RunRecords records;
  EXPECT_EQ(run(&endpoint, &records), ar);
  const auto first_cache = std::find_if(records.rounds.begin(), records.rounds.end(),
                                        [](const RoundRecord& r) { return r.outcome_hit >= 0; });
  ASSERT_NE(first_cache, records.rounds.end());
  EXPECT_EQ(first_cache->fanout_total, settings_.lookahead + 1);
}

// The just-in-time fallback's cost (Theorem 17's T_jit, --budget auto's miss cost) is timed
// on the rounds it drafts after a miss only: the first round's drafting, which includes the
// draft's prefill of the prompt, made it look ~3x slower on the Qwen pair and sent every miss
// to the backup.
TEST_F(Decode, SsdTimesTheFallbackWithoutTheFirstRoundsDrafting) {
  ModelGroup group(draft_, MPI_COMM_NULL);
  SaguaroSettings s;
  s.budget_setting = 1;  // a small cache: some outcomes miss
  s.fallback = FallbackMode::Primary;
  SaguaroDrafter drafter(group, s);
  InProcessSaguaro endpoint(drafter);
  RunRecords records;
  run(&endpoint, &records);
  std::set<std::tuple<int, int, int>> initial, primary;  // (rep, group, round)
  for (const RoundRecord& r : records.rounds) {
    const auto round = std::make_tuple(r.rep, r.group, r.round);
    if (r.source == int(SpeculationSource::Initial)) initial.insert(round);
    if (r.source == int(SpeculationSource::Primary)) primary.insert(round);
  }
  EXPECT_FALSE(initial.empty());
  ASSERT_FALSE(primary.empty());
  EXPECT_EQ(drafter.meter().primary_fallbacks(), int64_t(primary.size()));
}

// -k auto's second choice takes the draft's acceptance from the warm-up: the rounds a random
// backup speculated accept (almost) nothing and must not count, or a run whose misses go to
// the backup reads as a poor draft and gets a shorter K.
TEST_F(Decode, SsdMeasuresTheDraftsAcceptanceWithoutTheBackupsRounds) {
  ModelGroup group(draft_, MPI_COMM_NULL);
  SaguaroSettings s;
  s.budget_setting = 1;  // a small cache: some outcomes miss, and the backup answers them
  s.fallback = FallbackMode::Backup;
  SaguaroDrafter drafter(group, s);
  InProcessSaguaro endpoint(drafter);
  RunRecords records;
  run(&endpoint, &records);
  const RepTotals& t = records.reps.at(0);
  int64_t backup = 0, own = 0, accepted = 0, rejecting = 0;
  for (const RoundRecord& r : records.rounds) {
    if (r.source == int(SpeculationSource::Backup)) {
      ++backup;
      continue;
    }
    ++own;
    accepted += r.accepted;
    rejecting += r.accepted < r.drafted ? 1 : 0;
  }
  ASSERT_GT(backup, 0);
  EXPECT_EQ(t.rounds, own + backup);
  EXPECT_EQ(t.draft_rounds, own);
  EXPECT_EQ(t.draft_accepted, accepted);
  EXPECT_EQ(t.draft_rejections, rejecting);
}

TEST_F(Decode, RecorderTotalsAgreeWithRecords) {
  RunRecords records;
  const TokenLists generated = run_sd(&records);
  const RepTotals& t = records.reps.at(0);
  int64_t all = 0, round_tokens = 0, accepted = 0;
  for (const auto& g : generated) all += int64_t(g.size());
  for (const RoundRecord& r : records.rounds) {
    round_tokens += r.tokens;
    accepted += r.accepted;
    EXPECT_LE(r.start_s, r.end_s);
  }
  EXPECT_EQ(t.generated_tokens, all);
  EXPECT_EQ(t.decode_tokens + int64_t(prompts_.size()), all);  // the prefill emits one each
  EXPECT_EQ(round_tokens, t.decode_tokens);
  EXPECT_EQ(accepted, t.accepted);
  int64_t rejecting = 0;  // rounds that stopped at a rejected draft token
  for (const RoundRecord& r : records.rounds) rejecting += r.accepted < r.drafted ? 1 : 0;
  EXPECT_EQ(rejecting, t.draft_rejections);  // SD: every round is the draft's
  EXPECT_EQ(accepted, t.draft_accepted);
  EXPECT_EQ(t.rounds, int64_t(records.rounds.size()));
  EXPECT_EQ(records.steps.size(), prompts_.size());  // SD's steps are the prefills
}

TEST_F(Decode, SyntheticBonusesAreNamedBeforeTheRepetitionEnds) {
  settings_.outcomes.synthetic = true;
  settings_.outcomes.alpha = 0.7;
  RunRecords records;
  const TokenLists generated = run_sd(&records);
  for (const auto& tokens : generated)
    for (int32_t t : tokens) EXPECT_GE(t, 0) << "a placeholder was left in the output";
  for (const RoundRecord& r : records.rounds) {
    if (r.tokens <= r.accepted) continue;  // the sequence ended before the bonus
    EXPECT_GE(r.bonus, 0);
    EXPECT_EQ(generated[size_t(r.sequence)].size() >= size_t(r.tokens), true);
  }
}

// A synthetic bonus after a full accept is named without a draft pass: SD drafts K steps a
// round, as with real outcomes (it once fed s_K alone first, one pass more than real SD).
TEST_F(Decode, SyntheticSdDraftsKStepsARound) {
  settings_.outcomes.synthetic = true;
  settings_.outcomes.alpha = 1.0;  // every round accepts all K
  ModelGroup group(draft_, MPI_COMM_NULL);
  Drafter drafter(group, 0.0, settings_.limits.seed);
  LocalDraft endpoint(drafter);
  RunRecords records;
  const TokenLists generated = run(&endpoint, &records);
  const RepTotals& t = records.reps.at(0);
  int64_t full = 0;
  for (const RoundRecord& r : records.rounds) full += r.accepted == r.drafted ? 1 : 0;
  EXPECT_GT(full, 0);
  const int64_t groups = (int64_t(prompts_.size()) + settings_.batch_size - 1) /
                         settings_.batch_size;  // one prefill pass each
  EXPECT_EQ(group.forward_passes(), groups + t.decode_steps * settings_.lookahead);
  for (const auto& tokens : generated)
    for (int32_t token : tokens) EXPECT_GE(token, 0);
}

}  // namespace
}  // namespace ssd
