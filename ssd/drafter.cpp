#include "ssd/drafter.h"

#include <algorithm>
#include <stdexcept>

#include "ssd/autoregressive.h"
#include "ssd/sampling.h"

namespace ssd {

Drafter::Drafter(ModelGroup& draft, double temperature, uint64_t seed)
    : draft_(draft), temperature_(temperature), seed_(seed) {}

void Drafter::start(const StartMessage& m) {
  lookahead_ = m.lookahead;
  target_temperature_ = m.temperature;
  rows_.assign(m.prompts.size(), Row{});
  size_t longest = 0;
  for (size_t r = 0; r < m.prompts.size(); ++r) {
    rows_[r].tokens = m.prompts[r];
    rows_[r].sequence = m.sequence_ids.at(r);
    longest = std::max(longest, m.prompts[r].size());
  }
  draft_.reset_cache(int(rows_.size()), int(longest) + m.max_new_tokens + m.lookahead + 2);
}

void Drafter::apply(const SequenceOutcome& o) {
  Row& row = rows_.at(o.row);
  if (o.accepted < 0 || o.accepted > int(row.draft.size()))
    throw std::runtime_error("Drafter: outcome accepts more tokens than were drafted");
  // Drafting wrote K/V for draft tokens 1..K-1 after the committed ones; the accepted ones
  // among them stay valid, the rest are rolled back. (No draft yet: nothing changes.)
  if (!row.draft.empty())
    row.cached = int(row.tokens.size()) + std::min(o.accepted, lookahead_ - 1);
  row.tokens.insert(row.tokens.end(), row.draft.begin(), row.draft.begin() + o.accepted);
  row.tokens.push_back(o.bonus);
  row.draft.clear();
  if (int(row.tokens.size()) != o.length)
    throw std::runtime_error("Drafter: sequence length disagrees with the target's");
}

SpeculationMessage Drafter::propose(const OutcomeMessage& outcome) {
  const int vocab = draft_.config().vocab_size;
  std::vector<int> active;
  for (const SequenceOutcome& o : outcome.sequences) {
    apply(o);
    active.push_back(o.row);
  }
  SpeculationMessage spec;
  spec.round = outcome.round;
  spec.vocab = vocab;
  spec.sequences.resize(active.size());
  for (size_t i = 0; i < active.size(); ++i) {
    spec.sequences[i].row = active[i];
    spec.sequences[i].cache_hit = false;
  }

  for (int step = 0; step < lookahead_; ++step) {
    ForwardBatch batch;
    for (int r : active) {
      Row& row = rows_[r];
      const int length = int(row.tokens.size()) + step;
      if (step == 0) {
        // Everything not yet in the cache: the bonus token, and after a full accept the
        // last draft token too (or the whole prompt in the first round).
        std::vector<int32_t> pending(row.tokens.begin() + row.cached, row.tokens.end());
        batch.add_causal(r, row.cached, pending, ForwardBatch::Logits::Last);
      } else {
        batch.add_causal(r, length - 1, {row.draft.back()}, ForwardBatch::Logits::All);
      }
    }
    draft_.forward(batch, logits_);
    for (size_t i = 0; i < active.size(); ++i) {
      Row& row = rows_[active[i]];
      const float* l = logits_.data() + i * vocab;
      SequenceSpeculation& s = spec.sequences[i];
      int32_t token;
      if (temperature_ == 0.0) {
        token = argmax(l, vocab);
        // A greedy draft's distribution is one-hot; a sampling target needs it to verify.
        if (target_temperature_ > 0.0) {
          s.probs.resize(s.probs.size() + vocab, 0.0f);
          s.probs[s.probs.size() - vocab + token] = 1.0f;
        }
      } else {
        softmax(l, vocab, temperature_, probs_);
        token =
            sample_from(probs_, uniform01(seed_, sampling_stream(row.sequence) + 2, row.draws++));
        s.probs.insert(s.probs.end(), probs_.begin(), probs_.end());
      }
      row.draft.push_back(token);
      s.tokens.push_back(token);
    }
  }
  for (int r : active) rows_[r].cached = int(rows_[r].tokens.size());
  return spec;
}

}  // namespace ssd
