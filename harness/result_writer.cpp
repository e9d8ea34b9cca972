#include "harness/result_writer.h"

#include <nlohmann/json.hpp>

#include "harness/hdf5_writer.h"

namespace ssd {
namespace {

// [rows, width] int32, -1 padded.
std::vector<int32_t> padded(const std::vector<std::vector<int32_t>>& rows, size_t width) {
  std::vector<int32_t> out(rows.size() * width, -1);
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t i = 0; i < rows[r].size() && i < width; ++i) out[r * width + i] = rows[r][i];
  return out;
}

void write_model(ResultFile& file, const std::string& group, const ModelSummary& m) {
  file.set_attr(group, "spec", m.spec);
  file.set_attr(group, "source", m.description);
  file.set_attr(group, "config_json", model_config_to_json(m.config).dump());
  file.set_attr(group, "parameters", int64_t(m.config.parameter_count()));
  file.set_attr(group, "weight_bytes_rank0", int64_t(m.weight_bytes));
  file.set_attr(group, "weight_dtype", dtype_name(m.weight_dtype));
  file.set_attr(group, "weight_bytes_per_token",
                weight_bytes_per_token(m.config, dtype_size(m.weight_dtype)));
}

void write_metadata(ResultFile& file, const std::vector<std::string>& argv, const RunInfo& info,
                    const RunConfig& config, const ModelSummary& target,
                    const std::optional<ModelSummary>& draft) {
  nlohmann::json resolved;
  for (const auto& [name, value] : describe(config)) {
    file.set_attr("/config", name, value);
    resolved[name] = value;
  }
  file.set_attr("/", "schema_version", kSchemaVersion);
  file.set_attr("/", "mode", config.mode);
  file.set_attr("/", "config_json", resolved.dump());
  std::string joined;
  for (const std::string& a : argv) joined += (joined.empty() ? "" : " ") + a;
  file.set_attr("/", "argv", joined);
  file.set_attr("/", "version", info.version);
  file.set_attr("/", "git_commit", info.git_commit);
  file.set_attr("/", "build_type", info.build_type);
  file.set_attr("/", "host", info.host);
  file.set_attr("/", "cpu_model", info.cpu_model);
  file.set_attr("/", "gpu_model", info.gpu_model);
  file.set_attr("/", "start_time", info.start_time);
  file.set_attr("/", "end_time", iso_time_now());
  file.set_attr("/", "synthetic_outcomes", int64_t(config.outcomes == "real" ? 0 : 1));
  file.set_attr("/", "outcomes", config.outcomes);
  for (const auto& [name, version] : info.libraries) file.set_attr("/libraries", name, version);

  write_model(file, "/models/target", target);
  if (draft) write_model(file, "/models/draft", *draft);

  for (const RankInfo& r : info.ranks) {
    const std::string group = "/ranks/" + std::to_string(r.rank);
    file.set_attr(group, "role", r.role);
    file.set_attr(group, "host", r.host);
    file.set_attr(group, "device", r.device);
    file.set_attr(group, "pid", int64_t(r.pid));
    file.set_attr(group, "threads", int64_t(r.threads));
  }
}

void write_rounds(ResultFile& file, const std::vector<RoundRecord>& rounds) {
  auto column = [&](const char* name, auto get) {
    using T = decltype(get(rounds.front()));
    std::vector<T> values;
    for (const RoundRecord& r : rounds) values.push_back(get(r));
    file.write_column(std::string("/rounds/") + name, values);
  };
  column("rep", [](const RoundRecord& r) { return int32_t(r.rep); });
  column("group", [](const RoundRecord& r) { return int32_t(r.group); });
  column("round", [](const RoundRecord& r) { return int32_t(r.round); });
  column("row", [](const RoundRecord& r) { return int32_t(r.row); });
  column("sequence", [](const RoundRecord& r) { return int32_t(r.sequence); });
  column("drafted", [](const RoundRecord& r) { return int32_t(r.drafted); });
  column("accepted", [](const RoundRecord& r) { return int32_t(r.accepted); });
  column("bonus_token", [](const RoundRecord& r) { return int32_t(r.bonus); });
  column("tokens", [](const RoundRecord& r) { return int32_t(r.tokens); });
  column("source", [](const RoundRecord& r) { return int32_t(r.source); });
  column("outcome_hit", [](const RoundRecord& r) { return int32_t(r.outcome_hit); });
  column("bonus_rank", [](const RoundRecord& r) { return int32_t(r.bonus_rank); });
  column("budget", [](const RoundRecord& r) { return int32_t(r.budget); });
  column("branches", [](const RoundRecord& r) { return int32_t(r.branches); });
  column("cache_build_time_s", [](const RoundRecord& r) { return r.cache_build_s; });
  column("fallback_time_s", [](const RoundRecord& r) { return r.fallback_s; });
  column("start_s", [](const RoundRecord& r) { return r.start_s; });
  column("end_s", [](const RoundRecord& r) { return r.end_s; });
  column("draft_start_s", [](const RoundRecord& r) { return r.draft_start_s; });
  column("draft_end_s", [](const RoundRecord& r) { return r.draft_end_s; });
  column("draft_time_s", [](const RoundRecord& r) { return r.draft_s; });
  column("verify_time_s", [](const RoundRecord& r) { return r.verify_s; });
  column("accept_time_s", [](const RoundRecord& r) { return r.accept_s; });
  column("comm_time_s", [](const RoundRecord& r) { return r.comm_s; });
  column("target_idle_s", [](const RoundRecord& r) { return r.target_idle_s; });
  column("draft_idle_s", [](const RoundRecord& r) { return r.draft_idle_s; });
  column("message_bytes", [](const RoundRecord& r) { return r.message_bytes; });
}

// Fan-out shapes as a [rounds, K+1] dataset (-1 where no cache was looked up).
void write_fanouts(ResultFile& file, const std::vector<RoundRecord>& rounds) {
  const size_t width = rounds.empty() ? 0 : size_t(rounds.front().drafted) + 1;
  std::vector<int32_t> shape(rounds.size() * width, -1);
  for (size_t i = 0; i < rounds.size(); ++i)
    for (size_t k = 0; k < rounds[i].fanout.size() && k < width; ++k)
      shape[i * width + k] = rounds[i].fanout[k];
  file.write_dataset("/rounds/fanout", {rounds.size(), width}, shape.data());
}

void write_speculation_summary(ResultFile& file, const SpeculationSummary& sp) {
  file.set_attr("/summary", "lookahead", int64_t(sp.lookahead));
  file.set_attr("/summary", "rounds", sp.rounds);
  file.set_attr("/summary", "drafted_tokens", sp.drafted);
  file.set_attr("/summary", "accepted_tokens", sp.accepted);
  file.set_attr("/summary", "mean_acceptance_length", sp.mean_acceptance_length);
  file.set_attr("/summary", "acceptance_rate", sp.acceptance_rate);
  file.set_attr("/summary", "per_position_acceptance", sp.per_position);
  file.set_attr("/summary", "acceptance_length_histogram", sp.histogram);
  file.set_attr("/summary", "t_sd", sp.t_sd);
  file.set_attr("/summary", "draft_time_s", sp.draft_s);
  file.set_attr("/summary", "verify_time_s", sp.verify_s);
  if (sp.cache) {
    file.set_attr("/summary", "cache_lookups", sp.lookups);
    file.set_attr("/summary", "cache_hits", sp.hits);
    file.set_attr("/summary", "p_hit", sp.p_hit);
    file.set_attr("/summary", "p_hit_primary", sp.p_hit_primary);
    file.set_attr("/summary", "p_hit_backup", sp.p_hit_backup);
    file.set_attr("/summary", "e_hit", sp.e_hit);
    file.set_attr("/summary", "e_miss", sp.e_miss);
    file.set_attr("/summary", "t_p", sp.t_p);
    file.set_attr("/summary", "t_b", sp.t_b);
    file.set_attr("/summary", "ssd_warning", sp.warning);
  }
}

void write_records(ResultFile& file, const RunRecords& records) {
  std::vector<int32_t> rep, step, row, sequence, tokens;
  std::vector<double> start, step_s, forward_s;
  for (const StepRecord& s : records.steps) {
    rep.push_back(s.rep);
    step.push_back(s.step);
    row.push_back(s.row);
    sequence.push_back(s.sequence);
    tokens.push_back(s.tokens);
    start.push_back(s.start_s);
    step_s.push_back(s.step_s);
    forward_s.push_back(s.forward_s);
  }
  file.write_column("/steps/rep", rep);
  file.write_column("/steps/step", step);
  file.write_column("/steps/row", row);
  file.write_column("/steps/sequence", sequence);
  file.write_column("/steps/tokens", tokens);
  file.write_column("/steps/start_s", start);
  file.write_column("/steps/step_time_s", step_s);
  file.write_column("/steps/forward_time_s", forward_s);

  std::vector<int32_t> r_rep;
  std::vector<int64_t> prefill_tokens, decode_tokens, decode_steps, generated;
  std::vector<double> prefill_s, decode_s, tps, ms, per_sequence;
  for (const RepTotals& r : records.reps) {
    r_rep.push_back(r.rep);
    prefill_s.push_back(r.prefill_s);
    prefill_tokens.push_back(r.prefill_tokens);
    decode_s.push_back(r.decode_s);
    decode_tokens.push_back(r.decode_tokens);
    decode_steps.push_back(r.decode_steps);
    per_sequence.push_back(r.per_sequence_decode_tokens);
    generated.push_back(r.generated_tokens);
    tps.push_back(r.decode_tokens_per_s());
    ms.push_back(r.ms_per_token());
  }
  file.write_column("/reps/rep", r_rep);
  file.write_column("/reps/prefill_time_s", prefill_s);
  file.write_column("/reps/prefill_tokens", prefill_tokens);
  file.write_column("/reps/decode_time_s", decode_s);
  file.write_column("/reps/decode_tokens", decode_tokens);
  file.write_column("/reps/decode_steps", decode_steps);
  file.write_column("/reps/per_sequence_decode_tokens", per_sequence);
  file.write_column("/reps/generated_tokens", generated);
  file.write_column("/reps/decode_tokens_per_s", tps);
  file.write_column("/reps/ms_per_token", ms);
}

}  // namespace

void write_result_file(const std::string& path, bool overwrite,
                       const std::vector<std::string>& argv, const RunInfo& info,
                       const RunConfig& config, const ModelSummary& target,
                       const std::optional<ModelSummary>& draft, const Prompts& prompts,
                       const RunRecords& records, const RunSummary& summary) {
  ResultFile file = ResultFile::create(path, overwrite);
  write_metadata(file, argv, info, config, target, draft);

  const size_t width = size_t(config.max_new_tokens);
  const std::vector<int32_t> generated = padded(records.generated, width);
  file.write_dataset("/generated_tokens", {records.generated.size(), width}, generated.data());
  size_t longest = 0;
  std::vector<int32_t> lengths;
  for (const auto& p : prompts) {
    longest = std::max(longest, p.size());
    lengths.push_back(int32_t(p.size()));
  }
  const std::vector<int32_t> prompt_tokens = padded(prompts, longest);
  file.write_dataset("/prompt_tokens", {prompts.size(), longest}, prompt_tokens.data());
  file.write_column("/prompt_lengths", lengths);

  write_records(file, records);
  if (summary.speculation.present) {
    write_rounds(file, records.rounds);
    write_fanouts(file, records.rounds);
    write_speculation_summary(file, summary.speculation);
  }

  file.set_attr("/summary", "decode_tokens_per_s", summary.decode_tokens_per_s.mean);
  file.set_attr("/summary", "decode_tokens_per_s_std", summary.decode_tokens_per_s.stddev);
  file.set_attr("/summary", "prefill_tokens_per_s", summary.prefill_tokens_per_s.mean);
  file.set_attr("/summary", "prefill_tokens_per_s_std", summary.prefill_tokens_per_s.stddev);
  file.set_attr("/summary", "ms_per_token_mean", summary.ms_per_token.mean);
  file.set_attr("/summary", "ms_per_token_std", summary.ms_per_token.stddev);
  file.set_attr("/summary", "reps", int64_t(summary.reps));
  file.set_attr("/summary", "generated_tokens_per_rep", summary.generated_tokens);
  file.set_attr("/summary", "clock_span_s", records.clock_span_s);
  file.set_attr("/summary", "tokens_identical_across_reps",
                int64_t(!summary.tokens_check_applies          ? -1
                        : summary.tokens_identical_across_reps ? 1
                                                               : 0));
  file.commit();
}

}  // namespace ssd
