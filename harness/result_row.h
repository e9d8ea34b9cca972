// The result row (llama-bench's pattern): one list of cells, built once per run, that every
// printer iterates: the text table, CSV, JSONL, and the HDF5 file's /summary attributes. A
// column added here appears everywhere, with one name. A figure only /summary holds (a list,
// or a total analysis/ checks the records against) is a cell with neither key nor title.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "harness/cli.h"
#include "harness/model_summary.h"
#include "harness/summary.h"

namespace ssd {

struct ResultCell {
  // Not applicable (AR has no acceptance rate): "-" in text, empty in CSV, null in JSON, and
  // no /summary attribute.
  struct None {};
  // A figure over repetitions: key_mean and key_std in CSV and JSON.
  struct MeanStd {
    double mean = 0.0, stddev = 0.0;
  };
  // Lists (per-position acceptance, the acceptance histogram) have no CSV or text form, so
  // only /summary-only cells hold them.
  using Value = std::variant<None, std::string, int64_t, double, MeanStd, std::vector<double>,
                             std::vector<int64_t>>;
  std::string key;    // CSV column and JSON key; empty: not in CSV or JSON
  std::string title;  // text heading; empty: not in the text table
  int width = 0;      // text column width
  Value value;
  // printf format of the text cell (a MeanStd gets mean and stddev; others their value).
  const char* text_format = "%g";
  // /summary attribute names (docs/hdf5-schema.md); empty: not written there. A MeanStd
  // writes summary_key (the mean) and summary_std_key.
  std::string summary_key, summary_std_key;
};

struct RunPlan;   // harness/plan.h
struct RunSetup;  // harness/plan.h

std::vector<ResultCell> make_result_row(const RunPlan& plan, const RunSetup& setup,
                                        const ModelSummary& target, const RunSummary& summary);

// The printers.
std::string text_heading(const std::vector<ResultCell>& row);
std::string text_line(const std::vector<ResultCell>& row);
std::string csv_heading(const std::vector<ResultCell>& row);
std::string csv_line(const std::vector<ResultCell>& row);
std::string json_line(const std::vector<ResultCell>& row);

}  // namespace ssd
