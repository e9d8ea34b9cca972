// Recorder: every record and total of one repetition is built here, at the moment the decode
// loop reports what happened: the prefill, an AR step, a speculation round, and (SSD) the
// draft's report on how last round's outcome fared in its cache, which arrives with the next
// speculation. Warm-up runs record nothing but still count totals (progress lines).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "comm/messages.h"
#include "ssd/draft_endpoint.h"
#include "ssd/records.h"
#include "ssd/sequence_batch.h"

namespace ssd {

// One sequence's verdict in a speculation round.
struct SequenceVerdict {
  int row = 0;
  int drafted = 0;    // K: the speculation's draft tokens
  int accepted = 0;   // k
  int32_t bonus = 0;  // -1 while a synthetic bonus awaits the draft's token
  int emitted = 0;    // tokens emitted (k + 1, less when the sequence ended)
  SpeculationSource source = SpeculationSource::Primary;
};

// Global-clock times of one round on the target leader.
struct RoundTimes {
  double start = 0.0;         // the outcome sent
  double verify_start = 0.0;  // the speculation in hand
  double verify_s = 0.0;      // the K+1-row forward
  double accept_start = 0.0;  // verdicts and emission
  double end = 0.0;
};

class Recorder {
 public:
  // `records` may be null (warm-up). `on_tokens` is told the tokens each step or round emitted.
  Recorder(int rep, double clock_zero, RunRecords* records,
           std::function<void(int64_t)> on_tokens = {});

  // A new batch group; its prefill took `seconds` in all, `forward_s` in the forward pass.
  void prefill(int group, const SequenceBatch& batch, double start, double seconds,
               double forward_s);
  // AR: one decode step over the `active` rows, each emitting one token.
  void step(const SequenceBatch& batch, int step, const std::vector<int>& active, double start,
            double step_s, double forward_s);
  // SD/SSD: the draft's report, carried by a speculation, on the outcome of the row's previous
  // round (hit or miss, the bonus's rank, the cache's shape; the cache's size and build time
  // from the draft's telemetry) and on a synthetic bonus it named.
  void cache_report(const SequenceSpeculation& sp, const DraftTelemetry& draft);
  void bonus_resolved(int row, int32_t token);
  // SD/SSD: one round's verdicts.
  void round(const SequenceBatch& batch, int round, const std::vector<SequenceVerdict>& verdicts,
             const RoundTimes& times, const ExchangeTiming& exchange);

  // The target's forward passes in a batch group's decoding (its prefill excluded).
  void target_passes(int64_t passes) { totals_.target_passes += passes; }

  const RepTotals& totals() const { return totals_; }

 private:
  RoundRecord* previous_round(int row);

  RepTotals totals_;
  double clock_zero_;
  RunRecords* records_;
  std::function<void(int64_t)> on_tokens_;
  int group_ = 0;
  std::vector<int> last_round_;  // each row's latest round in records_->rounds, -1: none
};

}  // namespace ssd
