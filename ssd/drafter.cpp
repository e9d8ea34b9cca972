#include "ssd/drafter.h"

#include <algorithm>
#include <stdexcept>

#include "ssd/draft_steps.h"
#include "ssd/saguaro_sampling.h"
#include "ssd/sampling.h"
#include "ssd/synthetic_outcome.h"

namespace ssd {

Drafter::Drafter(ModelGroup& draft, double temperature, uint64_t seed)
    : draft_(draft), temperature_(temperature), seed_(seed) {}

void Drafter::start(const StartMessage& m) {
  lookahead_ = m.lookahead;
  synthetic_ = m.synthetic;
  target_temperature_ = m.temperature;
  rows_.assign(m.prompts.size(), Row{});
  size_t longest = 0;
  for (size_t r = 0; r < m.prompts.size(); ++r) {
    rows_[r].tokens = m.prompts[r];
    rows_[r].sequence = m.sequence_ids.at(r);
    rows_[r].lists.assign(m.lookahead + 1, {});
    longest = std::max(longest, m.prompts[r].size());
  }
  draft_.reset_cache(int(rows_.size()), int(longest) + m.max_new_tokens + m.lookahead + 2);
}

int32_t Drafter::apply(const SequenceOutcome& o) {
  Row& row = rows_.at(o.row);
  if (o.accepted < 0 || o.accepted > int(row.draft.size()))
    throw std::runtime_error("Drafter: outcome accepts more tokens than were drafted");
  int32_t bonus = o.bonus;
  if (bonus < 0)  // synthetic outcome: the bonus is our rank-th candidate at position k
    bonus = resolve_synthetic_bonus(seed_, row.sequence, row.resolve_draws, row.lists[o.accepted],
                                    o.accepted < lookahead_ ? row.draft[o.accepted] : -1,
                                    o.bonus_rank, draft_.config().vocab_size);
  // Drafting wrote K/V for draft tokens 1..K-1 (all K when a synthetic outcome needed the
  // distribution after s_K) after the committed ones; the accepted ones among them stay
  // valid, the rest are rolled back. (No draft yet: nothing changes.)
  if (!row.draft.empty())
    row.cached = int(row.tokens.size()) + std::min(o.accepted, row.draft_cached);
  row.tokens.insert(row.tokens.end(), row.draft.begin(), row.draft.begin() + o.accepted);
  row.tokens.push_back(bonus);
  row.draft.clear();
  if (int(row.tokens.size()) != o.length)
    throw std::runtime_error("Drafter: sequence length disagrees with the target's");
  return bonus;
}

void Drafter::resolve_last_position(const OutcomeMessage& outcome) {
  // A synthetic bonus after a full accept is a candidate of the distribution after s_K,
  // which drafting never computed: one forward of s_K for those sequences.
  ForwardBatch batch;
  std::vector<int> rows;
  for (const SequenceOutcome& o : outcome.sequences) {
    Row& row = rows_.at(o.row);
    if (o.bonus >= 0 || o.accepted != lookahead_ || row.draft.empty()) continue;
    const int position = int(row.tokens.size()) + lookahead_ - 1;
    batch.add_causal(o.row, position, {row.draft.back()}, ForwardBatch::Logits::All);
    rows.push_back(o.row);
  }
  if (rows.empty()) return;
  draft_.forward(batch, logits_);
  const int vocab = draft_.config().vocab_size;
  for (size_t i = 0; i < rows.size(); ++i) {
    rows_[rows[i]].lists[lookahead_] = top_tokens(logits_.data() + i * vocab, vocab, 64, -1);
    rows_[rows[i]].draft_cached = lookahead_;
  }
}

SpeculationMessage Drafter::propose(const OutcomeMessage& outcome) {
  const int vocab = draft_.config().vocab_size;
  if (synthetic_) resolve_last_position(outcome);
  SpeculationMessage spec;
  spec.round = outcome.round;
  spec.vocab = vocab;
  std::vector<int> active;
  for (const SequenceOutcome& o : outcome.sequences) {
    const int32_t bonus = apply(o);
    SequenceSpeculation out;
    out.row = o.row;
    if (o.bonus < 0) out.resolved_bonus = bonus;
    spec.sequences.push_back(out);
    if (o.finishing) {
      spec.sequences.back().tokens.clear();
      continue;
    }
    active.push_back(o.row);
  }
  // Drafted sequences first, in `active` order; finished ones (resolution only) after.
  std::stable_partition(spec.sequences.begin(), spec.sequences.end(),
                        [&](const SequenceSpeculation& x) {
                          return std::find(active.begin(), active.end(), x.row) != active.end();
                        });

  std::vector<DraftInput> inputs;
  for (int r : active) inputs.push_back({r, &rows_[r].tokens, rows_[r].cached});
  const auto pick = [&](size_t i, int step, const float* l) {
    Row& row = rows_[active[i]];
    SequenceSpeculation& s = spec.sequences[i];
    int32_t token;
    if (temperature_ == 0.0) {
      token = argmax(l, vocab);
      if (target_temperature_ > 0.0) append_one_hot(s.probs, vocab, token);
    } else {
      softmax(l, vocab, temperature_, probs_);
      token =
          sample_from(probs_, uniform01(seed_, draft_sampling_stream(row.sequence), row.draws++));
      s.probs.insert(s.probs.end(), probs_.begin(), probs_.end());
    }
    if (synthetic_) row.lists[step] = top_tokens(l, vocab, 64, -1);
    return token;
  };
  const auto drafted = draft_k_tokens(draft_, inputs, lookahead_, pick, logits_);
  for (size_t i = 0; i < active.size(); ++i) {
    rows_[active[i]].draft = drafted[i];
    spec.sequences[i].tokens = drafted[i];
  }
  for (int r : active) {
    rows_[r].cached = int(rows_[r].tokens.size());
    rows_[r].draft_cached = lookahead_ - 1;
  }
  return spec;
}

}  // namespace ssd
