// Memory bandwidth: Backend::copy between two buffers well above the last-level cache (the
// number every rank reports, from its own backend), and the CPU read loop of the host (rank 0,
// kept from the single-rank characterize: a read-only stream is what a CPU decode step does),
// alone and with every rank of its node reading at once.
#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "characterize/parts.h"

namespace ssd {

MemoryResult measure_copy_bandwidth(Backend& backend, int64_t bytes, double min_time) {
  MemoryResult r;
  r.element_bytes = int64_t(backend.element_bytes());
  const size_t count = size_t(bytes / 2 / r.element_bytes);
  r.buffer_bytes = int64_t(count) * r.element_bytes;
  Buffer src = backend.alloc(count), dst = backend.alloc(count);
  // Non-zero source data, uploaded in slices so host memory stays small.
  const size_t slice = std::min<size_t>(count, size_t(1) << 22);
  const std::vector<float> values = random_floats(slice, 11, 1);
  for (size_t at = 0; at < count; at += slice)
    backend.from_host(src, at, values.data(), std::min(slice, count - at));
  const Timing t = time_calls(
      backend, [&] { backend.copy(dst, 0, src, 0, count); }, min_time);
  backend.release(src);
  backend.release(dst);
  r.passes = t.calls;
  r.best_s = t.best_s;
  r.mean_s = t.mean_s;
  r.gbps = 2.0 * double(r.buffer_bytes) / t.best_s / 1e9;
  r.mean_gbps = 2.0 * double(r.buffer_bytes) / t.mean_s / 1e9;
  return r;
}

namespace {

constexpr int kReadPasses = 3;
// measure_node_read's passes, each with every rank: their mean is its figure, not their best.
// Ten, --min-time apart: a 2-core guest's vCPUs were seen to move between sharing a die and not
// every few seconds, and the default 0.2 s spreads the passes over 2 s of it.
constexpr int kNodeReadPasses = 10;

// Internal, inlined helpers: without AVX, GCC's -Wpsabi note about passing 32-byte vectors
// concerns no ABI anyone links against.
#pragma GCC diagnostic ignored "-Wpsabi"
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
  const double t0 = omp_get_wtime();
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
  const double seconds = omp_get_wtime() - t0;
  g_sink = total;
  return double(bytes) / seconds / 1e9;
}

using ReadPass = double (*)(const float*, size_t, int);

ReadPass read_pass_for(int streams) {
  return streams >= 8   ? read_pass<8>
         : streams >= 4 ? read_pass<4>
         : streams >= 2 ? read_pass<2>
                        : read_pass<1>;
}

// Read bandwidth in GB/s (1e9 bytes): the best pass over 1, 2, 4 and 8 streams per thread.
std::pair<double, int> read_bandwidth(const float* p, size_t count, int threads) {
  std::pair<double, int> best{0.0, 1};
  int streams = 1;
  for (auto pass : {read_pass<1>, read_pass<2>, read_pass<4>, read_pass<8>}) {
    pass(p, count, threads);  // warm-up: thread pool, TLB
    for (int i = 0; i < kReadPasses; ++i)
      best = std::max(best, std::pair(pass(p, count, threads), streams));
    streams *= 2;
  }
  return best;
}

}  // namespace

std::vector<float> read_loop_buffer(int64_t bytes, int threads) {
  return random_floats(size_t(bytes) / sizeof(float) / 64 * 64, 7, threads);
}

HostReadResult measure_host_read(int64_t bytes, int threads) {
  HostReadResult r;
  const std::vector<float> buf = read_loop_buffer(bytes, threads);
  const size_t count = buf.size();
  r.bytes = int64_t(count * sizeof(float));
  r.threads = threads;
  std::tie(r.one_thread_gbps, r.one_thread_streams) = read_bandwidth(buf.data(), count, 1);
  std::tie(r.gbps, r.streams) = threads == 1 ? std::pair(r.one_thread_gbps, r.one_thread_streams)
                                             : read_bandwidth(buf.data(), count, threads);
  return r;
}

NodeReadResult measure_node_read(const std::vector<float>& buffer, int threads, int streams,
                                 double spacing_s) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  NodeReadResult r;
  MPI_Comm_size(node, &r.ranks);
  r.streams = streams;
  r.spacing_s = spacing_s;
  const ReadPass pass = read_pass_for(streams);
  pass(buffer.data(), buffer.size(), threads);  // warm-up: thread pool, TLB
  {
    NodeLatencyProbe probe(node);
    // A barrier before every pass, so that the ranks' passes overlap (one that ran ahead would
    // read part of its pass alone), and the mean of the passes: the rate while all read.
    double sum = 0.0;
    for (int i = 0; i < kNodeReadPasses; ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::duration<double>(spacing_s));
      NodeReadPass p;
      p.latency_ns = probe.farthest_ns();
      MPI_Barrier(node);
      const double rate = pass(buffer.data(), buffer.size(), threads);
      sum += rate;
      MPI_Allreduce(&rate, &p.gbps, 1, MPI_DOUBLE, MPI_SUM, node);
      r.passes.push_back(p);
    }
    const double mine = sum / kNodeReadPasses;
    MPI_Allreduce(&mine, &r.gbps, 1, MPI_DOUBLE, MPI_SUM, node);
    MPI_Allreduce(&mine, &r.min_rank_gbps, 1, MPI_DOUBLE, MPI_MIN, node);
    MPI_Allreduce(&mine, &r.max_rank_gbps, 1, MPI_DOUBLE, MPI_MAX, node);
  }
  MPI_Comm_free(&node);
  return r;
}

}  // namespace ssd
