// SAGUARO sampling (Definition 14) down-weights the top F_k tokens of the draft's distribution
// at each position, so that the residual pushes the bonus token into them (Theorem 15); the
// speculation cache must then prepare for exactly those tokens. This drives a SaguaroDrafter in
// process over many rounds (random outcomes, most of them cache hits, so both just-in-time and
// branch-drafted speculations are checked) and compares, for every speculation, the set each
// sampled position down-weighted with the set its cache prepared for.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "comm/clock.h"
#include "comm/peer_link.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/weights.h"
#include "ssd/fanout.h"
#include "ssd/model_group.h"
#include "ssd/saguaro_drafter.h"
#include "tests/mpi_environment.h"  // MPI for the code under test

namespace ssd {
namespace {

struct Drive {
  int rounds = 0, hits = 0;
};

// Runs `rounds` rounds of the drafter against a fake target that accepts a random k and picks
// the bonus among the cached roots for k (when there are any) three times in four.
Drive drive(SaguaroDrafter& drafter, SaguaroTrace& trace, int K, int vocab, int rounds) {
  const std::vector<std::vector<int32_t>> prompts = {{1, 17, 5, 9}, {1, 3, 33, 2, 8, 4}};
  StartMessage start;
  start.max_new_tokens = (K + 1) * rounds + 4;
  start.lookahead = K;
  start.temperature = 1.0;
  start.seed = 11;
  start.sequence_ids = {0, 1};
  start.prompts = prompts;
  drafter.start(start);
  PeerLink link(MPI_COMM_SELF, 0);  // only polled: nothing ever arrives

  std::mt19937 rng(5);
  std::vector<int> length = {int(prompts[0].size()), int(prompts[1].size())};
  OutcomeMessage outcome;
  for (int row = 0; row < 2; ++row) outcome.sequences.push_back({row, 0, 7, ++length[row], 0, 0});
  Drive d;
  for (int round = 0; round < rounds; ++round) {
    DraftTelemetry telemetry;
    const SpeculationMessage spec = drafter.respond(outcome, telemetry);
    for (const SequenceSpeculation& s : spec.sequences) d.hits += s.cache_hit ? 1 : 0;
    const size_t first_cached = trace.cached.size();
    drafter.build_cache(link, global_now());
    // The fake verification: k accepted, a bonus other than s_{k+1}.
    outcome = {};
    outcome.round = round + 1;
    outcome.temperature = 1.0;
    for (size_t i = 0; i < spec.sequences.size(); ++i) {
      const SequenceSpeculation& s = spec.sequences[i];
      const int k = int(rng() % (K + 1));
      const SaguaroTrace::Cached& cached = trace.cached.at(first_cached + i * (K + 1) + k);
      EXPECT_EQ(cached.k, k);
      int32_t bonus;
      if (!cached.roots.empty() && rng() % 4 != 0) {
        bonus = cached.roots[rng() % cached.roots.size()];
      } else {
        do bonus = int32_t(rng() % vocab);
        while (k < K && bonus == s.tokens[k]);
      }
      length[s.row] += k + 1;
      outcome.sequences.push_back({s.row, k, bonus, length[s.row], 0, 0});
    }
    ++d.rounds;
  }
  return d;
}

// With C < 1 the cache holds every down-weighted token but s_{k+1}, and as many tokens as the
// down-weighted set: when s_{k+1} was one of them, one token from outside it takes its place, so
// that the cache's size (and cost) does not depend on C.
TEST(SaguaroSets, CacheHoldsTheDownweightedTokensAtFullSize) {
  CpuBackend backend{1};
  std::unique_ptr<WeightSource> source = open_weight_source("synthetic:tiny-llama", 3);
  Model model = load_model(*source, backend);
  const int K = 3;
  for (const char* fanout : {"geometric:9", "uniform:3"}) {
    ModelGroup group(model, MPI_COMM_NULL);
    SaguaroTrace trace;
    SaguaroSettings s;
    s.draft_temperature = 1.0;
    s.seed = 2;
    s.fanout = s.backup_fanout = parse_fanout(fanout);
    s.saguaro_c = 0.25;
    s.fallback = FallbackMode::Primary;
    s.trace = &trace;
    SaguaroDrafter drafter(group, s);
    const Drive d = drive(drafter, trace, K, model.config.vocab_size, 40);
    ASSERT_GT(d.hits, 20) << fanout << ": too few hits to check branch-drafted speculations";

    std::map<std::pair<int64_t, int>, const SaguaroTrace::Sampled*> sampled;
    for (const SaguaroTrace::Sampled& x : trace.sampled) sampled[{x.spec, x.k}] = &x;
    int checked = 0, with_own_token = 0;
    for (const SaguaroTrace::Cached& c : trace.cached) {
      if (c.k == K) continue;  // nothing is sampled at position K + 1
      const auto it = sampled.find({c.spec, c.k});
      ASSERT_NE(it, sampled.end()) << "a cached speculation whose sampling was not traced";
      const std::vector<int32_t>& downweighted = it->second->downweighted;
      std::set<int32_t> want(downweighted.begin(), downweighted.end());
      const bool own_token = want.erase(it->second->token) > 0;
      with_own_token += own_token;
      const std::set<int32_t> got(c.roots.begin(), c.roots.end());
      const std::string where =
          std::string(fanout) + " spec " + std::to_string(c.spec) + " k " + std::to_string(c.k);
      EXPECT_EQ(got.size(), downweighted.size()) << where;
      EXPECT_EQ(got.count(it->second->token), 0u) << where;
      for (int32_t t : want) EXPECT_EQ(got.count(t), 1u) << where << " token " << t;
      ++checked;
    }
    EXPECT_GT(checked, 2 * 40 * K / 2) << fanout;
    // The case that used to leave the cache one short (s_{k+1} among the down-weighted) occurred.
    EXPECT_GT(with_own_token, 0) << fanout;
  }
  release_model(model);
}

TEST(SaguaroSets, GreedyDraftCachesTheFBestOtherTokens) {
  CpuBackend backend{1};
  std::unique_ptr<WeightSource> source = open_weight_source("synthetic:tiny-llama", 3);
  Model model = load_model(*source, backend);
  {
    ModelGroup group(model, MPI_COMM_NULL);
    SaguaroTrace trace;
    SaguaroSettings s;
    s.fanout = s.backup_fanout = parse_fanout("uniform:3");
    s.fallback = FallbackMode::Primary;
    s.trace = &trace;
    SaguaroDrafter drafter(group, s);
    drive(drafter, trace, 2, model.config.vocab_size, 10);
    // Nothing is down-weighted, so each position keeps its full fan-out of 3.
    for (const SaguaroTrace::Cached& c : trace.cached) EXPECT_EQ(c.roots.size(), 3u) << c.k;
  }  // the group's cache goes before the model
  release_model(model);
}

}  // namespace
}  // namespace ssd
