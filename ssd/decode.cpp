#include "ssd/decode.h"

#include <algorithm>

#include "comm/clock.h"

namespace ssd {

RepTotals decode_repetition(ModelGroup& target, DraftEndpoint* draft, const TokenLists& prompts,
                            const DecodeSettings& s, Recorder& recorder, TokenLists& generated) {
  const int n_prompts = int(prompts.size());
  const int batch_size = std::min(s.batch_size, n_prompts);
  const int extra = int(sequence_kv_capacity(0, draft ? s.lookahead : 0));
  generated.assign(size_t(n_prompts), {});
  std::vector<float> logits;
  for (int first = 0, group = 0; first < n_prompts; first += batch_size, ++group) {
    SequenceBatch batch(target, prompts, first, std::min(batch_size, n_prompts - first), extra,
                        s.limits, generated);
    // The prefill is the target's and the draft's: a draft rank prefills beside the target, an
    // in-process draft before it (DraftEndpoint::start).
    const double start = global_now();
    if (draft) draft->start(start_message(batch, group, s));
    const double forward_s = batch.prefill(logits);
    if (draft) draft->wait_ready();
    recorder.prefill(group, batch, start, global_now() - start, forward_s);
    const int64_t passes_before = target.forward_passes();
    if (draft)
      decode_group_speculative(target, *draft, batch, s, recorder);
    else
      decode_group_autoregressive(target, batch, recorder);
    recorder.target_passes(target.forward_passes() - passes_before);
  }
  return recorder.totals();
}

void decode_group_autoregressive(ModelGroup& target, SequenceBatch& batch, Recorder& recorder) {
  const int vocab = target.config().vocab_size;
  std::vector<float> logits;
  for (int step = 0;; ++step) {
    const std::vector<int> active = batch.active();
    if (active.empty()) return;
    const double start = global_now();
    ForwardBatch forward;
    for (int row : active)
      forward.add_causal(row, batch.cached(row), {batch.last(row)}, ForwardBatch::Logits::All);
    const double forward_start = global_now();
    target.forward(forward, logits);
    const double forward_s = global_now() - forward_start;
    for (size_t i = 0; i < active.size(); ++i) {
      const int row = active[i];
      batch.cached(row) += 1;
      batch.emit(row, batch.sample_next(row, logits.data() + i * size_t(vocab)));
    }
    recorder.step(batch, step, active, start, global_now() - start, forward_s);
  }
}

}  // namespace ssd
