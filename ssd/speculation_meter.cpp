#include "ssd/speculation_meter.h"

namespace ssd {

void SpeculationMeter::lookup(bool hit) {
  lookups_ += 1;
  hits_ += hit ? 1 : 0;
}

void SpeculationMeter::verified(SpeculationSource source, int accepted) {
  const bool backup = source == SpeculationSource::Backup;
  (backup ? backup_rounds_ : primary_rounds_) += 1;
  (backup ? backup_accepted_ : primary_accepted_) += accepted;
}

void SpeculationMeter::fallback(FallbackKind kind, double seconds) {
  const bool primary = kind == FallbackKind::Primary;
  (primary ? primary_draft_s_ : backup_draft_s_) += seconds;
  (primary ? primary_drafts_ : backup_drafts_) += 1;
}

void SpeculationMeter::window(double seconds) {
  window_sum_ += seconds;
  windows_ += 1;
}

void SpeculationMeter::target_busy(double seconds) {
  if (seconds <= 0) return;
  verify_s_ = verify_s_ > 0 ? verify_s_ + 0.125 * (seconds - verify_s_) : seconds;
}

double SpeculationMeter::mean_primary_fallback_s() const {
  return primary_drafts_ ? primary_draft_s_ / double(primary_drafts_) : 0.0;
}

double SpeculationMeter::mean_backup_fallback_s() const {
  return backup_drafts_ ? backup_draft_s_ / double(backup_drafts_) : 0.0;
}

double SpeculationMeter::e_miss_backup() const {
  return 1.0 + (backup_rounds_ ? double(backup_accepted_) / double(backup_rounds_) : 0.0);
}

SpeedupInputs SpeculationMeter::speedup_inputs() const {
  SpeedupInputs in;
  in.p_hit = lookups_ ? double(hits_) / double(lookups_) : 0.0;
  in.e_hit = 1.0 + (primary_rounds_ ? double(primary_accepted_) / double(primary_rounds_) : 0.0);
  in.e_miss = e_miss_backup();
  const double window = windows_ ? window_sum_ / double(windows_) : 0.0;
  in.t_jit = window > 0 ? mean_primary_fallback_s() / window : 0.0;
  in.t_b = window > 0 ? mean_backup_fallback_s() / window : 0.0;
  return in;
}

}  // namespace ssd
