#include "harness/report.h"

#include <cstdio>
#include <iomanip>
#include <sstream>

#include "harness/cache_domains.h"
#include "harness/plan.h"
#include "harness/result_row.h"

namespace ssd {
namespace {

std::string fmt(const char* format, double a, double b = 0.0) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, a, b);
  return buf;
}

}  // namespace

std::string human_count(double n) {
  if (n >= 1e9) return fmt("%.2fB", n / 1e9);
  if (n >= 1e6) return fmt("%.1fM", n / 1e6);
  if (n >= 1e3) return fmt("%.1fK", n / 1e3);
  return fmt("%.0f", n);
}

std::string human_bytes(double bytes) {
  if (bytes >= 1e9) return fmt("%.2f GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt("%.1f MB", bytes / 1e6);
  return fmt("%.1f kB", bytes / 1e3);
}

static void describe_model(std::ostream& out, const char* role, const ModelSummary& m) {
  const ModelConfig& c = m.config;
  out << "# " << role << ": " << m.description << ": " << c.model_type() << ", "
      << human_count(double(c.parameter_count())) << " parameters, " << c.num_hidden_layers
      << " layers, hidden " << c.hidden_size << ", heads " << c.num_attention_heads << "/"
      << c.num_key_value_heads << ", vocab " << c.vocab_size << "; " << dtype_name(m.weight_dtype)
      << " weights, " << m.compute << " compute, "
      << human_bytes(weight_bytes_per_token(c, dtype_size(m.weight_dtype))) << " read per token"
      << (m.weight_bytes ? ", " + human_bytes(double(m.weight_bytes)) + " held by rank 0" : "")
      << (m.load_s > 0 ? fmt(", loaded in %.2f s", m.load_s) : "") << "\n";
}

void Report::header(const RunInfo& info, const RunPlan& plan, const RunSetup& setup,
                    const ModelSummary& target, const std::optional<ModelSummary>& draft) {
  out_ << "# ssd-bench " << info.version << " (commit " << info.git_commit << ", "
       << info.build_type << ")\n";
  out_ << "# started " << info.start_time << " on " << info.host << ", CPU " << info.cpu_model
       << ", GPU " << info.gpu_model << "\n";
  out_ << "# libraries:";
  for (const auto& [name, version] : info.libraries) out_ << " " << name << " " << version << ";";
  out_ << "\n#\n# settings:";
  int column = 0;
  for (const auto& [name, value] : run_settings(plan, setup)) {
    if (column++ % 6 == 0) out_ << "\n#  ";
    out_ << " " << name << "=" << value;
  }
  out_ << "\n";
  if (plan.synthetic())
    out_ << "# SYNTHETIC OUTCOMES (" << plan.setting("outcomes")
         << "): forward passes are real, verification outcomes are drawn\n";
  describe_model(out_, "target", target);
  if (draft) describe_model(out_, "draft", *draft);
  out_ << "#\n";
  out_ << "# rank layout:\n";
  out_ << "#  " << std::setw(5) << "rank"
       << "  " << std::left << std::setw(24) << "role" << std::setw(20) << "host" << std::right
       << std::setw(8) << "pid"
       << "  " << std::left << std::setw(32) << "device" << std::right << std::setw(8) << "threads"
       << "  cpus\n";
  for (const RankInfo& r : info.ranks)
    out_ << "#  " << std::setw(5) << r.rank << "  " << std::left << std::setw(24) << r.role
         << std::setw(20) << r.host << std::right << std::setw(8) << r.pid << "  " << std::left
         << std::setw(32) << r.device.substr(0, 31) << std::right << std::setw(8) << r.threads
         << "  " << (r.cpus.empty() ? "?" : r.cpus) << "\n";
  for (const std::string& warning : affinity_warnings(info.ranks))
    out_ << "# Warning: " << warning << "\n";
  for (const std::string& warning : shared_cache_warnings(info.ranks, plan.mode == Mode::SSD))
    out_ << "# Warning: " << warning << "\n";
  if (!setup.lookahead_warning.empty()) out_ << "# Warning: " << setup.lookahead_warning << "\n";
  out_ << "#\n";
  const std::vector<ResultCell> columns = make_result_row(plan, setup, target, RunSummary{});
  if (format_ == OutputFormat::Text) out_ << text_heading(columns) << "\n";
  if (format_ == OutputFormat::Csv) out_ << csv_heading(columns) << "\n";
  out_.flush();
}

void Report::result_row(const std::vector<ResultCell>& row) {
  if (format_ == OutputFormat::Text)
    out_ << text_line(row) << "\n";
  else if (format_ == OutputFormat::Csv)
    out_ << csv_line(row) << "\n";
  else
    out_ << json_line(row) << "\n";
  out_.flush();
}

void Report::tokens(const std::vector<std::vector<int32_t>>& generated) {
  for (size_t i = 0; i < generated.size(); ++i) {
    out_ << "# tokens[" << i << "]:";
    for (int32_t t : generated[i]) out_ << " " << t;
    out_ << "\n";
  }
}

void Report::final_lines(const RunSummary& s, const std::string& out_path,
                         const ModelSummary& target, const std::optional<ModelSummary>& draft) {
  out_ << "#\n# Check: generated tokens identical across " << s.reps << " repetitions: "
       << (!s.tokens_check_applies          ? "not applicable (sampled SSD or synthetic outcomes)"
           : s.tokens_identical_across_reps ? "OK"
                                            : "FAILED")
       << "\n";
  if (!s.speculation.warning.empty()) out_ << "# Warning: " << s.speculation.warning << "\n";
  out_ << "# Results: " << (out_path.empty() ? "not written (no --out)" : out_path) << "\n";
  out_ << "# Avg decode throughput: " << fmt("%.2f", s.decode_tokens_per_s.mean) << " tok/s\n";
  if (s.decode_tokens > 0 && s.decode_s > 0) {
    const auto model_bytes = [](const ModelSummary& m) {
      return weight_bytes_per_token(m.config, dtype_size(m.weight_dtype));
    };
    const double bytes = double(s.target_passes) * model_bytes(target) +
                         (draft ? double(s.draft_passes) * model_bytes(*draft) : 0.0);
    const double tokens = double(s.decode_tokens);
    out_ << "# Weight traffic: " << human_bytes(bytes / tokens) << " per token ("
         << fmt("%.3f", double(s.target_passes) / tokens) << " target"
         << (draft ? fmt(" + %.3f draft", double(s.draft_passes) / tokens) : std::string())
         << " forward passes per token), read at " << fmt("%.1f", bytes / s.decode_s / 1e9)
         << " GB/s\n";
  }
  out_.flush();
}

}  // namespace ssd
