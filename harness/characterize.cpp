// `ssd-bench characterize`: sets the launch up exactly as run_benchmark does (rank layout,
// models, backend, all-reduce, all through the same helpers, every step agreed across ranks),
// then runs the measurements in phases separated by barriers, gathers them to rank 0, prints
// and writes them. Within a phase every rank measures at once, as the ranks of a run compute at
// once; the phases themselves do not overlap, so communication is measured on quiet ranks.
#include "harness/characterize.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "comm/collective.h"
#include "harness/backend_select.h"
#include "harness/characterize_parts.h"
#include "harness/models.h"
#include "model/errors.h"

namespace ssd {

std::vector<std::pair<std::string, std::string>> describe(const CharacterizeConfig& c) {
  auto str = [](auto v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  std::string branch_rows;
  for (int r : c.branch_rows) branch_rows += (branch_rows.empty() ? "" : ",") + std::to_string(r);
  return {
      {"target", c.target},
      {"draft", c.draft.empty() ? "none" : c.draft},
      {"weight_seed", str(c.weight_seed)},
      {"target_tp", str(c.target_tp)},
      {"draft_ranks", str(c.draft_ranks)},
      {"backend", c.backend},
      {"devices", c.devices.empty() ? "local rank" : c.devices},
      {"threads", str(c.threads)},
      {"gemm", c.gemm},
      {"lookahead", str(c.lookahead)},
      {"batch_size", str(c.batch_size)},
      {"context", str(c.context)},
      {"branch_rows", branch_rows.empty() ? "none" : branch_rows},
      {"rows", str(c.rows)},
      {"min_time", str(c.min_time)},
      {"memory_bytes", str(c.memory_bytes)},
      {"comm_max_bytes", str(c.comm_max_bytes)},
      {"forward", c.forward ? "true" : "false"},
      {"out", c.out.empty() ? "none" : c.out},
  };
}

namespace {

// characterize's flags in the RunConfig the run's own set-up helpers read. A draft makes it
// "sd" so that the layout rules are those of a run with a draft (separate when a draft rank is
// launched, collocated on target rank 0 when not).
RunConfig as_run_config(const CharacterizeConfig& c) {
  RunConfig r;
  r.target = c.target;
  r.draft = c.draft;
  r.weight_seed = c.weight_seed;
  r.target_tp = c.target_tp;
  r.draft_ranks = c.draft_ranks;
  r.mode = c.draft.empty() ? "ar" : "sd";
  r.backend = c.backend;
  r.devices = c.devices;
  r.threads = c.threads;
  r.gemm = c.gemm;
  r.lookahead = c.lookahead;
  r.batch_size = c.batch_size;
  return r;
}

// The one layout rule a run phrases in terms of --mode: a launched draft rank needs a model.
void check_draft_rank(const CharacterizeConfig& c) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const int draft_ranks = c.draft_ranks >= 0 ? c.draft_ranks : world - c.target_tp;
  if (draft_ranks > 0 && c.draft.empty())
    throw InputError("--draft: required when a draft rank is launched (mpirun -np " +
                     std::to_string(world) + " with --target-tp " + std::to_string(c.target_tp) +
                     ")");
}

void check_positions(const ModelConfig& mc, const CharacterizeConfig& c, const char* which) {
  const int64_t needed = int64_t(c.context) + 2 * int64_t(c.lookahead) + 1;
  if (mc.max_position_embeddings > 0 && needed > mc.max_position_embeddings)
    throw InputError("--context: " + std::to_string(c.context) + " + 2K + 1 positions exceed the " +
                     which + "'s max_position_embeddings (" +
                     std::to_string(mc.max_position_embeddings) + ")");
}

// load_model checks this too, but --no-forward loads nothing.
void check_tp(const ModelConfig& mc, int tp) {
  for (auto [count, what] : {std::pair{mc.num_attention_heads, "num_attention_heads"},
                             {mc.num_key_value_heads, "num_key_value_heads"},
                             {mc.intermediate_size, "intermediate_size"}})
    if (count % tp != 0)
      throw InputError("--target-tp " + std::to_string(tp) + " does not divide " + what + " (" +
                       std::to_string(count) + ")");
}

// Row counts to measure GEMMs at, in ascending order; equal counts merge their purposes.
std::vector<GemmRows> gemm_rows(std::initializer_list<GemmRows> wanted,
                                const std::vector<int>& branch_rows) {
  std::vector<GemmRows> rows(wanted);
  for (int r : branch_rows) rows.push_back({r, "branch"});
  std::vector<GemmRows> merged;
  for (const GemmRows& r : rows) {
    auto same = std::find_if(merged.begin(), merged.end(),
                             [&](const GemmRows& m) { return m.rows == r.rows; });
    if (same == merged.end())
      merged.push_back(r);
    else if (same->purpose.find(r.purpose) == std::string::npos)
      same->purpose += "+" + r.purpose;
  }
  std::stable_sort(merged.begin(), merged.end(),
                   [](const GemmRows& a, const GemmRows& b) { return a.rows < b.rows; });
  return merged;
}

double linear_bytes(const std::vector<LinearShape>& shapes, int element_bytes) {
  double bytes = 0.0;
  for (const LinearShape& s : shapes) bytes += double(s.in) * s.out * s.per_token * element_bytes;
  return bytes;
}

}  // namespace

int run_characterize(const Cli& cli) {
  CharacterizeConfig c = cli.characterize;
  RunConfig rc = as_run_config(c);
  RankLayout layout;
  run_collectively(MPI_COMM_WORLD, [&] {
    check_draft_rank(c);
    layout = resolve_rank_layout(rc);
  });
  c.draft_ranks = rc.draft_ranks;
  if (c.threads == 0) c.threads = rc.threads = default_threads_per_rank();
  const bool has_draft = !c.draft.empty(), separate = draft_is_separate(rc);
  const bool holds = holds_draft(rc, layout), is_target = layout.role == Role::Target;
  if (has_draft && c.branch_rows.empty())
    for (int m : {1, 2, 4, 8}) c.branch_rows.push_back(m * c.batch_size * (c.lookahead + 1));
  std::sort(c.branch_rows.begin(), c.branch_rows.end());
  c.branch_rows.erase(std::unique(c.branch_rows.begin(), c.branch_rows.end()), c.branch_rows.end());

  std::unique_ptr<WeightSource> target_source, draft_source;
  std::optional<ResultFile> file;
  run_collectively(MPI_COMM_WORLD, [&] {
    target_source = open_target(rc);
    check_tp(target_source->config(), c.target_tp);
    check_positions(target_source->config(), c, "target");
    if (has_draft) {
      draft_source = open_draft(rc, target_source->config());
      check_positions(draft_source->config(), c, "draft");
    } else if (!cli.characterize.branch_rows.empty()) {
      throw InputError("--branch-rows: needs --draft (branch steps are the draft's)");
    }
    if (layout.is_run_leader() && !c.out.empty()) {
      try {
        file.emplace(ResultFile::create(c.out, c.overwrite));
      } catch (const InputError& e) {
        throw InputError("--out: " + std::string(e.what()));
      }
    }
  });
  BackendSetup backend_setup;
  run_collectively(MPI_COMM_WORLD,
                   [&] { backend_setup = make_backend(c.backend, c.threads, c.gemm, c.devices); });
  Backend& backend = *backend_setup.backend;
  std::unique_ptr<AllReduce> all_reduce;
  std::optional<Model> target_model, draft_model;
  const DType target_dtype =
      backend.weight_storage(resolve_weight_dtype(c.weight_dtype, *target_source));
  ModelSummary target_summary{c.target,    target_source->describe(), target_source->config(), 0, 0,
                              target_dtype};
  std::optional<ModelSummary> draft_summary;
  if (has_draft)
    draft_summary =
        ModelSummary{c.draft,
                     draft_source->describe(),
                     draft_source->config(),
                     0,
                     0,
                     backend.weight_storage(resolve_weight_dtype(c.weight_dtype, *draft_source))};
  run_collectively(MPI_COMM_WORLD, [&] {
    if (is_target) {
      all_reduce = backend_setup.make_all_reduce(layout.group);
      if (c.forward) {
        const double start = MPI_Wtime();
        target_model =
            load_model(*target_source, backend, Shard{layout.group_rank, layout.target_tp},
                       all_reduce.get(), target_summary.weight_dtype);
        target_summary.load_s = MPI_Wtime() - start;
        target_summary.weight_bytes = target_model->weights.bytes;
      }
    }
    if (holds && c.forward) {
      const double start = MPI_Wtime();
      draft_model = load_model(*draft_source, backend, {}, nullptr, draft_summary->weight_dtype);
      draft_summary->load_s = MPI_Wtime() - start;
      draft_summary->weight_bytes = draft_model->weights.bytes;
    }
  });

  CharacterizeReport report;
  report.config = &c;
  report.info = collect_run_info();
  for (const auto& version : backend_setup.libraries) report.info.libraries.push_back(version);
  if (std::string gpu = backend.gpu_model(); !gpu.empty()) report.info.gpu_model = gpu;
  const std::string role = layout.role_name() + (holds && is_target ? " + draft" : "");
  report.info.ranks = gather_rank_info({layout.world_rank, role, report.info.host, int(getpid()),
                                        backend.device_description(), c.threads});
  report.backend = backend.name();
  report.target_tp = layout.target_tp;
  report.draft_ranks = layout.draft_ranks;
  report.draft_collocated = has_draft && !separate;
  const std::vector<LinearShape> target_shapes =
      linear_shapes(target_summary.config, layout.target_tp);
  report.models.push_back({"target", target_summary, target_shapes});
  std::vector<LinearShape> draft_shapes;
  if (has_draft) {
    draft_shapes = linear_shapes(draft_summary->config, 1);
    report.models.push_back({"draft", *draft_summary, draft_shapes});
  }
  std::ostream& os = std::cout;
  if (layout.is_run_leader()) print_header(os, report);

  RankResults mine;
  mine.rank = layout.world_rank;
  mine.role = role;
  const int K = c.lookahead, b = c.batch_size;
  run_collectively(MPI_COMM_WORLD, [&] {
    mine.memory = measure_copy_bandwidth(backend, c.memory_bytes, c.min_time);
    mine.memory.rank = layout.world_rank;
  });
  // The host's own read loop, alone on the node's memory (the other ranks wait).
  run_collectively(MPI_COMM_WORLD, [&] {
    if (layout.is_run_leader()) report.host_read = measure_host_read(c.memory_bytes, c.threads);
  });
  run_collectively(MPI_COMM_WORLD, [&] {
    auto add = [&](const char* model, const std::vector<LinearShape>& shapes,
                   const std::vector<GemmRows>& rows, DType storage) {
      for (GemmResult& g :
           measure_gemms(backend, model, shapes, rows, c.min_time, c.threads, storage)) {
        g.rank = layout.world_rank;
        g.kernel = c.gemm;
        mine.gemm.push_back(g);
      }
    };
    if (is_target)
      add("target", target_shapes,
          gemm_rows({{b, "decode"}, {b * (K + 1), "verify"}, {c.rows, "prefill"}}, {}),
          target_summary.weight_dtype);
    if (holds)
      add("draft", draft_shapes, gemm_rows({{b, "decode"}, {b * (K + 1), "glue"}}, c.branch_rows),
          draft_summary->weight_dtype);
  });
  if (is_target && layout.target_tp > 1) {
    auto rows =
        measure_all_reduce(backend, *all_reduce, layout.group, c.comm_max_bytes, c.min_time);
    if (layout.is_run_leader()) mine.all_reduce = std::move(rows);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (has_draft && separate && (layout.is_run_leader() || layout.role == Role::Draft))
    mine.p2p = measure_peer_link(
        layout.is_run_leader(), layout.is_run_leader() ? layout.draft_leader : layout.target_leader,
        c.comm_max_bytes, c.min_time);
  MPI_Barrier(MPI_COMM_WORLD);
  if (c.forward) {
    const ForwardPlan plan{K, b, c.context, c.branch_rows, c.min_time};
    // A separate draft times its steps while the target verifies, as in SSD.
    if (is_target)
      mine.forward = time_target_forwards(*target_model, layout.group, layout.world_rank, plan);
    if (holds)
      for (const ForwardResult& f : time_draft_forwards(*draft_model, layout.world_rank, plan))
        mine.forward.push_back(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  report.ranks = gather_results(mine);
  int out_of_bounds = 0;
  if (layout.is_run_leader()) {
    std::vector<ForwardResult> forwards;
    for (const RankResults& r : report.ranks)
      forwards.insert(forwards.end(), r.forward.begin(), r.forward.end());
    report.window = verification_window(forwards, K, b);
    const MemoryResult& memory = report.ranks.front().memory;
    // A decode step only reads its weights: on the host, many independent read streams are
    // its ceiling (copy bandwidth also counts the writes, which a decode step does not make).
    report.target_dtype = target_summary.weight_dtype;
    report.decode_bytes = linear_bytes(target_shapes, int(dtype_size(report.target_dtype)));
    const bool host = backend.weights_in_host_memory() && report.host_read;
    report.bound_gbps = host ? report.host_read->gbps : memory.gbps;
    report.bound_source = host ? "host read bandwidth" : "device copy bandwidth";
    report.ar_bound_tok_s = b * report.bound_gbps * 1e9 / report.decode_bytes;
    for (const ForwardResult& f : forwards)
      if (f.model == "target" && f.kind == "ar") report.decode_ms = f.seconds * 1e3;
    out_of_bounds = print_tables(os, report);
    if (file) write_characterize_file(*file, cli.argv, report);
    os << "# Results: " << (c.out.empty() ? "not written (no --out)" : c.out) << "\n" << std::flush;
  }
  if (target_model) release_model(*target_model);
  if (draft_model) release_model(*draft_model);
  all_reduce.reset();
  free_rank_layout(layout);
  MPI_Barrier(MPI_COMM_WORLD);
  return out_of_bounds == 0 ? 0 : 1;
}

}  // namespace ssd
