// Writes a run's HDF5 result file (layout in docs/hdf5-schema.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/cli.h"
#include "harness/prompts.h"
#include "harness/model_summary.h"
#include "harness/result_row.h"
#include "harness/run_info.h"
#include "harness/summary.h"
#include "ssd/records.h"

namespace ssd {

void write_result_file(const std::string& path, bool overwrite,
                       const std::vector<std::string>& argv, const RunInfo& info,
                       const RunConfig& config, const ModelSummary& target,
                       const std::optional<ModelSummary>& draft, const Prompts& prompts,
                       const RunRecords& records, const RunSummary& summary,
                       const std::vector<ResultCell>& row);

}  // namespace ssd
