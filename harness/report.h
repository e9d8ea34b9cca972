// Console report in the style of nccl-tests: '#' header lines with the configuration and the
// rank layout, one aligned row per result, then the check line. --output-format csv|jsonl
// prints the same rows machine-readably (header lines stay '#' comments).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/cli.h"
#include "harness/model_summary.h"
#include "harness/run_info.h"
#include "harness/summary.h"

namespace ssd {

struct RunPlan;   // harness/plan.h
struct RunSetup;  // harness/plan.h

struct ResultCell;  // harness/result_row.h

class Report {
 public:
  Report(OutputFormat format, std::ostream& out) : format_(format), out_(out) {}
  void header(const RunInfo& info, const RunPlan& plan, const RunSetup& setup,
              const ModelSummary& target, const std::optional<ModelSummary>& draft);
  // The row of harness/result_row.h in the chosen format (its heading went with the header).
  void result_row(const std::vector<ResultCell>& row);
  // The token check, the result file and the mean throughput; then the weight bytes the
  // decode read per token and the rate it read them at (each forward pass reads its model's
  // weights once: `ssd-analyze traffic` has the same from the file).
  void final_lines(const RunSummary& s, const std::string& out_path, const ModelSummary& target,
                   const std::optional<ModelSummary>& draft);
  // '#'-comment lines "# tokens[i]: t0 t1 ..." for every sequence.
  void tokens(const std::vector<std::vector<int32_t>>& generated);

 private:
  OutputFormat format_;
  std::ostream& out_;
};

// "124.4M", "8.03B"
std::string human_count(double n);
// "497.7 MB"
std::string human_bytes(double bytes);

}  // namespace ssd
