#include "ssd/autoregressive.h"

#include <algorithm>
#include <chrono>

#include "comm/clock.h"
#include "ssd/sampling.h"

namespace ssd {

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Four streams per sequence: token sampling, acceptance tests, draft sampling, spare.
uint64_t sampling_stream(int sequence) {
  return 4 * uint64_t(sequence);
}
uint64_t acceptance_stream(int sequence) {
  return 4 * uint64_t(sequence) + 1;
}

RepTotals run_autoregressive(ModelGroup& target, const std::vector<std::vector<int32_t>>& prompts,
                             const DecodeSettings& s, int rep, double clock_zero,
                             std::vector<StepRecord>* steps,
                             std::vector<std::vector<int32_t>>& generated) {
  const ModelConfig& config = target.config();
  const int vocab = config.vocab_size;
  const int n_prompts = int(prompts.size());
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  const int capacity = int(longest) + s.max_new_tokens;
  const int batch = std::min(s.batch_size, n_prompts);

  RepTotals totals;
  totals.rep = rep;
  generated.assign(n_prompts, {});
  target.reset_cache(batch, capacity);
  std::vector<int>& length = target.lengths();
  std::vector<float> logits;

  for (int first = 0; first < n_prompts; first += batch) {
    const int rows = std::min(batch, n_prompts - first);
    std::vector<bool> done(rows, false);
    std::vector<int32_t> last(rows);

    auto emit = [&](int row, int32_t token) {
      const int sequence = first + row;
      generated[sequence].push_back(token);
      ++totals.generated_tokens;
      if (int(generated[sequence].size()) >= s.max_new_tokens ||
          (!s.ignore_eos && config.is_eos(token)))
        done[row] = true;
      last[row] = token;
    };
    auto draw = [&](int row, const float* row_logits) {
      const int sequence = first + row;
      const double u = uniform01(s.seed, sampling_stream(sequence), generated[sequence].size());
      return sample_token(row_logits, vocab, s.temperature, u);
    };

    // Prefill: every prompt of the group in one forward, logits of each last token. Times
    // come from global_now(), the clock `clock_zero` was read from, like SD's records (one
    // clock for every record, on every rank).
    const double prefill_start = global_now();
    ForwardBatch prefill;
    for (int row = 0; row < rows; ++row) {
      length[row] = 0;
      prefill.add_causal(row, 0, prompts[first + row], ForwardBatch::Logits::Last);
    }
    const double forward_start = global_now();
    target.forward(prefill, logits);
    const double forward_s = global_now() - forward_start;
    for (int row = 0; row < rows; ++row) {
      length[row] = int(prompts[first + row].size());
      emit(row, draw(row, logits.data() + size_t(row) * vocab));
    }
    const double prefill_s = global_now() - prefill_start;
    totals.prefill_s += prefill_s;
    totals.prefill_tokens += prefill.rows();
    if (steps)
      for (int row = 0; row < rows; ++row)
        steps->push_back(
            {rep, -1, row, first + row, 1, prefill_start - clock_zero, prefill_s, forward_s});

    // Decode: one token per unfinished row per step.
    for (int step = 0;; ++step) {
      std::vector<int> active;
      for (int row = 0; row < rows; ++row)
        if (!done[row]) active.push_back(row);
      if (active.empty()) break;
      const double step_start = global_now();
      ForwardBatch batch_step;
      for (int row : active)
        batch_step.add_causal(row, length[row], {last[row]}, ForwardBatch::Logits::All);
      const double fwd_start = global_now();
      target.forward(batch_step, logits);
      const double fwd_s = global_now() - fwd_start;
      for (size_t i = 0; i < active.size(); ++i) {
        const int row = active[i];
        length[row] += 1;
        emit(row, draw(row, logits.data() + i * vocab));
      }
      const double step_s = global_now() - step_start;
      totals.decode_s += step_s;
      totals.decode_tokens += int64_t(active.size());
      totals.decode_steps += 1;
      totals.per_sequence_decode_tokens += double(active.size()) / rows;
      if (s.on_tokens) s.on_tokens(int64_t(active.size()));
      if (steps)
        for (int row : active)
          steps->push_back(
              {rep, step, row, first + row, 1, step_start - clock_zero, step_s, fwd_s});
    }
  }
  return totals;
}

}  // namespace ssd
