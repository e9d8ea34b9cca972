// characterize's HDF5 file (docs/hdf5-schema.md, "Characterize files"): the run files' root,
// /config, /libraries, /ranks and /models metadata, the headline numbers as root attributes
// (the names the single-rank characterize used are kept for analysis/), and one table per
// measurement. String columns are ids into a comma-separated `names` attribute, as ResultFile
// has no string columns.
#include <algorithm>

#include "characterize/parts.h"
#include "harness/machine_info.h"
#include "harness/result_metadata.h"

namespace ssd {
namespace {

// Appends the id of `name` in `names`, adding it on first sight.
int32_t id_of(std::vector<std::string>& names, const std::string& name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return int32_t(i);
  names.push_back(name);
  return int32_t(names.size() - 1);
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

// One table from `rows`: column(name, getter) writes a column, ids(name, getter) an id column
// with its names attribute.
template <typename Row>
struct Table : RecordColumns<Row> {
  template <typename Get>
  void ids(const std::string& name, Get get) {
    std::vector<std::string> names;
    std::vector<int32_t> values;
    for (const Row& r : this->records) values.push_back(id_of(names, get(r)));
    this->file.write_column(this->group + "/" + name, values);
    this->file.set_dataset_attr(this->group + "/" + name, "names", joined(names));
  }
};

void write_metadata(ResultFile& f, const std::vector<std::string>& argv,
                    const CharacterizeReport& r) {
  RootMetadata m{"characterize", argv, describe(*r.config), false, {}};
  for (const CharacterizeModel& model : r.models) m.models.emplace_back(model.role, &model.summary);
  write_root_metadata(f, m, r.info);
  f.set_attr("/", "command", "characterize");  // what the single-rank characterize wrote
}

// What was characterized: the models, the layout, the decoding shape, the copy bandwidth.
void write_setup_headline(ResultFile& f, const CharacterizeReport& r) {
  const CharacterizeConfig& c = *r.config;
  const RankResults& rank0 = r.ranks.front();
  const CharacterizeModel& target = r.models.front();
  f.set_attr("/", "target", c.target);
  f.set_attr("/", "target_description", target.summary.description);
  f.set_attr("/", "parameters", int64_t(target.summary.config.parameter_count()));
  f.set_attr("/", "draft", c.draft.empty() ? "none" : c.draft);
  f.set_attr("/", "backend", r.backend);
  f.set_attr("/", "element_bytes", rank0.memory.element_bytes);
  f.set_attr("/", "threads", c.threads);
  f.set_attr("/", "rows", c.rows);
  f.set_attr("/", "target_tp", r.target_tp);
  f.set_attr("/", "draft_ranks", r.draft_ranks);
  f.set_attr("/", "lookahead", c.lookahead);
  f.set_attr("/", "batch_size", c.batch_size);
  f.set_attr("/", "context", c.context);
  f.set_attr("/", "bandwidth_gbps", rank0.memory.gbps);
  f.set_attr("/", "bandwidth_buffer_bytes", rank0.memory.buffer_bytes);
}

// The host's read bandwidth and compute peaks, where measured.
void write_host_headline(ResultFile& f, const CharacterizeReport& r) {
  if (r.host_read) {
    f.set_attr("/", "host_read_gbps", r.host_read->gbps);
    f.set_attr("/", "bandwidth_1thread_gbps", r.host_read->one_thread_gbps);
    f.set_attr("/", "bandwidth_streams_per_thread", r.host_read->streams);
  }
  if (r.node_read) {
    f.set_attr("/", "node_read_gbps", r.node_read->gbps);
    f.set_attr("/", "node_read_ranks", r.node_read->ranks);
    f.set_attr("/", "node_read_min_rank_gbps", r.node_read->min_rank_gbps);
    f.set_attr("/", "node_read_max_rank_gbps", r.node_read->max_rank_gbps);
    std::vector<double> ns;
    for (const NodeReadPass& p : r.node_read->passes) ns.push_back(p.latency_ns);
    std::sort(ns.begin(), ns.end());
    f.set_attr("/", "node_latency_min_ns", ns.front());
    f.set_attr("/", "node_latency_median_ns",
               ns.size() % 2 ? ns[ns.size() / 2] : (ns[ns.size() / 2 - 1] + ns[ns.size() / 2]) / 2);
    f.set_attr("/", "node_latency_max_ns", ns.back());
  }
  if (r.host_fma) {
    f.set_attr("/", "host_fma_gflops", r.host_fma->gflops);
    f.set_attr("/", "host_fma_1thread_gflops", r.host_fma->one_thread_gflops);
    f.set_attr("/", "host_fma_lanes", r.host_fma->lanes);
  }
  if (r.host_bf16_dot) {
    f.set_attr("/", "host_bf16_dot_gflops", r.host_bf16_dot->gflops);
    f.set_attr("/", "host_bf16_dot_1thread_gflops", r.host_bf16_dot->one_thread_gflops);
    f.set_attr("/", "host_bf16_dot_lanes", r.host_bf16_dot->lanes);
  }
  if (r.host_amx_bf16) {
    f.set_attr("/", "host_amx_bf16_gflops", r.host_amx_bf16->gflops);
    f.set_attr("/", "host_amx_bf16_1thread_gflops", r.host_amx_bf16->one_thread_gflops);
    f.set_attr("/", "host_amx_bf16_lanes", r.host_amx_bf16->lanes);
  }
  f.set_attr("/", "target_compute", r.target_compute);
  if (const HostPeakResult* peak = compute_peak(r)) {  // the peak the bounds are taken at
    f.set_attr("/", "compute_peak", compute_peak_name(r));
    f.set_attr("/", "compute_peak_gflops", peak->gflops);
  }
}

// The verification's and the AR step's bounds, against the measured steps.
void write_bounds_headline(ResultFile& f, const CharacterizeReport& r) {
  const CharacterizeConfig& c = *r.config;
  if (r.verify_bound_ms > 0) {
    f.set_attr("/", "verify_rows", r.verify_rows);
    f.set_attr("/", "verify_bound_ms", r.verify_bound_ms);
    f.set_attr("/", "verify_ms", r.verify_ms);
  }
  f.set_attr("/", "decode_bytes_per_token", r.decode_bytes);
  f.set_attr("/", "unsteady_passes", int64_t(r.unsteady.size()));
  std::string unsteady;
  for (const std::string& line : r.unsteady) unsteady += (unsteady.empty() ? "" : "; ") + line;
  f.set_attr("/", "unsteady", unsteady);
  f.set_attr("/", "target_weight_dtype", dtype_name(r.target_dtype));
  f.set_attr("/", "ar_bound_gbps", r.bound_gbps);
  f.set_attr("/", "ar_bound_bandwidth", r.bound_source);
  f.set_attr("/", "ar_bound_tok_s", r.ar_bound_tok_s);
  // Linear-layer GEMM time of one AR step on rank 0: count x time at the decode rows, a sliced
  // shape scaled to its full size.
  double step_ms = 0.0;
  for (const GemmResult& g : r.ranks.front().gemm)
    if (g.model == "target" && g.rows == c.batch_size)
      step_ms += g.seconds * 1e3 * double(g.per_token) * double(g.full_out) / double(g.out);
  f.set_attr("/", "gemm_step_ms", step_ms);
  f.set_attr("/", "gemm_step_ms_" + c.gemm, step_ms);
  if (r.decode_ms > 0) {
    f.set_attr("/", "decode_ms_per_step", r.decode_ms);
    f.set_attr("/", "decode_fraction_of_bound",
               1e3 * c.batch_size / r.ar_bound_tok_s / r.decode_ms);
  }
}

// The all-reduce's and the peer link's latency (smallest message) and peak bandwidth.
void write_comm_headline(ResultFile& f, const CharacterizeReport& r) {
  const RankResults& rank0 = r.ranks.front();
  if (!rank0.all_reduce.empty()) {
    double peak = 0.0;
    for (const CommResult& x : rank0.all_reduce) peak = std::max(peak, x.busbw_gbps);
    f.set_attr("/", "all_reduce_latency_s", rank0.all_reduce.front().seconds);
    f.set_attr("/", "all_reduce_busbw_gbps", peak);
  }
  if (!rank0.p2p.empty()) {
    double peak = 0.0;
    for (const CommResult& x : rank0.p2p) peak = std::max(peak, x.algbw_gbps);
    f.set_attr("/", "p2p_latency_s", rank0.p2p.front().seconds);
    f.set_attr("/", "p2p_bandwidth_gbps", peak);
  }
}

// The verification window: its steps and fan-out limit (fanout_budget) at the root, the rest
// under /window.
void write_window_headline(ResultFile& f, const CharacterizeReport& r) {
  const CharacterizeConfig& c = *r.config;
  const VerificationWindow& w = r.window;
  if (!w.present) return;
  f.set_attr("/", "verification_window_steps", w.window_steps);
  f.set_attr("/", "fanout_budget", w.window_fanout_limit);
  f.set_attr("/window", "verify_time_s", w.verify_s);
  f.set_attr("/window", "glue_time_s", w.glue_s);
  f.set_attr("/window", "draft_time_s", w.draft_s);
  f.set_attr("/window", "t_sd", w.t_sd);
  f.set_attr("/window", "branch_rows", w.base_rows);
  f.set_attr("/window", "branch_time_s", w.branch_s);
  f.set_attr("/window", "window_steps", w.window_steps);
  f.set_attr("/window", "branch_step_a_s", w.step_a_s);
  f.set_attr("/window", "branch_step_b_s", w.step_b_s);
  f.set_attr("/window", "fanout_budget", w.window_fanout_limit);
  f.set_attr("/window", "budget_rows", w.window_limit_rows);
  f.set_attr("/window", "lookahead", c.lookahead);
  f.set_attr("/window", "batch_size", c.batch_size);
}

// The headline numbers, at the root where analysis/ and the single-rank characterize keep them.
void write_headline(ResultFile& f, const CharacterizeReport& r) {
  write_setup_headline(f, r);
  write_host_headline(f, r);
  write_bounds_headline(f, r);
  write_comm_headline(f, r);
  write_window_headline(f, r);
}

void write_tables(ResultFile& f, const CharacterizeReport& r) {
  std::vector<MemoryResult> memory;
  std::vector<GemmResult> gemm;
  std::vector<ForwardResult> forward;
  for (const RankResults& rank : r.ranks) {
    memory.push_back(rank.memory);
    gemm.insert(gemm.end(), rank.gemm.begin(), rank.gemm.end());
    forward.insert(forward.end(), rank.forward.begin(), rank.forward.end());
  }
  Table<MemoryResult> m{f, "/memory", memory};
  m.column("rank", [](const MemoryResult& x) { return int32_t(x.rank); });
  m.column("element_bytes", [](const MemoryResult& x) { return x.element_bytes; });
  m.column("buffer_bytes", [](const MemoryResult& x) { return x.buffer_bytes; });
  m.column("passes", [](const MemoryResult& x) { return int64_t(x.passes); });
  m.column("best_s", [](const MemoryResult& x) { return x.best_s; });
  m.column("mean_s", [](const MemoryResult& x) { return x.mean_s; });
  m.column("gbps", [](const MemoryResult& x) { return x.gbps; });
  m.column("mean_gbps", [](const MemoryResult& x) { return x.mean_gbps; });

  if (!gemm.empty()) {
    Table<GemmResult> g{f, "/gemm", gemm};
    g.column("rank", [](const GemmResult& x) { return int32_t(x.rank); });
    g.ids("model_id", [](const GemmResult& x) { return x.model; });
    g.ids("shape_id", [](const GemmResult& x) { return x.shape; });
    g.ids("kernel_id", [](const GemmResult& x) { return x.kernel; });
    g.ids("purpose_id", [](const GemmResult& x) { return x.purpose; });
    g.column("in", [](const GemmResult& x) { return x.in; });
    g.column("out", [](const GemmResult& x) { return x.out; });
    g.column("full_out", [](const GemmResult& x) { return x.full_out; });
    g.column("rows", [](const GemmResult& x) { return x.rows; });
    g.column("per_token", [](const GemmResult& x) { return x.per_token; });
    g.column("element_bytes", [](const GemmResult& x) { return x.element_bytes; });
    g.column("seconds", [](const GemmResult& x) { return x.seconds; });
    g.column("gflops", [](const GemmResult& x) { return x.gflops; });
    g.column("gbps", [](const GemmResult& x) { return x.gbps; });
    f.set_dataset_attr("/gemm/seconds", "units", "s per call");
    f.set_dataset_attr("/gemm/gbps", "units", "weight bytes / s / 1e9");
  }
  const RankResults& rank0 = r.ranks.front();
  if (!rank0.all_reduce.empty()) {
    Table<CommResult> a{f, "/all_reduce", rank0.all_reduce};
    a.column("bytes", [](const CommResult& x) { return x.bytes; });
    a.column("iterations", [](const CommResult& x) { return int64_t(x.iterations); });
    a.column("seconds", [](const CommResult& x) { return x.seconds; });
    a.column("algbw_gbps", [](const CommResult& x) { return x.algbw_gbps; });
    a.column("busbw_gbps", [](const CommResult& x) { return x.busbw_gbps; });
    f.set_attr("/all_reduce", "ranks", r.target_tp);
  }
  if (!rank0.p2p.empty()) {
    Table<CommResult> p{f, "/p2p", rank0.p2p};
    p.column("bytes", [](const CommResult& x) { return x.bytes; });
    p.column("wire_bytes", [](const CommResult& x) { return x.wire_bytes; });
    p.column("iterations", [](const CommResult& x) { return int64_t(x.iterations); });
    p.column("seconds", [](const CommResult& x) { return x.seconds; });
    p.column("gbps", [](const CommResult& x) { return x.algbw_gbps; });
    f.set_attr("/p2p", "target_rank", int64_t(0));
    f.set_attr("/p2p", "draft_rank", int64_t(r.target_tp));
  }
  if (r.node_read) {
    Table<NodeReadPass> n{f, "/node_read", r.node_read->passes};
    n.column("latency_ns", [](const NodeReadPass& x) { return x.latency_ns; });
    n.column("gbps", [](const NodeReadPass& x) { return x.gbps; });
    f.set_attr("/node_read", "ranks", int64_t(r.node_read->ranks));
    f.set_attr("/node_read", "spacing_s", r.node_read->spacing_s);
    f.set_dataset_attr("/node_read/latency_ns", "units", "ns one way, before the pass");
    f.set_dataset_attr("/node_read/gbps", "units", "the node's ranks' rates summed, 1e9 B/s");
  }
  if (!forward.empty()) {
    Table<ForwardResult> t{f, "/forward", forward};
    t.column("rank", [](const ForwardResult& x) { return int32_t(x.rank); });
    t.ids("model_id", [](const ForwardResult& x) { return x.model; });
    t.ids("kind_id", [](const ForwardResult& x) { return x.kind; });
    t.column("rows", [](const ForwardResult& x) { return int64_t(x.rows); });
    t.column("sequences", [](const ForwardResult& x) { return int64_t(x.sequences); });
    t.column("context", [](const ForwardResult& x) { return int64_t(x.context); });
    t.column("calls", [](const ForwardResult& x) { return int64_t(x.calls); });
    t.column("seconds", [](const ForwardResult& x) { return x.seconds; });
    t.column("best_seconds", [](const ForwardResult& x) { return x.best_seconds; });
    t.column("concurrent", [](const ForwardResult& x) { return int32_t(x.concurrent); });
  }
}

}  // namespace

void write_characterize_file(ResultFile& f, const std::vector<std::string>& argv,
                             const CharacterizeReport& r) {
  write_metadata(f, argv, r);
  write_machine_group(f, r.info);
  write_headline(f, r);
  write_tables(f, r);
  f.commit();
}

}  // namespace ssd
