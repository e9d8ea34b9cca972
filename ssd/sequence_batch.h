// SequenceBatch: one batch group of sequences on the target leader, the part of decoding that
// AR, SD and SSD share. It owns the group's rows of the target's KV cache (fresh, sized for
// the prompts, the new tokens and a verification's K+1 extra positions), prefills every prompt
// in one forward pass, and emits tokens, deciding when a sequence is done (token limit or EOS).
// Decoding algorithms only decide which tokens to emit.
#pragma once

#include <cstdint>
#include <vector>

#include "ssd/model_group.h"

namespace ssd {

using TokenLists = std::vector<std::vector<int32_t>>;

// What every decoding algorithm is told about the run.
struct SequenceLimits {
  int max_new_tokens = 128;
  bool ignore_eos = false;
  double temperature = 0.0;  // the target's sampling temperature (0 = greedy)
  uint64_t seed = 0;
};

class SequenceBatch {
 public:
  // Rows are prompts[first .. first + rows); `extra` cache positions past the longest prompt
  // and the new tokens (a verification's lookahead). `generated` holds every prompt's tokens.
  SequenceBatch(ModelGroup& target, const TokenLists& prompts, int first, int rows, int extra,
                const SequenceLimits& limits, TokenLists& generated);

  int rows() const { return rows_; }
  int first() const { return first_; }
  int sequence(int row) const { return first_ + row; }
  bool done(int row) const { return done_[size_t(row)] != 0; }
  int32_t last(int row) const { return last_[size_t(row)]; }
  const std::vector<int32_t>& prompt(int row) const { return prompts_[size_t(first_ + row)]; }
  std::vector<int32_t>& generated(int row) { return generated_[size_t(first_ + row)]; }
  // Prompt + generated tokens.
  int committed(int row) const;
  // Tokens whose K/V are in the target's cache (the newest emitted token is not yet).
  int& cached(int row) { return target_.lengths()[size_t(row)]; }
  std::vector<int> active() const;  // rows not done, in order

  // One forward over every prompt, then each row's first token sampled and emitted. Returns
  // the forward's seconds.
  double prefill(std::vector<float>& logits);
  // Samples the row's next token from its logits (greedy or at the temperature), with the
  // sequence's own random stream so a token never depends on the batch it was drawn in.
  int32_t sample_next(int row, const float* logits) const;
  // Appends a token (-1: a placeholder to be filled in later); returns false once the row is
  // finished.
  bool emit(int row, int32_t token);
  // Fills in the placeholder at `index` of the row's generated tokens.
  void replace(int row, int index, int32_t token);
  int prefill_rows() const { return prefill_rows_; }

 private:
  ModelGroup& target_;
  const TokenLists& prompts_;
  TokenLists& generated_;
  SequenceLimits limits_;
  int first_, rows_;
  int prefill_rows_ = 0;
  std::vector<char> done_;
  std::vector<int32_t> last_;
};

}  // namespace ssd
