#include "ssd/drafter.h"

#include <algorithm>
#include <stdexcept>

#include "ssd/decode.h"
#include "ssd/saguaro_sampling.h"
#include "ssd/sampling.h"
#include "ssd/synthetic_outcome.h"
#include "ssd/verification.h"

namespace ssd {
namespace {

// Synthetic outcomes name the bonus by its rank among this many candidates (SD).
constexpr int kSyntheticListLimit = 64;

// A sequence about to be drafted: its cache row, committed tokens, and how many of them are
// already in the draft's cache.
struct DraftInput {
  int row = 0;
  const std::vector<int32_t>* committed = nullptr;
  int cached = 0;
};

// K batched forward steps over `rows`: step 0 feeds every committed token not yet cached (the
// bonus; after a full accept the last draft token too),
// step j the token picked at step j-1. Returns the K tokens of each row. The draft's cache then
// holds every committed token and the first K-1 drafts of each row.
std::vector<std::vector<int32_t>> draft_k_tokens(ModelGroup& draft,
                                                 const std::vector<DraftInput>& rows, int K,
                                                 const PickToken& pick,
                                                 std::vector<float>& logits) {
  const int vocab = draft.config().vocab_size;
  std::vector<std::vector<int32_t>> tokens(rows.size());
  for (int step = 0; step < K; ++step) {
    ForwardBatch batch;
    for (size_t i = 0; i < rows.size(); ++i) {
      const DraftInput& in = rows[i];
      const int length = int(in.committed->size()) + step;
      if (step == 0) {
        std::vector<int32_t> pending(in.committed->begin() + in.cached, in.committed->end());
        batch.add_causal(in.row, in.cached, pending, ForwardBatch::Logits::Last);
      } else {
        batch.add_causal(in.row, length - 1, {tokens[i].back()}, ForwardBatch::Logits::All);
      }
    }
    draft.forward(batch, logits);
    for (size_t i = 0; i < rows.size(); ++i)
      tokens[i].push_back(pick(i, step, logits.data() + i * size_t(vocab)));
  }
  return tokens;
}

// Synthetic outcomes: the bonus the target drew as a rank, named from the draft's candidate
// list at position k (s_{k+1} = `excluded` skipped), with the sequence's own resolving stream
// (`draws` is its counter).
int32_t resolve_synthetic_bonus(uint64_t seed, int sequence, uint64_t& draws,
                                const std::vector<int32_t>& candidates, int32_t excluded, int rank,
                                int vocab) {
  UniformStream u{seed ^ kResolveSeed, resolve_stream(sequence), draws};
  const int32_t bonus = resolve_ranked_bonus(candidates, excluded, rank, vocab, u);
  draws = u.counter;
  return bonus;
}

}  // namespace

int longest_sequence(const StartMessage& m) {
  size_t longest = 0;
  for (const std::vector<int32_t>& prompt : m.prompts) longest = std::max(longest, prompt.size());
  return int(longest) + m.max_new_tokens;
}

Drafter::Drafter(ModelGroup& draft, double temperature, uint64_t seed, int list_limit)
    : draft_(draft),
      temperature_(temperature),
      seed_(seed),
      vocab_(draft.config().vocab_size),
      list_limit_(list_limit) {}

void Drafter::start(const StartMessage& m) {
  // The committed tokens, a draft, and after a full accept its last token beside the bonus.
  start(m, int(sequence_kv_capacity(longest_sequence(m), m.lookahead)));
}

void Drafter::start(const StartMessage& m, int capacity) {
  lookahead_ = m.lookahead;
  synthetic_ = m.synthetic;
  lists_ = list_limit_ > 0 ? list_limit_ : synthetic_ ? kSyntheticListLimit : 0;
  target_temperature_ = m.temperature;
  rows_.assign(m.prompts.size(), Sequence{});
  for (size_t r = 0; r < m.prompts.size(); ++r) {
    rows_[r].tokens = m.prompts[r];
    rows_[r].id = m.sequence_ids.at(r);
    rows_[r].lists.assign(m.lookahead + 1, {});
  }
  draft_.reset_cache(int(rows_.size()), capacity);
  // The prompts' K/V now, as the target's prefill computes its own; the first round's draft
  // then feeds only the bonus. Batch invariance makes every row's K/V the same as when the
  // prompt rode along with that first step.
  ForwardBatch prefill;
  for (size_t r = 0; r < rows_.size(); ++r)
    if (!rows_[r].tokens.empty())
      prefill.add_causal(int(r), 0, rows_[r].tokens, ForwardBatch::Logits::None);
  if (prefill.rows() > 0) draft_.forward(prefill, logits_);
  for (Sequence& row : rows_) row.cached = int(row.tokens.size());
}

int32_t Drafter::commit(const SequenceOutcome& o) {
  Sequence& row = rows_.at(o.row);
  if (o.accepted < 0 || o.accepted > int(row.draft.size()))
    throw std::runtime_error("Drafter: outcome accepts more tokens than were drafted");
  int32_t bonus = o.bonus;
  if (bonus < 0) {  // synthetic outcome: the bonus is our rank-th candidate at position k
    // After a full accept SD holds no list after s_K: drafting never fed s_K, and feeding it
    // alone would cost SD a draft pass a round that real SD never makes (it feeds s_K beside
    // the bonus in its next first step). SD's speed does not depend on which token the bonus
    // is, its acceptance being drawn, so it names it from the list s_K came from, s_K
    // excluded. SSD's glue step computed the list after s_K, on which its cache is judged.
    const bool after_last = o.accepted == lookahead_ && row.lists[o.accepted].empty();
    const int at = after_last ? lookahead_ - 1 : o.accepted;
    bonus = resolve_synthetic_bonus(seed_, row.id, row.resolve_draws, row.lists[at],
                                    at < int(row.draft.size()) ? row.draft[at] : -1, o.bonus_rank,
                                    vocab_);
  }
  // Drafting wrote K/V for draft tokens 1..K-1 (all K when the last was fed too) after the
  // committed ones; the accepted ones among them stay valid, the rest are rolled back. (No
  // draft yet: nothing changes.)
  if (!row.draft.empty())
    row.cached = int(row.tokens.size()) + std::min(o.accepted, row.draft_cached);
  row.tokens.insert(row.tokens.end(), row.draft.begin(), row.draft.begin() + o.accepted);
  row.tokens.push_back(bonus);
  row.draft.clear();
  if (int(row.tokens.size()) != o.length)
    throw std::runtime_error("Drafter: sequence length disagrees with the target's");
  return bonus;
}

std::vector<std::vector<int32_t>> Drafter::draft(const std::vector<int>& rows,
                                                 const PickToken& pick) {
  std::vector<DraftInput> inputs;
  for (int r : rows) {
    Sequence& row = rows_[r];
    row.lists.assign(lookahead_ + 1, {});
    inputs.push_back({r, &row.tokens, row.cached});
  }
  const auto listed_pick = [&](size_t i, int step, const float* l) {
    if (lists_ > 0) rows_[rows[i]].lists[step] = top_tokens(l, vocab_, lists_, -1);
    return pick(i, step, l);
  };
  std::vector<std::vector<int32_t>> drafted =
      draft_k_tokens(draft_, inputs, lookahead_, listed_pick, logits_);
  for (size_t i = 0; i < rows.size(); ++i) {
    Sequence& row = rows_[rows[i]];
    row.draft = drafted[i];
    row.cached = int(row.tokens.size());
    row.draft_cached = lookahead_ - 1;
  }
  return drafted;
}

int32_t Drafter::greedy(const float* logits, std::vector<float>* probs) const {
  const int32_t token = argmax(logits, vocab_);
  // A greedy draft's distribution is one-hot on its token; a sampling target verifies against
  // it (paper §2.1).
  if (probs && target_samples()) {
    probs->resize(probs->size() + size_t(vocab_), 0.0f);
    (*probs)[probs->size() - size_t(vocab_) + size_t(token)] = 1.0f;
  }
  return token;
}

int32_t Drafter::draw(Sequence& s, const std::vector<float>& probs) const {
  return sample_from(probs, uniform01(seed_, draft_sampling_stream(s.id), s.draws++));
}

int32_t Drafter::pick(Sequence& s, const float* logits, std::vector<float>& probs) {
  if (temperature_ == 0.0) return greedy(logits, &probs);
  softmax(logits, vocab_, temperature_, probs_);
  const int32_t token = draw(s, probs_);
  // Every sampled row goes out, even to a greedy target.
  probs.insert(probs.end(), probs_.begin(), probs_.end());
  return token;
}

SpeculationMessage Drafter::propose(const OutcomeMessage& outcome) {
  SpeculationMessage spec;
  spec.round = outcome.round;
  spec.vocab = vocab_;
  std::vector<int> active;
  for (const SequenceOutcome& o : outcome.sequences) {
    const int32_t bonus = commit(o);
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
  const auto drafted = draft(active, [&](size_t i, int, const float* l) {
    return pick(rows_[active[i]], l, spec.sequences[i].probs);
  });
  for (size_t i = 0; i < active.size(); ++i) spec.sequences[i].tokens = drafted[i];
  return spec;
}

}  // namespace ssd
