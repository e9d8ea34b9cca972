// --budget auto (ssd/budget.h): the budget of highest predicted rate under Corollary 16, with
// known answers, and the warning a run gets when SSD degenerates into its fallback.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/summary.h"
#include "ssd/budget.h"
#include "ssd/fanout.h"
#include "ssd/step_cost.h"

namespace ssd {
namespace {

// Branch steps of a + b n seconds over n rows.
std::function<double(double)> step_line(double a, double b) {
  return [a, b](double rows) { return a + b * rows; };
}

TEST(PredictBudgets, KnownAnswerForOneGuess) {
  // K = 1, a = 0.5, r = 1: weights w_0 = w_1 = 0.5; the first unit goes to k = 0 (ties to the
  // smaller k): p_hit = 0.5 (1 - 2^-1) = 0.25. E_hit = 1 + a = 1.5.
  BudgetInputs in;
  in.lookahead = 1;
  in.rows = 2;
  in.max_fanout_total = 1;
  in.verify_s = 1.0;
  in.glue_s = 0.1;
  in.step_s = step_line(0.2, 0.05);
  in.law = FanoutLaw{0.5, 1.0, 1.0};
  in.primary_fallback_s = 0.4;
  in.backup_fallback_allowed = false;
  const std::vector<BudgetPrediction> p = predict_budgets(in);
  ASSERT_EQ(p.size(), 2u);
  // Budget 0: every row misses; the round is max(1, 0.1) + 0.4.
  EXPECT_DOUBLE_EQ(p[0].p_hit, 0.0);
  EXPECT_DOUBLE_EQ(p[0].round_s, 1.4);
  EXPECT_DOUBLE_EQ(p[0].tokens_per_s, 2 * 1.5 / 1.4);
  // Budget 1: build 0.1 + 1 * (0.2 + 0.05 * 2 rows) = 0.4 < 1; some row misses with
  // probability 1 - 0.25^2.
  EXPECT_DOUBLE_EQ(p[1].p_hit, 0.25);
  EXPECT_DOUBLE_EQ(p[1].build_s, 0.4);
  EXPECT_DOUBLE_EQ(p[1].round_s, 1.0 + (1 - 0.0625) * 0.4);
  EXPECT_DOUBLE_EQ(p[1].tokens_per_s, 2 * 1.5 / p[1].round_s);
  EXPECT_EQ(best_budget(in).fanout_total, 1);
}

TEST(PredictBudgets, HitRatesAreThoseOfTheOptimalShapes) {
  BudgetInputs in;
  in.lookahead = 4;
  in.max_fanout_total = 40;
  in.verify_s = 1.0;
  // Theorem 12's one law, and Theorem 18's two (a second curve for the all-accepted position).
  for (const FanoutLaw& law : {FanoutLaw{0.8, 0.6, 0.6}, FanoutLaw{0.85, 0.83, 2.45}}) {
    in.law = law;
    const std::vector<BudgetPrediction> p = predict_budgets(in);
    for (int b = 0; b <= 40; ++b)
      EXPECT_NEAR(p[b].p_hit, expected_hit_rate(geometric_fanout(4, b, law), law), 1e-12) << b;
  }
}

// A draft step that does not fit the verification window: the old rule (the most fan-out that
// hides in the window) gave 0, i.e. SSD without a cache. A build longer than the verification
// still pays when it saves the just-in-time draft: the new rule spends it.
TEST(BestBudget, PaysForABuildLongerThanTheVerification) {
  BudgetInputs in;
  in.lookahead = 4;
  in.rows = 1;
  in.max_fanout_total = 64;
  in.verify_s = 1.0;
  in.glue_s = 0.1;
  const double step_a = 0.5, step_b = 0.01;  // a branch step is half a verification: K never fit
  in.step_s = step_line(step_a, step_b);
  in.law = FanoutLaw{0.8, 2.0, 2.0};
  in.primary_fallback_s = 4 * 0.51;  // K just-in-time steps of one row
  in.backup_fallback_allowed = false;
  ASSERT_EQ(window_fanout_limit(in.verify_s, in.glue_s, step_a, step_b, 4, 1, 64), 0);
  const std::vector<BudgetPrediction> all = predict_budgets(in);
  const BudgetPrediction best = best_budget(in);
  EXPECT_GT(best.fanout_total, 0);
  EXPECT_GT(best.build_s, in.verify_s);
  EXPECT_GT(best.tokens_per_s, all[0].tokens_per_s);
  for (const BudgetPrediction& p : all) EXPECT_LE(p.tokens_per_s, best.tokens_per_s);
}

TEST(BestBudget, ZeroWhenNoCachePaysForItself) {
  // Branch steps cost ten verifications and a miss costs nothing (a free backup as good as
  // the primary): a cache can only slow the round down.
  BudgetInputs in;
  in.lookahead = 3;
  in.verify_s = 1.0;
  in.step_s = step_line(10.0, 0.0);
  in.law = FanoutLaw{0.7, 0.5, 0.5};
  in.primary_fallback_allowed = false;
  in.backup_fallback_s = 0.0;
  in.e_miss_backup = 1 + 0.7 + 0.49 + 0.343;
  EXPECT_EQ(best_budget(in).fanout_total, 0);
}

TEST(BestBudget, FreeBranchesFillTheCapacity) {
  BudgetInputs in;
  in.lookahead = 3;
  in.max_fanout_total = 25;
  in.verify_s = 1.0;
  in.primary_fallback_s = 0.5;
  EXPECT_EQ(best_budget(in).fanout_total, 25);
}

RunRecords ssd_rounds(int n, int fanout_total, int hits) {
  RunRecords records;
  records.reps.push_back({});
  for (int i = 0; i < n; ++i) {
    RoundRecord r;
    r.round = i;
    r.drafted = 3;
    r.source = i == 0 ? 0 : 2;
    r.outcome_hit = i < hits ? 1 : 0;
    r.fanout_total = fanout_total;
    r.fanout = {1, 1, 1, 1};
    r.verify_s = 0.01;
    records.rounds.push_back(r);
  }
  return records;
}

TEST(DegenerationWarning, BudgetZeroInMostRounds) {
  const std::string w = summarize(ssd_rounds(40, 0, 0), true).speculation.warning;
  EXPECT_NE(w.find("budget was 0 in 100% of rounds"), std::string::npos) << w;
  EXPECT_NE(w.find("--budget"), std::string::npos) << w;
}

TEST(DegenerationWarning, HardlyAnyHit) {
  const std::string w = summarize(ssd_rounds(100, 4, 2), true).speculation.warning;
  EXPECT_NE(w.find("p_hit 0.020"), std::string::npos) << w;
}

TEST(DegenerationWarning, SilentWhenTheCacheWorks) {
  EXPECT_EQ(summarize(ssd_rounds(100, 4, 40), true).speculation.warning, "");
  EXPECT_EQ(summarize(ssd_rounds(5, 0, 0), true).speculation.warning, "");  // too few to say
}

// With several draft ranks each builds for its own rows, but a miss on any rank stalls the
// whole batch: the all-hit chance is p^batch, not p^rows, while the build is rows' branches.
TEST(PredictBudgets, TheWholeBatchWaitsOnAMiss) {
  BudgetInputs in;
  in.lookahead = 3;
  in.rows = 4;  // this rank's sequences
  in.max_fanout_total = 48;
  in.verify_s = 1.0;
  in.step_s = step_line(0.02, 0.002);
  in.law = FanoutLaw{0.8, 0.7, 0.7};
  in.primary_fallback_s = 0.5;
  in.backup_fallback_allowed = false;
  const std::vector<BudgetPrediction> alone = predict_budgets(in);
  in.batch = 16;  // four draft ranks of 4
  const std::vector<BudgetPrediction> shared = predict_budgets(in);
  for (int b = 0; b <= 48; ++b) {
    EXPECT_DOUBLE_EQ(shared[b].build_s, alone[b].build_s) << b;
    const double base = std::max({in.verify_s, shared[b].build_s, 1e-12});
    EXPECT_NEAR(shared[b].round_s, base + (1 - std::pow(shared[b].p_hit, 16)) * 0.5, 1e-12) << b;
  }
  // a round with 16 waiting meets a miss more often than one with this rank's 4
  for (int b = 0; b <= 48; ++b) {
    if (alone[b].p_hit > 0 && alone[b].p_hit < 1) {
      EXPECT_GT(shared[b].round_s, alone[b].round_s) << b;
    }
  }
}

// The branch step's cost as measured: interpolated between sizes, never falling with more rows,
// extended beyond the measured sizes by the nearest segment's slope.
TEST(StepCostCurve, InterpolatesTheMeasuredSizes) {
  StepCostCurve c;
  EXPECT_EQ(c.seconds(4), 0.0);
  c.observe(2, 0.040);
  EXPECT_DOUBLE_EQ(c.seconds(1), 0.040);  // one size known: flat both ways
  EXPECT_DOUBLE_EQ(c.seconds(64), 0.040);
  c.observe(4, 0.050);
  c.observe(8, 0.058);
  EXPECT_DOUBLE_EQ(c.seconds(3), 0.045);
  EXPECT_DOUBLE_EQ(c.seconds(6), 0.054);
  EXPECT_DOUBLE_EQ(c.seconds(16), 0.058 + 8 * 0.002);  // the last segment's slope
  EXPECT_DOUBLE_EQ(c.seconds(1), 0.035);               // the first segment's
  EXPECT_EQ(c.samples(), 3);
  EXPECT_EQ(c.describe(), "2: 40.0, 4: 50.0, 8: 58.0");
}

TEST(StepCostCurve, MoreRowsNeverCostLess) {
  StepCostCurve c;
  c.observe(1, 0.050);
  c.observe(2, 0.030);  // taken in a quiet spell: pooled with the 1-row step
  c.observe(4, 0.060);
  const auto p = c.points();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_DOUBLE_EQ(p[0].second, 0.040);
  EXPECT_DOUBLE_EQ(p[1].second, 0.040);
  EXPECT_DOUBLE_EQ(p[2].second, 0.060);
  for (double n = 0.5; n < 10; n += 0.25) EXPECT_LE(c.seconds(n), c.seconds(n + 0.25)) << n;
}

TEST(StepCostCurve, RecentStepsOfASizeWeighMost) {
  StepCostCurve c;
  for (int i = 0; i < 100; ++i) c.observe(4, 0.100);
  for (int i = 0; i < 64; ++i) c.observe(4, 0.050);
  EXPECT_NEAR(c.seconds(4), 0.050, 1e-3);
  c.scale(2.0);
  EXPECT_NEAR(c.seconds(4), 0.100, 2e-3);
}

TEST(StepCostCurve, SizesNotSteppedAtLatelyAreForgotten) {
  StepCostCurve c;
  c.observe(8, 0.090);  // measured in a slow spell of the host
  for (int i = 0; i < StepCostCurve::kForgetAfterSteps; ++i) c.observe(2, 0.040);
  EXPECT_DOUBLE_EQ(c.seconds(8), 0.090);
  c.observe(2, 0.040);
  EXPECT_DOUBLE_EQ(c.seconds(8), 0.040);  // forgotten: flat beyond the size in use
  EXPECT_EQ(c.points().size(), 1u);
}

TEST(NextAutoBudget, GrowsFromWhatWasTimedAndShrinksAtOnce) {
  EXPECT_EQ(next_auto_budget(40, 11, 2), 22);  // twice the largest timed, whatever was chosen
  EXPECT_EQ(next_auto_budget(40, 2, 4), 7);    // or K + 1 more, from small budgets
  EXPECT_EQ(next_auto_budget(15, 11, 2), 15);
  EXPECT_EQ(next_auto_budget(3, 24, 2), 3);
  EXPECT_EQ(next_auto_budget(0, 0, 3), 0);
  StepCostCurve c;
  EXPECT_EQ(c.largest_rows(), 0);
  c.observe(22, 0.15);
  c.observe(11, 0.08);
  EXPECT_EQ(c.largest_rows(), 22);
}

// Budget 0 runs no branch step, so nothing it decided from is measured again: every
// kZeroBudgetProbe-th round in a row at 0 builds K + 1 branches.
TEST(ProbeZeroBudget, EveryEighthRoundAtZeroMeasuresAgain) {
  EXPECT_EQ(probe_zero_budget(5, 0, 3), 5) << "a budget above 0 stands";
  for (int n = 1; n < kZeroBudgetProbe; ++n) EXPECT_EQ(probe_zero_budget(0, n, 3), 0) << n;
  EXPECT_EQ(probe_zero_budget(0, kZeroBudgetProbe, 3), 4);
  EXPECT_EQ(probe_zero_budget(0, kZeroBudgetProbe + 1, 3), 0);
  EXPECT_EQ(probe_zero_budget(0, 2 * kZeroBudgetProbe, 8), 9);
}

// The Qwen pair's case: steps as flat from 1 to 8 rows as its runs measured beside the target.
// A budget of 8 hides the same traffic as 1 and hits far more often; the line that a run's 1-2
// row steps fit put the cost on the slope and chose a budget of 1-2.
TEST(BestBudget, AFlatStepCurveBuysTheBiggerCache) {
  BudgetInputs in;
  in.lookahead = 4;
  in.max_fanout_total = 16;
  in.verify_s = 0.200;
  in.glue_s = 0.040;
  in.law = FanoutLaw{0.89, 1.77, 1.77};
  in.primary_fallback_s = 0.170;
  in.backup_fallback_allowed = false;
  StepCostCurve measured;
  measured.observe(1, 0.047);
  measured.observe(2, 0.050);
  measured.observe(4, 0.052);
  measured.observe(8, 0.056);
  measured.observe(16, 0.080);
  in.step_s = [&](double rows) { return measured.seconds(rows); };
  const BudgetPrediction flat = best_budget(in);
  EXPECT_GE(flat.fanout_total, 6);
  EXPECT_LE(flat.fanout_total, 9);
  EXPECT_GT(flat.p_hit, 0.8) << flat.fanout_total;
  // The two smallest sizes as a line through them: 8 rows at 0.068, and a budget of 3.
  in.step_s = step_line(0.044, 0.003);
  EXPECT_LE(best_budget(in).fanout_total, 3);
}

}  // namespace
}  // namespace ssd
