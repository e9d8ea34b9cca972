// The speedup model of SSD (paper §3.2, Theorem 7; §4.3, Corollary 16) and SAGUARO's fallback
// choice on cache misses (Theorem 17): at small batch sizes the slow, accurate primary
// speculator drafts just in time; once a miss somewhere in the batch becomes near certain,
// the whole batch would stall on it, and a fast backup speculator wins.
#pragma once

#include <string>
#include <utility>

namespace ssd {

// Measured quantities that drive Theorem 17 / Corollary 16. E_hit/E_miss are tokens generated
// per round after a hit / a miss; the times are relative to one verification window:
//   t_jit  the primary drafting a round's misses just in time (the slow fallback; /summary's
//          t_jit). The formulas below take it as the paper's primary latency T_p, both in a
//          hit's max(1, T_p) and in the slow fallback's 1 + T_p. It is not /summary's t_p,
//          which is the cache build over the verification.
//   t_b    the backup drafting a round's misses (the fast fallback, T_b).
struct SpeedupInputs {
  double p_hit, e_hit, e_miss, t_jit, t_b;
};

// Theorem 7, and Corollary 16 at batch size b (b = 1 is Theorem 7):
// (p E_hit + (1-p) E_miss) / (p^b max(1, T_jit) + (1 - p^b)(1 + T_b)); the hit probability
// becomes p^b because one miss anywhere in the batch makes the whole batch wait.
double ssd_speedup_batch(const SpeedupInputs& in, int b);

// The two speedups compared in the proof of Theorem 17 (Appendix A.4), at batch size b:
// misses drafted just in time by the primary (E_miss -> E_hit, T_b -> T_jit), or by the
// backup (E_miss and T_b as measured; the paper takes T_b = 0).
double speedup_primary_fallback(const SpeedupInputs& in, int b);
double speedup_backup_fallback(const SpeedupInputs& in, int b);

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
