// Mean and standard deviation over repetitions: the figures a result row shows.
#pragma once

#include <string>
#include <vector>

#include "ssd/records.h"

namespace ssd {

struct Stat {
  double mean = 0.0;
  double stddev = 0.0;  // sample standard deviation; 0 for a single repetition
};
Stat mean_stddev(const std::vector<double>& values);

// Speculation statistics over all recorded rounds, with the definitions vLLM and llama.cpp
// report (docs/hdf5-schema.md): a "round" is one sequence in one speculation round.
struct SpeculationSummary {
  bool present = false;
  int64_t rounds = 0, drafted = 0, accepted = 0;
  double mean_acceptance_length = 0;  // 1 + accepted / rounds
  double acceptance_rate = 0;         // accepted / drafted
  std::vector<double> per_position;   // [K]: rounds accepting position i / rounds
  std::vector<int64_t> histogram;     // [K+1]: rounds with acceptance length 1..K+1
  double t_sd = 0;                    // draft time / verify time (T_SD)
  double draft_s = 0, verify_s = 0;   // summed over rounds (per round, not per sequence)
  // SSD (docs/hdf5-schema.md): cache hit rates over looked-up outcomes, overall and after a
  // primary-speculated (cache hit or primary fallback) or backup-speculated round; tokens per
  // round after a hit and after a miss; cache build and fallback time relative to verification.
  bool cache = false;
  int64_t lookups = 0, hits = 0;
  double p_hit = 0, p_hit_primary = 0, p_hit_backup = 0;
  // The T's of Theorems 7 and 17, relative to the mean verification (the one definition;
  // analysis/ reads them from /summary): T_p the cache build, T_b any fallback after a miss,
  // T_jit the primary's just-in-time fallback (Theorem 17's slow speculator), T_backup the
  // backup's. Means over sequence-rounds (each repeats its batch round's times).
  double e_hit = 0, e_miss = 0, t_p = 0, t_b = 0, t_jit = 0, t_backup = 0;
  // One line when SSD degenerated into its fallback (a cache budget of 0 in most rounds, or
  // hardly any hits), with the reason and the flag to try; empty otherwise.
  std::string warning;
};

struct RunSummary {
  Stat decode_tokens_per_s;
  Stat ms_per_token;
  Stat prefill_tokens_per_s;
  int reps = 0;
  int64_t generated_tokens = 0;  // per repetition
  double clock_span_s = 0.0;     // RunRecords::clock_span_s, for the result row
  bool tokens_identical_across_reps = true;
  // Whether that check applies: AR, SD, greedy SSD and real outcomes reproduce their tokens
  // exactly; sampled SSD and synthetic outcomes depend on the adaptive cache (its budget and
  // fan-out estimates carry over between repetitions), so they need not.
  bool tokens_check_applies = true;
  // Summed over the recorded repetitions: the decode's tokens, time and forward passes of each
  // model (RepTotals), what the final lines price at each model's weight bytes.
  int64_t decode_tokens = 0, target_passes = 0, draft_passes = 0;
  double decode_s = 0.0;
  SpeculationSummary speculation;
};

RunSummary summarize(const RunRecords& records, bool tokens_identical_across_reps);

}  // namespace ssd
