// CudaBackend::run_recorded: CUDA graphs for a forward pass (see cuda_backend.h, "Graphs").
//
// A call runs `ops` up to three times, each a different pass (CudaBackend::Pass):
//   1. Collect, always: the ops check their arguments, put their host arguments into the input
//      arena and note their launches' arguments into the signature; nothing is launched.
//   2. Capture, the second time a signature is seen: the ops launch into a stream capture, which
//      becomes the signature's graph. They stage the same inputs at the same arena offsets (the
//      collect pass fixed them), so the graph reads its inputs from the device arena.
//   3. Eager, where there is no graph to replay: the ops run one by one as without recording.
// A replay is one copy of the arena to the device and one graph launch. The signature holds
// every pointer and size a launch was given (buffers, scratch, the arena), so a graph is only
// replayed where the ops would launch exactly what it holds: a reallocated buffer, a grown
// scratch or a different shape is a different signature.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_internal.cuh"
#include "kernels/cuda/cuda_check.h"

namespace ssd {

using namespace cuda_backend_detail;

namespace {

// A shape runs op by op until it has been seen this often (one-off shapes, such as SSD branch
// batches of an unusual size, are not worth a capture that costs more than it saves).
constexpr int kCaptureAtCall = 2;
// Graphs kept; the least recently replayed goes first.
constexpr size_t kMaxGraphs = 64;
// Shapes counted before capture; the counts are forgotten past this many.
constexpr size_t kMaxSeen = 4096;
constexpr size_t kArenaInitial = size_t(1) << 16;

uint64_t hash_words(const std::vector<uint64_t>& words) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
  for (uint64_t w : words) {
    h ^= w;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

// --- the recorder ---

void CudaBackend::Recorder::begin_pass() {
  signature.clear();
  recordable = true;
  bytes = 0;
  for (LastInput& l : last) l.valid = false;
}

size_t CudaBackend::Recorder::place(int kind, const void* src, size_t n, bool write) {
  LastInput& l = last[kind];
  if (l.valid && l.bytes == n && (n == 0 || std::memcmp(host + l.offset, src, n) == 0))
    return l.offset;
  const size_t offset = bytes;
  const size_t end = offset + round_up(std::max<size_t>(n, 1), kStagingAlign);
  if (write) {
    reserve_host(end);
    if (n > 0) std::memcpy(host + offset, src, n);
  } else if (end > host_capacity) {
    throw std::logic_error("CudaBackend::run_recorded: a capture staged more than its collect");
  }
  bytes = end;
  l = LastInput{offset, n, true};
  return offset;
}

void CudaBackend::Recorder::reserve_host(size_t n) {
  if (n <= host_capacity) return;
  const size_t want = std::max({n, 2 * host_capacity, kArenaInitial});
  char* grown = nullptr;
  SSD_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&grown), want));
  if (host) {
    std::memcpy(grown, host, bytes);  // this pass's inputs so far
    SSD_CUDA_CHECK(cudaFreeHost(host));
  }
  host = grown;
  host_capacity = want;
}

void CudaBackend::Recorder::grow_dev(cudaStream_t stream, size_t n) {
  if (n <= dev_capacity && dev) return;
  const size_t want = std::max({n, 2 * dev_capacity, kArenaInitial});
  // Graphs read the old arena: wait for them, then drop them (their signatures name it anyway).
  SSD_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (auto& [key, list] : graphs)
    for (Graph& g : list) SSD_CUDA_CHECK(cudaGraphExecDestroy(g.exec));
  graphs.clear();
  graph_count = 0;
  if (dev) SSD_CUDA_CHECK(cudaFree(dev));
  dev = nullptr;
  dev_capacity = 0;
  SSD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dev), want));
  dev_capacity = want;
}

CudaBackend::Recorder::Graph* CudaBackend::Recorder::find(uint64_t key) {
  auto it = graphs.find(key);
  if (it == graphs.end()) return nullptr;
  for (Graph& g : it->second)
    if (g.signature == signature) {
      g.last_used = ++clock;
      return &g;
    }
  return nullptr;
}

void CudaBackend::Recorder::add(cudaStream_t stream, uint64_t key, std::vector<uint64_t> sig,
                                cudaGraphExec_t exec) {
  if (graph_count >= kMaxGraphs) {
    auto oldest_list = graphs.end();
    size_t oldest = 0;
    for (auto it = graphs.begin(); it != graphs.end(); ++it)
      for (size_t i = 0; i < it->second.size(); ++i)
        if (oldest_list == graphs.end() ||
            it->second[i].last_used < oldest_list->second[oldest].last_used) {
          oldest_list = it;
          oldest = i;
        }
    // A launch of it may still be in flight.
    SSD_CUDA_CHECK(cudaStreamSynchronize(stream));
    SSD_CUDA_CHECK(cudaGraphExecDestroy(oldest_list->second[oldest].exec));
    oldest_list->second.erase(oldest_list->second.begin() + std::ptrdiff_t(oldest));
    if (oldest_list->second.empty()) graphs.erase(oldest_list);
    --graph_count;
  }
  graphs[key].push_back(Graph{std::move(sig), exec, ++clock});
  ++graph_count;
}

void CudaBackend::Recorder::release_all() noexcept {
  // Called with the stream already synchronised; errors are ignored (destructor path).
  for (auto& [key, list] : graphs)
    for (Graph& g : list) cudaGraphExecDestroy(g.exec);
  graphs.clear();
  graph_count = 0;
  if (uploaded) cudaEventDestroy(uploaded);
  if (host) cudaFreeHost(host);
  if (dev) cudaFree(dev);
  uploaded = nullptr;
  host = dev = nullptr;
  host_capacity = dev_capacity = 0;
}

// --- the backend's side ---

void CudaBackend::set_graphs(bool on) {
  graphs_ = on;
}

const void* CudaBackend::stage_input(int kind, const void* src, size_t bytes) {
  if (pass_ == Pass::Eager)
    return state_->stage(stream_, static_cast<State::Kind>(kind), src, bytes);
  const size_t offset = recorder_->place(kind, src, bytes, pass_ == Pass::Collect);
  recorder_->signature.insert(recorder_->signature.end(),
                              {kOpStage, uint64_t(kind), uint64_t(offset), uint64_t(bytes)});
  return recorder_->dev + offset;
}

bool CudaBackend::note_launch(std::initializer_list<uint64_t> words) {
  if (pass_ == Pass::Eager) return true;
  std::vector<uint64_t>& s = recorder_->signature;
  s.insert(s.end(), words);
  s.push_back(uint64_t(words.size()));  // ends the op: no two op sequences read alike
  return pass_ == Pass::Capture;
}

bool CudaBackend::recordable_launch() {
  if (pass_ == Pass::Eager) return true;
  if (pass_ == Pass::Capture)
    throw std::logic_error("CudaBackend::run_recorded: an unrecordable op in a capture");
  recorder_->recordable = false;
  return false;
}

void CudaBackend::collect_pass(const std::function<void()>& ops) {
  recorder_->begin_pass();
  pass_ = Pass::Collect;
  try {
    ops();
  } catch (...) {
    pass_ = Pass::Eager;
    throw;
  }
  pass_ = Pass::Eager;
}

void CudaBackend::capture_graph(const std::function<void()>& ops) {
  Recorder& r = *recorder_;
  std::vector<uint64_t> collected = std::move(r.signature);
  const size_t collected_bytes = r.bytes;
  r.begin_pass();
  // Thread-local: other threads of the process (MPI progress, a draft's own backend) may keep
  // calling the runtime while this stream is captured.
  SSD_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  pass_ = Pass::Capture;
  cudaGraph_t graph = nullptr;
  try {
    ops();
  } catch (...) {
    pass_ = Pass::Eager;
    cudaStreamEndCapture(stream_, &graph);
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  pass_ = Pass::Eager;
  SSD_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  if (r.signature != collected || r.bytes != collected_bytes) {
    cudaGraphDestroy(graph);
    throw std::logic_error(
        "CudaBackend::run_recorded: the ops launched differently in two passes over the same "
        "arguments");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  SSD_CUDA_CHECK(status);
  // The key first: add() takes the signature by value, moved from.
  const uint64_t key = hash_words(r.signature);
  r.add(stream_, key, std::move(r.signature), exec);
  r.signature = std::move(collected);
  ++graph_stats_.captures;
}

void CudaBackend::run_recorded(const std::function<void()>& ops) {
  if (!graphs_ || pass_ != Pass::Eager) {
    ops();
    return;
  }
  make_current();
  if (!recorder_) recorder_ = std::make_unique<Recorder>();
  Recorder& r = *recorder_;
  if (!r.uploaded) SSD_CUDA_CHECK(cudaEventCreateWithFlags(&r.uploaded, cudaEventDisableTiming));
  r.grow_dev(stream_, kArenaInitial);
  // The last replay's upload must have read the host arena before this call rewrites it.
  SSD_CUDA_CHECK(cudaEventSynchronize(r.uploaded));

  collect_pass(ops);
  if (r.recordable && r.bytes > r.dev_capacity) {
    r.grow_dev(stream_, r.bytes);
    collect_pass(ops);  // the arena moved, and the signature names it
  }
  if (!r.recordable) {
    ++graph_stats_.op_by_op;
    ops();
    return;
  }
  const uint64_t key = hash_words(r.signature);
  Recorder::Graph* graph = r.find(key);
  if (!graph) {
    if (r.seen.size() >= kMaxSeen) r.seen.clear();
    if (++r.seen[key] < kCaptureAtCall) {
      ++graph_stats_.op_by_op;
      ops();
      return;
    }
    r.seen.erase(key);
    capture_graph(ops);
    graph = r.find(key);
    if (!graph) throw std::logic_error("CudaBackend::run_recorded: a captured graph went missing");
  } else {
    ++graph_stats_.replays;
  }
  if (r.bytes > 0)
    SSD_CUDA_CHECK(cudaMemcpyAsync(r.dev, r.host, r.bytes, cudaMemcpyHostToDevice, stream_));
  SSD_CUDA_CHECK(cudaEventRecord(r.uploaded, stream_));
  SSD_CUDA_CHECK(cudaGraphLaunch(graph->exec, stream_));
}

}  // namespace ssd
