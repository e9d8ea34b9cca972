#include "ssd/fanout.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "kernels/errors.h"

namespace ssd {
namespace {

constexpr const char* kFanoutForms = "uniform:F, list:F0,...,FK or geometric[:B]";

[[noreturn]] void fanout_error(const std::string& text, const std::string& why) {
  throw InputError("fan-out '" + text + "': " + why + " (expected " + kFanoutForms + ")");
}

// A whole decimal integer: no sign, no spaces, no trailing characters.
bool parse_int(const std::string& s, int& out) {
  if (s.empty() || s[0] == '+' || s[0] == '-') return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

void check_inputs(int K, double budget, double acceptance, double r) {
  if (K < 0) throw std::invalid_argument("geometric fan-out: lookahead K must be >= 0");
  if (!(budget >= 0) || !std::isfinite(budget))
    throw std::invalid_argument("geometric fan-out: budget must be finite and >= 0");
  if (std::isnan(acceptance) || std::isnan(r))
    throw std::invalid_argument("geometric fan-out: acceptance and r must not be NaN");
}

// A.2's weights: the probability that exactly k of K drafts are accepted.
std::vector<double> outcome_weights(int K, double acceptance) {
  const double a = std::clamp(acceptance, 0.0, 1.0);
  std::vector<double> w(K + 1);
  double reach = 1.0;  // a^k
  for (int k = 0; k <= K; ++k, reach *= a) w[k] = k < K ? reach * (1.0 - a) : reach;
  return w;
}

}  // namespace

FanoutSpec parse_fanout(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const bool has_arg = colon != std::string::npos;
  const std::string arg = has_arg ? text.substr(colon + 1) : std::string();
  FanoutSpec spec;
  if (kind == "uniform") {
    spec.kind = FanoutSpec::Kind::Uniform;
    if (!has_arg || !parse_int(arg, spec.uniform) || spec.uniform < 1)
      fanout_error(text, "uniform needs a positive integer F, e.g. uniform:4");
  } else if (kind == "list") {
    spec.kind = FanoutSpec::Kind::List;
    if (!has_arg || arg.empty()) fanout_error(text, "list needs K+1 comma-separated counts");
    size_t start = 0;
    while (true) {
      const size_t comma = arg.find(',', start);
      const std::string item = arg.substr(start, comma - start);
      int value = 0;
      if (!parse_int(item, value))
        fanout_error(text, "list entry '" + item + "' is not a non-negative integer");
      spec.list.push_back(value);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else if (kind == "geometric") {
    spec.kind = FanoutSpec::Kind::Geometric;
    spec.fanout_total = 0;  // bare "geometric": B comes from --budget
    if (has_arg && (!parse_int(arg, spec.fanout_total) || spec.fanout_total < 1))
      fanout_error(text, "geometric:B needs a positive budget B (omit it to use the run's budget)");
  } else {
    fanout_error(text, "unknown shape '" + kind + "'");
  }
  return spec;
}

std::vector<int> geometric_fanout(int K, int fanout_total, double acceptance, double r) {
  check_inputs(K, fanout_total, acceptance, r);
  const std::vector<double> w = outcome_weights(K, acceptance);
  const double rr = std::max(r, 1e-3);
  // The gain of one more guess at k: w_k ((F_k+1)^{-r} - (F_k+2)^{-r}), decreasing in F_k.
  auto gain = [&](int k, int f) {
    return w[k] * (std::pow(f + 1.0, -rr) - std::pow(f + 2.0, -rr));
  };
  std::vector<int> shape(K + 1, 0);
  for (int unit = 0; unit < fanout_total; ++unit) {
    int best = 0;
    double best_gain = gain(0, shape[0]);
    for (int k = 1; k <= K; ++k) {
      const double g = gain(k, shape[k]);
      if (g > best_gain) best = k, best_gain = g;
    }
    ++shape[best];
  }
  return shape;
}

std::vector<int> resolve_fanout(const FanoutSpec& spec, int K, int fanout_total, double acceptance,
                                double r) {
  switch (spec.kind) {
    case FanoutSpec::Kind::Uniform:
      return std::vector<int>(K + 1, spec.uniform);
    case FanoutSpec::Kind::List:
      if (int(spec.list.size()) != K + 1)
        throw InputError("fan-out list has " + std::to_string(spec.list.size()) +
                         " entries but lookahead K = " + std::to_string(K) +
                         " needs K+1 = " + std::to_string(K + 1) + " (F_0..F_K)");
      return spec.list;
    case FanoutSpec::Kind::Geometric:
      return geometric_fanout(K, spec.fanout_total > 0 ? spec.fanout_total : fanout_total,
                              acceptance, r);
  }
  throw std::logic_error("resolve_fanout: unknown kind");
}

double expected_hit_rate(const std::vector<int>& shape, double acceptance, double r) {
  const int K = int(shape.size()) - 1;
  const double a = acceptance;
  double total = 0.0, reach = 1.0;  // reach = a^k
  for (int k = 0; k <= K; ++k, reach *= a) {
    const double hit = 1.0 - std::pow(double(shape[k]) + 1.0, -r);
    // Exactly k accepted: a^k (1-a) for k < K, a^K when all K are (A.2).
    total += (k < K ? reach * (1.0 - a) : reach) * hit;
  }
  return total;
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
  law.r = fixed_r >= 0 ? fixed_r : power_law_r(kFanoutPrior);
  return law;
}

double FanoutEstimator::acceptance(double fallback) const {
  return drafted_ > 0 ? double(accepted_) / double(drafted_) : fallback;
}

double FanoutEstimator::power_law_r(double fallback) const {
  if (informative_ < kMinObservations) return fallback;
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

int window_fanout_limit(double window_s, double glue_s, double step_a, double step_b, int K,
                        int rows, int max_fanout_total) {
  if (K <= 0 || rows <= 0 || window_s <= 0) return 0;
  const double per_step = (0.9 * window_s - glue_s) / K;
  if (per_step <= step_a) return 0;
  const double branches =
      step_b > 0 ? (per_step - step_a) / step_b : double(max_fanout_total) * rows;
  const double limit = std::floor(branches / rows);
  return int(std::clamp(limit, 0.0, double(max_fanout_total)));
}

}  // namespace ssd
