// The root metadata every HDF5 file of ssd-bench carries (run and characterize alike, see
// docs/hdf5-schema.md): the schema version, what was run and how, the build, the host, the
// libraries, the models and the rank layout. One writer, so the two files never drift apart.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "harness/hdf5_writer.h"
#include "harness/model_summary.h"
#include "harness/run_info.h"

namespace ssd {

inline constexpr const char* kSchemaVersion = "1.1";

struct RootMetadata {
  std::string mode;  // ar | sd | ssd | characterize
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> settings;  // resolved, as /config holds them
  bool synthetic_outcomes = false;
  std::vector<std::pair<std::string, const ModelSummary*>> models;  // role -> model
};

void write_root_metadata(ResultFile& file, const RootMetadata& m, const RunInfo& info);

}  // namespace ssd
