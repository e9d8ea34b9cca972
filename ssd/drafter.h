// Drafter: the draft model's side of speculative decoding. Given last round's outcome per
// sequence (k accepted, bonus token) it rolls its KV cache back to the accepted path and
// drafts the next K tokens for every active sequence in one batched forward per step.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/messages.h"
#include "ssd/model_group.h"

namespace ssd {

class Drafter {
 public:
  // temperature: the draft's sampling temperature (0 = greedy, then no probability rows).
  Drafter(ModelGroup& draft, double temperature, uint64_t seed);

  // A new batch group: fresh cache, prompts prefilled on the first propose().
  void start(const StartMessage& m);
  // Applies the outcome and drafts K tokens for every sequence in it.
  SpeculationMessage propose(const OutcomeMessage& outcome);

 private:
  struct Row {
    std::vector<int32_t> tokens;  // committed: prompt + generated
    int cached = 0;               // leading tokens whose K/V are in the draft's cache
    std::vector<int32_t> draft;   // last round's draft
    int sequence = 0;             // prompt index (random stream)
    uint64_t draws = 0;
    uint64_t resolve_draws = 0;
    int draft_cached = 0;  // draft tokens whose K/V drafting wrote (K-1, or K)
    // Synthetic outcomes: the top candidates at positions 0..K of the last draft.
    std::vector<std::vector<int32_t>> lists;
  };
  // Applies an outcome; returns the bonus token (resolved from its rank when synthetic).
  int32_t apply(const SequenceOutcome& o);
  void resolve_last_position(const OutcomeMessage& outcome);

  ModelGroup& draft_;
  double temperature_;
  uint64_t seed_;
  int lookahead_ = 0;
  double target_temperature_ = 0.0;
  bool synthetic_ = false;
  std::vector<Row> rows_;
  std::vector<float> logits_, probs_;
};

}  // namespace ssd
