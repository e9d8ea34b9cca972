// Online estimates of the law that shapes a geometric fan-out (--fanout-alpha auto,
// --fanout-r auto): the acceptance a of A.2's capped geometric model and the power-law
// exponents of Definition 11, one for each condition Theorem 18 tells apart (ssd/fanout.h).
#pragma once

#include <cstdint>
#include <vector>

#include "ssd/fanout.h"

namespace ssd {

// The bonus ranks observed under one condition, each either known (1-based) or censored (only
// "beyond the L candidates examined" is known), and the shifted power law fitted to them.
class RankHistogram {
 public:
  // bonus_rank 0 = not among the list_length candidates; a round with no list carries nothing.
  void add(int bonus_rank, int list_length);
  int informative() const { return informative_; }
  // r of miss(F) = (F+1)^{-r} fitted to the ranks (see fanout_estimator.cpp); fallback with
  // fewer than min_observations informative observations (at least 8: the fit's first point
  // needs 8 at risk).
  double power_law_r(double fallback, int min_observations) const;

 private:
  int informative_ = 0;
  std::vector<int64_t> rank_count_;      // [j] = observations with bonus rank j (1-based)
  std::vector<int64_t> censored_count_;  // [L] = observations with rank > L (not in a list)
};

// One instance for the primary speculator's rounds, one for the backup's.
class FanoutEstimator {
 public:
  // Each of a and r fixed where given (>= 0; < 0 = auto), else estimated from the run so far,
  // kFanoutPrior until there is something to estimate from. The a it shapes with is the
  // acceptance estimate pulled towards kFanoutPrior by kPriorTrials trials; each condition's r
  // is its own fit pulled towards the pooled fit by kConditionPriorWeight observations (see
  // fanout_estimator.cpp). A fixed r is Theorem 12's single law: r and r_all both.
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
  // r fitted to every observed rank, both conditions pooled (Theorem 12's one law); fallback
  // with fewer than kMinObservations informative observations.
  double power_law_r(double fallback) const;
  int observations() const { return observations_; }

  static constexpr int kMinObservations = 16;
  static constexpr double kPriorTrials = 4.0;  // the weight of kFanoutPrior in law()'s a
  // A condition's own fit counts from this many observations, and weighs against the pooled r
  // as if the pooled r were this many more.
  static constexpr int kMinConditionObservations = 8;
  static constexpr double kConditionPriorWeight = 8.0;
  static constexpr int kMaxRank = 1024;  // ranks/list lengths beyond this are censored here

 private:
  int observations_ = 0;
  int64_t accepted_ = 0, drafted_ = 0;
  RankHistogram pooled_, rejected_, all_accepted_;
};

}  // namespace ssd
