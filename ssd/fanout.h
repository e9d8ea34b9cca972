// The shape of the SAGUARO speculation cache (paper §4.1): how many bonus-token guesses F_k
// to prepare for each number k = 0..K of accepted draft tokens (Definition 10), either fixed
// by the user or the integer optimum of A.2's objective (Theorem 12's capped geometric series
// with one power law; Theorem 18's form with a curve per condition) fed by online estimates of
// the acceptance rate a and the power-law exponents (Definition 11).
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
// paper's F^-r slope beside it); the synthetic outcomes draw from it (one r for every
// position), FanoutEstimator fits it (ssd/fanout_estimator.h: an r per condition), and the
// shapes below are optimal for it.
// Its r is not the paper's: analysis reports both (ssd_analysis.metrics.fit_power_law_mle and
// fit_power_law_paper_mle).

// a and r before a run has measured them (--fanout-alpha / --fanout-r auto): a prior, not a fit.
inline constexpr double kFanoutPrior = 0.7;

// What shapes a geometric fan-out: the acceptance a and the power-law exponents of the hit
// rate. Theorem 18 lets the hit-rate curve depend on the condition; Theorem 12 takes one law for
// all. Two are kept here (ssd/fanout_estimator.h fits them): after a rejection at k + 1 (k < K)
// the bonus is drawn from the residual max(p_t - p_d, 0), after all K are accepted from the
// target's own distribution, which the draft ranks far better (the Qwen pair's top 2 holds it in
// 84-88% of such rounds against 56-62% after a rejection, at T = 0.5 and 1).
struct FanoutLaw {
  double acceptance = kFanoutPrior;
  double r = kFanoutPrior;      // positions k < K
  double r_all = kFanoutPrior;  // k = K, every drafted token accepted
};

// A.2's objective term by term for a law at lookahead K: position k's weight w_k, the chance
// that exactly k are accepted (a^k (1-a) for k < K, a^K for K), times its hit rate
// 1 - (F_k+1)^{-r_k}, r_k = r below K and r_all at K (Theorem 18's first-order conditions then
// equalise w_k h_k'(F_k)). Separable and concave in each F_k, so a greedy allocation of whole
// units is exactly optimal; geometric_fanout and --budget auto's predictions (ssd/budget.h)
// share it.
class FanoutObjective {
 public:
  // a is clamped to [0, 1], r and r_all to >= 1e-3.
  FanoutObjective(int K, const FanoutLaw& law);
  // w_k (1 - (F+1)^{-r_k}): what F guesses at position k add to p_hit.
  double hit(int k, int fanout) const;
  // What one more guess there adds: hit(k, F+1) - hit(k, F).
  double gain(int k, int fanout) const;
  // The position whose next guess gains most (ties to the smaller k, reached more often).
  int best_position(const std::vector<int>& shape) const;
  int lookahead() const { return int(weight_.size()) - 1; }

 private:
  std::vector<double> weight_, r_;
};

// The integer shape that maximises expected_hit_rate among all shapes of non-negative integers
// summing to B (FanoutObjective's greedy). Over real shapes with r = r_all, Theorem 12
// (Appendix A.2) is the paper's law's optimum, and its series in G_k = F_k + 1 with budget
// B + K + 1 the shifted law's where every F_k stays > 0 (Theorem 18's first-order conditions;
// F_k = 0 where it would not); this shape stays within K of the latter (the oracles of
// tests/test_fanout_geometric.cpp). Throws std::invalid_argument for K < 0, a negative
// fanout_total or a NaN a, r or r_all.
std::vector<int> geometric_fanout(int K, int fanout_total, const FanoutLaw& law);

// The integer shape for a spec at lookahead K, total fan-out B = fanout_total (geometric
// only; spec.fanout_total > 0 overrides it) and the current law estimates. Throws InputError if
// a list has the wrong length (naming --fanout and K).
std::vector<int> resolve_fanout(const FanoutSpec& spec, int K, int fanout_total,
                                const FanoutLaw& law);

// p_hit,p of a shape under a law (A.2, Theorem 18): sum_k w_k (1 - (F_k+1)^{-r_k}).
double expected_hit_rate(const std::vector<int>& shape, const FanoutLaw& law);

// Theorem 12's single law: r at every position.
inline std::vector<int> geometric_fanout(int K, int fanout_total, double acceptance, double r) {
  return geometric_fanout(K, fanout_total, FanoutLaw{acceptance, r, r});
}
inline double expected_hit_rate(const std::vector<int>& shape, double acceptance, double r) {
  return expected_hit_rate(shape, FanoutLaw{acceptance, r, r});
}

// The verification window's limit: the largest total fan-out per sequence B such that the
// glue step and K branch steps, each over rows * B rows costing step_a + step_b * rows * B
// seconds, finish within 90% of the verification window (the slack absorbs timing noise). 0
// when even one branch row does not fit; clamped to [0, max_fanout_total]. `ssd-bench
// characterize` reports it (as fanout_budget). A limit on B, not a cache's own B
// (fanout_total) nor the --budget setting: --budget auto (ssd/budget.h) may spend more when
// that pays.
int window_fanout_limit(double window_s, double glue_s, double step_a, double step_b, int K,
                        int rows, int max_fanout_total);

}  // namespace ssd
