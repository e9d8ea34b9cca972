// SAGUARO sampling (paper §4.2, Definition 14): C = 1 is plain softmax, C = 0 removes the
// top-F mass, Theorem 19's construction, Theorem 15's monotonicity of the cached residual mass
// in C; and the token selection (top_tokens, argmax) against a full sort, a rank count
// (token_rank, this file's oracle) and a scalar scan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "ssd/saguaro_sampling.h"
#include "ssd/sampling.h"

namespace ssd {
namespace {

std::vector<float> random_logits(std::mt19937& rng, int vocab, double scale) {
  std::normal_distribution<float> normal(0.0f, float(scale));
  std::vector<float> z(vocab);
  for (float& x : z) x = normal(rng);
  return z;
}

// The reference order: full stable sort by (logit desc, id asc), then drop `exclude`.
std::vector<int32_t> sorted_ids(const std::vector<float>& z, int32_t exclude) {
  std::vector<int32_t> ids(z.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
  ids.erase(std::remove(ids.begin(), ids.end(), exclude), ids.end());
  return ids;
}

// The oracle for top_tokens' order, one token at a time: the 1-based rank of `token` in
// top_tokens(logits, vocab, limit, exclude), 0 if not within the first `limit` (or if token ==
// exclude), by counting the tokens ahead of it (larger logit, or equal logit and lower id; NaN
// counts as -inf). One scan, no sort.
int token_rank(const float* logits, int vocab, int32_t token, int32_t exclude, int limit) {
  if (token < 0 || token >= vocab || token == exclude || limit <= 0) return 0;
  auto value = [&](int32_t i) {
    return std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
  };
  int ahead_of_token = 0;
  for (int32_t i = 0; i < vocab; ++i)
    if (i != exclude && (value(i) > value(token) || (value(i) == value(token) && i < token)))
      ++ahead_of_token;
  return ahead_of_token < limit ? ahead_of_token + 1 : 0;
}

TEST(SaguaroDistribution, CEqualOneIsSoftmax) {
  std::mt19937 rng(1);
  const std::vector<float> z = random_logits(rng, 50, 2.0);
  for (double t : {0.5, 1.0, 1.7}) {
    std::vector<float> expected, got;
    softmax(z.data(), 50, t, expected);
    saguaro_distribution(z.data(), 50, t, 5, 1.0, got);
    for (int i = 0; i < 50; ++i) EXPECT_NEAR(got[i], expected[i], 1e-7);
    saguaro_distribution(z.data(), 50, t, 0, 0.3, got);  // F = 0: nothing downweighted
    for (int i = 0; i < 50; ++i) EXPECT_NEAR(got[i], expected[i], 1e-7);
    saguaro_distribution(z.data(), 50, t, 50, 0.0, got);  // F >= vocab: all scaled alike
    for (int i = 0; i < 50; ++i) EXPECT_NEAR(got[i], expected[i], 1e-7);
  }
}

TEST(SaguaroDistribution, CZeroRemovesTheTopF) {
  std::mt19937 rng(2);
  const std::vector<float> z = random_logits(rng, 40, 3.0);
  const int F = 4;
  std::vector<float> plain, got;
  softmax(z.data(), 40, 1.0, plain);
  saguaro_distribution(z.data(), 40, 1.0, F, 0.0, got);
  const std::vector<int32_t> top = top_tokens(z.data(), 40, F, -1);
  double rest = 0.0;
  for (int i = 0; i < 40; ++i)
    if (std::find(top.begin(), top.end(), i) == top.end()) rest += plain[i];
  double total = 0.0;
  for (int i = 0; i < 40; ++i) {
    total += got[i];
    if (std::find(top.begin(), top.end(), i) != top.end()) {
      EXPECT_EQ(got[i], 0.0f);
    } else {
      EXPECT_NEAR(got[i], plain[i] / rest, 1e-6);  // the rest keeps its proportions
    }
  }
  EXPECT_NEAR(total, 1.0, 1e-6);
}

TEST(SaguaroDistribution, CZeroKeepsTokensFarBelowTheRemovedOnes) {
  // exp(-100) underflows in float; the shift must come from the tokens that keep mass.
  const std::vector<float> z = {100.0f, 0.0f, -1.0f};
  std::vector<float> p;
  saguaro_distribution(z.data(), 3, 0.5, 1, 0.0, p);
  const double e = std::exp(-2.0);
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_NEAR(p[1], 1.0 / (1.0 + e), 1e-6);
  EXPECT_NEAR(p[2], e / (1.0 + e), 1e-6);
}

TEST(SaguaroDistribution, SumsToOneAndMatchesDefinition14) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 50; ++trial) {
    const int V = 2 + int(rng() % 300);
    const std::vector<float> z = random_logits(rng, V, 4.0);
    const double t = 0.3 + (trial % 5) * 0.4, c = (trial % 7) / 6.0;
    const int F = int(rng() % V);
    std::vector<float> p;
    saguaro_distribution(z.data(), V, t, F, c, p);
    // Reference straight from Definition 14, in double.
    const std::vector<int32_t> top = top_tokens(z.data(), V, F, -1);
    std::vector<double> w(V);
    double total = 0.0, sum = 0.0;
    for (int i = 0; i < V; ++i) {
      const bool in_top = std::find(top.begin(), top.end(), i) != top.end();
      w[i] = (in_top ? c : 1.0) * std::exp(z[i] / t);
      total += w[i];
    }
    for (int i = 0; i < V; ++i) {
      EXPECT_NEAR(p[i], w[i] / total, 1e-6) << trial << " " << i;
      sum += p[i];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST(SaguaroDistribution, Theorem19Construction) {
  // p_d = (.49, .49, .01, .01) as logits log p_d at temperature 1; F = 2, C = 47/147 gives
  // p'_d = (.47, .47, .03, .03), whose residual against p_t = (.48, .48, .02, .02) lies
  // entirely on the two cached tokens.
  const std::vector<float> z = {std::log(0.49f), std::log(0.49f), std::log(0.01f), std::log(0.01f)};
  std::vector<float> got;
  saguaro_distribution(z.data(), 4, 1.0, 2, 47.0 / 147.0, got);
  const std::vector<double> expected = {0.47, 0.47, 0.03, 0.03};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], expected[i], 1e-6);
  const std::vector<double> target = {0.48, 0.48, 0.02, 0.02};
  double accept = 0.0;
  for (int i = 0; i < 4; ++i) accept += std::min(target[i], double(got[i]));
  EXPECT_NEAR(accept, 0.98, 1e-6);  // same acceptance rate as p_d
}

TEST(SaguaroDistribution, Theorem15CachedResidualShareFallsWithC) {
  // Theorem 15: with S = top_F(z), in(C) = sum_{t in S} max(q - p_C, 0) is non-increasing and
  // out(C) non-decreasing in C, so the hit probability in / (in + out) is non-increasing.
  std::mt19937 rng(3);
  const int V = 30;
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> z = random_logits(rng, V, 2.0);
    std::vector<float> target;
    const std::vector<float> tz = random_logits(rng, V, 2.0);
    softmax(tz.data(), V, 1.0, target);
    const int F = 1 + trial % 6;
    const std::vector<int32_t> top = top_tokens(z.data(), V, F, -1);
    double last_in = 1e9, last_out = -1.0, last_hit = 2.0;
    for (int step = 0; step <= 20; ++step) {
      const double c = step / 20.0;
      std::vector<float> p;
      saguaro_distribution(z.data(), V, 1.0, F, c, p);
      double in = 0.0, out = 0.0;
      for (int t = 0; t < V; ++t) {
        const double u = std::max(double(target[t]) - double(p[t]), 0.0);
        (std::find(top.begin(), top.end(), t) != top.end() ? in : out) += u;
      }
      const double hit = in + out > 0 ? in / (in + out) : 1.0;
      EXPECT_LE(in, last_in + 1e-6);
      EXPECT_GE(out, last_out - 1e-6);
      EXPECT_LE(hit, last_hit + 1e-6);
      last_in = in, last_out = out, last_hit = hit;
    }
  }
}

TEST(SaguaroDistribution, RejectsBadArguments) {
  const std::vector<float> z = {0.0f, 1.0f};
  std::vector<float> p;
  EXPECT_THROW(saguaro_distribution(z.data(), 2, 0.0, 1, 0.5, p), std::invalid_argument);
  EXPECT_THROW(saguaro_distribution(z.data(), 2, 1.0, 1, 1.5, p), std::invalid_argument);
  EXPECT_THROW(saguaro_distribution(z.data(), 2, 1.0, 1, -0.1, p), std::invalid_argument);
}

TEST(SaguaroDistribution, NoMassLeftFallsBackToPlain) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> z = {2.0f, 1.0f, -inf, -inf};
  std::vector<float> p, plain;
  saguaro_distribution(z.data(), 4, 1.0, 2, 0.0, p);
  softmax(z.data(), 4, 1.0, plain);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(p[i], plain[i], 1e-7);
}

TEST(TopTokens, MatchesAFullSortWithTiesAndExclude) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 300; ++trial) {
    const int V = 1 + int(rng() % 400);
    std::vector<float> z(V);
    // Few distinct values so that ties are common.
    for (float& x : z) x = float(int(rng() % 7)) * 0.5f;
    const int32_t exclude = trial % 3 == 0 ? -1 : int32_t(rng() % V);
    const std::vector<int32_t> all = sorted_ids(z, exclude);
    for (int n : {0, 1, 3, 17, 128, 129, 300, 1000}) {
      const std::vector<int32_t> got = top_tokens(z.data(), V, n, exclude);
      const size_t expect_size = std::min<size_t>(std::max(n, 0), all.size());
      ASSERT_EQ(got.size(), expect_size) << "V=" << V << " n=" << n;
      EXPECT_TRUE(std::equal(got.begin(), got.end(), all.begin())) << "V=" << V << " n=" << n;
    }
  }
}

TEST(TopTokens, NanRanksLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> z = {nan, 1.0f, nan, 3.0f, -1.0f};
  EXPECT_EQ(top_tokens(z.data(), 5, 3, -1), (std::vector<int32_t>{3, 1, 4}));
  EXPECT_EQ(token_rank(z.data(), 5, 4, -1, 10), 3);
  EXPECT_EQ(token_rank(z.data(), 5, 0, -1, 10), 4);
}

TEST(TokenRank, AgreesWithTopTokens) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 100; ++trial) {
    const int V = 2 + int(rng() % 200);
    std::vector<float> z(V);
    for (float& x : z) x = float(int(rng() % 9));
    const int32_t exclude = trial % 2 ? -1 : int32_t(rng() % V);
    const int limit = 1 + int(rng() % 20);
    const std::vector<int32_t> top = top_tokens(z.data(), V, limit, exclude);
    for (int32_t t = 0; t < V; ++t) {
      const auto at = std::find(top.begin(), top.end(), t);
      const int expected = at == top.end() ? 0 : int(at - top.begin()) + 1;
      EXPECT_EQ(token_rank(z.data(), V, t, exclude, limit), expected);
    }
  }
  const std::vector<float> z = {1.0f, 2.0f};
  EXPECT_EQ(token_rank(z.data(), 2, 1, 1, 5), 0);  // the excluded token has no rank
  EXPECT_EQ(token_rank(z.data(), 2, 1, -1, 0), 0);
  EXPECT_EQ(token_rank(z.data(), 2, 7, -1, 5), 0);
}

// Rows of vocabulary size (the block-maxima bound of top_tokens needs 1024 logits or more):
// ties, ascending and descending runs, NaN and -inf, the best tokens in the last partial
// chunk, and the excluded token among the best.
std::vector<float> patterned_logits(std::mt19937& rng, int V, int pattern) {
  std::vector<float> z = random_logits(rng, V, 2.0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int i = 0; i < V; ++i) {
    if (pattern == 1) z[size_t(i)] = float(int(rng() % 5));  // ties everywhere
    if (pattern == 2) z[size_t(i)] = float(i) * 1e-3f;       // ascending: the best come last
    if (pattern == 3) z[size_t(i)] = -float(i);              // descending
  }
  if (pattern == 4)
    for (int i = 0; i < V / 50; ++i) z[rng() % V] = i % 2 ? nan : -inf;
  if (pattern == 5)  // the best tokens in the tail, past the last full 1024-logit chunk
    for (int i = V - 1; i >= 0 && i > V - 40; --i) z[size_t(i)] = 10.0f + float(i % 3);
  return z;
}

// The reference order with NaN ranked as -inf (top_tokens' contract).
std::vector<int32_t> sorted_ids_nan_last(std::vector<float> z, int32_t exclude) {
  for (float& x : z)
    if (std::isnan(x)) x = -std::numeric_limits<float>::infinity();
  return sorted_ids(z, exclude);
}

TEST(TopTokens, VocabularySizedRowsMatchAFullSort) {
  std::mt19937 rng(7);
  for (int V : {1024, 1025, 2055, 20000, 32013}) {
    for (int pattern = 0; pattern < 6; ++pattern) {
      const std::vector<float> z = patterned_logits(rng, V, pattern);
      const std::vector<int32_t> order = sorted_ids_nan_last(z, -1);
      for (int32_t exclude : {-1, order[0], order[40], int32_t(rng() % V)}) {
        const std::vector<int32_t> all = sorted_ids_nan_last(z, exclude);
        for (int n : {1, 17, 64, 65, 200}) {
          const std::vector<int32_t> got = top_tokens(z.data(), V, n, exclude);
          ASSERT_EQ(got.size(), size_t(n));
          EXPECT_TRUE(std::equal(got.begin(), got.end(), all.begin()))
              << "V=" << V << " pattern=" << pattern << " exclude=" << exclude << " n=" << n;
        }
      }
    }
  }
}

// argmax's contract, as a scalar scan from index 0: the first index of the largest value; a
// NaN never wins, except at index 0, where it is never beaten.
int32_t scalar_argmax(const std::vector<float>& z) {
  int32_t best = 0;
  for (size_t i = 1; i < z.size(); ++i)
    if (z[i] > z[size_t(best)]) best = int32_t(i);
  return best;
}

TEST(Argmax, MatchesAScalarScan) {
  std::mt19937 rng(8);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int trial = 0; trial < 600; ++trial) {
    const int V = trial < 400 ? 1 + int(rng() % 100) : 1000 + int(rng() % 40000);
    std::vector<float> z = patterned_logits(rng, V, trial % 6);
    if (trial % 7 == 0) z[0] = nan;
    if (trial % 11 == 0) std::fill(z.begin(), z.end(), -inf);
    if (trial % 13 == 0) z[rng() % V] = inf, z[rng() % V] = inf;
    EXPECT_EQ(argmax(z.data(), V), scalar_argmax(z)) << "trial " << trial << " V=" << V;
  }
}

TEST(TopTokens, LargeVocabularyIsFast) {
  // A 150k vocabulary: the shape of Qwen/Llama-3 logits, selected per sequence per position.
  std::mt19937 rng(6);
  const int V = 150000;
  const std::vector<float> z = random_logits(rng, V, 3.0);
  const std::vector<int32_t> all = sorted_ids(z, 17);
  for (int rep = 0; rep < 20; ++rep) {
    const std::vector<int32_t> got = top_tokens(z.data(), V, 64, 17);
    ASSERT_TRUE(std::equal(got.begin(), got.end(), all.begin()));
  }
}

}  // namespace
}  // namespace ssd
