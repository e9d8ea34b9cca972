#include "harness/launch.h"

#include <unistd.h>

#include <cstdlib>

#include "comm/clock.h"
#include "harness/cache_domains.h"
#include "harness/plan.h"
#include "kernels/errors.h"

namespace ssd {

std::unique_ptr<WeightSource> open_target(const LaunchSpec& s) {
  return with_flag("--target", [&] { return open_weight_source(s.target, s.weight_seed); });
}

std::unique_ptr<WeightSource> open_draft(const LaunchSpec& s, const ModelConfig& target) {
  std::unique_ptr<WeightSource> draft = with_flag("--draft", [&] {
    const std::string prefix = "perturb:";
    if (s.draft.rfind(prefix, 0) == 0) {
      const std::string value = s.draft.substr(prefix.size());
      char* end = nullptr;
      const double sigma = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(sigma >= 0))
        throw InputError(s.draft + ": SIGMA must be a number >= 0");
      return perturb_weight_source(open_weight_source(s.target, s.weight_seed), sigma,
                                   s.weight_seed + 1);
    }
    return open_weight_source(s.draft, s.weight_seed);
  });
  if (draft->config().vocab_size != target.vocab_size)
    throw InputError("--draft: vocabulary size " + std::to_string(draft->config().vocab_size) +
                     " differs from the target's " + std::to_string(target.vocab_size));
  return draft;
}

Launch::Launch(const LaunchSpec& s, const std::function<void(Launch&)>& check_sources) : spec(s) {
  run_collectively(MPI_COMM_WORLD,
                   [&] { layout = make_rank_layout(spec.target_tp, spec.draft_ranks); });
  // One clock for every record, on every rank (comm/clock.h).
  set_clock_offset(estimate_clock_offset(MPI_COMM_WORLD));
  run_collectively(MPI_COMM_WORLD, [&] {
    target_source = open_target(spec);
    with_flag("--target-tp",
              [&] { check_tensor_parallel(target_source->config(), spec.target_tp); });
    if (!spec.draft.empty()) draft_source = open_draft(spec, target_source->config());
    if (check_sources) check_sources(*this);
  });
}

Launch::~Launch() {
  if (target_model) release_model(*target_model);
  if (draft_model) release_model(*draft_model);
  all_reduce.reset();
  free_rank_layout(layout);
}

bool Launch::holds_draft() const {
  if (spec.draft.empty()) return false;
  return spec.separate_draft ? layout.role == Role::Draft : layout.is_run_leader();
}

void Launch::start_backend() {
  run_collectively(MPI_COMM_WORLD, [&] {
    backend_setup = make_backend(spec.backend, spec.threads, spec.gemm, spec.compute, spec.devices);
  });
  run_collectively(MPI_COMM_WORLD, [&] {
    const auto summary = [&](const std::string& spec_text, const WeightSource& source,
                             const char* role) {
      const DType dtype = backend().weight_storage(with_flag(
          "--weight-dtype", [&] { return resolve_weight_dtype(spec.weight_dtype, source); }));
      ModelSummary m{spec_text, source.describe(), source.config(), 0, 0, dtype};
      m.compute = backend().compute_for(dtype);
      // Here rather than in the backend's upload_matrix, so that it is one line naming both
      // flags before any weight is read.
      if ((spec.compute == "bf16" || spec.compute == "amx") && m.compute != spec.compute)
        throw InputError("--compute " + spec.compute + ": the " + std::string(role) +
                         "'s weights are kept as " + dtype_name(dtype) + " (--weight-dtype " +
                         spec.weight_dtype + "), and " + spec.compute +
                         " compute needs bf16 weights (--weight-dtype bf16)");
      return m;
    };
    target = summary(spec.target, *target_source, "target");
    if (draft_source) draft = summary(spec.draft, *draft_source, "draft");
  });
}

void Launch::load_models(bool load_weights) {
  run_collectively(MPI_COMM_WORLD, [&] {
    if (is_target()) {
      all_reduce = backend_setup.make_all_reduce(layout.group);
      if (load_weights) {
        const double start = now_seconds();
        target_model =
            load_model(*target_source, backend(), Shard{layout.group_rank, layout.target_tp},
                       all_reduce.get(), target.weight_dtype);
        target.load_s = now_seconds() - start;
        target.weight_bytes = target_model->weights.bytes;
      }
    }
    if (holds_draft() && load_weights) {
      const double start = now_seconds();
      draft_model = load_model(*draft_source, backend(), {}, nullptr, draft->weight_dtype);
      draft->load_s = now_seconds() - start;
      draft->weight_bytes = draft_model->weights.bytes;
    }
  });
}

RunInfo Launch::run_info() {
  RunInfo info = collect_run_info();
  for (const auto& version : backend_setup.libraries) info.libraries.push_back(version);
  if (std::string gpu = backend().gpu_model(); !gpu.empty()) info.gpu_model = gpu;
  const std::string role = layout.role_name() + (is_target() && holds_draft() ? " + draft" : "");
  const std::vector<int>& cpus = process_cpus();
  info.ranks = gather_rank_info({layout.world_rank, role, info.host, int(getpid()),
                                 backend().device_description(), spec.threads, cpu_list_text(cpus),
                                 int(cpus.size()), !backend().gpu_model().empty(),
                                 cpu_list_text(cache_domains(cpus)), host_cache_domains()});
  return info;
}

}  // namespace ssd
