// --budget auto: how much fan-out the SAGUARO cache should get each round (paper §4.1, §4.3).
// A bigger cache hits more often but takes longer to build; once the build outlasts the
// verification the target waits for it. The budget that maximises the predicted decoding rate
// of Corollary 16 (with the run's own measured times and fitted acceptance and power law) is
// the one to use; it may well be a build longer than the verification, and it is 0 only when
// no cache at all pays for itself.
#pragma once

#include <functional>
#include <vector>

#include "ssd/fanout.h"

namespace ssd {

// The largest total fan-out per sequence --budget auto may choose: the draft rank's scratch
// slots hold this many branches of K tokens per sequence.
constexpr int kMaxAutoBudget = 128;

struct BudgetInputs {
  int lookahead = 4;  // K
  int rows = 1;       // sequences this draft rank builds branches for
  // Sequences whose misses stall the round together (Corollary 16's b): the whole batch over
  // every draft rank; 0 = rows (one draft rank).
  int batch = 0;
  int max_fanout_total = kMaxAutoBudget;  // the largest total fan-out to weigh
  double verify_s = 0.0;  // the target's verification of a round (the window to hide in)
  double glue_s = 0.0;    // the glue step before branching
  // One branch step over n branch rows, in seconds: as measured (ssd/step_cost.h); free unless
  // set.
  std::function<double(double rows)> step_s = [](double) { return 0.0; };
  FanoutLaw law;  // the primary's a and its power laws (ssd/fanout.h)
  // Fallback after a miss, for the whole batch: the primary drafting just in time (yielding
  // E_hit tokens) or the backup (yielding e_miss_backup = 1 + its mean accepted count).
  double primary_fallback_s = 0.0;
  double backup_fallback_s = 0.0;
  double e_miss_backup = 1.0;
  bool primary_fallback_allowed = true;
  bool backup_fallback_allowed = true;
};

struct BudgetPrediction {
  int fanout_total = 0;          // B = sum F_k per sequence, the cache this prediction builds
  double p_hit = 0.0;            // per sequence, with geometric_fanout's shape for this B
  double build_s = 0.0;          // glue + K branch steps
  double round_s = 0.0;          // Corollary 16's expected round time, in seconds
  double tokens_per_s = 0.0;     // rows * expected tokens per round / round_s
  bool primary_fallback = true;  // which fallback the prediction assumed (the better one)
};

// Predicted rate for every total fan-out B = 0..max_fanout_total (index = B). One greedy pass
// gives the optimal shape of every B (ssd/fanout.h: each B's shape is the previous one plus
// one unit), so the whole curve costs O(max_fanout_total * K).
std::vector<BudgetPrediction> predict_budgets(const BudgetInputs& in);

// The total fan-out of highest predicted rate (the smallest among equals: cheaper to build).
BudgetPrediction best_budget(const BudgetInputs& in);

// --budget auto's next budget: the best predicted, but at most twice (or K + 1 more than) the
// largest budget whose branch steps have been timed, `largest_timed`, so that the step-cost
// curve (ssd/step_cost.h) measures each size before it is relied on far beyond; shrinking is
// at once. Capped from what was timed, not from the last choice: a choice shapes the build
// after next (a branch's shape is fixed when it is prepared), so a cap of twice the last choice
// let the Qwen pair's budget go from 11 to 22 and then 44 before 22 had been timed (builds of
// 615-821 ms where 11's took ~200, in 2 of Figure 7's 3 repetitions at b = 1).
int next_auto_budget(int best, int largest_timed, int K);

// --budget auto at 0 (the SD-like round) measures nothing: no branch step runs, so the
// step-cost curve (ssd/step_cost.h) neither refreshes nor forgets, and whatever priced every
// cache above the SD-like round keeps deciding for the rest of the run. One launch of a draft
// of 0.1 of its target stayed at 0 for every round (p_hit 0, 11.3 tok/s) where launches beside
// it built caches of 13-23 outcomes at p_hit 0.91-0.98 (15-17 tok/s). So every
// kZeroBudgetProbe-th round in a row that chose 0 builds K + 1 branches instead (one guess per
// position, as a run's first round), timed beside a verification that a separate draft rank
// would otherwise idle through. `zero_rounds`: rounds in a row that chose 0, this one included.
constexpr int kZeroBudgetProbe = 8;
int probe_zero_budget(int chosen, int zero_rounds, int K);

}  // namespace ssd
