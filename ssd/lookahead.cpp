#include "ssd/lookahead.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "ssd/budget.h"

namespace ssd {
namespace {

void check(const LookaheadCosts& costs) {
  if (costs.verify_s.size() < 2 || costs.batch < 1)
    throw std::invalid_argument("lookahead: needs verification costs for K >= 1 and a batch");
}

// Appendix A.2: expected tokens of a round that drafts K, 1 + a + ... + a^K.
double expected_tokens(double a, int K) {
  double sum = 0.0, power = 1.0;
  for (int i = 0; i <= K; ++i, power *= a) sum += power;
  return sum;
}

double ar_rate(const LookaheadCosts& costs) {
  return costs.verify_s[0] > 0 ? costs.batch / costs.verify_s[0] : 0.0;
}

// The first K of the highest rate: a longer speculation must earn its extra rows.
int best_of(const std::vector<double>& rate) {
  int best = 1;
  for (size_t K = 2; K < rate.size(); ++K)
    if (rate[K] > rate[size_t(best)] * (1.0 + 1e-9)) best = int(K);
  return best;
}

}  // namespace

LookaheadChoice choose_sd_lookahead(const LookaheadCosts& costs, const LookaheadPrior& prior) {
  check(costs);
  const double a = std::clamp(prior.acceptance, 0.0, 1.0);
  LookaheadChoice choice;
  choice.predicted_tok_s.assign(costs.verify_s.size(), 0.0);
  for (size_t K = 1; K < costs.verify_s.size(); ++K) {
    const double round_s = costs.verify_s[K] + double(K) * costs.draft_step_s;
    choice.predicted_tok_s[K] = costs.batch * expected_tokens(a, int(K)) / std::max(round_s, 1e-12);
  }
  choice.lookahead = best_of(choice.predicted_tok_s);
  choice.ar_tok_s = ar_rate(costs);
  return choice;
}

LookaheadChoice choose_ssd_lookahead(const LookaheadCosts& costs, const LookaheadPrior& prior,
                                     int budget_setting, int max_fanout_total) {
  check(costs);
  LookaheadChoice choice;
  choice.predicted_tok_s.assign(costs.verify_s.size(), 0.0);
  choice.fanout_total.assign(costs.verify_s.size(), 0);
  for (size_t K = 1; K < costs.verify_s.size(); ++K) {
    BudgetInputs in;
    in.lookahead = int(K);
    in.rows = costs.batch;
    in.max_fanout_total = budget_setting > 0 ? budget_setting : max_fanout_total;
    in.verify_s = costs.verify_s[K];
    // After a hit the glue step feeds the one speculation token not yet cached per sequence.
    in.glue_s = costs.draft_step_s;
    in.step_s = [&costs](double rows) { return costs.branch.seconds(rows); };
    in.law = FanoutLaw{prior.acceptance, prior.r, prior.r_all};
    in.primary_fallback_s = double(K) * costs.draft_step_s;
    // A random backup's tokens cost nothing to make and are (almost) never accepted.
    in.backup_fallback_s = 0.0;
    in.e_miss_backup = 1.0;
    in.primary_fallback_allowed = prior.fallback != FallbackMode::Backup;
    in.backup_fallback_allowed = prior.fallback != FallbackMode::Primary;
    const BudgetPrediction best = budget_setting > 0 ? predict_budgets(in).back() : best_budget(in);
    choice.predicted_tok_s[K] = best.tokens_per_s;
    choice.fanout_total[K] = best.fanout_total;
  }
  choice.lookahead = best_of(choice.predicted_tok_s);
  choice.ar_tok_s = ar_rate(costs);
  return choice;
}

int next_auto_lookahead_range(int chosen, int range, int limit) {
  limit = std::min(limit, kMaxAutoLookahead);
  if (chosen < range || range >= limit) return 0;
  return std::min(2 * range, limit);
}

double measured_acceptance(const RepTotals& totals, double fallback) {
  const int64_t trials = totals.draft_accepted + totals.draft_rejections;
  if (totals.draft_rounds < kMinAcceptanceRounds || trials <= 0) return fallback;
  return double(totals.draft_accepted) / double(trials);
}

std::vector<double> nondecreasing_costs(const std::vector<double>& v) {
  std::vector<double> level, weight;
  for (double x : v) {
    level.push_back(x), weight.push_back(1.0);
    while (level.size() > 1 && level[level.size() - 2] > level.back()) {
      const double w = weight[weight.size() - 2] + weight.back();
      const double pooled =
          (level[level.size() - 2] * weight[weight.size() - 2] + level.back() * weight.back()) / w;
      level.pop_back(), weight.pop_back();
      level.back() = pooled, weight.back() = w;
    }
  }
  std::vector<double> out;
  for (size_t i = 0; i < level.size(); ++i) out.insert(out.end(), size_t(weight[i]), level[i]);
  return out;
}

std::string describe_choice(const LookaheadChoice& choice) {
  std::string text;
  char item[64];
  for (size_t K = 1; K < choice.predicted_tok_s.size(); ++K) {
    if (choice.fanout_total.empty())
      std::snprintf(item, sizeof item, "%sK=%zu %.3g", K > 1 ? ", " : "", K,
                    choice.predicted_tok_s[K]);
    else
      std::snprintf(item, sizeof item, "%sK=%zu %.3g (budget %d)", K > 1 ? ", " : "", K,
                    choice.predicted_tok_s[K], choice.fanout_total[K]);
    text += item;
  }
  text += " tok/s";
  if (choice.ar_tok_s > 0) {
    std::snprintf(item, sizeof item, "; AR %.3g tok/s", choice.ar_tok_s);
    text += item;
  }
  return text;
}

std::string speculation_loses_to_ar(const LookaheadChoice& choice) {
  // The chosen K is the one of the highest predicted rate (best_of).
  const double best = choice.predicted_tok_s.at(size_t(choice.lookahead));
  if (choice.ar_tok_s <= 0 || choice.ar_tok_s <= best) return "";
  char line[320];
  std::snprintf(line, sizeof line,
                "-k auto: AR's step predicts %.3g tok/s, above every K's (best K = %d, %.3g): "
                "speculation does not pay with these models on this hardware (a draft step "
                "costs too much of a target step); compare with --mode ar",
                choice.ar_tok_s, choice.lookahead, best);
  return line;
}

}  // namespace ssd
