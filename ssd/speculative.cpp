// decode_group_speculative (ssd/decode.h): SD and SSD on the target leader. The draft endpoint
// hides whether the draft is in-process (SD), a draft rank (SD on its own hardware) or SSD's
// draft rank with its speculation cache, and the OutcomeSource whether verdicts are the
// target's (lossless) or synthetic draws; this loop only sends outcomes, verifies speculations
// and emits the accepted tokens.
#include <memory>

#include "comm/clock.h"
#include "ssd/decode.h"
#include "ssd/outcome_source.h"
#include "ssd/sampling.h"

namespace ssd {
namespace {

// The target leader's view of one sequence between rounds, beyond what SequenceBatch holds.
struct SpeculationRow {
  int accepted = 0;        // k of the previous round, sent to the draft
  UniformStream uniforms;  // acceptance tests (and synthetic outcomes)
};

// Last round's outcome of every sequence still running (or still owed one by `outcomes`).
// `busy_s` is the target's verification and acceptance time of that round.
OutcomeMessage outcome_message(const SequenceBatch& batch, const std::vector<SpeculationRow>& rows,
                               const OutcomeSource& outcomes, int round, double busy_s,
                               double temperature) {
  OutcomeMessage outcome;
  outcome.round = round;
  outcome.temperature = temperature;
  outcome.target_busy_s = busy_s;
  for (int r = 0; r < batch.rows(); ++r) {
    outcome.batch_live += batch.done(r) ? 0 : 1;
    if (batch.done(r) && !outcomes.awaits_token(r)) continue;
    SequenceOutcome o{r, rows[size_t(r)].accepted, batch.last(r), int32_t(batch.committed(r)),
                      0, batch.done(r) ? 1 : 0};
    outcomes.describe(r, o);
    outcome.sequences.push_back(o);
  }
  return outcome;
}

// Takes in what a speculation reports about last round (cache hits, and whatever `outcomes`
// awaited); returns the sequences it drafted for.
std::vector<const SequenceSpeculation*> take_speculation(const SpeculationMessage& spec,
                                                         const DraftTelemetry& draft,
                                                         SequenceBatch& batch,
                                                         OutcomeSource& outcomes,
                                                         Recorder& recorder) {
  std::vector<const SequenceSpeculation*> drafted;
  for (const SequenceSpeculation& sp : spec.sequences) {
    recorder.cache_report(sp, draft);
    outcomes.take(sp, batch, recorder);
    if (!sp.tokens.empty()) drafted.push_back(&sp);
  }
  return drafted;
}

// One target forward over the newest token plus the K drafts of every drafted sequence: K+1
// logits rows per sequence.
void verify(ModelGroup& target, SequenceBatch& batch,
            const std::vector<const SequenceSpeculation*>& drafted, std::vector<float>& logits) {
  ForwardBatch forward;
  for (const SequenceSpeculation* sp : drafted) {
    std::vector<int32_t> tokens{batch.last(sp->row)};
    tokens.insert(tokens.end(), sp->tokens.begin(), sp->tokens.end());
    forward.add_causal(sp->row, batch.cached(sp->row), tokens, ForwardBatch::Logits::All);
  }
  target.forward(forward, logits);
}

// Emits the accepted drafts and the bonus, as far as the sequence's limits allow.
SequenceVerdict accept(SequenceBatch& batch, SpeculationRow& row, const SequenceSpeculation& sp,
                       const Verdict& v, OutcomeSource& outcomes) {
  // The newest token and the accepted drafts are now in the target's cache.
  batch.cached(sp.row) += 1 + v.accepted;
  SequenceVerdict out{sp.row, int(sp.tokens.size()), v.accepted, v.bonus, 0, sp.source};
  bool open = true;
  for (int j = 0; j < v.accepted && open; ++j, ++out.emitted)
    open = batch.emit(sp.row, sp.tokens[size_t(j)]);
  outcomes.bonus_emitted(sp.row, open ? int(batch.generated(sp.row).size()) : -1);
  if (open) {
    batch.emit(sp.row, v.bonus);
    ++out.emitted;
  }
  row.accepted = v.accepted;
  return out;
}

}  // namespace

StartMessage start_message(const SequenceBatch& batch, int group, const DecodeSettings& s) {
  StartMessage start;
  start.group = group;
  start.max_new_tokens = s.limits.max_new_tokens;
  start.lookahead = s.lookahead;
  start.temperature = s.limits.temperature;
  start.seed = s.limits.seed;
  start.synthetic = s.outcomes.synthetic;
  for (int r = 0; r < batch.rows(); ++r) {
    start.sequence_ids.push_back(batch.sequence(r));
    start.prompts.push_back(batch.prompt(r));
  }
  return start;
}

void decode_group_speculative(ModelGroup& target, DraftEndpoint& draft, SequenceBatch& batch,
                              const DecodeSettings& s, Recorder& recorder) {
  const int vocab = target.config().vocab_size;
  const std::unique_ptr<OutcomeSource> outcomes = make_outcome_source(s, batch.rows(), vocab);
  std::vector<SpeculationRow> rows(size_t(batch.rows()));
  for (int r = 0; r < batch.rows(); ++r)
    rows[size_t(r)].uniforms =
        UniformStream{s.limits.seed, acceptance_stream(batch.sequence(r)), 0};
  std::vector<float> logits;  // reused across rounds
  double busy_s = 0.0;
  for (int round = 0;; ++round) {
    OutcomeMessage outcome =
        outcome_message(batch, rows, *outcomes, round, busy_s, s.limits.temperature);
    if (outcome.sequences.empty()) {
      outcome.stop = true;
      draft.finish_group(outcome);
      return;
    }
    RoundTimes t;
    t.start = global_now();
    ExchangeTiming exchange;
    const SpeculationMessage spec = draft.exchange(outcome, exchange);
    const auto drafted = take_speculation(spec, exchange.draft, batch, *outcomes, recorder);
    if (drafted.empty()) continue;  // only finished sequences' synthetic bonuses were named
    t.verify_start = global_now();
    verify(target, batch, drafted, logits);
    t.verify_s = global_now() - t.verify_start;
    t.accept_start = global_now();
    std::vector<SequenceVerdict> verdicts;
    for (size_t i = 0; i < drafted.size(); ++i) {
      const SequenceSpeculation& sp = *drafted[i];
      SpeculationRow& row = rows[size_t(sp.row)];
      const float* l = logits.data() + i * size_t(s.lookahead + 1) * vocab;
      verdicts.push_back(accept(batch, row, sp, outcomes->judge(l, sp, row.uniforms), *outcomes));
    }
    t.end = global_now();
    busy_s = t.end - t.verify_start;
    recorder.round(batch, round, verdicts, t, exchange);
  }
}

}  // namespace ssd
