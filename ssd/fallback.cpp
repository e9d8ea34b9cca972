#include "ssd/fallback.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "kernels/errors.h"

namespace ssd {
namespace {

// Expected round latency (relative to one verification) when every sequence of the batch hits
// with probability x = p^b: max(1, T_primary) if all hit, else 1 + T_fallback (Corollary 16).
// T_primary is the paper's T_p, the primary's drafting latency (SpeedupInputs::t_jit here).
double latency(double all_hit, double t_primary, double t_fallback) {
  return all_hit * std::max(1.0, t_primary) + (1.0 - all_hit) * (1.0 + t_fallback);
}

double tokens(const SpeedupInputs& in) {
  return in.p_hit * in.e_hit + (1.0 - in.p_hit) * in.e_miss;
}

double all_hit(double p, int b) {
  if (b < 0) throw std::invalid_argument("batch size must be >= 0");
  return std::pow(std::clamp(p, 0.0, 1.0), b);
}

}  // namespace

double ssd_speedup_batch(const SpeedupInputs& in, int b) {
  return tokens(in) / latency(all_hit(in.p_hit, b), in.t_jit, in.t_b);
}

double speedup_primary_fallback(const SpeedupInputs& in, int b) {
  // A.4: a miss is drafted just in time by the primary, so every round yields E_hit and a
  // miss costs 1 + T_jit.
  return in.e_hit / latency(all_hit(in.p_hit, b), in.t_jit, in.t_jit);
}

double speedup_backup_fallback(const SpeedupInputs& in, int b) {
  return ssd_speedup_batch(in, b);
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
