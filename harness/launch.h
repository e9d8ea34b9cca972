// Launch: the set-up every ssd-bench launch shares, a run and characterize alike, so that
// characterize measures the machine exactly as a run uses it: the rank layout, the models'
// sources, this rank's backend and weight dtypes, the target's all-reduce, the loaded weights,
// and the run info with every rank's row. Every step is agreed across ranks (run_collectively):
// bad input on any rank ends every rank with the same one-line error.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "comm/collective.h"
#include "comm/rank_layout.h"
#include "harness/backend_select.h"
#include "harness/cli.h"
#include "harness/model_summary.h"
#include "harness/run_info.h"
#include "model/model.h"
#include "model/weights.h"

namespace ssd {

// What a launch is made of, from the run's plan or characterize's flags.
struct LaunchSpec {
  std::string target, draft;  // model specs; draft empty: none
  uint64_t weight_seed = 0;
  int target_tp = 1, draft_ranks = 0;
  bool separate_draft = false;  // the draft on its own rank, else on target rank 0
  std::string backend = "auto", devices, gemm = "invariant", weight_dtype = "auto", compute = "f32";
  int threads = 1;  // resolved
};

// The launch a run's or characterize's flags describe.
inline LaunchSpec launch_spec(const SetupConfig& c, bool separate_draft) {
  LaunchSpec s;
  s.target = c.target;
  s.draft = c.draft;
  s.weight_seed = c.weight_seed;
  s.target_tp = c.target_tp;
  s.draft_ranks = c.draft_ranks;
  s.separate_draft = separate_draft;
  s.backend = c.backend;
  s.devices = c.devices;
  s.gemm = c.gemm;
  s.weight_dtype = c.weight_dtype;
  s.compute = c.compute;
  s.threads = c.threads;
  return s;
}

class Launch {
 public:
  // Splits the world into the layout and opens the models' sources (checking the target's
  // tensor-parallel split); `check_sources` (may be empty) adds the caller's own checks of them.
  // Collective over MPI_COMM_WORLD.
  Launch(const LaunchSpec& spec, const std::function<void(Launch&)>& check_sources);
  ~Launch();
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  // Creates this rank's backend and resolves the weight dtypes it keeps and what it multiplies
  // them in; --compute bf16 with weights kept in fp32 is an InputError here, before any weight
  // is loaded. Collective.
  void start_backend();
  // Loads the target's shard (target ranks) and the draft (where it is held), and creates the
  // target's all-reduce. `load_weights` false: the all-reduce only (characterize --no-forward).
  // Collective.
  void load_models(bool load_weights = true);
  // Host, build, libraries and every rank's row (collective); `spec.threads` per rank.
  RunInfo run_info();

  bool holds_draft() const;
  bool is_target() const { return layout.role == Role::Target; }
  Backend& backend() { return *backend_setup.backend; }

  LaunchSpec spec;
  RankLayout layout;
  std::unique_ptr<WeightSource> target_source, draft_source;
  BackendSetup backend_setup;
  ModelSummary target;                // filled by start_backend and load_models
  std::optional<ModelSummary> draft;  // when there is a draft
  std::unique_ptr<AllReduce> all_reduce;
  std::optional<Model> target_model, draft_model;
};

// --target and --draft; errors name the flag. perturb:SIGMA wraps the target's source.
std::unique_ptr<WeightSource> open_target(const LaunchSpec& spec);
std::unique_ptr<WeightSource> open_draft(const LaunchSpec& spec, const ModelConfig& target);

}  // namespace ssd
