#include "ssd/fanout_estimator.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ssd {

void RankHistogram::add(int bonus_rank, int list_length) {
  if (bonus_rank > 0) {
    if (int(rank_count_.size()) <= bonus_rank) rank_count_.resize(bonus_rank + 1, 0);
    ++rank_count_[bonus_rank];
    ++informative_;
  } else if (list_length > 0) {  // censored: only "rank > L" is known
    if (int(censored_count_.size()) <= list_length) censored_count_.resize(list_length + 1, 0);
    ++censored_count_[list_length];
    ++informative_;
  }
}

double RankHistogram::power_law_r(double fallback, int min_observations) const {
  if (informative_ < std::max(min_observations, 8)) return fallback;
  // Definition 11 writes the miss rate as F^{-r}, which is 1 at F = 1 (a one-token cache would
  // always miss). This project's synthetic outcome model uses the shifted law
  // P(rank > F) = (F+1)^{-r} (F = 0 always misses), so the fit is log m(F) = -r log(F+1),
  // through the origin, to stay consistent with it; Theorem 12's shape then takes r as is.
  // A bonus missing from a list of length L only says rank > L, and lists differ in length
  // (a position's list can also be empty), so m(F) is the Kaplan-Meier survival estimate:
  // m(F) = prod_{j <= F} (1 - d_j / n_j), d_j = #(rank = j), n_j = #(rank >= j) + #(L >= j).
  // With one list length for all observations it is exactly the empirical P(rank > F).
  const int max_f = int(std::max(rank_count_.size(), censored_count_.size()));
  // Suffix sums: ranked_from[j] = #(rank >= j), censored_from[j] = #(censored with L >= j).
  std::vector<int64_t> ranked_from(max_f + 1, 0), censored_from(max_f + 1, 0);
  auto count = [](const std::vector<int64_t>& v, int i) { return i < int(v.size()) ? v[i] : 0; };
  for (int j = max_f - 1; j >= 0; --j) {
    ranked_from[j] = ranked_from[j + 1] + count(rank_count_, j);
    censored_from[j] = censored_from[j + 1] + count(censored_count_, j);
  }
  double log_m = 0.0, greenwood = 0.0, sxy = 0.0, sxx = 0.0;
  for (int f = 1; f < max_f; ++f) {
    const int64_t at_risk = ranked_from[f] + censored_from[f];
    const int64_t hits = count(rank_count_, f);
    if (at_risk < 8 || hits >= at_risk) break;  // too few left, or m(F) = 0 from here on
    log_m += std::log1p(-double(hits) / double(at_risk));
    greenwood += double(hits) / (double(at_risk) * double(at_risk - hits));
    // Weighted by the inverse of Greenwood's variance of log m(F): the tail, estimated from
    // few misses, is noisy. The floor keeps a point with no hits yet from dominating.
    const double w = 1.0 / std::max(greenwood, 1.0 / (double(at_risk) * double(at_risk)));
    const double x = std::log(f + 1.0);
    sxy += w * x * log_m;
    sxx += w * x * x;
  }
  constexpr double kMaxR = 64.0;
  if (sxx == 0.0) {
    // Every bonus was the top candidate: the miss rate at F = 1 is below ~1/(2n).
    return std::min(kMaxR, std::log(2.0 * informative_) / std::log(2.0));
  }
  return std::clamp(-sxy / sxx, 1e-3, kMaxR);
}

void FanoutEstimator::observe(int accepted, int drafted, int bonus_rank, int list_length) {
  if (drafted < 0 || accepted < 0 || accepted > drafted || bonus_rank < 0 || list_length < 0)
    throw std::invalid_argument("FanoutEstimator::observe: inconsistent outcome");
  ++observations_;
  // A.2's model: each drafted position is accepted with probability a until the first
  // rejection, so a round is `accepted` successes plus one failure unless all were accepted.
  // Positions after a rejection are never tried, which is why accepted/drafted would
  // underestimate a; this is the maximum-likelihood estimate of the capped geometric instead.
  accepted_ += accepted;
  drafted_ += accepted + (accepted < drafted ? 1 : 0);
  if (bonus_rank > kMaxRank) bonus_rank = 0, list_length = kMaxRank;
  list_length = std::min(list_length, kMaxRank);
  pooled_.add(bonus_rank, list_length);
  // Theorem 18's two conditions: after all K are accepted the bonus is drawn from the target's
  // own distribution; after a rejection from the residual max(p_t - p_d, 0), which lacks the
  // mass the draft ranks highest, so the draft's list holds it less often.
  (accepted == drafted ? all_accepted_ : rejected_).add(bonus_rank, list_length);
}

FanoutLaw FanoutEstimator::law(double fixed_acceptance, double fixed_r) const {
  FanoutLaw law;
  // The maximum-likelihood a alone swings to the ends in a run's first rounds: one or two rounds
  // that accepted every drafted token give a = 1, and Theorem 12 then puts the whole budget at
  // the last position (the Qwen pair's third round had the shape (0, 0, 0, 8)) just when the
  // next round rejects early. So a is the posterior mean under a Beta prior worth kPriorTrials
  // trials at kFanoutPrior: two all-accepted K = 4 rounds give 0.90, not 1. After n trials it
  // moves a by kPriorTrials / (n + kPriorTrials) of its distance to the prior: 0.005 for the
  // pair's a = 0.86 after a 128-token sequence (~40 rounds, ~120 trials).
  law.acceptance = fixed_acceptance >= 0 ? fixed_acceptance
                                         : (double(accepted_) + kPriorTrials * kFanoutPrior) /
                                               (double(drafted_) + kPriorTrials);
  if (fixed_r >= 0) {
    law.r = law.r_all = fixed_r;
    return law;
  }
  // Each condition has a fraction of the rounds (with the pair at a ~0.85 and K = 3, a third
  // reject), so its own fit is noisy early on: it is pulled towards the pooled fit, which
  // uses every round, by kConditionPriorWeight observations' worth (a Gaussian prior's
  // posterior mean, the fit's variance taken as ~1/n). The pair's Figure 4 rounds at T = 1,
  // pooled over both hosts, fit r = 0.83 after a rejection and 2.45 after all accepted
  // (one law: 1.37).
  const double pooled = power_law_r(kFanoutPrior);
  auto condition_r = [&](const RankHistogram& h) {
    const double own = h.power_law_r(-1.0, kMinConditionObservations);
    if (own < 0) return pooled;
    const double n = h.informative();
    return (n * own + kConditionPriorWeight * pooled) / (n + kConditionPriorWeight);
  };
  law.r = condition_r(rejected_);
  law.r_all = condition_r(all_accepted_);
  return law;
}

double FanoutEstimator::acceptance(double fallback) const {
  return drafted_ > 0 ? double(accepted_) / double(drafted_) : fallback;
}

double FanoutEstimator::power_law_r(double fallback) const {
  return pooled_.power_law_r(fallback, kMinObservations);
}

}  // namespace ssd
