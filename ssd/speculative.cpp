// decode_group_speculative (ssd/decode.h): SD and SSD on the target leader. The draft endpoint
// hides whether the draft is in-process (SD), a draft rank (SD on its own hardware) or SSD's
// draft rank with its speculation cache; this loop only sends outcomes, verifies speculations
// and emits the accepted tokens.
#include <algorithm>

#include "comm/clock.h"
#include "ssd/decode.h"
#include "ssd/sampling.h"
#include "ssd/verification.h"

namespace ssd {
namespace {

// The target leader's view of one sequence between rounds, beyond what SequenceBatch holds.
struct SpeculationRow {
  int accepted = 0;        // k of the previous round, sent to the draft
  UniformStream uniforms;  // acceptance tests (and synthetic outcomes)
  // Synthetic outcomes: the bonus drawn as a rank waits for the draft to name its token.
  int pending_rank = 0;
  int pending_index = -1;  // its place in the generated tokens; -1 when none is pending
};

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

// Last round's outcome of every sequence still running, or whose synthetic bonus the draft has
// yet to name. `busy_s` is the target's verification and acceptance time of that round.
OutcomeMessage outcome_message(const SequenceBatch& batch, const std::vector<SpeculationRow>& rows,
                               int round, double busy_s, double temperature) {
  OutcomeMessage outcome;
  outcome.round = round;
  outcome.temperature = temperature;
  outcome.target_busy_s = busy_s;
  for (int r = 0; r < batch.rows(); ++r) {
    const SpeculationRow& row = rows[size_t(r)];
    outcome.batch_live += batch.done(r) ? 0 : 1;
    if (batch.done(r) && row.pending_index < 0) continue;
    outcome.sequences.push_back({r, row.accepted, batch.last(r), int32_t(batch.committed(r)),
                                 row.pending_index >= 0 ? row.pending_rank : 0,
                                 batch.done(r) ? 1 : 0});
  }
  return outcome;
}

// Takes in what a speculation reports about last round (cache hits, synthetic bonus tokens the
// draft has named); returns the sequences it drafted for.
std::vector<const SequenceSpeculation*> take_speculation(const SpeculationMessage& spec,
                                                         const DraftTelemetry& draft,
                                                         SequenceBatch& batch,
                                                         std::vector<SpeculationRow>& rows,
                                                         Recorder& recorder) {
  std::vector<const SequenceSpeculation*> drafted;
  for (const SequenceSpeculation& sp : spec.sequences) {
    recorder.cache_report(sp, draft);
    SpeculationRow& row = rows[size_t(sp.row)];
    if (row.pending_index >= 0) {
      batch.replace(sp.row, row.pending_index, sp.resolved_bonus);
      recorder.bonus_resolved(sp.row, sp.resolved_bonus);
      row.pending_index = -1;
    }
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

// The verification rule (greedy or sampled, paper §2.1), or a synthetic draw; `rank` is the
// synthetic bonus's rank.
Verdict judge(const float* logits, const SequenceSpeculation& sp, SpeculationRow& row,
              const DecodeSettings& s, int vocab, std::vector<float>& target_probs,
              std::vector<float>& probs, int& rank) {
  const int K = s.lookahead;
  if (s.outcomes.synthetic)
    return draw_synthetic_verdict(s.outcomes, sp.source, K, row.uniforms, rank);
  if (s.limits.temperature == 0.0) return verify_greedy(logits, sp.tokens.data(), K, vocab);
  target_probs.resize(size_t(K + 1) * vocab);
  for (int j = 0; j <= K; ++j) {
    softmax(logits + size_t(j) * vocab, vocab, s.limits.temperature, probs);
    std::copy(probs.begin(), probs.end(), target_probs.begin() + size_t(j) * vocab);
  }
  return verify_sampled(target_probs.data(), sp.probs.data(), sp.tokens.data(), K, vocab,
                        row.uniforms);
}

// Emits the accepted drafts and the bonus (a placeholder while a synthetic bonus awaits its
// token), as far as the sequence's limits allow.
SequenceVerdict accept(SequenceBatch& batch, SpeculationRow& row, const SequenceSpeculation& sp,
                       const Verdict& v, int rank) {
  // The newest token and the accepted drafts are now in the target's cache.
  batch.cached(sp.row) += 1 + v.accepted;
  SequenceVerdict out{sp.row, v.accepted, v.bonus, 0, sp.source};
  bool open = true;
  for (int j = 0; j < v.accepted && open; ++j, ++out.emitted)
    open = batch.emit(sp.row, sp.tokens[size_t(j)]);
  if (open) {
    if (v.bonus < 0) {
      row.pending_rank = rank;
      row.pending_index = int(batch.generated(sp.row).size());
    }
    batch.emit(sp.row, v.bonus);
    ++out.emitted;
  }
  row.accepted = v.accepted;
  return out;
}

}  // namespace

void decode_group_speculative(ModelGroup& target, DraftEndpoint& draft, SequenceBatch& batch,
                              int group, const DecodeSettings& s, Recorder& recorder) {
  const int vocab = target.config().vocab_size;
  std::vector<SpeculationRow> rows(size_t(batch.rows()));
  for (int r = 0; r < batch.rows(); ++r)
    rows[size_t(r)].uniforms =
        UniformStream{s.limits.seed, acceptance_stream(batch.sequence(r)), 0};
  draft.start(start_message(batch, group, s));
  std::vector<float> logits, target_probs, probs;  // reused across rounds
  double busy_s = 0.0;
  for (int round = 0;; ++round) {
    OutcomeMessage outcome = outcome_message(batch, rows, round, busy_s, s.limits.temperature);
    if (outcome.sequences.empty()) {
      outcome.stop = true;
      draft.finish_group(outcome);
      return;
    }
    RoundTimes t;
    t.start = global_now();
    ExchangeTiming exchange;
    const SpeculationMessage spec = draft.exchange(outcome, exchange);
    const auto drafted = take_speculation(spec, exchange.draft, batch, rows, recorder);
    if (drafted.empty()) continue;  // only finished sequences' bonuses were resolved
    t.verify_start = global_now();
    verify(target, batch, drafted, logits);
    t.verify_s = global_now() - t.verify_start;
    t.accept_start = global_now();
    std::vector<SequenceVerdict> verdicts;
    for (size_t i = 0; i < drafted.size(); ++i) {
      const SequenceSpeculation& sp = *drafted[i];
      int rank = 0;
      const float* l = logits.data() + i * size_t(s.lookahead + 1) * vocab;
      const Verdict v = judge(l, sp, rows[size_t(sp.row)], s, vocab, target_probs, probs, rank);
      verdicts.push_back(accept(batch, rows[size_t(sp.row)], sp, v, rank));
    }
    t.end = global_now();
    busy_s = t.end - t.verify_start;
    recorder.round(batch, round, s.lookahead, verdicts, t, exchange);
  }
}

}  // namespace ssd
