// characterize's console output, in the style of nccl-tests: '#' header lines (build, settings,
// models, rank layout), then per measurement a '#' title and column line and one aligned row
// per result, then the derived numbers and the check line.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <ostream>

#include "characterize/parts.h"
#include "harness/cache_domains.h"

namespace ssd {
namespace {

std::string format(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* f, ...) {
  char buf[512];
  va_list args;
  va_start(args, f);
  std::vsnprintf(buf, sizeof(buf), f, args);
  va_end(args);
  return buf;
}

bool positive(double x) {
  return std::isfinite(x) && x > 0.0;
}

void describe_model(std::ostream& os, const CharacterizeModel& m) {
  const ModelConfig& c = m.summary.config;
  os << "# " << m.role << ": " << m.summary.description << ": " << c.model_type() << ", "
     << human_count(double(c.parameter_count())) << " parameters, " << c.num_hidden_layers
     << " layers, hidden " << c.hidden_size << ", heads " << c.num_attention_heads << "/"
     << c.num_key_value_heads << ", vocab " << c.vocab_size << ", "
     << (c.tie_word_embeddings ? "tied" : "untied") << "; " << dtype_name(m.summary.weight_dtype)
     << " weights, " << m.summary.compute << " compute"
     << (m.summary.load_s > 0 ? format("; loaded in %.2f s", m.summary.load_s) : "") << "\n";
}

int print_memory(std::ostream& os, const CharacterizeReport& r) {
  int bad = 0;
  os << "# memory bandwidth: Backend::copy between two buffers, best and mean of the passes; "
        "GB/s = (bytes read + bytes written) / time / 1e9\n";
  os << format("# %5s  %-20s %5s %12s %7s %10s %10s %10s %10s\n", "rank", "role", "elem", "buffer",
               "passes", "best ms", "mean ms", "GB/s best", "GB/s mean");
  for (const RankResults& rank : r.ranks) {
    const MemoryResult& m = rank.memory;
    os << format("  %5d  %-20s %5lld %12s %7d %10.3f %10.3f %10.2f %10.2f\n", m.rank,
                 rank.role.c_str(), (long long)m.element_bytes,
                 human_bytes(double(m.buffer_bytes)).c_str(), m.passes, m.best_s * 1e3,
                 m.mean_s * 1e3, m.gbps, m.mean_gbps);
    bad += !positive(m.gbps) + !positive(m.mean_gbps);
  }
  if (r.host_read) {
    const HostReadResult& h = *r.host_read;
    os << format(
        "# host read bandwidth (world rank 0's CPU summing a %s buffer, best of 1/2/4/8 streams "
        "per thread): 1 thread %.2f GB/s (%d streams)",
        human_bytes(double(h.bytes)).c_str(), h.one_thread_gbps, h.one_thread_streams);
    if (h.threads > 1)
      os << format(", %d threads %.2f GB/s (%d streams)", h.threads, h.gbps, h.streams);
    os << "\n";
    bad += !positive(h.gbps);
  }
  if (r.node_read) {
    const NodeReadResult& n = *r.node_read;
    double low = n.passes.front().gbps, high = low;
    for (const NodeReadPass& p : n.passes)
      low = std::min(low, p.gbps), high = std::max(high, p.gbps);
    os << format(
        "# node read bandwidth (the %d ranks on world rank 0's node each summing a buffer of its "
        "own at once, %d streams per thread, mean of %zu passes started together %.2g s apart): "
        "%.2f GB/s together (%.2f-%.2f a pass), %.2f-%.2f a rank",
        n.ranks, n.streams, n.passes.size(), n.spacing_s, n.gbps, low, high, n.min_rank_gbps,
        n.max_rank_gbps);
    if (r.host_read) os << format(", %.2fx world rank 0's alone", n.gbps / r.host_read->gbps);
    os << "\n# node placement (one-way latency of a cache line from the node's first rank's core "
          "to the farthest other rank's, taken before each pass, and the GB/s together):";
    for (const NodeReadPass& p : n.passes) {
      os << format("%s %.0f ns %.1f", &p == &n.passes.front() ? "" : ",", p.latency_ns, p.gbps);
      bad += !positive(p.latency_ns) + !positive(p.gbps);
    }
    os << "\n";
    bad += !positive(n.gbps) + !positive(n.min_rank_gbps);
  }
  const auto peak = [&](const std::optional<HostPeakResult>& h, const char* what,
                        const char* instruction) {
    if (!h) return;
    const bool chosen = compute_peak(r) == &*h;
    os << format(
        "# host %s peak (world rank 0's CPU, %d-lane %s on registers only%s): 1 "
        "thread %.1f GFLOP/s",
        what, h->lanes, instruction, chosen ? "; the floors' peak" : "", h->one_thread_gflops);
    if (h->threads > 1) os << format(", %d threads %.1f GFLOP/s", h->threads, h->gflops);
    os << "\n";
    bad += !positive(h->gflops);
  };
  peak(r.host_fma, "fp32 FMA", "FMAs");
  peak(r.host_bf16_dot, "bf16 dot-product", "vdpbf16ps, 4 FLOPs per lane,");
  peak(r.host_amx_bf16, "bf16 AMX tile", "TDPBF16PS, 64 FLOPs per accumulator,");
  return bad;
}

int print_gemm(std::ostream& os, const CharacterizeReport& r) {
  int bad = 0;
  os << "#\n# GEMM out[rows][out] = x[rows][in] * W[out][in]^T through Backend::matmul, weights "
        "cycled through >= 256 MB of copies so they stream from memory; count = matrices per "
        "forward pass; GB/s = weight bytes / time\n";
  os << format("# %5s  %-6s %-22s %7s %7s %6s %-14s %-9s %5s %10s %9s %8s\n", "rank", "model",
               "shape", "in", "out", "rows", "purpose", "kernel", "count", "ms/call", "GFLOP/s",
               "GB/s");
  for (const RankResults& rank : r.ranks)
    for (const GemmResult& g : rank.gemm) {
      os << format("  %5d  %-6s %-22s %7lld %7lld %6lld %-14s %-9s %5lld %10.4f %9.2f %8.2f\n",
                   g.rank, g.model.c_str(), g.shape.c_str(), (long long)g.in, (long long)g.out,
                   (long long)g.rows, g.purpose.c_str(), g.kernel.c_str(), (long long)g.per_token,
                   g.seconds * 1e3, g.gflops, g.gbps);
      if (g.out != g.full_out)
        os << format("#        (%s has %lld output rows; a slice of %lld was measured)\n",
                     g.shape.c_str(), (long long)g.full_out, (long long)g.out);
      bad += !positive(g.seconds) + !positive(g.gflops);
    }
  return bad;
}

int print_comm(std::ostream& os, const CharacterizeReport& r) {
  int bad = 0;
  const std::vector<CommResult>& ar = r.ranks.front().all_reduce;
  if (!ar.empty()) {
    os << "#\n# target all-reduce over " << r.target_tp << " ranks, through the run's AllReduce ("
       << (r.backend == "cuda" ? "NCCL" : "MPI")
       << "); time = slowest rank; busbw = algbw * 2(n-1)/n (nccl-tests)\n";
    os << format("# %12s %12s %7s %12s %12s %12s\n", "size (B)", "count", "iters", "time (us)",
                 "algbw (GB/s)", "busbw (GB/s)");
    double peak = 0.0;
    for (const CommResult& c : ar) {
      os << format("  %12lld %12lld %7d %12.2f %12.3f %12.3f\n", (long long)c.bytes,
                   (long long)(c.bytes / r.ranks.front().memory.element_bytes), c.iterations,
                   c.seconds * 1e6, c.algbw_gbps, c.busbw_gbps);
      peak = std::max(peak, c.busbw_gbps);
      bad += !positive(c.seconds) + !positive(c.busbw_gbps);
    }
    os << format("# all-reduce latency %.2f us (%lld B), peak bus bandwidth %.3f GB/s\n",
                 ar.front().seconds * 1e6, (long long)ar.front().bytes, peak);
  }
  const std::vector<CommResult>& p2p = r.ranks.front().p2p;
  if (!p2p.empty()) {
    os << "#\n# draft<->target point to point, world rank 0 <-> " << r.target_tp
       << ", over PeerLink with the decoding loop's messages (an outcome out, a speculation "
          "back); one way = half a round trip\n";
    os << format("# %12s %12s %7s %14s %10s\n", "size (B)", "wire (B)", "iters", "one way (us)",
                 "GB/s");
    double peak = 0.0;
    for (const CommResult& c : p2p) {
      os << format("  %12lld %12lld %7d %14.2f %10.3f\n", (long long)c.bytes,
                   (long long)c.wire_bytes, c.iterations, c.seconds * 1e6, c.algbw_gbps);
      peak = std::max(peak, c.algbw_gbps);
      bad += !positive(c.seconds) + !positive(c.algbw_gbps);
    }
    os << format(
        "# point-to-point latency %.2f us (%lld B on the wire), peak bandwidth %.3f GB/s\n",
        p2p.front().seconds * 1e6, (long long)p2p.front().wire_bytes, peak);
  }
  return bad;
}

int print_forward(std::ostream& os, const CharacterizeReport& r) {
  const CharacterizeConfig& c = *r.config;
  int bad = 0;
  bool any = false;
  for (const RankResults& rank : r.ranks) any = any || !rank.forward.empty();
  if (!any) return 0;
  os << "#\n# forward passes with the models: " << c.batch_size << " sequence(s) of " << c.context
     << " committed tokens, K = " << c.lookahead
     << "; ar = 1 token per sequence, verify = K+1, draft = 1, glue = K+1, branch = SSD's "
        "branch-masked step; host = the CPU work per logits row (argmax, sample = softmax + "
        "draw, candidates = top 64); sd = SD's collocated round, verify then K draft steps on "
        "one rank; timed alone (AR, SD) or beside = while the other model's rank timed its own "
        "(SSD); ms = per call in the median of 5 batches, a model's ar, verify, draft, glue, rows "
        "and branch batches taken in turns (sd, ssd: mean over the rounds); best = "
        "fastest batch of calls; per verify = floor(window's verify / ms)\n";
  os << format("# %5s  %-6s %-10s %6s %5s %6s %6s %-6s %10s %10s %11s\n", "rank", "model", "kind",
               "rows", "seqs", "ctx", "calls", "timed", "ms", "ms best", "per verify");
  for (const RankResults& rank : r.ranks)
    for (const ForwardResult& f : rank.forward) {
      const std::string fits = f.model == "draft" && r.window.verify_s > 0
                                   ? std::to_string(int(std::floor(r.window.verify_s / f.seconds)))
                                   : "-";
      os << format("  %5d  %-6s %-10s %6d %5d %6d %6d %-6s %10.3f %10.3f %11s\n", f.rank,
                   f.model.c_str(), f.kind.c_str(), f.rows, f.sequences, f.context, f.calls,
                   f.concurrent ? "beside" : "alone", f.seconds * 1e3, f.best_seconds * 1e3,
                   fits.c_str());
      bad += !positive(f.seconds);
    }
  return bad;
}

}  // namespace

void print_header(std::ostream& os, const CharacterizeReport& r) {
  const RunInfo& info = r.info;
  os << "# ssd-bench " << info.version << " characterize (commit " << info.git_commit << ", "
     << info.build_type << ")\n";
  os << "# started " << info.start_time << " on " << info.host << ", CPU " << info.cpu_model
     << ", GPU " << info.gpu_model << "\n# libraries:";
  for (const auto& [name, version] : info.libraries) os << " " << name << " " << version << ";";
  os << "\n#\n# settings:";
  int column = 0;
  for (const auto& [name, value] : describe(*r.config)) {
    if (column++ % 6 == 0) os << "\n#  ";
    os << " " << name << "=" << value;
  }
  os << "\n";
  for (const CharacterizeModel& m : r.models) describe_model(os, m);
  if (r.draft_collocated)
    os << "# the draft is collocated: measured on target rank 0 (launch --target-tp + 1 ranks "
          "for a draft rank)\n";
  os << "#\n# rank layout:\n";
  os << format("# %5s  %-24s %-20s %8s  %-32s %7s  %s\n", "rank", "role", "host", "pid", "device",
               "threads", "cpus");
  for (const RankInfo& i : info.ranks)
    os << format("# %5d  %-24s %-20s %8d  %-32s %7d  %s\n", i.rank, i.role.c_str(), i.host.c_str(),
                 i.pid, i.device.substr(0, 32).c_str(), i.threads,
                 i.cpus.empty() ? "?" : i.cpus.c_str());
  for (const std::string& warning : affinity_warnings(info.ranks))
    os << "# Warning: " << warning << "\n";
  // characterize times SSD's rounds, the draft building beside the target's verification.
  for (const std::string& warning : shared_cache_warnings(info.ranks, true))
    os << "# Warning: " << warning << "\n";
  os << "#\n" << std::flush;
}

namespace {

// Every target step of several rows timed alone at the run's context, against its floor: how
// much of what a verification (K+1 rows) or a batch's (b(K+1)) costs over an AR step is the
// hardware's and how much the kernels'. On a CPU the FMAs take over from the weight reading at a
// few rows, so the floor, not only the measurement, rises with rows.
void print_row_floors(std::ostream& os, const CharacterizeReport& r) {
  if (!(target_step_bound_ms(r, 1) > 0) || !(r.decode_ms > 0)) return;
  const double ar_bound_ms = 1e3 * r.config->batch_size / r.ar_bound_tok_s;
  std::vector<const ForwardResult*> steps;
  for (const ForwardResult& f : r.ranks.front().forward)
    if (f.model == "target" && !f.concurrent && f.context == r.config->context &&
        (f.kind == "verify" || f.kind == "rows" || f.kind == "sequences"))
      steps.push_back(&f);
  if (steps.empty()) return;
  std::stable_sort(steps.begin(), steps.end(), [](const ForwardResult* a, const ForwardResult* b) {
    return a->rows < b->rows;
  });
  os << format(
      "# target steps of more rows (timed alone, context %d, %s compute), rows: floor in AR bound "
      "steps (the weight reading, or the rows' multiply-adds at the %s peak of %.1f GFLOP/s, "
      "whichever is longer) / measured in measured AR steps:",
      r.config->context, r.target_compute.c_str(), compute_peak_name(r), compute_peak(r)->gflops);
  for (size_t i = 0; i < steps.size(); ++i) {
    const ForwardResult& f = *steps[i];
    const std::string of = f.kind == "sequences" ? format(" (%d sequences)", f.sequences) : "";
    os << format("%s %d%s %.2f/%.2f", i == 0 ? "" : ",", f.rows, of.c_str(),
                 target_step_bound_ms(r, f.rows) / ar_bound_ms, f.seconds * 1e3 / r.decode_ms);
  }
  os << "\n";
}

}  // namespace

int print_tables(std::ostream& os, const CharacterizeReport& r) {
  int bad = print_memory(os, r) + print_gemm(os, r) + print_comm(os, r) + print_forward(os, r);
  const CharacterizeConfig& c = *r.config;
  const VerificationWindow& w = r.window;
  os << "#\n";
  if (w.present) {
    os << format(
        "# draft step %.3f ms vs verify %.3f ms, as SD's round takes them (each after the "
        "other): K = %d draft steps take %.3f of a verification (T_SD)\n",
        w.sd_draft_s * 1e3, w.sd_verify_s * 1e3, c.lookahead, w.t_sd);
    os << format(
        "# verification window: verify %.3f ms / draft branch step (%d rows) %.3f ms = %d branch "
        "steps (timed side by side, as SSD overlaps them, where a draft rank was launched)\n",
        w.verify_s * 1e3, w.base_rows, w.branch_s * 1e3, w.window_steps);
    os << format(
        "# branch step ~ a + b * rows = %.4f ms + %.4f us/row (least squares); glue step "
        "%.3f ms\n",
        w.step_a_s * 1e3, w.step_b_s * 1e6, w.glue_s * 1e3);
    os << format(
        "# largest hidden fan-out budget: %d per sequence (%d rows per branch step): the "
        "glue step and K = %d branch steps within 90%% of the verification (--budget auto "
        "may spend more when it pays: it maximises Corollary 16's rate, ssd/budget.h)\n",
        w.window_fanout_limit, w.window_limit_rows, c.lookahead);
    bad += !positive(w.verify_s) + !positive(w.branch_s);
  } else if (c.forward && !c.draft.empty()) {
    os << "# verification window: not measured\n";
  }
  if (positive(r.decode_bytes)) {
    const double bound_ms = 1e3 * c.batch_size / r.ar_bound_tok_s;
    os << format(
        "# AR decode bound (rank 0's target shard): %s of %s linear weights per step at "
        "%.2f GB/s (%s; copy %.2f GB/s) = %.3f ms/step, %.2f tok/s",
        human_bytes(r.decode_bytes).c_str(), dtype_name(r.target_dtype).c_str(), r.bound_gbps,
        r.bound_source.c_str(), r.ranks.front().memory.gbps, bound_ms, r.ar_bound_tok_s);
    if (r.decode_ms > 0)
      os << format("; measured AR step %.3f ms = %.1f%% of the bound", r.decode_ms,
                   100.0 * bound_ms / r.decode_ms);
    os << "\n";
  }
  if (r.verify_bound_ms > 0 && compute_peak(r)) {
    os << format(
        "# verification bound (%g rows): the AR bound's weight reading, or %.2f GFLOP at the "
        "%s peak of %.1f GFLOP/s, whichever is longer = %.3f ms = %.2f AR bound steps; "
        "measured verification %.3f ms = %.1f%% of the bound, %.2f measured AR steps\n",
        r.verify_rows, r.verify_gflop, compute_peak_name(r), compute_peak(r)->gflops,
        r.verify_bound_ms, r.verify_bound_ms * r.ar_bound_tok_s / (1e3 * r.config->batch_size),
        r.verify_ms, 100.0 * r.verify_bound_ms / r.verify_ms,
        r.decode_ms > 0 ? r.verify_ms / r.decode_ms : 0.0);
  }
  print_row_floors(os, r);
  os << "# Out of bounds values : " << bad << (bad == 0 ? " OK" : " FAILED")
     << " (measurements that are not positive and finite)\n";
  // A warning, not a failure: the figures are what the host gave, but not what it gives alone.
  if (c.forward) {
    os << "# Unsteady passes : " << r.unsteady.size()
       << (r.unsteady.empty()
               ? " OK (no pass of more rows timed over 5% below one of fewer, and SSD's "
                 "rounds within 20% of their passes timed beside)"
               : " WARNING: the host was disturbed while they were timed; run "
                 "characterize again before predicting from this file:");
    for (size_t i = 0; i < r.unsteady.size(); ++i) os << (i == 0 ? " " : "; ") << r.unsteady[i];
    os << "\n";
  }
  return bad;
}

}  // namespace ssd
