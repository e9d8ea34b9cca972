// Autoregressive decoding: the baseline every speculative mode is measured against.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ssd/model_group.h"
#include "ssd/records.h"

namespace ssd {

struct DecodeSettings {
  int batch_size = 1;
  int max_new_tokens = 128;
  double temperature = 0.0;
  uint64_t seed = 0;
  bool ignore_eos = false;
  // Called after every decode step or round with the tokens emitted in it (progress lines).
  std::function<void(int64_t)> on_tokens;
};

// Monotonic seconds on this process's clock, for durations only (progress lines, load times).
// Records take their times from global_now() (comm/clock.h), the clock of `clock_zero`.
double now_seconds();

// Generates up to max_new_tokens for every prompt, batch_size prompts at a time: one prefill
// forward per batch group, then one-token decode steps until every row hit EOS or the limit.
// Appends the step records to `records` (when rep >= 0) and returns the rep's totals and the
// tokens generated per prompt. `clock_zero` is the run's time origin, read from global_now().
RepTotals run_autoregressive(ModelGroup& target, const std::vector<std::vector<int32_t>>& prompts,
                             const DecodeSettings& settings, int rep, double clock_zero,
                             std::vector<StepRecord>* steps,
                             std::vector<std::vector<int32_t>>& generated);

// The random stream of a sequence's token sampling (and, for SD, of its acceptance tests):
// streams depend only on the prompt index, so a sequence draws the same numbers whatever
// batch it is in.
uint64_t sampling_stream(int sequence);
uint64_t acceptance_stream(int sequence);

}  // namespace ssd
