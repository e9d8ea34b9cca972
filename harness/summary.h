// Mean and standard deviation over repetitions: the figures a result row shows.
#pragma once

#include <vector>

#include "ssd/records.h"

namespace ssd {

struct Stat {
  double mean = 0.0;
  double stddev = 0.0;  // sample standard deviation; 0 for a single repetition
};
Stat mean_stddev(const std::vector<double>& values);

struct RunSummary {
  Stat decode_tokens_per_s;
  Stat ms_per_token;
  Stat prefill_tokens_per_s;
  int reps = 0;
  int64_t generated_tokens = 0;  // per repetition
  bool tokens_identical_across_reps = true;
};

RunSummary summarize(const RunRecords& records, bool tokens_identical_across_reps);

}  // namespace ssd
