// The SAGUARO cache's fan-out (paper §4.1) around its shape: --fanout parsing and its
// resolution to per-position counts, the online (a, r) estimators on synthetic outcomes, and the
// verification window's limit on the budget. The geometric shape itself, against its oracles:
// test_fanout_geometric.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/errors.h"
#include "ssd/fanout.h"
#include "ssd/fanout_estimator.h"

namespace ssd {
namespace {

// Expects an InputError whose message says it is about a fan-out (a value error: the CLI layer
// names the flag) and contains `also`.
void expect_fanout_error(const std::string& text, const std::string& also = "") {
  try {
    parse_fanout(text);
    ADD_FAILURE() << "'" << text << "' parsed";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("fan-out '", 0), 0u) << what;
    EXPECT_NE(what.find(also), std::string::npos) << what;
  }
}

TEST(ParseFanout, AcceptsTheThreeForms) {
  FanoutSpec u = parse_fanout("uniform:4");
  EXPECT_EQ(u.kind, FanoutSpec::Kind::Uniform);
  EXPECT_EQ(u.uniform, 4);
  FanoutSpec l = parse_fanout("list:4,3,2,1,0");
  EXPECT_EQ(l.kind, FanoutSpec::Kind::List);
  EXPECT_EQ(l.list, (std::vector<int>{4, 3, 2, 1, 0}));
  FanoutSpec g = parse_fanout("geometric:20");
  EXPECT_EQ(g.kind, FanoutSpec::Kind::Geometric);
  EXPECT_EQ(g.fanout_total, 20);
  EXPECT_EQ(parse_fanout("geometric").fanout_total, 0);  // from --budget
}

TEST(ParseFanout, ErrorsNameTheValueAndTheExpectation) {
  for (const char* bad :
       {"", "uniform", "uniform:", "uniform:0", "uniform:-2", "uniform:x", "uniform:3x", "list",
        "list:", "list:1,,2", "list:1,2,", "list:a", "list:-1,2", "geometric:0", "geometric:-5",
        "geometric:abc", "tree:4", "Uniform:4", "uniform:99999999999999"})
    expect_fanout_error(bad, "expected");
  expect_fanout_error("tree:4", "tree");
}

TEST(ResolveFanout, UniformAndList) {
  EXPECT_EQ(resolve_fanout(parse_fanout("uniform:3"), 4, 0, FanoutLaw{0.5, 1.0, 1.0}),
            (std::vector<int>{3, 3, 3, 3, 3}));
  EXPECT_EQ(resolve_fanout(parse_fanout("list:4,3,2,1,1"), 4, 0, FanoutLaw{0.5, 1.0, 1.0}),
            (std::vector<int>{4, 3, 2, 1, 1}));
  try {
    resolve_fanout(parse_fanout("list:4,3,2"), 4, 0, FanoutLaw{0.5, 1.0, 1.0});
    ADD_FAILURE() << "a 3-entry list resolved at K = 4";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("fan-out list", 0), 0u) << what;
    EXPECT_NE(what.find("K = 4"), std::string::npos) << what;
  }
}

TEST(ResolveFanout, GeometricBudgetFromSpecOrFlag) {
  const std::vector<int> own =
      resolve_fanout(parse_fanout("geometric:30"), 4, 7, FanoutLaw{0.7, 1.0, 1.0});
  EXPECT_EQ(std::accumulate(own.begin(), own.end(), 0), 30);
  const std::vector<int> flag =
      resolve_fanout(parse_fanout("geometric"), 4, 7, FanoutLaw{0.7, 1.0, 1.0});
  EXPECT_EQ(std::accumulate(flag.begin(), flag.end(), 0), 7);
  EXPECT_EQ(flag, geometric_fanout(4, 7, 0.7, 1.0));
}

// Draws a rank from the shifted power law P(rank > F) = (F+1)^{-r}: rank = floor(u^{-1/r}).
int synthetic_rank(std::mt19937_64& rng, double r) {
  const double u = std::uniform_real_distribution<double>(1e-12, 1.0)(rng);
  return int(std::min(1e6, std::floor(std::pow(u, -1.0 / r))));
}

TEST(FanoutEstimator, RecoversThePowerLawExponent) {
  for (double r : {0.5, 1.0}) {
    std::mt19937_64 rng(11);
    FanoutEstimator est;
    const int L = 64;
    for (int i = 0; i < 4000; ++i) {
      const int rank = synthetic_rank(rng, r);
      est.observe(2, 4, rank <= L ? rank : 0, L);
    }
    EXPECT_NEAR(est.power_law_r(-1.0), r, 0.1 * r) << "r = " << r;
  }
}

TEST(FanoutEstimator, HandlesVaryingListLengths) {
  // Short lists censor the ranks beyond them; the fit must only use what each list showed.
  std::mt19937_64 rng(5);
  FanoutEstimator est;
  for (int i = 0; i < 6000; ++i) {
    const int L = (i % 3 == 0) ? 4 : 64;
    const int rank = synthetic_rank(rng, 0.8);
    est.observe(1, 4, rank <= L ? rank : 0, L);
  }
  EXPECT_NEAR(est.power_law_r(-1.0), 0.8, 0.08);
}

TEST(FanoutEstimator, FallsBackUntilEnoughObservations) {
  FanoutEstimator est;
  EXPECT_EQ(est.power_law_r(0.7), 0.7);
  EXPECT_EQ(est.acceptance(0.6), 0.6);
  for (int i = 0; i < FanoutEstimator::kMinObservations - 1; ++i) est.observe(1, 4, 2, 8);
  EXPECT_EQ(est.power_law_r(0.7), 0.7);
  // Rounds with no candidate list (e.g. after a backup) carry no rank information.
  for (int i = 0; i < 10; ++i) est.observe(1, 4, 0, 0);
  EXPECT_EQ(est.power_law_r(0.7), 0.7);
  EXPECT_EQ(est.observations(), FanoutEstimator::kMinObservations - 1 + 10);
  est.observe(1, 4, 2, 8);
  EXPECT_NE(est.power_law_r(0.7), 0.7);
  EXPECT_THROW(est.observe(5, 4, 1, 8), std::invalid_argument);
}

TEST(FanoutEstimator, TheShapesAcceptanceStartsAtThePriorAndFollowsTheRun) {
  FanoutEstimator est;
  EXPECT_DOUBLE_EQ(est.law(-1.0, -1.0).acceptance, kFanoutPrior);
  // Two rounds that accepted all of K = 4: the MLE says 1, the shape's a stays short of it
  // and keeps the budget spread over the positions.
  est.observe(4, 4, 1, 8);
  est.observe(4, 4, 1, 8);
  EXPECT_DOUBLE_EQ(est.acceptance(-1.0), 1.0);
  const double early = est.law(-1.0, -1.0).acceptance;
  EXPECT_NEAR(
      early,
      (8 + FanoutEstimator::kPriorTrials * kFanoutPrior) / (8 + FanoutEstimator::kPriorTrials),
      1e-12);
  EXPECT_LT(early, 0.95);
  EXPECT_GT(early, kFanoutPrior);
  // At a = 1 Theorem 12 spends the budget on the last position alone; at the shape's a the
  // early positions get guesses too.
  EXPECT_EQ(geometric_fanout(4, 8, 1.0, kFanoutPrior), (std::vector<int>{0, 0, 0, 0, 8}));
  EXPECT_GT(geometric_fanout(4, 8, early, kFanoutPrior)[0], 0);
  // A fixed a is taken as given.
  EXPECT_DOUBLE_EQ(est.law(0.5, -1.0).acceptance, 0.5);
  // Over a run the prior fades: 40 rounds at a = 0.9 put the shape's a within 0.01 of the MLE.
  std::mt19937_64 rng(5);
  std::bernoulli_distribution accept(0.9);
  for (int i = 0; i < 40; ++i) {
    int k = 0;
    while (k < 4 && accept(rng)) ++k;
    est.observe(k, 4, 1, 8);
  }
  EXPECT_NEAR(est.law(-1.0, -1.0).acceptance, est.acceptance(-1.0), 0.01);
}

TEST(FanoutEstimator, AlwaysTopCandidateMeansLargeR) {
  FanoutEstimator est;
  for (int i = 0; i < 100; ++i) est.observe(4, 4, 1, 64);
  EXPECT_GT(est.power_law_r(0.7), 5.0);
}

TEST(FanoutEstimator, FitsACurvePerCondition) {
  // Theorem 18's two conditions drawn from different laws: the bonus after all K = 4 accepted
  // from r = 2.5, after a rejection from r = 0.6. The law takes each its own r (the pull
  // towards the pooled fit is 8 of ~2000 observations); the pooled r lies between.
  std::mt19937_64 rng(3);
  FanoutEstimator est;
  const int L = 64;
  for (int i = 0; i < 4000; ++i) {
    const bool all = i % 2 == 0;
    const int rank = synthetic_rank(rng, all ? 2.5 : 0.6);
    est.observe(all ? 4 : 1, 4, rank <= L ? rank : 0, L);
  }
  const FanoutLaw law = est.law(-1.0, -1.0);
  EXPECT_NEAR(law.r, 0.6, 0.06);
  EXPECT_NEAR(law.r_all, 2.5, 0.25);
  const double pooled = est.power_law_r(-1.0);
  EXPECT_GT(pooled, law.r + 0.1);
  EXPECT_LT(pooled, law.r_all - 0.1);
  // A fixed r is Theorem 12's one law for both.
  const FanoutLaw fixed = est.law(-1.0, 1.5);
  EXPECT_EQ(fixed.r, 1.5);
  EXPECT_EQ(fixed.r_all, 1.5);
}

TEST(FanoutEstimator, AConditionWithFewRoundsLeansOnThePooledFit) {
  // 40 rejected rounds and 7 all-accepted ones: too few for the second curve, which is then
  // the pooled r; at 8 its own fit counts, as much as the pooled one.
  std::mt19937_64 rng(9);
  FanoutEstimator est;
  for (int i = 0; i < 40; ++i) {
    const int rank = synthetic_rank(rng, 0.8);
    est.observe(0, 3, rank <= 64 ? rank : 0, 64);
  }
  for (int i = 0; i < FanoutEstimator::kMinConditionObservations - 1; ++i) est.observe(3, 3, 1, 64);
  const double pooled = est.power_law_r(-1.0);
  EXPECT_DOUBLE_EQ(est.law(-1.0, -1.0).r_all, pooled);
  EXPECT_NE(est.law(-1.0, -1.0).r, pooled);
  est.observe(3, 3, 1, 64);
  const double pooled_now = est.power_law_r(-1.0);
  const double n = FanoutEstimator::kMinConditionObservations;
  const double own = (est.law(-1.0, -1.0).r_all * (n + FanoutEstimator::kConditionPriorWeight) -
                      FanoutEstimator::kConditionPriorWeight * pooled_now) /
                     n;
  EXPECT_GT(est.law(-1.0, -1.0).r_all, pooled_now);
  // Eight top-1 ranks: the "every bonus was the top candidate" bound, log2(2 * 8) = 4.
  EXPECT_NEAR(own, 4.0, 1e-9);
}

TEST(FanoutEstimator, AcceptanceIsTheCappedGeometricMle) {
  // Rounds drawn from A.2's model: each position accepted with probability a until the first
  // rejection, at most K.
  for (double a : {0.3, 0.7, 0.9}) {
    std::mt19937_64 rng(3);
    std::bernoulli_distribution accept(a);
    FanoutEstimator est;
    const int K = 4;
    for (int i = 0; i < 20000; ++i) {
      int k = 0;
      while (k < K && accept(rng)) ++k;
      est.observe(k, K, 1, 8);
    }
    EXPECT_NEAR(est.acceptance(-1.0), a, 0.01) << "a = " << a;
  }
  FanoutEstimator exact;
  exact.observe(4, 4, 0, 0);  // 4 successes, no failure
  exact.observe(1, 4, 0, 0);  // 1 success, 1 failure
  EXPECT_DOUBLE_EQ(exact.acceptance(-1.0), 5.0 / 6.0);
}

}  // namespace
}  // namespace ssd

TEST(WindowFanoutLimit, FitsKBranchStepsInNinetyPercentOfTheWindow) {
  // Window 10 ms, glue 1 ms, K = 4: each branch step may take (9 - 1) / 4 = 2 ms. With
  // a = 0.5 ms and b = 0.01 ms per row, 150 rows fit; over 3 sequences that is 50 each.
  EXPECT_EQ(ssd::window_fanout_limit(10e-3, 1e-3, 0.5e-3, 0.01e-3, 4, 3, 1000), 50);
  // One sequence more than the rows allow rounds down: 150 / 4 = 37.
  EXPECT_EQ(ssd::window_fanout_limit(10e-3, 1e-3, 0.5e-3, 0.01e-3, 4, 4, 1000), 37);
  // The cache capacity caps it.
  EXPECT_EQ(ssd::window_fanout_limit(10e-3, 1e-3, 0.5e-3, 0.01e-3, 4, 3, 20), 20);
}

TEST(WindowFanoutLimit, ZeroWhenNoBranchStepFits) {
  // A step's fixed cost alone exceeds the per-step share of the window.
  EXPECT_EQ(ssd::window_fanout_limit(10e-3, 1e-3, 2.5e-3, 0.01e-3, 4, 1, 1000), 0);
  // The glue step alone fills the window.
  EXPECT_EQ(ssd::window_fanout_limit(10e-3, 9.5e-3, 0.1e-3, 0.01e-3, 4, 1, 1000), 0);
  // No measured window yet, or nothing to draft.
  EXPECT_EQ(ssd::window_fanout_limit(0.0, 0.0, 0.1e-3, 0.01e-3, 4, 1, 1000), 0);
  EXPECT_EQ(ssd::window_fanout_limit(10e-3, 1e-3, 0.1e-3, 0.01e-3, 0, 1, 1000), 0);
}

TEST(WindowFanoutLimit, FreeRowsFillTheCapacity) {
  // Branch rows that cost nothing beyond the step's fixed cost: the capacity is the limit.
  EXPECT_EQ(ssd::window_fanout_limit(10e-3, 1e-3, 0.5e-3, 0.0, 4, 8, 64), 64);
}
