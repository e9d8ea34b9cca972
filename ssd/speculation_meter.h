// SpeculationMeter: what SSD's draft rank measures about its own speculations while it runs,
// the live inputs of Theorem 17's fallback choice and of --budget auto: cache hits, tokens per
// round by the speculator that drafted them, fallback drafting times, and the verification
// window (from sending a speculation to the next outcome's arrival).
#pragma once

#include <cstdint>

#include "comm/messages.h"
#include "ssd/fallback.h"

namespace ssd {

class SpeculationMeter {
 public:
  // A looked-up outcome: was it in the cache?
  void lookup(bool hit);
  // A round speculated by `source` (cache hit, primary or backup) came back with k accepted.
  void verified(SpeculationSource source, int accepted);
  // The misses of one round drafted by the primary just in time, or by the backup.
  void fallback(FallbackKind kind, double seconds);
  // One verification window as the draft saw it.
  void window(double seconds);
  // The target's own busy time in the last round (OutcomeMessage::target_busy_s): a moving
  // average over the last ~8 rounds.
  void target_busy(double seconds);

  // Theorem 17's inputs (Appendix A.4), times relative to the mean verification window:
  //   p_hit   hits / lookups
  //   E_hit   1 + mean accepted of primary-drafted rounds (cache hits and just-in-time drafts)
  //   E_miss  1 + mean accepted of backup-drafted rounds
  //   T_jit   the primary's just-in-time drafting of a round's misses (the slow fallback;
  //           not /summary's t_p, the cache build)
  //   T_b     the backup's drafting of a round's misses (the fast fallback)
  SpeedupInputs speedup_inputs() const;

  double verify_s() const { return verify_s_; }
  int64_t verified_rounds() const { return primary_rounds_ + backup_rounds_; }
  int64_t primary_fallbacks() const { return primary_drafts_; }
  double mean_primary_fallback_s() const;  // 0 before the first
  double mean_backup_fallback_s() const;   // 0 before the first
  double e_miss_backup() const;            // 1 + mean accepted after a backup round

 private:
  int64_t hits_ = 0, lookups_ = 0;
  int64_t primary_rounds_ = 0, primary_accepted_ = 0, backup_rounds_ = 0, backup_accepted_ = 0;
  double primary_draft_s_ = 0.0, backup_draft_s_ = 0.0;
  int64_t primary_drafts_ = 0, backup_drafts_ = 0;
  double window_sum_ = 0.0;
  int64_t windows_ = 0;
  double verify_s_ = 0.0;
};

}  // namespace ssd
