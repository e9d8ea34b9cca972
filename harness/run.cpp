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
#include "harness/calibrate.h"
#include "harness/launch.h"
#include "harness/memory_check.h"
#include "harness/plan.h"
#include "harness/prompts.h"
#include "harness/report.h"
#include "harness/result_row.h"
#include "harness/result_writer.h"
#include "harness/run_info.h"
#include "harness/summary.h"
#include "kernels/errors.h"
#include "model/model.h"
#include "ssd/decode.h"

namespace ssd {
namespace {

void check_output_path(const OutputPlan& o) {
  if (o.path.empty()) return;
  namespace fs = std::filesystem;
  if (fs::exists(o.path) && !o.overwrite)
    throw InputError("--out: " + o.path + " exists; pass --overwrite to replace it");
  const fs::path dir = fs::path(o.path).parent_path();
  if (!dir.empty() && !fs::is_directory(dir))
    throw InputError("--out: directory " + dir.string() + " does not exist");
  // Prove the file can be created now, not after the whole run: a directory can pass every
  // permission check (as root, or on /proc) and still refuse a new file. The probe has the
  // partial file's name pattern, so nothing else is touched, and is removed at once.
  const std::string probe = o.path + ".partial." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    const int err = errno;
    throw InputError("--out: cannot create " + o.path + ": " + std::strerror(err));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

Prompts make_prompts(const RunPlan& plan, const ModelConfig& mc) {
  const PromptPlan& p = plan.prompts;
  Prompts prompts = p.file.empty() ? random_prompts(mc, p.count, p.length, p.seed)
                                   : load_prompts(p.file, mc.vocab_size);
  size_t longest = 0;
  for (const auto& prompt : prompts) longest = std::max(longest, prompt.size());
  const int max_new_tokens = plan.decode.limits.max_new_tokens;
  if (mc.max_position_embeddings > 0 &&
      plan.positions_needed(int64_t(longest) + max_new_tokens) > mc.max_position_embeddings)
    throw InputError("--max-new-tokens: prompt (" + std::to_string(longest) + ") + " +
                     std::to_string(max_new_tokens) +
                     " new tokens exceed the model's max_position_embeddings (" +
                     std::to_string(mc.max_position_embeddings) + ")");
  return prompts;
}

// Preflight (harness/memory_check.h): this rank's weights, KV cache and activations, summed
// over the ranks of each node, against the node's available memory, before anything loads.
void check_run_fits(const RunPlan& plan, const Launch& launch, const Prompts& prompts) {
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  const int batch_size = plan.decode.batch_size, max_new_tokens = plan.decode.limits.max_new_tokens;
  const int64_t rows = std::min<int64_t>(batch_size, int64_t(prompts.size()));
  const int64_t capacity = plan.kv_capacity(int64_t(longest) + max_new_tokens);
  const int64_t step_rows = plan.step_rows(rows);
  const int64_t forward_rows = std::max(rows * int64_t(longest), step_rows);  // prefill or step
  MemoryNeed need;
  if (launch.is_target())
    need += estimate_model_memory(launch.target.config, launch.target.weight_dtype,
                                  launch.layout.target_tp, rows, capacity, forward_rows, step_rows);
  if (launch.holds_draft())  // at least one cache row per sequence
    need += estimate_model_memory(launch.draft->config, launch.draft->weight_dtype, 1, rows,
                                  capacity, forward_rows, step_rows);
  check_host_memory(MPI_COMM_WORLD, need,
                    "--batch-size (" + std::to_string(batch_size) + "), --max-new-tokens (" +
                        std::to_string(max_new_tokens) + ") or the prompts' length (" +
                        std::to_string(longest) + " tokens)");
}

// -k auto's steps see the context a round sees halfway through the run (attention is a small
// part of these steps; capped so that calibrating costs a few steps, not a long prefill).
int calibration_context(const RunPlan& plan, const Prompts& prompts) {
  size_t total = 0;
  for (const auto& p : prompts) total += p.size();
  const int mean = prompts.empty() ? 1 : int(total / prompts.size());
  return std::clamp(mean + plan.decode.limits.max_new_tokens / 2, 1, 256);
}

// The largest K -k auto may choose: kMaxAutoLookahead, or fewer where a speculation of K + 1
// past the longest prompt's last new token would pass the model's max_position_embeddings
// (make_prompts has checked that K = 1 fits).
int auto_lookahead_limit(const RunPlan& plan, const Prompts& prompts, const ModelConfig& mc) {
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  if (mc.max_position_embeddings <= 0) return kMaxAutoLookahead;
  const int64_t room = int64_t(mc.max_position_embeddings) - int64_t(longest) -
                       plan.decode.limits.max_new_tokens - 1;
  return int(std::clamp<int64_t>(room, 1, kMaxAutoLookahead));
}

// What the launch settled: the backend, the prompts' count, and K (-k auto measures it now,
// with the models loaded; collective).
RunSetup settle_setup(const RunPlan& plan, Launch& launch, const Prompts& prompts) {
  RunSetup setup = given_setup(plan, launch.backend().name(), int(prompts.size()));
  // The target's steps, -k auto's timed ones too, on kernels that keep SD's and SSD's tokens
  // equal to AR's; -k auto raises the bound with each range of K it times (choose_lookahead).
  const int64_t sequences = std::min<int64_t>(plan.decode.batch_size, int64_t(prompts.size()));
  if (launch.is_target() && !plan.lookahead_auto)
    launch.backend().keep_batch_invariant_up_to(int(plan.step_rows(sequences)));
  if (!plan.lookahead_auto) return setup;
  const AutoLookahead k =
      choose_lookahead(plan, launch, calibration_context(plan, prompts),
                       auto_lookahead_limit(plan, prompts, launch.target_source->config()));
  setup.decode.lookahead = k.lookahead;
  setup.lookahead_choice = k.choice;
  setup.lookahead_costs = k.costs;
  setup.lookahead_measured = k.measured;
  setup.lookahead_warning = k.warning;
  return setup;
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

// `runs` warm-up runs, unrecorded; their totals summed (refine_lookahead's acceptance and
// step costs).
RepTotals warm_up(const DecodeSettings& settings, int runs, const Prompts& prompts,
                  ModelGroup& target, DraftEndpoint* draft, double clock_zero, Progress& progress) {
  const auto on_tokens = [&](int64_t tokens) { progress.add(tokens); };
  RepTotals sum;
  TokenLists generated;
  for (int w = 0; w < runs; ++w) {
    Recorder warmup(-1, clock_zero, nullptr, on_tokens);
    const RepTotals t = decode_repetition(target, draft, prompts, settings, warmup, generated);
    sum.draft_rounds += t.draft_rounds, sum.draft_accepted += t.draft_accepted;
    sum.draft_rejections += t.draft_rejections;
    sum.decode_steps += t.decode_steps, sum.verify_s += t.verify_s;
    sum.cache_build_s += t.cache_build_s, sum.branch_rows += t.branch_rows;
    sum.cache_builds += t.cache_builds;
  }
  return sum;
}

// What the target leader measures: the recorded repetitions. Their clock's zero is the
// warm-up's start.
RunRecords run_repetitions(const RunPlan& plan, const RunSetup& setup, const Prompts& prompts,
                           ModelGroup& target, DraftEndpoint* draft, double clock_zero,
                           Progress& progress, bool& identical) {
  const DecodeSettings& settings = setup.decode;
  const auto on_tokens = [&](int64_t tokens) { progress.add(tokens); };
  RunRecords records;
  TokenLists generated;
  identical = true;
  for (int rep = 0; rep < plan.reps; ++rep) {
    progress.phase("rep " + std::to_string(rep + 1) + "/" + std::to_string(plan.reps));
    Recorder recorder(rep, clock_zero, &records, on_tokens);
    records.reps.push_back(
        decode_repetition(target, draft, prompts, settings, recorder, generated));
    if (rep == 0)
      records.generated = generated;
    else if (generated != records.generated)
      identical = false;
  }
  records.clock_span_s = global_now() - clock_zero;
  return records;
}

// The target leader: warms up, settles -k auto's K at the warm-up's acceptance, prints the
// header, decodes every repetition, then reports and writes the file.
int lead(const RunPlan& plan, RunSetup setup, Launch& launch, const Prompts& prompts,
         const RunInfo& info, Report& report, const std::vector<std::string>& argv) {
  ModelGroup target_group(*launch.target_model, launch.layout.group);
  std::unique_ptr<ModelGroup> draft_group;
  std::unique_ptr<Drafter> drafter;
  std::vector<std::unique_ptr<PeerLink>> links;  // one per draft rank
  std::unique_ptr<DraftEndpoint> endpoint;
  if (plan.separate_draft()) {
    std::vector<PeerLink*> peers;
    for (int d = 0; d < launch.layout.draft_ranks; ++d) {
      links.push_back(std::make_unique<PeerLink>(MPI_COMM_WORLD, launch.layout.draft_leader + d));
      peers.push_back(links.back().get());
    }
    endpoint = std::make_unique<RemoteDraft>(peers);
  } else if (plan.speculative()) {
    draft_group = std::make_unique<ModelGroup>(*launch.draft_model, MPI_COMM_SELF);
    drafter =
        std::make_unique<Drafter>(*draft_group, plan.draft_temperature, plan.decode.limits.seed);
    endpoint = std::make_unique<LocalDraft>(*drafter);
  }
  // Decode tokens of all runs, first tokens (from the prefill) excluded, and of the warm-up that
  // a new -k auto K gets: an upper bound.
  const int extra_warm_up = plan.lookahead_auto && plan.warmup > 0 ? 1 : 0;
  const int64_t total = int64_t(plan.warmup + extra_warm_up + plan.reps) * int64_t(prompts.size()) *
                        std::max(0, plan.decode.limits.max_new_tokens - 1);
  Progress progress(plan.output.progress_s, total);
  progress.phase("warm-up");
  const double clock_zero = global_now();
  const RepTotals warm = warm_up(setup.decode, plan.warmup, prompts, target_group, endpoint.get(),
                                 clock_zero, progress);
  if (std::optional<RunSetup> refined = refine_lookahead(plan, setup, warm)) {
    // A new K gets a warm-up of its own: the SSD drafter learns its budget and fallback times
    // afresh at a new K (SaguaroDrafter::start), and the recorded runs should not time that.
    // On the Qwen pair the first recorded run at the new K spent 3.5 outcomes per sequence at
    // T_p 1.11 where a run given that K settled at ~2 and 0.96.
    const bool new_k = refined->decode.lookahead != setup.decode.lookahead;
    setup = *refined;
    if (new_k)
      warm_up(setup.decode, 1, prompts, target_group, endpoint.get(), clock_zero, progress);
  }
  report.header(info, plan, setup, launch.target, launch.draft);
  bool identical = true;
  const RunRecords records = run_repetitions(plan, setup, prompts, target_group, endpoint.get(),
                                             clock_zero, progress, identical);
  target_group.stop();
  if (endpoint) endpoint->shutdown();

  RunSummary summary = summarize(records, identical);
  summary.tokens_check_applies = plan.tokens_reproducible();
  const std::vector<ResultCell> row = make_result_row(plan, setup, launch.target, summary);
  report.result_row(row);
  if (plan.output.show_tokens) report.tokens(records.generated);
  if (!plan.output.path.empty())
    write_result_file({.argv = argv,
                       .info = info,
                       .plan = plan,
                       .setup = setup,
                       .target = launch.target,
                       .draft = launch.draft,
                       .prompts = prompts,
                       .records = records,
                       .row = row});
  report.final_lines(summary, plan.output.path, launch.target, launch.draft);
  return identical || !summary.tokens_check_applies ? 0 : 1;
}

// A draft rank: serves the target leader until it is shut down. With several draft ranks each
// holds the whole draft model and serves its share of every batch's sequences.
void serve_draft_rank(const RunPlan& plan, Launch& launch) {
  ModelGroup draft_group(*launch.draft_model, MPI_COMM_SELF);
  PeerLink link(MPI_COMM_WORLD, launch.layout.target_leader);
  if (plan.mode == Mode::SSD) {
    SaguaroDrafter drafter(draft_group, plan.saguaro);
    serve_saguaro(link, drafter);
  } else {
    Drafter drafter(draft_group, plan.draft_temperature, plan.decode.limits.seed);
    serve_draft(link, drafter);
  }
}

}  // namespace

int run_benchmark(const Cli& cli) {
  RunPlan plan;
  run_collectively(MPI_COMM_WORLD, [&] { plan = make_run_plan(cli.run); });
  Prompts prompts;
  Launch launch(plan.launch, [&](Launch& l) {
    if (l.layout.is_run_leader()) check_output_path(plan.output);
    prompts = make_prompts(plan, l.target_source->config());
  });
  launch.start_backend();
  if (launch.backend().weights_in_host_memory())
    run_collectively(MPI_COMM_WORLD, [&] { check_run_fits(plan, launch, prompts); });
  launch.load_models();
  const RunSetup setup = settle_setup(plan, launch, prompts);
  const RunInfo info = launch.run_info();

  Report report(plan.output.format, std::cout);
  int code = 0;
  if (launch.layout.role == Role::Draft)
    serve_draft_rank(plan, launch);
  else if (!launch.layout.is_leader())
    ModelGroup(*launch.target_model, launch.layout.group).serve();
  else
    code = lead(plan, setup, launch, prompts, info, report, cli.argv);
  MPI_Barrier(MPI_COMM_WORLD);
  return code;
}

}  // namespace ssd
