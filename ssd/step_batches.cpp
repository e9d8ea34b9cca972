// The forward batches characterize and the -k auto calibration time (step_batches.h).
#include "ssd/step_batches.h"

#include <vector>

namespace ssd {

int32_t token_at(int64_t i, int vocab) {
  return int32_t((7919 * i + 3) % vocab);
}

void prefill(ModelGroup& g, int sequences, int context, int capacity) {
  g.reset_cache(sequences, capacity);
  const int vocab = g.config().vocab_size;
  ForwardBatch b;
  for (int s = 0; s < sequences; ++s) {
    std::vector<int32_t> tokens(static_cast<size_t>(context));
    for (int i = 0; i < context; ++i) tokens[size_t(i)] = token_at(int64_t(s) * context + i, vocab);
    b.add_causal(s, 0, tokens, ForwardBatch::Logits::Last);
  }
  std::vector<float> logits;
  g.forward(b, logits);
  for (int s = 0; s < sequences; ++s) g.lengths()[size_t(s)] = context;
}

ForwardBatch causal_step(int sequences, int context, int per_sequence, int vocab, bool all_logits) {
  ForwardBatch b;
  for (int s = 0; s < sequences; ++s) {
    std::vector<int32_t> tokens(static_cast<size_t>(per_sequence));
    for (int i = 0; i < per_sequence; ++i) tokens[size_t(i)] = token_at(1000 + s * 31 + i, vocab);
    b.add_causal(s, context, tokens,
                 all_logits ? ForwardBatch::Logits::All : ForwardBatch::Logits::Last);
  }
  return b;
}

ForwardBatch branch_step(int sequences, int context, int K, int rows, int scratch, int vocab) {
  ForwardBatch b;
  for (int i = 0; i < rows; ++i) {
    const int s = i % sequences, j = i / sequences, k = j % (K + 1);
    const int slot = scratch + j * K;
    std::vector<int32_t> visible;
    for (int v = 0; v < k; ++v) visible.push_back(context + v);
    visible.push_back(slot);
    b.add_token(s, token_at(5000 + i, vocab), context + k, slot, context, visible, true);
  }
  return b;
}

}  // namespace ssd
