// The shape of the SAGUARO speculation cache (paper §4.1): how many bonus-token guesses F_k
// to prepare for each number k = 0..K of accepted draft tokens (Definition 10), either fixed
// by the user or Theorem 12's capped geometric series fed by online estimates of the
// acceptance rate a and the power-law exponent r (Definition 11).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ssd {

// A fan-out shape: F_k bonus-token guesses at each position k = 0..K (Definition 10).
// Its total fan-out per sequence, B = sum_k F_k (the paper's "budget"), is named fanout_total
// in code. Two other quantities are easily taken for it: the --budget setting (a fixed B or
// auto; SaguaroSettings::budget_setting, ssd/budget.h) and the verification window's limit
// (window_fanout_limit below: the largest B whose cache build one verification hides).
struct FanoutSpec {  // parsed from --fanout
  enum class Kind { Uniform, List, Geometric } kind = Kind::Uniform;
  int uniform = 1;        // uniform:F
  std::vector<int> list;  // list:F0,...,FK  (must have K+1 entries)
  int fanout_total = 0;   // geometric:B  (0 = take B from --budget)
};

// "uniform:4", "list:4,3,2,1,1", "geometric:20", "geometric" (B from --budget).
// Throws ssd::InputError naming --fanout and what was expected.
FanoutSpec parse_fanout(const std::string& text);

// The power law. Definition 11 writes the miss rate of a fan-out F as F^{-r} (F >= 1), which
// is 1 at F = 1: a one-token cache would never hit. This project uses the shifted law
// miss(F) = (F+1)^{-r} (F >= 0: an empty cache always misses, one guess already hits), which
// fits measured ranks better (results/figures/fig3_fanout.png draws its fit and gives the
// paper's F^-r slope beside it); the synthetic outcomes draw from it, FanoutEstimator fits it,
// and the shapes below are optimal for it.
// Its r is not the paper's: analysis reports both (ssd_analysis.metrics.fit_power_law_mle and
// fit_power_law_paper_mle).

// The integer shape that maximises expected_hit_rate (A.2's objective under the shifted law)
// among all shapes of non-negative integers summing to B: the objective is separable and
// concave in each F_k, so giving each unit of budget to the largest marginal gain (ties to the
// smaller k, reached more often) is exactly optimal. Over real shapes, Theorem 12 (Appendix
// A.2) is the paper's law's optimum, and its series in G_k = F_k + 1 with budget B + K + 1 the
// shifted law's where every F_k stays > 0 (Theorem 18's first-order conditions; F_k = 0 where
// it would not); this shape stays within K of the latter (the oracles of
// tests/test_fanout_geometric.cpp).
// a is clamped to [0, 1], r to >= 1e-3; throws std::invalid_argument for K < 0, a negative
// fanout_total or a NaN a or r.
std::vector<int> geometric_fanout(int K, int fanout_total, double acceptance, double r);

// The integer shape for a spec at lookahead K, total fan-out B = fanout_total (geometric
// only; spec.fanout_total > 0 overrides it) and the current (a, r) estimates. Throws
// InputError if a list has the wrong length (naming --fanout and K).
std::vector<int> resolve_fanout(const FanoutSpec& spec, int K, int fanout_total, double acceptance,
                                double r);

// The verification window's limit: the largest total fan-out per sequence B such that the
// glue step and K branch steps, each over rows * B rows costing step_a + step_b * rows * B
// seconds, finish within 90% of the verification window (the slack absorbs timing noise). 0
// when even one branch row does not fit; clamped to [0, max_fanout_total]. `ssd-bench
// characterize` reports it (as fanout_budget). A limit on B, not a cache's own B
// (fanout_total) nor the --budget setting: --budget auto (ssd/budget.h) may spend more when
// that pays.
int window_fanout_limit(double window_s, double glue_s, double step_a, double step_b, int K,
                        int rows, int max_fanout_total);

// A.2's objective p_hit,p({F_k}) = a^K h(F_K) + sum_{k<K} a^k (1-a) h(F_k) with the shifted
// power law h(F) = 1 - (F+1)^{-r} (see above). For tests and reports.
double expected_hit_rate(const std::vector<int>& shape, double acceptance, double r);

// a and r before a run has measured them (--fanout-alpha / --fanout-r auto): a prior, not a fit.
inline constexpr double kFanoutPrior = 0.7;

// The acceptance a and power-law exponent r that shape a fan-out (Theorem 12's inputs).
struct FanoutLaw {
  double acceptance = kFanoutPrior;
  double r = kFanoutPrior;
};

// Online estimates for --fanout-alpha auto / --fanout-r auto (one instance for the primary
// shape, one for the backup shape).
class FanoutEstimator {
 public:
  // Each of a and r fixed where given (>= 0; < 0 = auto), else estimated from the run so far,
  // kFanoutPrior until there is something to estimate from. The a it shapes with is the
  // acceptance estimate pulled towards kFanoutPrior by kPriorTrials trials (see fanout.cpp).
  FanoutLaw law(double fixed_acceptance, double fixed_r) const;
  // One verification outcome of a round speculated by this speculator: k accepted of K
  // drafted, and the 1-based rank of the realised bonus token in the draft's candidate list at
  // position k (0 when it was not in the list at all, i.e. rank > the list length L examined).
  void observe(int accepted, int drafted, int bonus_rank, int list_length);
  // The per-token acceptance rate a of A.2's capped geometric model, or fallback when nothing
  // was observed: accepted / (accepted + rounds with a rejection), its maximum-likelihood
  // estimate. (accepted/drafted would underestimate a: positions after a rejection are never
  // tried; at a = 0.8, K = 4 it gives 0.59.)
  double acceptance(double fallback) const;
  // r from fitting the power law of Definition 11 to the observed ranks (see fanout.cpp for
  // the shifted form and the weighting); fallback with fewer than kMinObservations
  // informative observations.
  double power_law_r(double fallback) const;
  int observations() const { return observations_; }

  static constexpr int kMinObservations = 16;
  static constexpr double kPriorTrials = 4.0;  // the weight of kFanoutPrior in law()'s a
  static constexpr int kMaxRank = 1024;        // ranks/list lengths beyond this are censored here

 private:
  int observations_ = 0;
  int informative_ = 0;  // observations with a known rank or a non-empty list
  int64_t accepted_ = 0, drafted_ = 0;
  std::vector<int64_t> rank_count_;      // [j] = observations with bonus rank j (1-based)
  std::vector<int64_t> censored_count_;  // [L] = observations with rank > L (not in a list)
};

}  // namespace ssd
