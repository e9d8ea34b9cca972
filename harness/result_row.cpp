#include "harness/result_row.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/plan.h"

namespace ssd {
namespace {

using Cell = ResultCell;

std::string model_name(const std::string& spec) {
  const std::string prefix = "synthetic:";
  std::string name = spec.rfind(prefix, 0) == 0 ? spec.substr(prefix.size()) : spec;
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  if (auto slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  return name;
}

Cell text(std::string key, std::string title, int width, std::string value) {
  return {std::move(key), std::move(title), width, std::move(value), "%s", "", ""};
}
Cell integer(std::string key, std::string title, int width, int64_t value,
             std::string summary_key = "") {
  return {std::move(key), std::move(title), width, value, "%lld", std::move(summary_key), ""};
}
// A figure that only some modes have.
Cell figure(std::string key, std::string title, int width, bool applies, double value,
            std::string summary_key) {
  Cell c{std::move(key), std::move(title), width, Cell::None{}, "%.3f", std::move(summary_key), ""};
  if (applies) c.value = value;
  return c;
}
Cell mean_std(std::string key, std::string title, int width, const Stat& s, const char* format,
              std::string summary_key, std::string summary_std_key) {
  return {std::move(key),
          std::move(title),
          width,
          Cell::MeanStd{s.mean, s.stddev},
          format,
          std::move(summary_key),
          std::move(summary_std_key)};
}

// The /summary attributes no printed column shows (docs/hdf5-schema.md), all of which
// analysis/ reads: speculation figures only where there were rounds, cache figures only where
// SSD looked outcomes up.
void add_summary_only(std::vector<Cell>& row, const RunSummary& s) {
  const SpeculationSummary& sp = s.speculation;
  const auto add = [&](const char* name, bool applies, Cell::Value value) {
    Cell c{"", "", 0, Cell::None{}, "%g", name, ""};
    if (applies) c.value = std::move(value);
    row.push_back(std::move(c));
  };
  const int64_t identical = !s.tokens_check_applies ? -1 : s.tokens_identical_across_reps ? 1 : 0;
  add("generated_tokens_per_rep", true, s.generated_tokens);
  add("clock_span_s", true, s.clock_span_s);
  add("tokens_identical_across_reps", true, identical);
  add("rounds", sp.present, sp.rounds);
  add("drafted_tokens", sp.present, sp.drafted);
  add("accepted_tokens", sp.present, sp.accepted);
  add("per_position_acceptance", sp.present, sp.per_position);
  add("acceptance_length_histogram", sp.present, sp.histogram);
  add("draft_time_s", sp.present, sp.draft_s);
  add("verify_time_s", sp.present, sp.verify_s);
  add("cache_lookups", sp.cache, sp.lookups);
  add("cache_hits", sp.cache, sp.hits);
  add("p_hit_primary", sp.cache, sp.p_hit_primary);
  add("p_hit_backup", sp.cache, sp.p_hit_backup);
  add("e_hit", sp.cache, sp.e_hit);
  add("e_miss", sp.cache, sp.e_miss);
  add("t_p", sp.cache, sp.t_p);
  add("t_b", sp.cache, sp.t_b);
  add("t_jit", sp.cache, sp.t_jit);
  add("t_backup", sp.cache, sp.t_backup);
  add("ssd_warning", sp.cache, sp.warning);
}

std::string text_value(const Cell& c) {
  char buf[96];
  if (std::holds_alternative<Cell::None>(c.value)) return "-";
  if (auto* s = std::get_if<std::string>(&c.value)) return *s;
  if (auto* i = std::get_if<int64_t>(&c.value))
    std::snprintf(buf, sizeof(buf), c.text_format, (long long)*i);
  else if (auto* d = std::get_if<double>(&c.value))
    std::snprintf(buf, sizeof(buf), c.text_format, *d);
  else {
    const auto& m = std::get<Cell::MeanStd>(c.value);
    std::snprintf(buf, sizeof(buf), c.text_format, m.mean, m.stddev);
  }
  return buf;
}

// A name column is 14 wide, or wider by a space where the name is longer (the real pair's
// "qwen2.5-coder-1.5b" is 18), so that it never runs into the next column. The heading is built
// from the same plan, so it widens with the row.
int name_width(const std::string& name) {
  return std::max(14, int(name.size()) + 1);
}

// The first two text columns are left-aligned names; the rest right-aligned figures.
bool left_aligned(const Cell& c) {
  return c.key == "mode" || c.key == "model" || c.key == "draft";
}

// RFC 4180: a field holding a comma, quote or line break is quoted, its quotes doubled.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_number(double v) {
  std::ostringstream out;
  out << v;  // as CSV has always printed them (6 significant digits)
  return out.str();
}

}  // namespace

std::vector<ResultCell> make_result_row(const RunPlan& plan, const RunSetup& setup,
                                        const ModelSummary& target, const RunSummary& s) {
  const SpeculationSummary& sp = s.speculation;
  const bool has_draft = !plan.launch.draft.empty();
  std::vector<Cell> row = {
      text("mode", "mode", 5, mode_name(plan.mode)),
      text("model", "target", name_width(model_name(target.spec)), model_name(target.spec)),
      has_draft ? text("draft", "draft", name_width(model_name(plan.launch.draft)),
                       model_name(plan.launch.draft))
                : Cell{"draft", "draft", 14, Cell::None{}, "%s", "", ""},
      // K as the run set it (RunSetup): the row, CSV, JSON and /summary show the same one.
      sp.present ? integer("lookahead", "K", 3, setup.decode.lookahead, "lookahead")
                 : Cell{"lookahead", "K", 3, Cell::None{}, "%lld", "lookahead", ""},
      integer("batch", "batch", 6, plan.decode.batch_size),
      integer("prompts", "prompts", 8, setup.num_prompts),
      integer("new_tokens", "new", 6, plan.decode.limits.max_new_tokens),
      Cell{"temperature", "", 0, plan.decode.limits.temperature, "%g", "", ""},
      integer("threads", "", 0, plan.launch.threads),
      mean_std("decode_tok_s", "decode tok/s", 20, s.decode_tokens_per_s, "%.2f +- %.2f",
               "decode_tokens_per_s", "decode_tokens_per_s_std"),
      mean_std("ms_per_token", "ms/token", 18, s.ms_per_token, "%.3f +- %.3f", "ms_per_token_mean",
               "ms_per_token_std"),
      mean_std("prefill_tok_s", "prefill tok/s", 14, s.prefill_tokens_per_s, "%.1f",
               "prefill_tokens_per_s", "prefill_tokens_per_s_std"),
      integer("reps", "", 0, s.reps, "reps"),
      figure("mean_acceptance_length", "acc.len", 9, sp.present, sp.mean_acceptance_length,
             "mean_acceptance_length"),
      figure("acceptance_rate", "acc.rate", 9, sp.present, sp.acceptance_rate, "acceptance_rate"),
      figure("t_sd", "T_SD", 8, sp.present, sp.t_sd, "t_sd"),
      figure("p_hit", "p_hit", 7, sp.cache, sp.p_hit, "p_hit"),
  };
  add_summary_only(row, s);
  return row;
}

std::string text_heading(const std::vector<ResultCell>& row) {
  std::ostringstream out;
  out << "# ";
  for (const Cell& c : row)
    if (!c.title.empty())
      out << (left_aligned(c) ? std::left : std::right) << std::setw(c.width) << c.title;
  return out.str();
}

std::string text_line(const std::vector<ResultCell>& row) {
  std::ostringstream out;
  out << "  ";
  for (const Cell& c : row)
    if (!c.title.empty())
      out << (left_aligned(c) ? std::left : std::right) << std::setw(c.width) << text_value(c);
  return out.str();
}

std::string csv_heading(const std::vector<ResultCell>& row) {
  std::string out;
  for (const Cell& c : row) {
    if (c.key.empty()) continue;
    if (!out.empty()) out += ",";
    out +=
        std::holds_alternative<Cell::MeanStd>(c.value) ? c.key + "_mean," + c.key + "_std" : c.key;
  }
  return out;
}

std::string csv_line(const std::vector<ResultCell>& row) {
  std::string out;
  for (const Cell& c : row) {
    if (c.key.empty()) continue;
    if (!out.empty()) out += ",";
    if (auto* m = std::get_if<Cell::MeanStd>(&c.value))
      out += csv_number(m->mean) + "," + csv_number(m->stddev);
    else if (auto* d = std::get_if<double>(&c.value))
      out += csv_number(*d);
    else if (auto* i = std::get_if<int64_t>(&c.value))
      out += std::to_string(*i);
    else if (auto* s = std::get_if<std::string>(&c.value))
      out += csv_field(*s);
  }
  return out;
}

std::string json_line(const std::vector<ResultCell>& row) {
  // nlohmann::json escapes names (a checkpoint path may hold quotes or backslashes), writes
  // every double at full precision, and null where a figure does not apply (and for NaN).
  nlohmann::json out = nlohmann::json::object();
  for (const Cell& c : row) {
    if (c.key.empty()) continue;
    if (auto* m = std::get_if<Cell::MeanStd>(&c.value)) {
      out[c.key + "_mean"] = m->mean;
      out[c.key + "_std"] = m->stddev;
    } else if (auto* d = std::get_if<double>(&c.value)) {
      out[c.key] = *d;
    } else if (auto* i = std::get_if<int64_t>(&c.value)) {
      out[c.key] = *i;
    } else if (auto* s = std::get_if<std::string>(&c.value)) {
      out[c.key] = *s;
    } else {
      out[c.key] = nullptr;
    }
  }
  return out.dump();
}

}  // namespace ssd
