// Drafter: the draft model's side of speculative decoding. Given last round's outcome per
// sequence (k accepted, bonus token) it rolls its KV cache back to the accepted path and
// drafts the next K tokens for every active sequence in one batched forward per step.
// SSD's SaguaroDrafter is this drafter (its primary speculator) plus what it does between
// rounds: it builds the speculation cache, and answers outcomes from it where it can.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "comm/messages.h"
#include "ssd/model_group.h"

namespace ssd {

// Chooses row i's token at `step` from the draft's logits there (greedy, sampled, SAGUARO),
// keeping whatever else the caller needs (probabilities).
using PickToken = std::function<int32_t(size_t i, int step, const float* logits)>;

// The longest a sequence of the group can get: its prompt and every token it may generate.
int longest_sequence(const StartMessage& m);

class Drafter {
 public:
  // One sequence's drafting state, its random draws included: SSD's cache build and fallbacks
  // keep their own per-sequence state beside it, not a second copy of it.
  struct Sequence {
    int id = 0;                   // prompt index: keys the sequence's random streams
    std::vector<int32_t> tokens;  // committed: prompt + generated
    int cached = 0;               // leading tokens whose K/V are in the draft's cache
    std::vector<int32_t> draft;   // the speculation being verified
    // Draft tokens whose K/V follow the committed ones': K-1 after drafting, K once the last
    // was fed too (SSD's glue step), 0 for a backup's.
    int draft_cached = 0;
    // Top candidates of the draft's distribution after k = 0..K draft tokens: what synthetic
    // bonus ranks name, and SSD's bonus-token guesses (empty: not computed, which SSD's glue
    // step then does; SD never computes the one after s_K).
    std::vector<std::vector<int32_t>> lists;
    uint64_t draws = 0;          // the draft sampling stream's counter
    uint64_t resolve_draws = 0;  // the resolving stream's (synthetic bonus ranks)
  };

  // temperature: the draft's sampling temperature (0 = greedy, then no probability rows).
  // list_limit: candidates kept per drafted position; 0 = only for synthetic outcomes (64).
  Drafter(ModelGroup& draft, double temperature, uint64_t seed, int list_limit = 0);

  // A new batch group: fresh cache, and the prompts prefilled into it in one forward pass. The
  // cache holds `capacity` tokens per sequence (SSD's branches need more than the sequence and a
  // draft).
  void start(const StartMessage& m);
  void start(const StartMessage& m, int capacity);
  // SD: applies the outcome and drafts K tokens for every sequence in it.
  SpeculationMessage propose(const OutcomeMessage& outcome);

  // The parts SaguaroDrafter answers outcomes with.
  Sequence& sequence(int row) { return rows_.at(size_t(row)); }
  // Commits k accepted and the bonus (resolving a synthetic bonus from its rank); returns the
  // bonus.
  int32_t commit(const SequenceOutcome& o);
  // Drafts K tokens just in time for `rows` with `pick` (which sees rows[i] as i), keeping
  // the candidate lists; each row's draft is the returned tokens.
  std::vector<std::vector<int32_t>> draft(const std::vector<int>& rows, const PickToken& pick);
  // Greedy: the argmax, and its one-hot row in *probs when the target samples.
  int32_t greedy(const float* logits, std::vector<float>* probs) const;
  // A draw from `probs` on the sequence's draft sampling stream.
  int32_t draw(Sequence& s, const std::vector<float>& probs) const;
  uint64_t seed() const { return seed_; }
  double temperature() const { return temperature_; }
  int lookahead() const { return lookahead_; }  // K of the current group
  bool target_samples() const { return target_temperature_ > 0.0; }
  int64_t forward_passes() const { return draft_.forward_passes(); }

 private:
  int32_t pick(Sequence& s, const float* logits, std::vector<float>& probs);

  ModelGroup& draft_;
  double temperature_;
  uint64_t seed_;
  int vocab_;
  int list_limit_ = 0;  // as given; lists_ is this group's
  int lists_ = 0;
  int lookahead_ = 0;
  double target_temperature_ = 0.0;
  bool synthetic_ = false;
  std::vector<Sequence> rows_;
  std::vector<float> logits_, probs_;
};

}  // namespace ssd
