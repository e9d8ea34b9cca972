#include "ssd/sequence_batch.h"

#include <algorithm>

#include "comm/clock.h"
#include "ssd/sampling.h"

namespace ssd {

SequenceBatch::SequenceBatch(ModelGroup& target, const TokenLists& prompts, int first, int rows,
                             int extra, const SequenceLimits& limits, TokenLists& generated)
    : target_(target),
      prompts_(prompts),
      generated_(generated),
      limits_(limits),
      first_(first),
      rows_(rows),
      done_(size_t(rows), 0),
      last_(size_t(rows), 0) {
  size_t longest = 0;
  for (int r = 0; r < rows; ++r) longest = std::max(longest, prompt(r).size());
  target_.reset_cache(rows, int(longest) + limits.max_new_tokens + extra);
}

int SequenceBatch::committed(int row) const {
  return int(prompt(row).size() + generated_[size_t(first_ + row)].size());
}

std::vector<int> SequenceBatch::active() const {
  std::vector<int> rows;
  for (int r = 0; r < rows_; ++r)
    if (!done(r)) rows.push_back(r);
  return rows;
}

double SequenceBatch::prefill(std::vector<float>& logits) {
  ForwardBatch batch;
  for (int r = 0; r < rows_; ++r) {
    cached(r) = 0;
    batch.add_causal(r, 0, prompt(r), ForwardBatch::Logits::Last);
  }
  const double start = global_now();
  target_.forward(batch, logits);
  const double forward_s = global_now() - start;
  prefill_rows_ = batch.rows();
  const int vocab = target_.config().vocab_size;
  for (int r = 0; r < rows_; ++r) {
    cached(r) = int(prompt(r).size());
    emit(r, sample_next(r, logits.data() + size_t(r) * vocab));
  }
  return forward_s;
}

int32_t SequenceBatch::sample_next(int row, const float* logits) const {
  const double u = uniform01(limits_.seed, sampling_stream(sequence(row)),
                             generated_[size_t(first_ + row)].size());
  return sample_token(logits, target_.config().vocab_size, limits_.temperature, u);
}

bool SequenceBatch::emit(int row, int32_t token) {
  std::vector<int32_t>& out = generated(row);
  out.push_back(token);
  if (int(out.size()) >= limits_.max_new_tokens ||
      (!limits_.ignore_eos && token >= 0 && target_.config().is_eos(token)))
    done_[size_t(row)] = 1;
  last_[size_t(row)] = token;
  return !done(row);
}

void SequenceBatch::replace(int row, int index, int32_t token) {
  generated(row)[size_t(index)] = token;
  if (index + 1 == int(generated(row).size())) last_[size_t(row)] = token;
}

}  // namespace ssd
