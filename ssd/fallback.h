// The speedup model of SSD (paper §3.2, Theorem 7; §4.3, Corollary 16) and SAGUARO's fallback
// choice on cache misses (Theorem 17): at small batch sizes the slow, accurate primary
// speculator drafts just in time; once a miss somewhere in the batch becomes near certain,
// the whole batch would stall on it, and a fast backup speculator wins.
#pragma once

#include <string>
#include <utility>

namespace ssd {

// Measured quantities that drive Theorem 17 / Corollary 16. Latencies are relative to one
// verification (T_p, T_b); E_hit/E_miss are tokens generated per round after a hit / a miss.
struct SpeedupInputs {
  double p_hit, e_hit, e_miss, t_p, t_b;
};

// Theorem 7: (p E_hit + (1-p) E_miss) / (p max(1, T_p) + (1-p)(1 + T_b)).
double ssd_speedup(const SpeedupInputs& in);
// Corollary 16 at batch size b: the denominator's hit probability becomes p^b, because one
// miss anywhere in the batch makes the whole batch wait for the fallback.
double ssd_speedup_batch(const SpeedupInputs& in, int b);

// The two speedups compared in the proof of Theorem 17 (Appendix A.4), at batch size b:
// misses drafted just in time by the primary (E_miss -> E_hit, T_b -> T_p), or by the backup
// (E_miss and T_b as measured; the paper takes T_b = 0).
double speedup_primary_fallback(const SpeedupInputs& in, int b);
double speedup_backup_fallback(const SpeedupInputs& in, int b);

// Theorem 17's critical batch size b*: primary fallback for b < b*, backup for b >= b*.
//   b* = log(x*) / log(p_hit),  x* = 1 + 1/T_p - E_hit / (T_p (p E_hit + (1-p) E_miss))
// in the paper's setting (T_p < 1, T_b = 0); fallback.cpp generalises x* to T_b > 0 and
// T_p >= 1 by solving the same equality. Edge cases (x = p^b falls from p towards 0 as b grows):
//   p_hit >= 1               -> +infinity (no misses, the choice never matters; primary)
//   x* <= 0                  -> +infinity (primary better at every b: even when every round
//                               misses, E_hit / (1 + T_p) beats the backup's yield)
//   x* >= 1                  -> 0 (backup better at every b, e.g. E_miss as good as E_hit)
//   p_hit <= 0               -> +infinity or 0, whichever fallback wins when every round misses
//   backup slower per token than primary (see .cpp) -> NaN: the preference flips the other way
//                               round with b, so no threshold of this form exists.
double critical_batch_size(const SpeedupInputs& in);

// Corollary 9 bounds on speedup_SSD / speedup_SD:
// {(1 + T_SD) E_hit/E_SD p_hit, (1 + T_SD) E_hit/E_SD}.
std::pair<double, double> speedup_sandwich(double t_sd, double e_hit, double e_sd, double p_hit);

// Equation (1) of Appendix A.1.2: the stationary hit rate of the Markov chain that alternates
// primary- and backup-speculated rounds, p_hit = p_hit_b / (1 + p_hit_b - p_hit_p).
double stationary_hit_rate(double p_hit_primary, double p_hit_backup);

enum class FallbackKind { Primary, Backup };
// What a cache miss falls back to: always one kind, or Theorem 17's choice (auto).
enum class FallbackMode { Primary, Backup, Auto };
const char* fallback_mode_name(FallbackMode mode);  // "primary", "backup", "auto"

// primary, backup or auto. auto follows Theorem 17 (Primary when batch < b*, else
// Backup), deciding by comparing the two fallback speedups at the batch size directly, which
// is the same rule wherever b* exists and is still defined where it does not.
class FallbackPolicy {
 public:
  explicit FallbackPolicy(FallbackMode mode) : mode_(mode) {}
  // Before kMinRounds verification rounds the measurements are noise, so auto picks Primary
  // (the better choice at the batch size 1 the paper evaluates by default).
  FallbackKind choose(int batch, const SpeedupInputs& measured, int rounds_observed) const;
  FallbackMode mode() const { return mode_; }

  static constexpr int kMinRounds = 8;

 private:
  FallbackMode mode_;
};

}  // namespace ssd
