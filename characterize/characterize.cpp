// `ssd-bench characterize`: sets the launch up exactly as run_benchmark does (rank layout,
// models, backend, all-reduce, all through the same helpers, every step agreed across ranks),
// then runs the measurements in phases separated by barriers, gathers them to rank 0, prints
// and writes them. Within a phase every rank measures at once, as the ranks of a run compute at
// once; the phases themselves do not overlap, so communication is measured on quiet ranks.
#include "characterize/characterize.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "characterize/parts.h"
#include "comm/collective.h"
#include "harness/backend_select.h"
#include "harness/launch.h"
#include "harness/plan.h"
#include "kernels/errors.h"

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
      {"compute", c.compute},
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

// The rank flags against the launched world, as a run with (or without) a draft checks them;
// resolves --draft-ranks.
void check_ranks(CharacterizeConfig& c) {
  c.draft_ranks = resolve_draft_ranks(c.target_tp, c.draft_ranks);
  if (c.draft_ranks > 0 && c.draft.empty())
    throw InputError("--draft: required when a draft rank is launched (mpirun -np " +
                     std::to_string(c.target_tp + c.draft_ranks) + " with --target-tp " +
                     std::to_string(c.target_tp) + ")");
  if (c.draft_ranks > 1) throw InputError("--draft-ranks: at most 1 (the draft runs on one rank)");
}

void check_positions(const ModelConfig& mc, const CharacterizeConfig& c, const char* which) {
  // The longest step after the context: 4(K+1) or 16 tokens of the cost curve (forward.cpp).
  const int64_t needed = int64_t(c.context) + std::max<int64_t>(4 * (int64_t(c.lookahead) + 1), 16);
  if (mc.max_position_embeddings > 0 && needed > mc.max_position_embeddings)
    throw InputError(
        "--context: " + std::to_string(c.context) + " + max(4(K+1), 16) positions exceed the " +
        which + "'s max_position_embeddings (" + std::to_string(mc.max_position_embeddings) + ")");
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

// Every rank's copy bandwidth, all at once; then the host's own read loop, alone on the node's
// memory, and its compute peaks (the other ranks wait): both computes', so that the file holds
// the one not chosen too. Then the read loop on every rank of the node at once, with rank 0's
// best streams, which bounds SSD's two ranks however their rounds overlap: on a 2-core guest
// (2026-12-03) two ranks read 44.5-44.8 GB/s together against 37.8-39.7 for one alone at times,
// 62.8-76.2 against 39.4-41.9 minutes later.
void measure_memory_phases(const CharacterizeConfig& c, Launch& launch, CharacterizeReport& report,
                           RankResults& mine) {
  const RankLayout& layout = launch.layout;
  run_collectively(MPI_COMM_WORLD, [&] {
    mine.memory = measure_copy_bandwidth(launch.backend(), c.memory_bytes, c.min_time);
    mine.memory.rank = layout.world_rank;
  });
  run_collectively(MPI_COMM_WORLD, [&] {
    if (layout.is_run_leader()) {
      report.host_read = measure_host_read(c.memory_bytes, c.threads);
      report.host_fma = measure_host_fma(c.threads);
      report.host_bf16_dot = measure_host_bf16_dot(c.threads);
      report.host_amx_bf16 = measure_host_amx_bf16(c.threads);
    }
  });
  int streams = report.host_read ? report.host_read->streams : 1;
  MPI_Bcast(&streams, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<float> buffer;
  run_collectively(MPI_COMM_WORLD, [&] { buffer = read_loop_buffer(c.memory_bytes, c.threads); });
  const NodeReadResult node = measure_node_read(buffer, c.threads, streams, c.min_time);
  if (layout.is_run_leader() && node.ranks > 1) report.node_read = node;
}

// Each model's GEMMs on the ranks that hold it, at the rows its steps multiply.
void measure_gemm_phase(const CharacterizeConfig& c, Launch& launch, RankResults& mine,
                        const std::vector<LinearShape>& target_shapes,
                        const std::vector<LinearShape>& draft_shapes) {
  const int K = c.lookahead, b = c.batch_size;
  run_collectively(MPI_COMM_WORLD, [&] {
    auto add = [&](const char* model, const std::vector<LinearShape>& shapes,
                   const std::vector<GemmRows>& rows, DType storage) {
      for (GemmResult& g :
           measure_gemms(launch.backend(), model, shapes, rows, c.min_time, c.threads, storage)) {
        g.rank = launch.layout.world_rank;
        g.kernel = c.gemm;
        mine.gemm.push_back(g);
      }
    };
    if (launch.is_target())
      add("target", target_shapes,
          gemm_rows({{b, "decode"}, {b * (K + 1), "verify"}, {c.rows, "prefill"}}, {}),
          launch.target.weight_dtype);
    if (launch.holds_draft())
      add("draft", draft_shapes, gemm_rows({{b, "decode"}, {b * (K + 1), "glue"}}, c.branch_rows),
          launch.draft->weight_dtype);
  });
}

// The target's all-reduce (with T > 1), then the draft<->target link (a separate draft rank),
// each alone: a barrier after each, so no rank still computes while the next is timed.
void measure_comm_phases(const CharacterizeConfig& c, Launch& launch, RankResults& mine) {
  const RankLayout& layout = launch.layout;
  if (launch.is_target() && layout.target_tp > 1) {
    auto rows = measure_all_reduce(launch.backend(), *launch.all_reduce, layout.group,
                                   c.comm_max_bytes, c.min_time);
    if (layout.is_run_leader()) mine.all_reduce = std::move(rows);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (launch.draft && launch.spec.separate_draft &&
      (layout.is_run_leader() || layout.role == Role::Draft))
    mine.p2p = measure_peer_link(
        layout.is_run_leader(), layout.is_run_leader() ? layout.draft_leader : layout.target_leader,
        c.comm_max_bytes, c.min_time);
  MPI_Barrier(MPI_COMM_WORLD);
}

// The forward passes: each model alone, then (a separate draft rank) both side by side.
void time_forward_phases(const CharacterizeConfig& c, Launch& launch, RankResults& mine) {
  const RankLayout& layout = launch.layout;
  const bool holds = launch.holds_draft(), is_target = launch.is_target();
  // SD's collocated round on the target's leader, beside the target's own passes: with the
  // draft it holds, or (a separate draft rank launched, as SSD has it) a copy of its own for
  // this phase, as an SD run on the target's ranks would hold it.
  struct ReleasedCopy {  // freed on every path out, an exception included
    std::optional<Model> model;
    ~ReleasedCopy() {
      if (model) release_model(*model);
    }
  } sd_copy;
  Model* sd_draft = nullptr;
  if (layout.is_run_leader() && launch.draft) {
    if (!launch.draft_model)
      sd_copy.model = load_model(*launch.draft_source, launch.backend(), {}, nullptr,
                                 launch.draft->weight_dtype);
    sd_draft = launch.draft_model ? &*launch.draft_model : &*sd_copy.model;
  }
  auto time_forwards = [&](const ForwardPlan& plan, bool target, bool draft, Model* sd = nullptr) {
    std::vector<ForwardResult> out;
    if (target && is_target)
      out = time_target_forwards(*launch.target_model, layout.group, layout.world_rank, plan, sd);
    if (draft && holds)
      for (const ForwardResult& f :
           time_draft_forwards(*launch.draft_model, layout.world_rank, plan))
        out.push_back(f);
    mine.forward.insert(mine.forward.end(), out.begin(), out.end());
  };
  ForwardPlan plan{c.lookahead, c.batch_size, c.context, c.branch_rows, c.min_time};
  // Each model alone, the other's ranks waiting: AR has no draft, and SD's draft and target
  // take turns, so their steps run on otherwise quiet memory.
  time_forwards(plan, true, false, sd_draft);
  MPI_Barrier(MPI_COMM_WORLD);
  time_forwards(plan, false, true);
  MPI_Barrier(MPI_COMM_WORLD);
  // A separate draft rank also times its steps while the target verifies, as in SSD's
  // rounds, where the two share the node's memory bandwidth (and on a CPU host its cores).
  if (launch.draft && launch.spec.separate_draft) {
    plan.concurrent = true;
    plan.peer = is_target ? layout.draft_leader : layout.target_leader;
    plan.host_sampling = false;
    time_forwards(plan, true, true);
  }
}

// What one rank measures, in phases every rank enters together (memory, the host read, GEMMs,
// the all-reduce, the peer link, forward passes), so communication is timed on quiet ranks.
RankResults measure_rank(const CharacterizeConfig& c, Launch& launch, CharacterizeReport& report,
                         const std::vector<LinearShape>& target_shapes,
                         const std::vector<LinearShape>& draft_shapes) {
  RankResults mine;
  mine.rank = launch.layout.world_rank;
  mine.role =
      launch.layout.role_name() + (launch.holds_draft() && launch.is_target() ? " + draft" : "");
  measure_memory_phases(c, launch, report, mine);
  measure_gemm_phase(c, launch, mine, target_shapes, draft_shapes);
  measure_comm_phases(c, launch, mine);
  if (c.forward) time_forward_phases(c, launch, mine);
  MPI_Barrier(MPI_COMM_WORLD);
  return mine;
}

// Rank 0, with every rank's results: the verification window and the AR bound. A decode step
// only reads its weights: on the host, many independent read streams are its ceiling (copy
// bandwidth also counts the writes, which a decode step does not make).
void conclude(CharacterizeReport& report, const Backend& backend,
              const std::vector<LinearShape>& target_shapes) {
  const CharacterizeConfig& c = *report.config;
  std::vector<ForwardResult> forwards;
  for (const RankResults& r : report.ranks)
    forwards.insert(forwards.end(), r.forward.begin(), r.forward.end());
  report.window = verification_window(forwards, c.lookahead, c.batch_size);
  report.unsteady = unsteady_passes(forwards);
  const MemoryResult& memory = report.ranks.front().memory;
  report.decode_bytes = linear_bytes(target_shapes, int(dtype_size(report.target_dtype)));
  const bool host = backend.weights_in_host_memory() && report.host_read;
  report.bound_gbps = host ? report.host_read->gbps : memory.gbps;
  report.bound_source = host ? "host read bandwidth" : "device copy bandwidth";
  report.ar_bound_tok_s = c.batch_size * report.bound_gbps * 1e9 / report.decode_bytes;
  // The AR step as an AR run takes it: alone on its memory.
  if (const ForwardResult* ar = find_forward(forwards, "target", "ar", false))
    report.decode_ms = ar->seconds * 1e3;
  // A verification reads the same weights once for all its rows and multiplies each row by each
  // of them (2 FLOPs per parameter per row, at the peak of the compute its GEMMs run in).
  if (host && compute_peak(report))
    report.linear_params = report.decode_bytes / double(dtype_size(report.target_dtype));
  const ForwardResult* verify = find_forward(forwards, "target", "verify", false);
  if (report.linear_params > 0 && verify) {
    report.verify_rows = verify->rows;
    report.verify_gflop = 2.0 * verify->rows * report.linear_params / 1e9;
    report.verify_bound_ms = target_step_bound_ms(report, verify->rows);
    report.verify_ms = verify->seconds * 1e3;
  }
}

}  // namespace

const HostPeakResult* compute_peak(const CharacterizeReport& report) {
  const auto& peak = report.target_compute == "bf16"  ? report.host_bf16_dot
                     : report.target_compute == "amx" ? report.host_amx_bf16
                                                      : report.host_fma;
  return peak ? &*peak : nullptr;
}

const char* compute_peak_name(const CharacterizeReport& report) {
  return report.target_compute == "bf16"  ? "bf16 dot-product"
         : report.target_compute == "amx" ? "bf16 AMX tile"
                                          : "fp32 FMA";
}

double target_step_bound_ms(const CharacterizeReport& report, int rows) {
  const HostPeakResult* peak = compute_peak(report);
  if (!(report.linear_params > 0) || !peak || !(report.bound_gbps > 0)) return 0.0;
  const double read_ms = 1e3 * report.decode_bytes / (report.bound_gbps * 1e9);
  const double compute_ms = 1e3 * 2.0 * rows * report.linear_params / (peak->gflops * 1e9);
  return std::max(read_ms, compute_ms);
}

int run_characterize(const Cli& cli) {
  CharacterizeConfig c = cli.characterize;
  run_collectively(MPI_COMM_WORLD, [&] { check_ranks(c); });
  if (c.threads == 0) c.threads = default_threads_per_rank();
  const bool has_draft = !c.draft.empty();
  if (has_draft && c.branch_rows.empty())
    for (int m : {1, 2, 4, 8}) c.branch_rows.push_back(m * c.batch_size * (c.lookahead + 1));
  std::sort(c.branch_rows.begin(), c.branch_rows.end());
  c.branch_rows.erase(std::unique(c.branch_rows.begin(), c.branch_rows.end()), c.branch_rows.end());

  std::optional<ResultFile> file;
  // The run's launch, with the draft placed as a run with a draft would place it (separate when
  // a draft rank is launched, collocated on target rank 0 if not).
  Launch launch(launch_spec(c, c.draft_ranks > 0), [&](Launch& l) {
    check_positions(l.target_source->config(), c, "target");
    if (l.draft_source) check_positions(l.draft_source->config(), c, "draft");
    if (!has_draft && !cli.characterize.branch_rows.empty())
      throw InputError("--branch-rows: needs --draft (branch steps are the draft's)");
    if (l.layout.is_run_leader() && !c.out.empty())
      file.emplace(with_flag("--out", [&] { return ResultFile::create(c.out, c.overwrite); }));
  });
  launch.start_backend();
  // The verification of b x (K + 1) rows on the kernels a run would give it (a run keeps its
  // steps batch-invariant).
  if (launch.is_target())
    launch.backend().keep_batch_invariant_up_to(c.batch_size * (c.lookahead + 1));
  launch.load_models(c.forward);

  CharacterizeReport report;
  report.config = &c;
  report.info = launch.run_info();
  report.backend = launch.backend().name();
  report.target_tp = launch.layout.target_tp;
  report.draft_ranks = launch.layout.draft_ranks;
  report.draft_collocated = has_draft && !launch.spec.separate_draft;
  report.target_dtype = launch.target.weight_dtype;
  report.target_compute = launch.target.compute;
  const std::vector<LinearShape> target_shapes =
      linear_shapes(launch.target.config, launch.layout.target_tp);
  report.models.push_back({"target", launch.target, target_shapes});
  std::vector<LinearShape> draft_shapes;
  if (has_draft) {
    draft_shapes = linear_shapes(launch.draft->config, 1);
    report.models.push_back({"draft", *launch.draft, draft_shapes});
  }
  const bool leader = launch.layout.is_run_leader();
  if (leader) print_header(std::cout, report);

  report.ranks = gather_results(measure_rank(c, launch, report, target_shapes, draft_shapes));
  int out_of_bounds = 0;
  if (leader) {
    conclude(report, launch.backend(), target_shapes);
    out_of_bounds = print_tables(std::cout, report);
    if (file) write_characterize_file(*file, cli.argv, report);
    std::cout << "# Results: " << (c.out.empty() ? "not written (no --out)" : c.out) << "\n"
              << std::flush;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return out_of_bounds == 0 ? 0 : 1;
}

}  // namespace ssd
