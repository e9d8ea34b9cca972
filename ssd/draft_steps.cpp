#include "ssd/draft_steps.h"

#include "ssd/sampling.h"
#include "ssd/synthetic_outcome.h"

namespace ssd {

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

void append_one_hot(std::vector<float>& probs, int vocab, int32_t token) {
  probs.resize(probs.size() + size_t(vocab), 0.0f);
  probs[probs.size() - size_t(vocab) + size_t(token)] = 1.0f;
}

int32_t resolve_synthetic_bonus(uint64_t seed, int sequence, uint64_t& draws,
                                const std::vector<int32_t>& candidates, int32_t excluded, int rank,
                                int vocab) {
  UniformStream u{seed ^ kResolveSeed, resolve_stream(sequence), draws};
  const int32_t bonus = resolve_ranked_bonus(candidates, excluded, rank, vocab, u);
  draws = u.counter;
  return bonus;
}

}  // namespace ssd
