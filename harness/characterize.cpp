// `ssd-bench characterize`: memory read bandwidth, GEMM throughput at the model's linear shapes
// (random matrices, so the model's weights are never loaded for this part and 70B shapes work),
// one real decode step when the model is small enough, and the AR decode bound they imply.
#include "harness/characterize.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "harness/hdf5_writer.h"
#include "harness/report.h"
#include "harness/run_info.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/errors.h"
#include "model/model.h"
#include "model/weights.h"

namespace ssd {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr size_t kBandwidthBytes = size_t(1) << 30;  // >> any L3
constexpr int kBandwidthPasses = 5;
constexpr size_t kMatrixCap = size_t(2) << 30;        // largest matrix measured whole
constexpr size_t kRotationBytes = size_t(256) << 20;  // weight copies cycled through per shape
constexpr double kMinGemmSeconds = 0.2;
constexpr double kDecodeLoadLimit = 8e9;  // fp32 weight bytes up to which a real step is timed
constexpr int kPrefillTokens = 16, kDecodeWarmup = 2, kDecodeSteps = 20;

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

// Uniform values in [-0.05, 0.05), filled in parallel.
std::vector<float> random_floats(size_t count, uint64_t seed, int threads) {
  std::vector<float> v(count);
  float* p = v.data();
  constexpr size_t kBlock = 1 << 16;
  const int64_t blocks = int64_t((count + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t b = 0; b < blocks; ++b) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + uint64_t(b) * 0xBF58476D1CE4E5B9ull + 1;
    const size_t end = std::min(count, size_t(b + 1) * kBlock);
    for (size_t i = size_t(b) * kBlock; i < end; ++i) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      p[i] = float(s >> 40) * (0.1f / 16777216.0f) - 0.05f;
    }
  }
  return v;
}

typedef float v8 __attribute__((vector_size(32)));
inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

volatile float g_sink;

// One pass summing `count` floats (a multiple of 64) with `threads` threads, each reading its
// share as S concurrent sequential streams (more streams keep more misses in flight); GB/s.
template <int S>
double read_pass(const float* p, size_t count, int threads) {
  const size_t blocks = count / 64;
  float total = 0.0f;
  size_t bytes = 0;
  const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total, bytes)
  {
    const size_t t = size_t(omp_get_thread_num()), n = size_t(omp_get_num_threads());
    const size_t begin = blocks * t / n, per = (blocks * (t + 1) / n - begin) / S;
    bytes += per * S * 64 * sizeof(float);
    v8 a[S][2] = {};
    for (size_t i = 0; i < per * 64; i += 64) {
      for (int s = 0; s < S; ++s) {
        const float* q = p + (begin + s * per) * 64 + i;
        a[s][0] += (load8(q) + load8(q + 8)) + (load8(q + 16) + load8(q + 24));
        a[s][1] += (load8(q + 32) + load8(q + 40)) + (load8(q + 48) + load8(q + 56));
      }
    }
    for (int s = 0; s < S; ++s)
      for (int k = 0; k < 8; ++k) total += a[s][0][k] + a[s][1][k];
  }
  const double seconds = since(t0);
  g_sink = total;
  return double(bytes) / seconds / 1e9;
}

// Read bandwidth in GB/s (1e9 bytes): the best pass over 1, 2, 4 and 8 streams per thread.
std::pair<double, int> read_bandwidth(const float* p, size_t count, int threads) {
  std::pair<double, int> best{0.0, 1};
  int streams = 1;
  for (auto pass : {read_pass<1>, read_pass<2>, read_pass<4>, read_pass<8>}) {
    pass(p, count, threads);  // warm-up: thread pool, TLB
    for (int i = 0; i < kBandwidthPasses; ++i)
      best = std::max(best, std::pair(pass(p, count, threads), streams));
    streams *= 2;
  }
  return best;
}

struct Shape {
  std::string name;
  int in = 0, out = 0;
  int per_token = 0;  // matrices of this shape one decode step multiplies by
};

// The distinct [out, in] shapes of the model's linear layers; equal shapes are merged.
std::vector<Shape> linear_shapes(const ModelConfig& c) {
  const int h = c.hidden_size, L = c.num_hidden_layers;
  const Shape all[] = {{"q_proj", h, c.q_dim(), L},
                       {"k/v_proj", h, c.kv_dim(), 2 * L},
                       {"o_proj", c.q_dim(), h, L},
                       {"gate/up_proj", h, c.intermediate_size, 2 * L},
                       {"down_proj", c.intermediate_size, h, L},
                       {"lm_head", h, c.vocab_size, 1}};
  std::vector<Shape> shapes;
  for (const Shape& s : all) {
    auto same = std::find_if(shapes.begin(), shapes.end(),
                             [&](const Shape& o) { return o.in == s.in && o.out == s.out; });
    if (same == shapes.end()) {
      shapes.push_back(s);
    } else {
      same->name += "+" + s.name;
      same->per_token += s.per_token;
    }
  }
  return shapes;
}

using GemmFn = void (*)(float*, const float*, const float*, int, int, int, int);
const std::pair<const char*, GemmFn> kKernels[] = {{"invariant", matmul_invariant},
                                                   {"openblas", matmul_openblas}};

struct GemmRow {
  int shape = 0, kernel = 0;
  int in = 0, out = 0, full_out = 0, rows = 0;
  double seconds = 0, gflops = 0, gbps = 0;
};

// Mean seconds per call, cycling through `copies` weight matrices spaced `stride` floats apart,
// so that each call reads its weights from memory as in a real decode step.
double time_gemm(GemmFn fn, const float* weights, size_t stride, int copies, const float* x,
                 float* out, int rows, int in, int out_dim, int threads) {
  fn(out, x, weights, rows, in, out_dim, threads);
  int calls = 0;
  const auto t0 = Clock::now();
  do {
    fn(out, x, weights + stride * size_t((calls + 1) % copies), rows, in, out_dim, threads);
    ++calls;
  } while (calls < 2 || since(t0) < kMinGemmSeconds);
  return since(t0) / calls;
}

std::vector<GemmRow> measure_gemms(const std::vector<Shape>& shapes, int rows, int threads,
                                   std::ostream& os) {
  std::vector<GemmRow> table;
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape& s = shapes[si];
    int out_dim = s.out;
    if (size_t(s.in) * s.out * sizeof(float) > kMatrixCap) {
      out_dim = std::max<int>(24, int(kMatrixCap / (size_t(s.in) * sizeof(float))) / 24 * 24);
      os << "# note: " << s.name << " " << s.in << "->" << s.out << " is "
         << human_bytes(double(s.in) * s.out * 4) << "; measuring a row slice of " << out_dim
         << " output rows (" << human_bytes(double(s.in) * out_dim * 4) << ")\n";
    }
    const size_t stride = (size_t(s.in) * out_dim + 15) / 16 * 16;
    const size_t bytes = stride * sizeof(float);
    const int copies = int(std::max<size_t>(1, (kRotationBytes + bytes - 1) / bytes));
    const std::vector<float> w = random_floats(stride * copies, si + 1, threads);
    const std::vector<float> x = random_floats(size_t(rows) * s.in, 1000 + si, threads);
    std::vector<float> out(size_t(rows) * out_dim);
    for (int k = 0; k < 2; ++k) {
      // A pool that just ran keeps spinning for a while (OpenBLAS ~0.1 s, libgomp less) and
      // would steal cores from the other kernel's threads: let it go to sleep first.
      if (threads > 1) std::this_thread::sleep_for(std::chrono::milliseconds(250));
      for (int m : rows == 1 ? std::vector<int>{1} : std::vector<int>{1, rows}) {
        GemmRow r{int(si), k, s.in, out_dim, s.out, m};
        r.seconds = time_gemm(kKernels[k].second, w.data(), stride, copies, x.data(), out.data(), m,
                              s.in, out_dim, threads);
        r.gflops = 2.0 * m * s.in * out_dim / r.seconds / 1e9;
        r.gbps = double(s.in) * out_dim * sizeof(float) / r.seconds / 1e9;
        table.push_back(r);
      }
    }
  }
  std::stable_sort(table.begin(), table.end(), [](const GemmRow& a, const GemmRow& b) {
    return std::tie(a.shape, a.rows) < std::tie(b.shape, b.rows);
  });
  return table;
}

// Loads the model and returns the mean ms of a one-token decode step (greedy, growing context).
double time_decode(WeightSource& source, int threads, double& load_s) {
  CpuBackend backend(threads);
  const auto load_start = Clock::now();
  Model model = load_model(source, backend);
  load_s = since(load_start);
  const int vocab = model.config.vocab_size;
  auto argmax = [](const auto& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); };
  KVCache cache = create_kv_cache(model, 1, kPrefillTokens + kDecodeWarmup + kDecodeSteps + 1);
  Activations acts;
  std::vector<float> logits;
  std::vector<int32_t> prompt(kPrefillTokens);
  for (int i = 0; i < kPrefillTokens; ++i) prompt[i] = int32_t((7919LL * i + 3) % vocab);
  ForwardBatch prefill;
  prefill.add_causal(0, 0, prompt, ForwardBatch::Logits::Last);
  forward(model, cache, prefill, acts, logits);
  cache.length[0] = kPrefillTokens;
  int32_t token = argmax(logits);
  double total = 0;
  for (int step = 0; step < kDecodeWarmup + kDecodeSteps; ++step) {
    const auto t0 = Clock::now();
    ForwardBatch batch;
    batch.add_causal(0, cache.length[0], {token}, ForwardBatch::Logits::Last);
    forward(model, cache, batch, acts, logits);
    token = argmax(logits);
    ++cache.length[0];
    if (step >= kDecodeWarmup) total += since(t0);
  }
  release_activations(acts, backend);
  release_kv_cache(cache, backend);
  release_model(model);
  return total / kDecodeSteps * 1e3;
}

// Bytes one AR decode step must read, fp32: every weight except the embedding table, of which
// only the token's row is read; a tied table is the LM head and is read whole.
double decode_bytes(const ModelConfig& c) {
  int64_t params = c.parameter_count();
  if (!c.tie_word_embeddings) params -= int64_t(c.vocab_size - 1) * c.hidden_size;
  return double(params) * sizeof(float);
}

}  // namespace

int run_characterize(const CharacterizeConfig& config) {
  const int threads = config.threads;
  if (threads < 1) throw InputError("--threads: must be at least 1");
  std::optional<ResultFile> file;
  if (!config.out.empty()) file.emplace(ResultFile::create(config.out, config.overwrite));
  std::unique_ptr<WeightSource> source;
  try {
    source = open_weight_source(config.target, 0);
  } catch (const InputError& e) {
    throw InputError("--target: " + std::string(e.what()));
  }
  const ModelConfig& mc = source->config();
  const double weight_bytes = double(mc.parameter_count()) * sizeof(float);
  std::ostream& os = std::cout;

  const RunInfo info = collect_run_info();
  os << "# ssd-bench " << info.version << " characterize (commit " << info.git_commit << ", "
     << info.build_type << ")\n";
  os << "# started " << info.start_time << " on " << info.host << ", CPU " << info.cpu_model << ", "
     << threads << " thread" << (threads == 1 ? "" : "s") << "\n# libraries:";
  for (const auto& [name, version] : info.libraries) os << " " << name << " " << version << ";";
  os << "\n# target: " << source->describe() << ": " << mc.model_type() << ", "
     << human_count(double(mc.parameter_count())) << " parameters, " << mc.num_hidden_layers
     << " layers, hidden " << mc.hidden_size << ", heads " << mc.num_attention_heads << "/"
     << mc.num_key_value_heads << ", vocab " << mc.vocab_size << ", "
     << (mc.tie_word_embeddings ? "tied" : "untied") << "; " << human_bytes(weight_bytes)
     << " fp32\n#\n"
     << std::flush;

  const size_t count = kBandwidthBytes / sizeof(float);
  std::vector<float> buf = random_floats(count, 7, threads);
  const auto [bw_one, streams_one] = read_bandwidth(buf.data(), count, 1);
  const auto [bw_all, streams_all] =
      threads == 1 ? std::pair(bw_one, streams_one) : read_bandwidth(buf.data(), count, threads);
  std::vector<float>().swap(buf);  // free it before the GEMMs
  os << "# memory read bandwidth (sum of a " << human_bytes(double(kBandwidthBytes))
     << " buffer, best of " << kBandwidthPasses
     << " passes x 1/2/4/8 streams per thread): 1 thread " << fmt("%.2f", bw_one) << " GB/s ("
     << streams_one << " streams)";
  if (threads > 1)
    os << ", " << threads << " threads " << fmt("%.2f", bw_all) << " GB/s (" << streams_all
       << " streams)";
  os << "\n#\n" << std::flush;

  const std::vector<Shape> shapes = linear_shapes(mc);
  os << "# GEMM out[rows][out] = x[rows][in] * W[out][in]^T, fp32, " << threads
     << " thread(s); each shape cycles through >= " << human_bytes(double(kRotationBytes))
     << " of weight copies so weights stream from memory; GB/s = weight bytes / time\n"
     << std::flush;
  const std::vector<GemmRow> table = measure_gemms(shapes, config.rows, threads, os);
  char line[256];
  std::snprintf(line, sizeof(line), "# %-22s %9s %9s %6s %9s %6s %12s %10s %9s\n", "shape", "in",
                "out", "rows", "kernel", "count", "ms/call", "GFLOP/s", "GB/s");
  os << line;
  double step_ms[2] = {0, 0};  // M=1 GEMM time of a whole decode step, per kernel
  for (const GemmRow& r : table) {
    const Shape& s = shapes[r.shape];
    std::snprintf(line, sizeof(line), "  %-22s %9d %9d %6d %9s %6d %12.4f %10.2f %9.2f\n",
                  s.name.c_str(), r.in, r.out, r.rows, kKernels[r.kernel].first, s.per_token,
                  r.seconds * 1e3, r.gflops, r.gbps);
    os << line;
    if (r.rows == 1)
      step_ms[r.kernel] += r.seconds * 1e3 * s.per_token * double(r.full_out) / r.out;
  }
  os << "#\n# count = matrices of the shape per decode step; sum of count x M=1 time: "
     << fmt("%.2f", step_ms[0]) << " ms invariant, " << fmt("%.2f", step_ms[1]) << " ms openblas\n";

  const double bytes = decode_bytes(mc);
  const double bound_tok_s = bw_all * 1e9 / bytes;
  os << "# AR decode bound: " << fmt("%.2f", bound_tok_s) << " tok/s (" << fmt("%.1f", bytes / 1e6)
     << " MB/token at " << fmt("%.2f", bw_all) << " GB/s) = " << fmt("%.3f", 1e3 / bound_tok_s)
     << " ms/token (weights only, KV cache not counted)\n"
     << std::flush;

  // One real decode step, when the model fits comfortably.
  double decode_ms = 0, load_s = 0;  // 0: not measured
  if (weight_bytes < kDecodeLoadLimit) {
    decode_ms = time_decode(*source, threads, load_s);
    const double tok_s = 1e3 / decode_ms;
    os << "# measured decode step: " << fmt("%.2f", tok_s)
       << " tok/s = " << fmt("%.1f", 100.0 * tok_s / bound_tok_s) << "% of bound ("
       << fmt("%.3f", decode_ms) << " ms/step, mean of " << kDecodeSteps << " steps after a "
       << kPrefillTokens << "-token prefill; invariant GEMM; load " << fmt("%.1f", load_s)
       << " s)\n";
  } else {
    os << "# measured decode step: skipped (" << human_bytes(weight_bytes) << " fp32 > "
       << human_bytes(kDecodeLoadLimit) << ")\n";
  }

  if (file) {
    ResultFile& f = *file;
    f.set_attr("/", "command", "characterize");
    f.set_attr("/", "version", info.version);
    f.set_attr("/", "git_commit", info.git_commit);
    f.set_attr("/", "start_time", info.start_time);
    f.set_attr("/", "host", info.host);
    f.set_attr("/", "cpu_model", info.cpu_model);
    f.set_attr("/", "target", config.target);
    f.set_attr("/", "target_description", source->describe());
    f.set_attr("/", "parameters", mc.parameter_count());
    f.set_attr("/", "threads", threads);
    f.set_attr("/", "rows", config.rows);
    f.set_attr("/", "bandwidth_buffer_bytes", kBandwidthBytes);
    f.set_attr("/", "bandwidth_gbps", bw_all);
    f.set_attr("/", "bandwidth_1thread_gbps", bw_one);
    f.set_attr("/", "bandwidth_streams_per_thread", streams_all);
    f.set_attr("/", "decode_bytes_per_token", bytes);
    f.set_attr("/", "ar_bound_tok_s", bound_tok_s);
    f.set_attr("/", "gemm_step_ms_invariant", step_ms[0]);
    f.set_attr("/", "gemm_step_ms_openblas", step_ms[1]);
    if (decode_ms > 0) {
      f.set_attr("/", "decode_ms_per_step", decode_ms);
      f.set_attr("/", "decode_fraction_of_bound", 1e3 / decode_ms / bound_tok_s);
    }
    // One column per GemmRow field. ResultFile has no string columns, so shape and kernel are
    // ids into the comma-separated "names" attribute of their column.
    auto column = [&](const std::string& name, auto get) {
      std::vector<decltype(get(table[0]))> values;
      for (const GemmRow& r : table) values.push_back(get(r));
      f.write_column("/gemm/" + name, values);
    };
    column("shape_id", [](const GemmRow& r) { return int32_t(r.shape); });
    column("kernel_id", [](const GemmRow& r) { return int32_t(r.kernel); });
    column("in", [](const GemmRow& r) { return int64_t(r.in); });
    column("out", [](const GemmRow& r) { return int64_t(r.out); });
    column("full_out", [](const GemmRow& r) { return int64_t(r.full_out); });
    column("rows", [](const GemmRow& r) { return int64_t(r.rows); });
    column("per_token", [&](const GemmRow& r) { return int64_t(shapes[r.shape].per_token); });
    column("seconds", [](const GemmRow& r) { return r.seconds; });
    column("gflops", [](const GemmRow& r) { return r.gflops; });
    column("gbps", [](const GemmRow& r) { return r.gbps; });
    std::string shape_names;
    for (const Shape& s : shapes) shape_names += (shape_names.empty() ? "" : ",") + s.name;
    f.set_dataset_attr("/gemm/shape_id", "names", shape_names);
    f.set_dataset_attr("/gemm/kernel_id", "names", "invariant,openblas");
    f.set_dataset_attr("/gemm/seconds", "units", "s per call");
    f.set_dataset_attr("/gemm/gbps", "units", "weight bytes / s / 1e9");
    f.commit();
  }
  os << "# Results: " << (config.out.empty() ? "not written (no --out)" : config.out) << "\n";
  return 0;
}

}  // namespace ssd
