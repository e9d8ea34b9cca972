#include "harness/run.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "comm/clock.h"
#include "comm/collective.h"
#include "comm/mpi_all_reduce.h"
#include "comm/peer_link.h"
#include "harness/backend_select.h"
#include "harness/memory_check.h"
#include "harness/models.h"
#include "harness/prompts.h"
#include "harness/report.h"
#include "harness/result_writer.h"
#include "harness/run_info.h"
#include "harness/summary.h"
#include "model/errors.h"
#include "model/model.h"
#include "ssd/autoregressive.h"
#include "ssd/speculative.h"

namespace ssd {
namespace {

void check_output_path(const RunConfig& c) {
  if (c.out.empty()) return;
  namespace fs = std::filesystem;
  if (fs::exists(c.out) && !c.overwrite)
    throw InputError("--out: " + c.out + " exists; pass --overwrite to replace it");
  const fs::path dir = fs::path(c.out).parent_path();
  if (!dir.empty() && !fs::is_directory(dir))
    throw InputError("--out: directory " + dir.string() + " does not exist");
  // Prove the file can be created now, not after the whole run: a directory can pass every
  // permission check (as root, or on /proc) and still refuse a new file. The probe has the
  // partial file's name pattern, so nothing else is touched, and is removed at once.
  const std::string probe = c.out + ".partial." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    const int err = errno;
    throw InputError("--out: cannot create " + c.out + ": " + std::strerror(err));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

Prompts make_prompts(RunConfig& c, const ModelConfig& mc) {
  Prompts prompts = c.prompts_file.empty() ? random_prompts(mc, c.num_prompts, c.prompt_len, c.seed)
                                           : load_prompts(c.prompts_file, mc.vocab_size);
  c.num_prompts = int(prompts.size());
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  const int64_t extra = c.mode == "ar" ? 0 : c.lookahead + 1;
  if (mc.max_position_embeddings > 0 &&
      int64_t(longest) + c.max_new_tokens + extra > mc.max_position_embeddings)
    throw InputError("--max-new-tokens: prompt (" + std::to_string(longest) + ") + " +
                     std::to_string(c.max_new_tokens) +
                     " new tokens exceed the model's max_position_embeddings (" +
                     std::to_string(mc.max_position_embeddings) + ")");
  return prompts;
}

// Preflight (harness/memory_check.h): this rank's weights, KV cache and activations, summed
// over the ranks of each node, against the node's available memory, before anything loads.
void check_run_fits(const RunConfig& c, const RankLayout& layout, const WeightSource& target,
                    DType target_dtype, const WeightSource* draft, DType draft_dtype,
                    const Prompts& prompts) {
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  const int64_t rows = std::min<int64_t>(c.batch_size, int64_t(prompts.size()));
  const int64_t extra = c.mode == "ar" ? 0 : c.lookahead + 2;
  const int64_t capacity = int64_t(longest) + c.max_new_tokens + extra;
  const int64_t step_rows = rows * (c.mode == "ar" ? 1 : c.lookahead + 1);
  const int64_t forward_rows = std::max(rows * int64_t(longest), step_rows);  // prefill or step
  MemoryNeed need;
  if (layout.role == Role::Target)
    need += estimate_model_memory(target.config(), target_dtype, layout.target_tp, rows, capacity,
                                  forward_rows, step_rows);
  if (draft && holds_draft(c, layout))  // at least one cache row per sequence
    need += estimate_model_memory(draft->config(), draft_dtype, 1, rows, capacity, forward_rows,
                                  step_rows);
  check_host_memory(MPI_COMM_WORLD, need,
                    "--batch-size (" + std::to_string(c.batch_size) + "), --max-new-tokens (" +
                        std::to_string(c.max_new_tokens) + ") or the prompts' length (" +
                        std::to_string(longest) + " tokens)");
}

// '# progress' lines at most every `every` seconds, so a long run shows it is alive without
// flooding a Slurm log.
class Progress {
 public:
  Progress(double every, int64_t total) : every_(every), total_(total), start_(now_seconds()) {}
  void add(int64_t tokens) {
    done_ += tokens;
    const double now = now_seconds();
    if (every_ <= 0 || now - last_ < every_) return;
    last_ = now;
    const double elapsed = now - start_;
    const double eta = done_ > 0 ? elapsed * double(total_ - done_) / double(done_) : 0.0;
    std::printf("# progress: %lld/%lld decode tokens (%s), elapsed %.0f s, ETA %.0f s\n",
                (long long)done_, (long long)total_, phase_.c_str(), elapsed, eta);
    std::fflush(stdout);
  }
  void phase(const std::string& name) { phase_ = name; }

 private:
  double every_;
  int64_t total_, done_ = 0;
  double start_, last_ = 0.0;
  std::string phase_;
};

// What the target leader measures: warm-up runs, then the recorded repetitions.
RunRecords run_repetitions(const RunConfig& c, const Prompts& prompts, ModelGroup& target,
                           DraftEndpoint* draft, bool& identical) {
  DecodeSettings settings;
  settings.batch_size = c.batch_size;
  settings.max_new_tokens = c.max_new_tokens;
  settings.temperature = c.temperature;
  settings.seed = c.seed;
  settings.ignore_eos = c.ignore_eos;
  // Decode tokens of all runs, first tokens (from the prefill) excluded: an upper bound.
  const int64_t total =
      int64_t(c.warmup + c.reps) * int64_t(prompts.size()) * std::max(0, c.max_new_tokens - 1);
  Progress progress(c.progress, total);
  progress.phase("warm-up");
  settings.on_tokens = [&](int64_t tokens) { progress.add(tokens); };
  SpeculativeSettings speculative{settings, c.lookahead, outcome_model(c)};

  const double clock_zero = global_now();
  RunRecords records;
  std::vector<std::vector<int32_t>> generated;
  auto once = [&](int rep, RunRecords* into) {
    if (c.mode == "ar")
      return run_autoregressive(target, prompts, settings, rep, clock_zero,
                                into ? &into->steps : nullptr, generated);
    return run_speculative(target, *draft, prompts, speculative, rep, clock_zero, into, generated);
  };
  for (int w = 0; w < c.warmup; ++w) once(-1, nullptr);
  identical = true;
  for (int rep = 0; rep < c.reps; ++rep) {
    progress.phase("rep " + std::to_string(rep + 1) + "/" + std::to_string(c.reps));
    records.reps.push_back(once(rep, &records));
    if (rep == 0)
      records.generated = generated;
    else if (generated != records.generated)
      identical = false;
  }
  records.clock_span_s = global_now() - clock_zero;
  return records;
}

}  // namespace

int run_benchmark(const Cli& cli) {
  RunConfig config = cli.run;
  RankLayout layout;
  run_collectively(MPI_COMM_WORLD, [&] { layout = resolve_rank_layout(config); });
  if (config.threads == 0) config.threads = default_threads_per_rank();
  set_clock_offset(estimate_clock_offset(MPI_COMM_WORLD));

  // Set-up that can fail on bad input, agreed across ranks so none is left waiting.
  std::unique_ptr<WeightSource> target_source, draft_source;
  Prompts prompts;
  SaguaroSettings saguaro;
  run_collectively(MPI_COMM_WORLD, [&] {
    if (layout.is_run_leader()) check_output_path(config);
    target_source = open_target(config);
    if (config.mode != "ar") draft_source = open_draft(config, target_source->config());
    prompts = make_prompts(config, target_source->config());
    if (config.mode == "ssd") saguaro = saguaro_settings(config);
    outcome_model(config);  // validates --outcomes on every rank
  });

  BackendSetup backend_setup;
  run_collectively(MPI_COMM_WORLD, [&] {
    backend_setup = make_backend(config.backend, config.threads, config.gemm, config.devices);
  });
  Backend& backend = *backend_setup.backend;
  DType target_dtype = DType::F32, draft_dtype = DType::F32;
  run_collectively(MPI_COMM_WORLD, [&] {
    target_dtype =
        backend.weight_storage(resolve_weight_dtype(config.weight_dtype, *target_source));
    if (draft_source)
      draft_dtype =
          backend.weight_storage(resolve_weight_dtype(config.weight_dtype, *draft_source));
  });
  if (backend.weights_in_host_memory())
    run_collectively(MPI_COMM_WORLD, [&] {
      check_run_fits(config, layout, *target_source, target_dtype, draft_source.get(), draft_dtype,
                     prompts);
    });
  std::unique_ptr<AllReduce> all_reduce;
  std::optional<Model> target_model, draft_model;
  double target_load_s = 0.0, draft_load_s = 0.0;
  run_collectively(MPI_COMM_WORLD, [&] {
    if (layout.role == Role::Target) {
      const double start = now_seconds();
      all_reduce = backend_setup.make_all_reduce(layout.group);
      target_model = load_model(*target_source, backend, Shard{layout.group_rank, layout.target_tp},
                                all_reduce.get(), target_dtype);
      target_load_s = now_seconds() - start;
    }
    if (holds_draft(config, layout)) {
      const double start = now_seconds();
      draft_model = load_model(*draft_source, backend, {}, nullptr, draft_dtype);
      draft_load_s = now_seconds() - start;
    }
  });

  RunInfo info = collect_run_info();
  for (const auto& version : backend_setup.libraries) info.libraries.push_back(version);
  if (std::string gpu = backend.gpu_model(); !gpu.empty()) info.gpu_model = gpu;
  config.backend = backend.name();
  const bool draft_only = layout.role == Role::Draft;
  info.ranks = gather_rank_info(
      {layout.world_rank,
       layout.role_name() + (layout.is_run_leader() && draft_model ? " + draft" : ""), info.host,
       int(getpid()), backend.device_description(), config.threads});
  const ModelConfig& mc = target_source->config();
  ModelSummary target{config.target,
                      target_source->describe(),
                      mc,
                      target_model ? target_model->weights.bytes : 0,
                      target_load_s,
                      target_dtype};
  std::optional<ModelSummary> draft;
  if (draft_source)
    draft = ModelSummary{config.draft,           draft_source->describe(),
                         draft_source->config(), draft_model ? draft_model->weights.bytes : 0,
                         draft_load_s,           draft_dtype};
  Report report(config.output_format, std::cout);
  if (layout.is_run_leader()) report.header(info, config, target, draft);

  int code = 0;
  if (draft_only) {
    // The draft rank serves the target leader until it is shut down.
    ModelGroup draft_group(*draft_model, MPI_COMM_SELF);
    PeerLink link(MPI_COMM_WORLD, layout.target_leader);
    if (config.mode == "ssd") {
      SaguaroDrafter drafter(draft_group, saguaro);
      serve_saguaro(link, drafter);
    } else {
      Drafter drafter(draft_group, config.draft_temperature, config.seed);
      serve_draft(link, drafter);
    }
  } else if (!layout.is_leader()) {
    ModelGroup target_group(*target_model, layout.group);
    target_group.serve();
  } else {
    ModelGroup target_group(*target_model, layout.group);
    std::unique_ptr<ModelGroup> draft_group;
    std::unique_ptr<Drafter> drafter;
    std::unique_ptr<PeerLink> link;
    std::unique_ptr<DraftEndpoint> endpoint;
    if (config.mode != "ar") {
      if (draft_is_separate(config)) {
        link = std::make_unique<PeerLink>(MPI_COMM_WORLD, layout.draft_leader);
        endpoint = std::make_unique<RemoteDraft>(*link);
      } else {
        draft_group = std::make_unique<ModelGroup>(*draft_model, MPI_COMM_SELF);
        drafter = std::make_unique<Drafter>(*draft_group, config.draft_temperature, config.seed);
        endpoint = std::make_unique<LocalDraft>(*drafter);
      }
    }
    bool identical = true;
    const RunRecords records =
        run_repetitions(config, prompts, target_group, endpoint.get(), identical);
    target_group.stop();
    if (endpoint) endpoint->shutdown();

    RunSummary summary = summarize(records, identical);
    summary.tokens_check_applies =
        config.outcomes == "real" && (config.mode != "ssd" || config.temperature == 0.0);
    report.result_row(config, target, summary);
    if (config.show_tokens) report.tokens(records.generated);
    if (!config.out.empty())
      write_result_file(config.out, config.overwrite, cli.argv, info, config, target, draft,
                        prompts, records, summary);
    report.final_lines(summary, config.out);
    code = identical || !summary.tokens_check_applies ? 0 : 1;
  }
  if (target_model) release_model(*target_model);
  if (draft_model) release_model(*draft_model);
  free_rank_layout(layout);
  MPI_Barrier(MPI_COMM_WORLD);
  return code;
}

}  // namespace ssd
