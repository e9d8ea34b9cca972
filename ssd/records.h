// What a decoding run measures: per-step records and per-repetition totals. The harness turns
// them into console rows and HDF5 datasets.
#pragma once

#include <cstdint>
#include <vector>

namespace ssd {

// One batch row in one decode step (or the prefill, step = -1).
struct StepRecord {
  int rep = 0;
  int step = 0;            // decode step within the batch group; -1 for the prefill
  int row = 0;             // row within the batch
  int sequence = 0;        // prompt index
  int tokens = 0;          // tokens this row emitted in this step
  double start_s = 0.0;    // step start, seconds since the run started
  double step_s = 0.0;     // wall time of the whole step (forward, sampling, bookkeeping)
  double forward_s = 0.0;  // of which the forward pass
};

struct RepTotals {
  int rep = 0;
  double prefill_s = 0.0;
  int64_t prefill_tokens = 0;  // prompt tokens processed
  double decode_s = 0.0;       // wall time of decode steps only
  int64_t decode_tokens = 0;   // tokens emitted by decode steps (not the prefill's first token)
  int64_t decode_steps = 0;
  int64_t generated_tokens = 0;  // everything emitted, first tokens included
  double decode_tokens_per_s() const { return decode_s > 0 ? decode_tokens / decode_s : 0.0; }
  double prefill_tokens_per_s() const { return prefill_s > 0 ? prefill_tokens / prefill_s : 0.0; }
  // Inter-token latency of one sequence: decode wall time per decode step.
  double ms_per_token() const { return decode_steps > 0 ? 1e3 * decode_s / decode_steps : 0.0; }
};

struct RunRecords {
  std::vector<StepRecord> steps;
  std::vector<RepTotals> reps;
  // Tokens generated per sequence by the first recorded repetition, without the prompt.
  std::vector<std::vector<int32_t>> generated;
};

}  // namespace ssd
