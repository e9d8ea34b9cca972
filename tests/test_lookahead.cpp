// -k auto (ssd/lookahead.h): the K of highest predicted rate from measured step costs, with
// known answers for SD, and for SSD the budget behind each K (Corollary 16 via ssd/budget.h).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "harness/calibrate.h"
#include "harness/plan.h"
#include "ssd/budget.h"
#include "ssd/lookahead.h"

namespace ssd {
namespace {

// Branch steps of a + b n seconds, as the calibration would measure them at 1 and 2 rows (the
// curve extends its segment both ways).
StepCostCurve branch_line(double a, double b) {
  StepCostCurve c;
  c.observe(1, a + b);
  c.observe(2, a + 2 * b);
  return c;
}

LookaheadCosts two_ks(double verify_1, double verify_2, double draft_step) {
  LookaheadCosts c;
  c.verify_s = {0.0, verify_1, verify_2};
  c.draft_step_s = draft_step;
  return c;
}

TEST(SdLookahead, KnownAnswers) {
  LookaheadPrior prior;
  prior.acceptance = 0.5;  // E(1) = 1.5, E(2) = 1.75 tokens per round
  // A draft step of half a verification: the second token is not worth its step.
  LookaheadChoice c = choose_sd_lookahead(two_ks(1.0, 1.1, 0.5), prior);
  EXPECT_DOUBLE_EQ(c.predicted_tok_s[1], 1.5 / 1.5);
  EXPECT_DOUBLE_EQ(c.predicted_tok_s[2], 1.75 / 2.1);
  EXPECT_EQ(c.lookahead, 1);
  // A nearly free draft: it is.
  c = choose_sd_lookahead(two_ks(1.0, 1.1, 0.01), prior);
  EXPECT_DOUBLE_EQ(c.predicted_tok_s[2], 1.75 / 1.12);
  EXPECT_EQ(c.lookahead, 2);
  EXPECT_TRUE(c.fanout_total.empty());
}

TEST(SdLookahead, BatchScalesTheRateNotTheChoice) {
  LookaheadPrior prior;
  prior.acceptance = 0.8;
  LookaheadCosts costs = two_ks(1.0, 1.05, 0.2);
  const LookaheadChoice one = choose_sd_lookahead(costs, prior);
  costs.batch = 4;
  const LookaheadChoice four = choose_sd_lookahead(costs, prior);
  EXPECT_EQ(one.lookahead, four.lookahead);
  EXPECT_DOUBLE_EQ(four.predicted_tok_s[2], 4 * one.predicted_tok_s[2]);
}

TEST(SdLookahead, EqualRatesKeepTheShorterSpeculation) {
  LookaheadPrior prior;
  prior.acceptance = 1.0;  // E(K) = K + 1: K = 1 and 2 both give 1 token per second here
  const LookaheadChoice c = choose_sd_lookahead(two_ks(2.0, 3.0, 0.0), prior);
  EXPECT_DOUBLE_EQ(c.predicted_tok_s[1], c.predicted_tok_s[2]);
  EXPECT_EQ(c.lookahead, 1);
}

// Costs of a draft whose steps cost 0.3 (one token) and 0.05 + 0.02 n (n branch rows).
LookaheadCosts branch_costs(std::vector<double> verify) {
  LookaheadCosts costs;
  costs.verify_s = std::move(verify);
  costs.draft_step_s = 0.3;
  costs.branch = branch_line(0.05, 0.02);
  return costs;
}

// What SSD's choice must hand ssd/budget.h at K for branch_costs, spelled out: the glue is one
// draft step, the primary's fallback K of them, and only the primary falls back.
BudgetInputs expected_inputs(int K, double verify, int max_fanout_total,
                             const LookaheadPrior& prior) {
  BudgetInputs in;
  in.lookahead = K;
  in.max_fanout_total = max_fanout_total;
  in.verify_s = verify;
  in.glue_s = 0.3;
  in.step_s = [](double rows) { return 0.05 + 0.02 * rows; };
  in.law = FanoutLaw{prior.acceptance, prior.r, prior.r_all};
  in.primary_fallback_s = K * 0.3;
  in.backup_fallback_allowed = false;
  return in;
}

TEST(SsdLookahead, EachKAtItsBestBudget) {
  const LookaheadCosts costs = branch_costs({0.0, 1.0, 1.05, 1.1});
  LookaheadPrior prior;
  prior.acceptance = 0.8;
  prior.r = 0.7;
  prior.r_all = 2.0;  // Theorem 18: the law after all K accepted is the prior's own
  prior.fallback = FallbackMode::Primary;
  const LookaheadChoice c = choose_ssd_lookahead(costs, prior, 0, 64);
  ASSERT_EQ(c.fanout_total.size(), 4u);
  for (int K = 1; K <= 3; ++K) {
    const BudgetPrediction best =
        best_budget(expected_inputs(K, costs.verify_s[size_t(K)], 64, prior));
    EXPECT_EQ(c.fanout_total[size_t(K)], best.fanout_total) << "K = " << K;
    EXPECT_DOUBLE_EQ(c.predicted_tok_s[size_t(K)], best.tokens_per_s) << "K = " << K;
  }
  int argmax = 1;
  for (int K = 2; K <= 3; ++K)
    if (c.predicted_tok_s[size_t(K)] > c.predicted_tok_s[size_t(argmax)]) argmax = K;
  EXPECT_EQ(c.lookahead, argmax);
}

TEST(SsdLookahead, ADraftTooSlowForAnyCacheGetsTheSdLikeRound) {
  // Every branch step outlasts the verification: no cache pays for itself (budget 0), and the
  // round is the just-in-time one, max(verify, glue) + K draft steps, as SD's.
  LookaheadCosts costs;
  costs.verify_s = {0.0, 1.0, 1.1};
  costs.draft_step_s = 0.4;
  costs.branch = branch_line(2.0, 1.0);
  LookaheadPrior prior;
  prior.acceptance = 0.5;
  prior.fallback = FallbackMode::Primary;
  const LookaheadChoice c = choose_ssd_lookahead(costs, prior, 0, 32);
  EXPECT_EQ(c.fanout_total[1], 0);
  EXPECT_EQ(c.fanout_total[2], 0);
  EXPECT_DOUBLE_EQ(c.predicted_tok_s[1], 1.5 / (1.0 + 0.4));
  EXPECT_DOUBLE_EQ(c.predicted_tok_s[2], 1.75 / (1.1 + 0.8));
  EXPECT_EQ(c.lookahead, 1);
  const LookaheadChoice sd = choose_sd_lookahead(costs, prior);
  EXPECT_DOUBLE_EQ(sd.predicted_tok_s[1], c.predicted_tok_s[1]);
}

TEST(SsdLookahead, AFixedBudgetIsPredictedAtThatBudget) {
  LookaheadPrior prior;
  prior.fallback = FallbackMode::Primary;
  const LookaheadChoice c = choose_ssd_lookahead(branch_costs({0.0, 1.0, 1.05}), prior, 3, 64);
  EXPECT_EQ(c.fanout_total[2], 3);
  EXPECT_DOUBLE_EQ(c.predicted_tok_s[2],
                   predict_budgets(expected_inputs(2, 1.05, 3, prior))[3].tokens_per_s);
}

// AR's step (verify_s[0]) beside the predictions: a rate of b / step, a line when it beats
// every K, and nothing where it was not measured.
TEST(Lookahead, ComparesEveryKWithAr) {
  LookaheadPrior prior;
  prior.acceptance = 0.5;  // rates: K = 1 1.5 / 1.4, K = 2 1.75 / 1.9 (above)
  LookaheadCosts costs = two_ks(1.0, 1.1, 0.4);
  LookaheadChoice c = choose_sd_lookahead(costs, prior);
  EXPECT_EQ(c.ar_tok_s, 0.0);
  EXPECT_EQ(speculation_loses_to_ar(c), "");
  EXPECT_EQ(describe_choice(c).find("AR"), std::string::npos);
  // An AR step of 0.8 (1.25 tok/s) beats K = 1's 1.07: the line names the rates.
  costs.verify_s[0] = 0.8;
  c = choose_sd_lookahead(costs, prior);
  EXPECT_DOUBLE_EQ(c.ar_tok_s, 1.25);
  EXPECT_EQ(c.lookahead, 1) << "K is still the best speculative one";
  const std::string line = speculation_loses_to_ar(c);
  EXPECT_NE(line.find("AR's step predicts 1.25 tok/s"), std::string::npos) << line;
  EXPECT_NE(line.find("best K = 1, 1.07"), std::string::npos) << line;
  EXPECT_NE(describe_choice(c).find("; AR 1.25 tok/s"), std::string::npos) << describe_choice(c);
  // A batch of 4 scales AR's rate as it scales the predictions; SSD compares the same way.
  costs.batch = 4;
  EXPECT_DOUBLE_EQ(choose_sd_lookahead(costs, prior).ar_tok_s, 5.0);
  costs.branch = branch_line(2.0, 1.0);
  prior.fallback = FallbackMode::Primary;
  EXPECT_NE(speculation_loses_to_ar(choose_ssd_lookahead(costs, prior, 0, 32)), "");
  // An AR step as long as a verification loses to K = 1 (1.5 tokens a round): silence.
  costs.verify_s[0] = 1.0;
  EXPECT_EQ(speculation_loses_to_ar(choose_sd_lookahead(costs, prior)), "");
}

// A best K at the end of the timed range widens it (doubling, up to the launch's limit and
// kMaxAutoLookahead); a best K inside it, or no room, ends the calibration.
TEST(Lookahead, TheRangeWidensWhileTheBestKIsItsLast) {
  EXPECT_EQ(next_auto_lookahead_range(8, 8, 100), 16);
  EXPECT_EQ(next_auto_lookahead_range(16, 16, 100), kMaxAutoLookahead);
  EXPECT_EQ(next_auto_lookahead_range(32, 32, 100), 0);
  EXPECT_EQ(next_auto_lookahead_range(8, 8, 11), 11) << "the model's positions bound it";
  EXPECT_EQ(next_auto_lookahead_range(7, 8, 100), 0);
  EXPECT_EQ(next_auto_lookahead_range(3, 3, 3), 0);
  // A draft step of 0.05 verifications at a = 0.9: SD's best K over 1..8 is 8, and over 1..16
  // it is 13 (L(13) / 1.65 = 4.67 tokens a verification against L(8) / 1.4 = 4.38).
  LookaheadPrior prior;
  prior.acceptance = 0.9;
  LookaheadCosts costs;
  costs.draft_step_s = 0.05;
  costs.verify_s.assign(9, 1.0);
  EXPECT_EQ(choose_sd_lookahead(costs, prior).lookahead, 8);
  costs.verify_s.assign(17, 1.0);
  const LookaheadChoice wide = choose_sd_lookahead(costs, prior);
  EXPECT_EQ(wide.lookahead, 13);
  EXPECT_NEAR(wide.predicted_tok_s[13], 4.674, 1e-3);
  EXPECT_EQ(next_auto_lookahead_range(wide.lookahead, 16, 100), 0);
}

TEST(Lookahead, RefusesCostsWithoutAVerification) {
  LookaheadCosts costs;
  costs.verify_s = {0.0};
  EXPECT_THROW(choose_sd_lookahead(costs, {}), std::invalid_argument);
  EXPECT_THROW(choose_ssd_lookahead(costs, {}, 0, 8), std::invalid_argument);
}

}  // namespace
}  // namespace ssd

namespace ssd {
namespace {

// -k auto's refinement after the warm-up: the capped geometric's maximum-likelihood a, not
// accepted / drafted.
TEST(MeasuredAcceptance, CountsOneFailurePerRejectingRound) {
  RepTotals t;
  t.draft_rounds = 20;                             // K = 4
  t.draft_accepted = 60, t.draft_rejections = 10;  // 10 took all 4, 10 stopped at a rejection
  EXPECT_DOUBLE_EQ(measured_acceptance(t, 0.8), 60.0 / 70.0);
  t.draft_rejections = 0;  // every draft accepted
  EXPECT_DOUBLE_EQ(measured_acceptance(t, 0.8), 1.0);
  t.draft_accepted = 0, t.draft_rejections = 20;  // none
  EXPECT_DOUBLE_EQ(measured_acceptance(t, 0.8), 0.0);
}

TEST(MeasuredAcceptance, TooFewRoundsKeepTheFallback) {
  RepTotals t;
  t.draft_rounds = kMinAcceptanceRounds - 1, t.draft_accepted = 30, t.draft_rejections = 5;
  EXPECT_DOUBLE_EQ(measured_acceptance(t, 0.8), 0.8);
  t.draft_rounds = kMinAcceptanceRounds;
  EXPECT_DOUBLE_EQ(measured_acceptance(t, 0.8), 30.0 / 35.0);
  EXPECT_DOUBLE_EQ(measured_acceptance(RepTotals{}, 0.7), 0.7);
}

TEST(NondecreasingCosts, PoolsInversionsKeepsOrderedSamples) {
  EXPECT_EQ(nondecreasing_costs({1.0, 2.0, 3.0}), (std::vector<double>{1.0, 2.0, 3.0}));
  // 234 then 174-194: pooled to their mean while it exceeds the next.
  const std::vector<double> v = nondecreasing_costs({4.0, 2.0, 3.0, 5.0});
  EXPECT_EQ(v, (std::vector<double>{3.0, 3.0, 3.0, 5.0}));
  EXPECT_EQ(nondecreasing_costs({1.0, 3.0, 2.0}), (std::vector<double>{1.0, 2.5, 2.5}));
  EXPECT_TRUE(nondecreasing_costs({}).empty());
}

// refine_lookahead chooses K again from the warm-up: its acceptance, and its rounds' own step
// costs, to which it scales the calibration's (the Qwen pair's numbers: a calibration of
// verifications at 220 ms and branch steps at 29.5 + 8.3 n ms, where the rounds took 150 ms
// and builds of 180 ms at K = 2 with 2 branch rows).
TEST(RefineLookahead, ScalesTheCalibrationToTheWarmUpsRounds) {
  RunPlan plan;
  plan.mode = Mode::SSD;
  plan.lookahead_auto = true;
  RunSetup setup;
  setup.decode.lookahead = 2;
  LookaheadCosts& cal = setup.lookahead_measured;
  cal.verify_s = {0.0, 0.22, 0.22, 0.22, 0.22, 0.24, 0.26, 0.27, 0.36};
  cal.draft_step_s = 0.046;
  cal.branch = branch_line(0.0295, 0.0083);
  RepTotals warm;
  warm.draft_rounds = warm.decode_steps = warm.cache_builds = 100;
  warm.draft_accepted = 180, warm.draft_rejections = 20;  // acceptance 0.9
  // Rounds as the calibration predicts them: its costs stand.
  warm.verify_s = 100 * 0.22;
  warm.branch_rows = 100 * 2.0;
  warm.cache_build_s = 100 * (0.046 + 2 * (0.0295 + 0.0083 * 2.0));
  LookaheadPrior prior;
  prior.acceptance = 0.9;
  const std::optional<RunSetup> same = refine_lookahead(plan, setup, warm);
  ASSERT_TRUE(same.has_value());
  EXPECT_EQ(same->decode.lookahead, choose_ssd_lookahead(cal, prior, 0, kMaxAutoBudget).lookahead);
  EXPECT_NE(same->lookahead_choice.find("x 1.00 and draft times x 1.00"), std::string::npos)
      << same->lookahead_choice;
  // Faster verifications and slower builds than calibrated: the cache of a long K no longer
  // fits the window, and K comes down to what the scaled costs predict best.
  warm.verify_s = 100 * 0.15;
  warm.cache_build_s = 100 * 0.18;
  const std::optional<RunSetup> scaled = refine_lookahead(plan, setup, warm);
  ASSERT_TRUE(scaled.has_value());
  LookaheadCosts expected = cal;
  for (double& v : expected.verify_s) v *= 0.15 / 0.22;
  const double draft = 0.18 / (0.046 + 2 * (0.0295 + 0.0083 * 2.0));
  expected.draft_step_s *= draft;
  expected.branch.scale(draft);
  EXPECT_EQ(scaled->decode.lookahead,
            choose_ssd_lookahead(expected, prior, 0, kMaxAutoBudget).lookahead);
  EXPECT_LT(scaled->decode.lookahead, same->decode.lookahead);
  EXPECT_NE(scaled->lookahead_choice.find("x 0.68 and draft times x 1.30"), std::string::npos)
      << scaled->lookahead_choice;
}

}  // namespace
}  // namespace ssd
