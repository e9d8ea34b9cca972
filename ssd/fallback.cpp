#include "ssd/fallback.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "model/errors.h"

namespace ssd {
namespace {

// Expected round latency (relative to one verification) when every sequence of the batch hits
// with probability x = p^b: max(1, T_p) if all hit, else 1 + T_fallback (Corollary 16).
double latency(double all_hit, double t_p, double t_fallback) {
  return all_hit * std::max(1.0, t_p) + (1.0 - all_hit) * (1.0 + t_fallback);
}

double tokens(const SpeedupInputs& in) {
  return in.p_hit * in.e_hit + (1.0 - in.p_hit) * in.e_miss;
}

double all_hit(double p, int b) {
  if (b < 0) throw std::invalid_argument("batch size must be >= 0");
  return std::pow(std::clamp(p, 0.0, 1.0), b);
}

}  // namespace

double ssd_speedup(const SpeedupInputs& in) {
  return ssd_speedup_batch(in, 1);
}

double ssd_speedup_batch(const SpeedupInputs& in, int b) {
  return tokens(in) / latency(all_hit(in.p_hit, b), in.t_p, in.t_b);
}

double speedup_primary_fallback(const SpeedupInputs& in, int b) {
  // A.4: a miss is drafted just in time by the primary, so every round yields E_hit and a
  // miss costs 1 + T_p.
  return in.e_hit / latency(all_hit(in.p_hit, b), in.t_p, in.t_p);
}

double speedup_backup_fallback(const SpeedupInputs& in, int b) {
  return ssd_speedup_batch(in, b);
}

double critical_batch_size(const SpeedupInputs& in) {
  const double inf = std::numeric_limits<double>::infinity();
  const double p = in.p_hit;
  if (p >= 1.0) return inf;
  // With x = p^b, h = max(1, T_p), N = p E_hit + (1-p) E_miss, the primary fallback is better
  // iff E_hit / (1 + T_p - x P) > N / (1 + T_b - x Q), P = 1 + T_p - h, Q = 1 + T_b - h, i.e.
  //   x D > R,  D = N P - E_hit Q,  R = N (1 + T_p) - E_hit (1 + T_b).
  // For T_p < 1, T_b = 0 this is x > x* = R / D = 1 + 1/T_p - E_hit / (T_p N): Theorem 17.
  const double h = std::max(1.0, in.t_p);
  const double n = tokens(in);
  const double d = n * (1.0 + in.t_p - h) - in.e_hit * (1.0 + in.t_b - h);
  const double r = n * (1.0 + in.t_p) - in.e_hit * (1.0 + in.t_b);
  if (p <= 0.0) return r < 0.0 ? inf : 0.0;  // x = 0 at every b >= 1: compare 0 > R
  if (d == 0.0) return r < 0.0 ? inf : 0.0;  // the preference does not depend on b
  const double x_star = r / d;
  if (d < 0.0) {
    // The primary wins iff x < x*: more likely at larger b, the reverse of Theorem 17. This
    // happens only when the backup costs more latency per token than the primary (T_b / T_p
    // above N / E_hit), outside the theorem's fast-backup premise.
    if (x_star > p) return inf;  // x = p^b <= p < x* for every b >= 1
    if (x_star <= 0.0) return 0.0;
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (x_star <= 0.0) return inf;
  if (x_star >= 1.0) return 0.0;
  return std::log(x_star) / std::log(p);
}

std::pair<double, double> speedup_sandwich(double t_sd, double e_hit, double e_sd, double p_hit) {
  const double upper = (1.0 + t_sd) * e_hit / e_sd;
  return {upper * p_hit, upper};
}

double stationary_hit_rate(double p_hit_primary, double p_hit_backup) {
  // The recurrence p(T) = p(T-1) (p_p - p_b) + p_b converges when |p_p - p_b| < 1; at
  // p_p = 1, p_b = 0 the chain never leaves its first state, which starts on the primary.
  const double denominator = 1.0 + p_hit_backup - p_hit_primary;
  if (denominator <= 0.0) return 1.0;
  return p_hit_backup / denominator;
}

const char* fallback_mode_name(FallbackMode mode) {
  switch (mode) {
    case FallbackMode::Primary:
      return "primary";
    case FallbackMode::Backup:
      return "backup";
    case FallbackMode::Auto:
      break;
  }
  return "auto";
}

FallbackKind FallbackPolicy::choose(int batch, const SpeedupInputs& measured,
                                    int rounds_observed) const {
  if (mode_ == FallbackMode::Primary) return FallbackKind::Primary;
  if (mode_ == FallbackMode::Backup) return FallbackKind::Backup;
  if (rounds_observed < kMinRounds) return FallbackKind::Primary;
  // Theorem 17: the primary below b*, the backup from b* on. Comparing the two speedups of its
  // proof at this batch size is that rule, and stays meaningful where b* does not exist.
  const int b = std::max(batch, 1);
  return speedup_primary_fallback(measured, b) > speedup_backup_fallback(measured, b)
             ? FallbackKind::Primary
             : FallbackKind::Backup;
}

}  // namespace ssd
