#include "ssd/recorder.h"

#include <algorithm>

namespace ssd {

Recorder::Recorder(int rep, double clock_zero, RunRecords* records,
                   std::function<void(int64_t)> on_tokens)
    : clock_zero_(clock_zero), records_(records), on_tokens_(std::move(on_tokens)) {
  totals_.rep = rep;
}

void Recorder::prefill(int group, const SequenceBatch& batch, double start, double seconds,
                       double forward_s) {
  group_ = group;
  last_round_.assign(size_t(batch.rows()), -1);
  totals_.prefill_s += seconds;
  totals_.prefill_tokens += batch.prefill_rows();
  totals_.generated_tokens += batch.rows();
  if (!records_) return;
  for (int r = 0; r < batch.rows(); ++r)
    records_->steps.push_back(
        {totals_.rep, -1, r, batch.sequence(r), 1, start - clock_zero_, seconds, forward_s});
}

void Recorder::step(const SequenceBatch& batch, int step, const std::vector<int>& active,
                    double start, double step_s, double forward_s) {
  const int64_t tokens = int64_t(active.size());
  totals_.decode_s += step_s;
  totals_.decode_tokens += tokens;
  totals_.generated_tokens += tokens;
  totals_.decode_steps += 1;
  totals_.per_sequence_decode_tokens += double(tokens) / batch.rows();
  if (on_tokens_) on_tokens_(tokens);
  if (!records_) return;
  for (int row : active)
    records_->steps.push_back(
        {totals_.rep, step, row, batch.sequence(row), 1, start - clock_zero_, step_s, forward_s});
}

RoundRecord* Recorder::previous_round(int row) {
  if (!records_ || last_round_[size_t(row)] < 0) return nullptr;
  return &records_->rounds[size_t(last_round_[size_t(row)])];
}

void Recorder::cache_report(const SequenceSpeculation& sp, const DraftTelemetry& draft) {
  RoundRecord* previous = previous_round(sp.row);
  if (!previous || sp.fanout.empty()) return;  // SD, or the group's first round
  previous->outcome_hit = sp.cache_hit ? 1 : 0;
  previous->bonus_rank = sp.bonus_rank;
  previous->fanout = sp.fanout;
  previous->fanout_total = draft.fanout_total;
  previous->branches = draft.branches;
  previous->cache_build_s = draft.cache_build_s;
}

void Recorder::bonus_resolved(int row, int32_t token) {
  if (RoundRecord* previous = previous_round(row)) previous->bonus = token;
}

void Recorder::round(const SequenceBatch& batch, int round,
                     const std::vector<SequenceVerdict>& verdicts, const RoundTimes& times,
                     const ExchangeTiming& exchange) {
  int64_t emitted = 0;
  for (const SequenceVerdict& v : verdicts) {
    emitted += v.emitted;
    totals_.accepted += v.accepted;
    if (v.source != SpeculationSource::Backup) {
      ++totals_.draft_rounds;
      totals_.draft_accepted += v.accepted;
      if (v.accepted < v.drafted) ++totals_.draft_rejections;
    }
    totals_.per_sequence_decode_tokens += double(v.emitted) / batch.rows();
    totals_.drafted += v.drafted;
  }
  totals_.rounds += int64_t(verdicts.size());
  totals_.decode_tokens += emitted;
  totals_.generated_tokens += emitted;
  totals_.decode_s += times.end - times.start;
  totals_.decode_steps += 1;
  totals_.draft_s += exchange.draft_s;
  totals_.verify_s += times.verify_s;
  totals_.draft_passes += exchange.draft.forward_passes;
  double build_s = 0.0, branches = 0.0;
  for (const DraftRankTiming& d : exchange.ranks) {
    build_s = std::max(build_s, d.telemetry.cache_build_s);
    branches += double(d.telemetry.branches);
  }
  if (build_s > 0) {
    totals_.cache_build_s += build_s;
    totals_.branch_rows += branches;
    totals_.cache_builds += 1;
  }
  if (on_tokens_) on_tokens_(emitted);
  if (!records_) return;
  for (const DraftRankTiming& d : exchange.ranks) {
    const DraftTelemetry& t = d.telemetry;
    records_->draft_ranks.push_back({totals_.rep, group_, round, d.draft_rank, d.sequences,
                                     t.draft_start_s - clock_zero_, t.draft_end_s - clock_zero_,
                                     t.idle_s, t.cache_build_s, t.fallback_s, t.branches,
                                     t.fanout_total, d.bytes, t.forward_passes});
  }
  for (const SequenceVerdict& v : verdicts) {
    // Separate drafts: the rank that served this row, whose own fallback it waited for.
    const int draft_rank = size_t(v.row) < exchange.row_draft_rank.size()
                               ? exchange.row_draft_rank[size_t(v.row)]
                               : -1;
    double row_fallback_s = exchange.draft.fallback_s;
    for (const DraftRankTiming& d : exchange.ranks)
      if (d.draft_rank == draft_rank) row_fallback_s = d.telemetry.fallback_s;
    RoundRecord r;
    r.draft_rank = draft_rank;
    r.rep = totals_.rep;
    r.group = group_;
    r.round = round;
    r.row = v.row;
    r.sequence = batch.sequence(v.row);
    r.drafted = v.drafted;
    r.accepted = v.accepted;
    r.bonus = v.bonus;
    r.tokens = v.emitted;
    r.source = int(v.source);
    r.fallback_s = v.source == SpeculationSource::CacheHit ? 0.0 : row_fallback_s;
    r.start_s = times.start - clock_zero_;
    r.end_s = times.end - clock_zero_;
    r.draft_start_s = exchange.draft.draft_start_s - clock_zero_;
    r.draft_end_s = exchange.draft.draft_end_s - clock_zero_;
    r.draft_s = exchange.draft_s;
    r.verify_s = times.verify_s;
    r.accept_s = times.end - times.accept_start;
    r.comm_s = exchange.comm_s;
    r.target_idle_s = exchange.target_idle_s;
    r.draft_idle_s = exchange.draft.idle_s;
    r.message_bytes = exchange.bytes;
    last_round_[size_t(v.row)] = int(records_->rounds.size());
    records_->rounds.push_back(r);
  }
}

}  // namespace ssd
