// -k auto: the lookahead K of highest predicted decoding rate, from step costs measured on the
// launch's own hardware just before decoding (harness/calibrate.h) and an acceptance rate.
//
// Why not the paper's K: its 1B draft costs ~1/20 of its 70B target over 4 GPUs, so K drafted
// tokens and a cache of many branches fit one verification. On a CPU pair whose draft costs ~1/3
// of the target, each extra position costs a third of a target step in SD and a whole branch
// step in SSD's cache build, while it adds only a^K tokens: the best K is smaller, and for SSD
// it is the one whose cache build still fits the verification window (T_p near 1).
#pragma once

#include <string>
#include <vector>

#include "ssd/fallback.h"
#include "ssd/fanout.h"
#include "ssd/records.h"
#include "ssd/step_cost.h"

namespace ssd {

// -k auto times K = 1..kFirstAutoLookahead first. A best K at the end of that range says that a
// longer one may be better still (a draft of a twentieth of its target: the paper's Llama pair
// is predicted best at K = 13, a draft of 0.05 of the Qwen target at 13 for SD and 19 for
// SSD), so the range doubles and is timed again, up to kMaxAutoLookahead
// (next_auto_lookahead_range). Where drafts cost a third of the target, as on the CPU pair,
// the first range ends it: its best K is 2-5.
constexpr int kFirstAutoLookahead = 8;
constexpr int kMaxAutoLookahead = 32;

// The range the calibration times next: twice `range` (at most `limit`, the largest K the
// launch may take), where the best K chosen over 1..range is `range` itself; 0 where the
// choice stands (inside the range, or no room for more).
int next_auto_lookahead_range(int chosen, int range, int limit);

// Seconds per forward pass, measured for the run's batch size b.
struct LookaheadCosts {
  int batch = 1;
  // verify_s[K]: the target's forward of b x (K + 1) rows, all logits; verify_s[0]: its step
  // of b rows, an AR step timed like the verifications (0 where not measured).
  std::vector<double> verify_s;
  // The draft's step of one token per sequence (b rows): SD's drafting, SSD's just-in-time
  // fallback and glue step.
  double draft_step_s = 0.0;
  // SSD's branch steps: seconds over n branch rows, measured at a few n (ssd/step_cost.h).
  StepCostCurve branch;
};

struct LookaheadChoice {
  int lookahead = 1;
  // predicted_tok_s[K] for K = 1..max (index 0 unused); for SSD at the best B of each K.
  std::vector<double> predicted_tok_s;
  // SSD: the total fan-out per sequence B behind each prediction (0: none)
  std::vector<int> fanout_total;
  // AR's rate on the same measurements, b / verify_s[0] (0 where not measured): what
  // speculation is for beating.
  double ar_tok_s = 0.0;
};

struct LookaheadPrior {
  double acceptance = 0.8;  // a: per-token acceptance (E[tokens] of Appendix A.2)
  // The fan-out power laws (ssd/fanout.h FanoutLaw), SSD only: after a rejection and after all
  // K accepted (Theorem 18; one law, Theorem 12's, where they are equal).
  double r = kFanoutPrior;
  double r_all = kFanoutPrior;
  FallbackMode fallback = FallbackMode::Auto;
};

// SD: b E(K) tokens per round of verify_s[K] + K draft steps, E(K) = (1 - a^(K+1)) / (1 - a).
LookaheadChoice choose_sd_lookahead(const LookaheadCosts& costs, const LookaheadPrior& prior);

// SSD: for each K the total fan-out B of Corollary 16's highest rate (ssd/budget.h: the round
// takes the longer of verification and cache build, plus the fallback when a sequence
// misses), up to max_fanout_total, then the K of the highest of those. B = 0 is the SD-like
// round: every speculation drafted just in time after the outcome.
// budget_setting > 0 (--budget N): every K is predicted at that B instead; 0 = auto.
LookaheadChoice choose_ssd_lookahead(const LookaheadCosts& costs, const LookaheadPrior& prior,
                                     int budget_setting, int max_fanout_total);

// The per-token acceptance a that the draft's own speculation rounds measured (a backup's are
// not the draft's a): accepted / (accepted + rounds with a rejection), the maximum-likelihood
// estimate of A.2's capped geometric model (as FanoutEstimator::acceptance). `fallback` below
// kMinAcceptanceRounds such sequence-rounds.
double measured_acceptance(const RepTotals& totals, double fallback);
constexpr int64_t kMinAcceptanceRounds = 16;

// Measured costs of steps of growing rows, made non-decreasing: a verification of more rows
// never costs less, but a sample taken while the draft rank was in a heavier step can make it
// look so (one launch measured 234 ms for K = 1 and 174-194 ms for K = 2-5). Pooling adjacent
// violators (isotonic regression) keeps the measured level and removes the inversions, so that
// one noisy step cannot decide K.
std::vector<double> nondecreasing_costs(const std::vector<double>& v);

// "K 1: 9.8, 2: 11.2, ..." tok/s (and B for SSD, printed as "budget"), then AR's rate where
// measured, for the header and /config.
std::string describe_choice(const LookaheadChoice& choice);

// One line when AR's rate beats every K's predicted rate: speculation does not pay with these
// models on this hardware, whatever K. Empty otherwise, or where AR's step was not measured.
// The calibration times the target beside the busy draft, which slows AR's step as much as the
// verifications, so the line errs towards silence.
std::string speculation_loses_to_ar(const LookaheadChoice& choice);

}  // namespace ssd
