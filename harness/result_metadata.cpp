#include "harness/result_metadata.h"

#include <nlohmann/json.hpp>

namespace ssd {
namespace {

void write_model(ResultFile& file, const std::string& group, const ModelSummary& m) {
  file.set_attr(group, "spec", m.spec);
  file.set_attr(group, "source", m.description);
  file.set_attr(group, "config_json", model_config_to_json(m.config).dump());
  file.set_attr(group, "parameters", int64_t(m.config.parameter_count()));
  file.set_attr(group, "weight_bytes_rank0", int64_t(m.weight_bytes));
  file.set_attr(group, "weight_dtype", dtype_name(m.weight_dtype));
  file.set_attr(group, "compute", m.compute);
  file.set_attr(group, "weight_bytes_per_token",
                weight_bytes_per_token(m.config, dtype_size(m.weight_dtype)));
}

}  // namespace

void write_root_metadata(ResultFile& file, const RootMetadata& m, const RunInfo& info) {
  nlohmann::json resolved = nlohmann::json::object();
  for (const auto& [name, value] : m.settings) {
    file.set_attr("/config", name, value);
    resolved[name] = value;
  }
  std::string argv;
  for (const std::string& a : m.argv) argv += (argv.empty() ? "" : " ") + a;
  file.set_attr("/", "schema_version", kSchemaVersion);
  file.set_attr("/", "mode", m.mode);
  file.set_attr("/", "config_json", resolved.dump());
  file.set_attr("/", "argv", argv);
  file.set_attr("/", "version", info.version);
  file.set_attr("/", "git_commit", info.git_commit);
  file.set_attr("/", "build_type", info.build_type);
  file.set_attr("/", "host", info.host);
  file.set_attr("/", "cpu_model", info.cpu_model);
  file.set_attr("/", "host_cpus", int64_t(info.host_cpus));
  file.set_attr("/", "gpu_model", info.gpu_model);
  file.set_attr("/", "start_time", info.start_time);
  file.set_attr("/", "end_time", iso_time_now());
  file.set_attr("/", "synthetic_outcomes", int64_t(m.synthetic_outcomes ? 1 : 0));
  file.set_attr("/", "oversubscribed_ranks", int64_t(affinity_warnings(info.ranks).size()));
  for (const auto& [name, version] : info.libraries) file.set_attr("/libraries", name, version);
  for (const auto& [role, model] : m.models) write_model(file, "/models/" + role, *model);
  for (const RankInfo& r : info.ranks) {
    const std::string group = "/ranks/" + std::to_string(r.rank);
    file.set_attr(group, "role", r.role);
    file.set_attr(group, "host", r.host);
    file.set_attr(group, "device", r.device);
    file.set_attr(group, "pid", int64_t(r.pid));
    file.set_attr(group, "threads", int64_t(r.threads));
    file.set_attr(group, "cpus", r.cpus);
    file.set_attr(group, "cpu_count", int64_t(r.cpu_count));
    file.set_attr(group, "llc", r.llc);
    file.set_attr(group, "host_llcs", int64_t(r.host_llcs));
  }
}

}  // namespace ssd
