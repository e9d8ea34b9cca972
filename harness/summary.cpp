#include "harness/summary.h"

#include <algorithm>
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

  SpeculationSummary& sp = s.speculation;
  if (!records.rounds.empty()) {
    sp.present = true;
    sp.lookahead = records.rounds.front().drafted;
    const int K = sp.lookahead;
    sp.per_position.assign(K, 0.0);
    sp.histogram.assign(K + 1, 0);
    for (const RoundRecord& r : records.rounds) {
      sp.rounds += 1;
      sp.drafted += r.drafted;
      sp.accepted += r.accepted;
      for (int i = 0; i < r.accepted && i < K; ++i) sp.per_position[i] += 1.0;
      sp.histogram[std::min(r.accepted, K)] += 1;
    }
    for (double& v : sp.per_position) v /= double(sp.rounds);
    sp.mean_acceptance_length = 1.0 + double(sp.accepted) / double(sp.rounds);
    sp.acceptance_rate = sp.drafted ? double(sp.accepted) / double(sp.drafted) : 0.0;
    for (const RepTotals& r : records.reps) {
      sp.draft_s += r.draft_s;
      sp.verify_s += r.verify_s;
    }
    sp.t_sd = sp.verify_s > 0 ? sp.draft_s / sp.verify_s : 0.0;
  }
  return s;
}

}  // namespace ssd
