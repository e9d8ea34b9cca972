#include "harness/summary.h"

#include <cmath>

namespace ssd {

Stat mean_stddev(const std::vector<double>& values) {
  Stat s;
  if (values.empty()) return s;
  for (double v : values) s.mean += v;
  s.mean /= double(values.size());
  if (values.size() > 1) {
    double sq = 0.0;
    for (double v : values) sq += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(sq / double(values.size() - 1));
  }
  return s;
}

RunSummary summarize(const RunRecords& records, bool identical) {
  RunSummary s;
  std::vector<double> tps, ms, prefill;
  for (const RepTotals& r : records.reps) {
    tps.push_back(r.decode_tokens_per_s());
    ms.push_back(r.ms_per_token());
    prefill.push_back(r.prefill_tokens_per_s());
  }
  s.decode_tokens_per_s = mean_stddev(tps);
  s.ms_per_token = mean_stddev(ms);
  s.prefill_tokens_per_s = mean_stddev(prefill);
  s.reps = int(records.reps.size());
  s.generated_tokens = records.reps.empty() ? 0 : records.reps.front().generated_tokens;
  s.tokens_identical_across_reps = identical;
  return s;
}

}  // namespace ssd
