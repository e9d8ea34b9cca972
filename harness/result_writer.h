// Writes a run's HDF5 result file (layout in docs/hdf5-schema.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/cli.h"
#include "harness/model_summary.h"
#include "harness/prompts.h"
#include "harness/result_row.h"
#include "harness/run_info.h"
#include "ssd/records.h"

namespace ssd {

struct RunPlan;   // harness/plan.h
struct RunSetup;  // harness/plan.h

// What the file holds, by reference: the lead rank has it all at hand when the run ends.
struct RunResult {
  // What ran: the command line, host and ranks, the plan (its output says where the file
  // goes) and what the launch settled, the models and the prompts.
  const std::vector<std::string>& argv;
  const RunInfo& info;
  const RunPlan& plan;
  const RunSetup& setup;
  const ModelSummary& target;
  const std::optional<ModelSummary>& draft;
  const Prompts& prompts;
  // What it measured: the records, and the result row, whose cells are /summary.
  const RunRecords& records;
  const std::vector<ResultCell>& row;
};

void write_result_file(const RunResult& run);

}  // namespace ssd
