#include "harness/result_writer.h"

#include <algorithm>
#include <type_traits>
#include <variant>

#include "comm/messages.h"
#include "harness/hdf5_writer.h"
#include "harness/machine_info.h"
#include "harness/plan.h"
#include "harness/result_metadata.h"

namespace ssd {
namespace {

// [rows, width] int32, -1 padded.
std::vector<int32_t> padded(const std::vector<std::vector<int32_t>>& rows, size_t width) {
  std::vector<int32_t> out(rows.size() * width, -1);
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t i = 0; i < rows[r].size() && i < width; ++i) out[r * width + i] = rows[r][i];
  return out;
}

void write_metadata(ResultFile& file, const RunResult& run) {
  RootMetadata m{mode_name(run.plan.mode),
                 run.argv,
                 run_settings(run.plan, run.setup),
                 run.plan.synthetic(),
                 {{"target", &run.target}}};
  if (run.draft) m.models.emplace_back("draft", &*run.draft);
  write_root_metadata(file, m, run.info);
  file.set_attr("/", "outcomes", run.plan.setting("outcomes"));
}

void write_rounds(ResultFile& file, const std::vector<RoundRecord>& rounds) {
  RecordColumns<RoundRecord> table{file, "/rounds", rounds};
  const auto column = [&](const char* name, auto get) { table.column(name, get); };
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
  file.set_dataset_attr("/rounds/source", "names", speculation_source_names());
  column("outcome_hit", [](const RoundRecord& r) { return int32_t(r.outcome_hit); });
  column("bonus_rank", [](const RoundRecord& r) { return int32_t(r.bonus_rank); });
  column("budget", [](const RoundRecord& r) { return int32_t(r.fanout_total); });
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
  column("draft_rank", [](const RoundRecord& r) { return int32_t(r.draft_rank); });
}

// Separate drafts: one row per draft rank per round (several when --draft-ranks > 1).
void write_draft_ranks(ResultFile& file, const std::vector<DraftRankRecord>& ranks) {
  RecordColumns<DraftRankRecord> table{file, "/draft_ranks", ranks};
  const auto column = [&](const char* name, auto get) { table.column(name, get); };
  column("rep", [](const DraftRankRecord& r) { return int32_t(r.rep); });
  column("group", [](const DraftRankRecord& r) { return int32_t(r.group); });
  column("round", [](const DraftRankRecord& r) { return int32_t(r.round); });
  column("draft_rank", [](const DraftRankRecord& r) { return int32_t(r.draft_rank); });
  column("sequences", [](const DraftRankRecord& r) { return int32_t(r.sequences); });
  column("draft_start_s", [](const DraftRankRecord& r) { return r.draft_start_s; });
  column("draft_end_s", [](const DraftRankRecord& r) { return r.draft_end_s; });
  column("idle_s", [](const DraftRankRecord& r) { return r.idle_s; });
  column("cache_build_time_s", [](const DraftRankRecord& r) { return r.cache_build_s; });
  column("fallback_time_s", [](const DraftRankRecord& r) { return r.fallback_s; });
  column("branches", [](const DraftRankRecord& r) { return int32_t(r.branches); });
  column("budget", [](const DraftRankRecord& r) { return int32_t(r.fanout_total); });
  column("message_bytes", [](const DraftRankRecord& r) { return r.message_bytes; });
  column("forward_passes", [](const DraftRankRecord& r) { return int32_t(r.forward_passes); });
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

// Every /summary attribute is a cell of the result row, under the name docs/hdf5-schema.md
// gives it.
void write_summary(ResultFile& file, const std::vector<ResultCell>& row) {
  for (const ResultCell& c : row) {
    if (c.summary_key.empty()) continue;
    std::visit(
        [&](const auto& value) {
          using Value = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<Value, ResultCell::MeanStd>) {
            file.set_attr("/summary", c.summary_key, value.mean);
            file.set_attr("/summary", c.summary_std_key, value.stddev);
          } else if constexpr (!std::is_same_v<Value, ResultCell::None>) {
            file.set_attr("/summary", c.summary_key, value);
          }
        },
        c.value);
  }
}

void write_steps(ResultFile& file, const std::vector<StepRecord>& steps) {
  RecordColumns<StepRecord> table{file, "/steps", steps};
  const auto column = [&](const char* name, auto get) { table.column(name, get); };
  column("rep", [](const StepRecord& s) { return int32_t(s.rep); });
  column("step", [](const StepRecord& s) { return int32_t(s.step); });
  column("row", [](const StepRecord& s) { return int32_t(s.row); });
  column("sequence", [](const StepRecord& s) { return int32_t(s.sequence); });
  column("tokens", [](const StepRecord& s) { return int32_t(s.tokens); });
  column("start_s", [](const StepRecord& s) { return s.start_s; });
  column("step_time_s", [](const StepRecord& s) { return s.step_s; });
  column("forward_time_s", [](const StepRecord& s) { return s.forward_s; });
}

void write_reps(ResultFile& file, const std::vector<RepTotals>& reps) {
  RecordColumns<RepTotals> table{file, "/reps", reps};
  const auto column = [&](const char* name, auto get) { table.column(name, get); };
  column("rep", [](const RepTotals& r) { return int32_t(r.rep); });
  column("prefill_time_s", [](const RepTotals& r) { return r.prefill_s; });
  column("prefill_tokens", [](const RepTotals& r) { return r.prefill_tokens; });
  column("decode_time_s", [](const RepTotals& r) { return r.decode_s; });
  column("decode_tokens", [](const RepTotals& r) { return r.decode_tokens; });
  column("decode_steps", [](const RepTotals& r) { return r.decode_steps; });
  column("per_sequence_decode_tokens",
         [](const RepTotals& r) { return r.per_sequence_decode_tokens; });
  column("generated_tokens", [](const RepTotals& r) { return r.generated_tokens; });
  column("decode_tokens_per_s", [](const RepTotals& r) { return r.decode_tokens_per_s(); });
  column("ms_per_token", [](const RepTotals& r) { return r.ms_per_token(); });
  column("target_forward_passes", [](const RepTotals& r) { return r.target_passes; });
  column("draft_forward_passes", [](const RepTotals& r) { return r.draft_passes; });
}

}  // namespace

void write_result_file(const RunResult& run) {
  const RunRecords& records = run.records;
  ResultFile file = ResultFile::create(run.plan.output.path, run.plan.output.overwrite);
  write_metadata(file, run);
  write_machine_group(file, run.info);

  const size_t width = size_t(run.plan.decode.limits.max_new_tokens);
  const std::vector<int32_t> generated = padded(records.generated, width);
  file.write_dataset("/generated_tokens", {records.generated.size(), width}, generated.data());
  size_t longest = 0;
  std::vector<int32_t> lengths;
  for (const auto& p : run.prompts) {
    longest = std::max(longest, p.size());
    lengths.push_back(int32_t(p.size()));
  }
  const std::vector<int32_t> prompt_tokens = padded(run.prompts, longest);
  file.write_dataset("/prompt_tokens", {run.prompts.size(), longest}, prompt_tokens.data());
  file.write_column("/prompt_lengths", lengths);

  write_steps(file, records.steps);
  write_reps(file, records.reps);
  // SD and SSD: rounds exist exactly where the row has speculation figures.
  if (!records.rounds.empty()) {
    write_rounds(file, records.rounds);
    write_fanouts(file, records.rounds);
    if (!records.draft_ranks.empty()) write_draft_ranks(file, records.draft_ranks);
  }
  write_summary(file, run.row);
  file.commit();
}

}  // namespace ssd
