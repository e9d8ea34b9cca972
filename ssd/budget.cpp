#include "ssd/budget.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ssd {

std::vector<BudgetPrediction> predict_budgets(const BudgetInputs& in) {
  const int K = in.lookahead;
  if (K < 1 || in.rows < 1 || in.max_fanout_total < 0)
    throw std::invalid_argument("predict_budgets: needs K >= 1, rows >= 1, max_fanout_total >= 0");
  const double a = std::clamp(in.law.acceptance, 0.0, 1.0);
  double e_hit = 1.0, reach = 1.0;  // A.2: E_hit = 1 + sum_{i=1..K} a^i
  for (int i = 1; i <= K; ++i) e_hit += (reach *= a);
  // Grow the optimal shape one unit at a time (geometric_fanout's rule), tracking p_hit.
  const FanoutObjective objective(K, in.law);
  std::vector<int> shape(K + 1, 0);
  double p_hit = 0.0;
  std::vector<BudgetPrediction> out;
  out.reserve(in.max_fanout_total + 1);
  for (int fanout_total = 0; fanout_total <= in.max_fanout_total; ++fanout_total) {
    if (fanout_total > 0) {
      const int k = objective.best_position(shape);
      p_hit += objective.gain(k, shape[k]++);
    }
    BudgetPrediction p;
    p.fanout_total = fanout_total;
    p.p_hit = std::clamp(p_hit, 0.0, 1.0);
    const double branches = double(in.rows) * fanout_total;
    p.build_s = in.glue_s + (fanout_total > 0 ? K * in.step_s(branches) : 0.0);
    // Corollary 16 in seconds: the round takes the longer of verification and cache build;
    // when any of the b rows misses (probability 1 - p^b) the batch also waits for the
    // fallback.
    const double base = std::max({in.verify_s, p.build_s, 1e-12});
    const int b = in.batch > 0 ? in.batch : in.rows;
    const double any_miss = 1.0 - std::pow(p.p_hit, b);
    p.tokens_per_s = -1.0;
    if (in.primary_fallback_allowed) {
      p.round_s = base + any_miss * in.primary_fallback_s;
      p.tokens_per_s = b * e_hit / p.round_s;
      p.primary_fallback = true;
    }
    if (in.backup_fallback_allowed) {
      const double round_s = base + any_miss * in.backup_fallback_s;
      const double tokens = p.p_hit * e_hit + (1.0 - p.p_hit) * in.e_miss_backup;
      const double rate = b * tokens / round_s;
      if (rate > p.tokens_per_s) {
        p.round_s = round_s;
        p.tokens_per_s = rate;
        p.primary_fallback = false;
      }
    }
    out.push_back(p);
  }
  return out;
}

BudgetPrediction best_budget(const BudgetInputs& in) {
  const std::vector<BudgetPrediction> all = predict_budgets(in);
  BudgetPrediction best = all.front();
  for (const BudgetPrediction& p : all)
    if (p.tokens_per_s > best.tokens_per_s * (1.0 + 1e-9)) best = p;
  return best;
}

int next_auto_budget(int best, int largest_timed, int K) {
  return std::min(best, std::max(2 * largest_timed, largest_timed + K + 1));
}

int probe_zero_budget(int chosen, int zero_rounds, int K) {
  if (chosen > 0 || zero_rounds < 1 || zero_rounds % kZeroBudgetProbe != 0) return chosen;
  return K + 1;
}

}  // namespace ssd
