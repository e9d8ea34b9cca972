// The result row (harness/result_row.h) is the one list behind the console, CSV, JSONL and the
// HDF5 file's /summary: its /summary cells must keep every name docs/hdf5-schema.md gives (and
// analysis/ requires), and the cells only /summary holds must not leak into CSV or JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/messages.h"
#include "harness/plan.h"
#include "harness/result_row.h"
#include "harness/summary.h"

namespace ssd {
namespace {

// One repetition; with speculation, SSD rounds that looked their outcomes up.
RunRecords records(bool speculative) {
  RunRecords out;
  RepTotals rep;
  rep.prefill_s = 0.5;
  rep.prefill_tokens = 8;
  rep.decode_s = 1.0;
  rep.decode_tokens = 12;
  rep.per_sequence_decode_tokens = 12;
  rep.generated_tokens = 13;
  rep.draft_s = 0.2;
  rep.verify_s = 0.6;
  out.reps = {rep};
  out.clock_span_s = 2.5;
  for (int i = 0; speculative && i < 4; ++i) {
    RoundRecord r;
    r.round = i;
    r.drafted = 2;
    r.accepted = i % 3;
    r.outcome_hit = i % 2;
    r.source = int(i == 0 ? SpeculationSource::Initial : SpeculationSource::CacheHit);
    r.verify_s = 0.1;
    out.rounds.push_back(r);
  }
  return out;
}

std::vector<ResultCell> row_for(Mode mode, bool identical = true, bool check_applies = true) {
  RunPlan plan;
  plan.mode = mode;
  plan.decode.lookahead = 2;  // the records' K
  if (mode != Mode::AR) plan.launch.draft = "synthetic:llama-tiny";
  RunSummary summary = summarize(records(mode != Mode::AR), identical);
  summary.tokens_check_applies = check_applies;
  ModelSummary target;
  target.spec = "synthetic:llama-124m";
  return make_result_row(plan, given_setup(plan, "cpu", 1), target, summary);
}

// The /summary attributes the row writes (a cell that does not apply writes none).
std::set<std::string> summary_names(const std::vector<ResultCell>& row) {
  std::set<std::string> names;
  for (const ResultCell& c : row) {
    if (c.summary_key.empty() || std::holds_alternative<ResultCell::None>(c.value)) continue;
    names.insert(c.summary_key);
    if (!c.summary_std_key.empty()) names.insert(c.summary_std_key);
  }
  return names;
}

const ResultCell& summary_cell(const std::vector<ResultCell>& row, const std::string& name) {
  const auto it = std::find_if(row.begin(), row.end(),
                               [&](const ResultCell& c) { return c.summary_key == name; });
  if (it == row.end()) throw std::runtime_error("no /summary cell " + name);
  return *it;
}

const std::set<std::string> kEveryRun = {"decode_tokens_per_s",
                                         "decode_tokens_per_s_std",
                                         "prefill_tokens_per_s",
                                         "prefill_tokens_per_s_std",
                                         "ms_per_token_mean",
                                         "ms_per_token_std",
                                         "reps",
                                         "generated_tokens_per_rep",
                                         "clock_span_s",
                                         "tokens_identical_across_reps"};
const std::set<std::string> kSpeculation = {"lookahead",
                                            "rounds",
                                            "drafted_tokens",
                                            "accepted_tokens",
                                            "mean_acceptance_length",
                                            "acceptance_rate",
                                            "per_position_acceptance",
                                            "acceptance_length_histogram",
                                            "t_sd",
                                            "draft_time_s",
                                            "verify_time_s"};
const std::set<std::string> kCache = {"cache_lookups", "cache_hits", "p_hit",    "p_hit_primary",
                                      "p_hit_backup",  "e_hit",      "e_miss",   "t_p",
                                      "t_b",           "t_jit",      "t_backup", "ssd_warning"};

std::set<std::string> joined(std::initializer_list<std::set<std::string>> sets) {
  std::set<std::string> out;
  for (const auto& s : sets) out.insert(s.begin(), s.end());
  return out;
}

TEST(ResultRow, SummaryOfAnArRunHasTheRunFiguresOnly) {
  EXPECT_EQ(summary_names(row_for(Mode::AR)), kEveryRun);
}

TEST(ResultRow, SummaryOfAnSsdRunHasEverySchemaName) {
  EXPECT_EQ(summary_names(row_for(Mode::SSD)), joined({kEveryRun, kSpeculation, kCache}));
}

TEST(ResultRow, SummaryValuesComeFromTheRunSummary) {
  const std::vector<ResultCell> row = row_for(Mode::SSD);
  EXPECT_EQ(std::get<double>(summary_cell(row, "clock_span_s").value), 2.5);
  EXPECT_EQ(std::get<int64_t>(summary_cell(row, "generated_tokens_per_rep").value), 13);
  EXPECT_EQ(std::get<int64_t>(summary_cell(row, "lookahead").value), 2);
  EXPECT_EQ(std::get<int64_t>(summary_cell(row, "rounds").value), 4);
  EXPECT_EQ(std::get<int64_t>(summary_cell(row, "cache_lookups").value), 4);
  EXPECT_EQ(std::get<int64_t>(summary_cell(row, "cache_hits").value), 2);
  EXPECT_EQ(std::get<std::vector<int64_t>>(summary_cell(row, "acceptance_length_histogram").value),
            (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(std::get<std::vector<double>>(summary_cell(row, "per_position_acceptance").value),
            (std::vector<double>{0.5, 0.25}));
}

TEST(ResultRow, TokensCheckIsOneZeroOrMinusOne) {
  const auto value = [](bool identical, bool applies) {
    return std::get<int64_t>(
        summary_cell(row_for(Mode::AR, identical, applies), "tokens_identical_across_reps").value);
  };
  EXPECT_EQ(value(true, true), 1);
  EXPECT_EQ(value(false, true), 0);
  EXPECT_EQ(value(false, false), -1);
}

// CSV and JSONL are read by scripts: the /summary-only cells must not add columns.
TEST(ResultRow, CsvAndJsonColumnsAreThePrintedOnes) {
  const std::vector<ResultCell> row = row_for(Mode::SSD);
  const std::string heading = csv_heading(row);
  EXPECT_EQ(heading,
            "mode,model,draft,lookahead,batch,prompts,new_tokens,temperature,threads,"
            "decode_tok_s_mean,decode_tok_s_std,ms_per_token_mean,ms_per_token_std,"
            "prefill_tok_s_mean,prefill_tok_s_std,reps,mean_acceptance_length,acceptance_rate,"
            "t_sd,p_hit");
  const std::string line = csv_line(row);
  EXPECT_EQ(std::count(line.begin(), line.end(), ','),
            std::count(heading.begin(), heading.end(), ','));
  const std::string json = json_line(row);
  for (const char* only_summary : {"clock_span_s", "cache_hits", "ssd_warning", "histogram"})
    EXPECT_EQ(json.find(only_summary), std::string::npos) << only_summary;
}

// Names longer than the 14-wide columns (the real pair's) widen their column, heading and row
// alike: a space before the draft's name and every later column under its title.
TEST(ResultRow, LongModelNamesKeepTheColumnsAligned) {
  RunPlan plan;
  plan.mode = Mode::SD;
  plan.decode.lookahead = 2;
  plan.launch.draft = "models/qwen2.5-coder-0.5b/";
  ModelSummary target;
  target.spec = "safetensors:/data/models/qwen2.5-coder-1.5b";
  const std::vector<ResultCell> row =
      make_result_row(plan, given_setup(plan, "cpu", 1), target, summarize(records(true), true));
  const std::string heading = text_heading(row), line = text_line(row);
  EXPECT_NE(line.find("qwen2.5-coder-1.5b qwen2.5-coder-0.5b"), std::string::npos) << line;
  EXPECT_EQ(heading.find("draft"), line.find("qwen2.5-coder-0.5b")) << heading << "\n" << line;
  // Right-aligned figures end under their titles: K (2) and batch (1).
  EXPECT_EQ(heading.find(" K "), line.find(" 2 ")) << heading << "\n" << line;
  const size_t batch_end = heading.find("batch") + 5;
  EXPECT_EQ(line.substr(batch_end - 6, 6), "     1") << heading << "\n" << line;
}

}  // namespace
}  // namespace ssd
