#include "harness/summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "comm/messages.h"

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

namespace {

std::string degeneration_warning(const std::vector<RoundRecord>& rounds,
                                 const SpeculationSummary& sp);

double ratio(double a, double b) {
  return b > 0 ? a / b : 0.0;
}
// Undefined (no such rounds) is NaN, not 0: analysis must not read it as a measurement.
double ratio_or_nan(double a, double b) {
  return b > 0 ? a / b : std::nan("");
}

void summarize_cache(const std::vector<RoundRecord>& rounds, SpeculationSummary& sp) {
  const auto from = [](const RoundRecord& r, SpeculationSource s) { return r.source == int(s); };
  int64_t hits_p = 0, looks_p = 0, hits_b = 0, looks_b = 0;
  int64_t hit_rounds = 0, hit_accepted = 0, miss_rounds = 0, miss_accepted = 0;
  double build = 0, fallback = 0, jit = 0, backup_s = 0, verify = 0;
  int64_t builds = 0, fallbacks = 0, jits = 0, backups = 0, verifies = 0;
  for (const RoundRecord& r : rounds) {
    if (r.outcome_hit >= 0) {
      sp.cache = true;
      const bool backup = from(r, SpeculationSource::Backup);
      (backup ? looks_b : looks_p) += 1;
      (backup ? hits_b : hits_p) += r.outcome_hit;
      build += r.cache_build_s;
      builds += 1;
    }
    if (from(r, SpeculationSource::CacheHit)) {
      hit_rounds += 1;
      hit_accepted += r.accepted;
    } else if (r.round > 0) {
      miss_rounds += 1;
      miss_accepted += r.accepted;
      fallback += r.fallback_s;
      fallbacks += 1;
      const bool by_backup = from(r, SpeculationSource::Backup);
      (by_backup ? backup_s : jit) += r.fallback_s;
      (by_backup ? backups : jits) += 1;
    }
    verify += r.verify_s;
    verifies += 1;
  }
  if (!sp.cache) return;
  sp.lookups = looks_p + looks_b;
  sp.hits = hits_p + hits_b;
  sp.p_hit = ratio_or_nan(double(sp.hits), double(sp.lookups));
  sp.p_hit_primary = ratio_or_nan(double(hits_p), double(looks_p));
  sp.p_hit_backup = ratio_or_nan(double(hits_b), double(looks_b));
  sp.e_hit = 1.0 + ratio_or_nan(double(hit_accepted), double(hit_rounds));
  sp.e_miss = 1.0 + ratio_or_nan(double(miss_accepted), double(miss_rounds));
  const double mean_verify = ratio(verify, double(verifies));
  sp.t_p = ratio(ratio(build, double(builds)), mean_verify);
  sp.t_b = ratio(ratio(fallback, double(fallbacks)), mean_verify);
  sp.t_jit = ratio_or_nan(ratio_or_nan(jit, double(jits)), mean_verify);
  sp.t_backup = ratio_or_nan(ratio_or_nan(backup_s, double(backups)), mean_verify);
  sp.warning = degeneration_warning(rounds, sp);
}

}  // namespace

namespace {

std::string degeneration_warning(const std::vector<RoundRecord>& rounds,
                                 const SpeculationSummary& sp) {
  int64_t looked = 0, no_cache = 0;
  for (const RoundRecord& r : rounds)
    if (r.outcome_hit >= 0) {
      looked += 1;
      no_cache += r.fanout_total == 0 ? 1 : 0;
    }
  char line[400];
  if (looked >= 10 && 2 * no_cache > looked) {
    std::snprintf(line, sizeof(line),
                  "SSD degenerated: the cache budget was 0 in %.0f%% of rounds, so they ran on "
                  "the fallback alone (no branch step paid for itself against the "
                  "verification); try a fixed --budget N, or a cheaper draft",
                  100.0 * double(no_cache) / double(looked));
    return line;
  }
  if (sp.lookups >= 30 && sp.p_hit < 0.03) {
    std::snprintf(line, sizeof(line),
                  "SSD degenerated: p_hit %.3f over %lld lookups, the cache almost never held "
                  "the outcome; try a larger --budget, --fanout geometric, or --saguaro-c < 1 "
                  "with a sampling draft",
                  sp.p_hit, (long long)sp.lookups);
    return line;
  }
  return "";
}

}  // namespace

RunSummary summarize(const RunRecords& records, bool identical) {
  RunSummary s;
  std::vector<double> tps, ms, prefill;
  for (const RepTotals& r : records.reps) {
    s.decode_tokens += r.decode_tokens, s.decode_s += r.decode_s;
    s.target_passes += r.target_passes, s.draft_passes += r.draft_passes;
    tps.push_back(r.decode_tokens_per_s());
    ms.push_back(r.ms_per_token());
    prefill.push_back(r.prefill_tokens_per_s());
  }
  s.decode_tokens_per_s = mean_stddev(tps);
  s.ms_per_token = mean_stddev(ms);
  s.prefill_tokens_per_s = mean_stddev(prefill);
  s.reps = int(records.reps.size());
  s.generated_tokens = records.reps.empty() ? 0 : records.reps.front().generated_tokens;
  s.clock_span_s = records.clock_span_s;
  s.tokens_identical_across_reps = identical;

  SpeculationSummary& sp = s.speculation;
  if (!records.rounds.empty()) {
    sp.present = true;
    const int K = records.rounds.front().drafted;  // the histogram's width
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
    summarize_cache(records.rounds, sp);
  }
  return s;
}

}  // namespace ssd
