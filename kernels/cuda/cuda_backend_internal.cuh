// Internal to kernels/cuda: what CudaBackend's source files share (cuda_backend.cu: device,
// memory and transfers; cuda_backend_ops.cu: the op entry points; cuda_backend_state.cu:
// staging and scratch memory). Included only by those .cu files.
#pragma once

#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/kernels.cuh"

#define SSD_CUBLAS_CHECK(call)                                                                  \
  do {                                                                                          \
    const cublasStatus_t ssd_cublas_status_ = (call);                                           \
    if (ssd_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                            \
      throw std::runtime_error(std::string("cuBLAS error: ") + #call +                          \
                               " failed: " + cublasGetStatusString(ssd_cublas_status_) + " (" + \
                               cublasGetStatusName(ssd_cublas_status_) + ") at " + __FILE__ +   \
                               ":" + std::to_string(__LINE__));                                 \
  } while (0)

namespace ssd {

namespace cuda_backend_detail {

using cuda_kernels::bf16;

// Device allocations and staging stretches start on this boundary.
inline constexpr size_t kStagingAlign = 256;

inline size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

inline bf16* data(Buffer& b) {
  return static_cast<bf16*>(b.data);
}
inline const bf16* data(const Buffer& b) {
  return static_cast<const bf16*>(b.data);
}

inline cublasHandle_t handle(void* h) {
  return static_cast<cublasHandle_t>(h);
}

// One word of a launch's signature (CudaBackend::note_launch): pointers by address, numbers by
// value (floats by their bits).
inline uint64_t word(const void* p) {
  return uint64_t(reinterpret_cast<uintptr_t>(p));
}
inline uint64_t word(int v) {
  return uint64_t(int64_t(v));
}
inline uint64_t word(size_t v) {
  return uint64_t(v);
}
inline uint64_t word(float v) {
  uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

// Which op a signature's launch belongs to.
enum OpCode : uint64_t {
  kOpEmbed = 1,
  kOpRmsnorm,
  kOpMatmul,
  kOpRope,
  kOpKvStore,
  kOpAttention,
  kOpSwiglu,
  kOpAdd,
  kOpAddBias,
  kOpCopy,
  kOpStage,
};

}  // namespace cuda_backend_detail

// What the backend owns besides its stream and cuBLAS handle.
struct CudaBackend::State {
  // Staging for host arrays passed to ops (tokens, positions, masks): a ring of pinned host
  // memory mirrored by device memory. Each upload copies into the next free stretch of the
  // pinned ring, enqueues the host->device copy of that stretch on the stream and records an
  // event. A stretch is reused only after the event of every earlier copy from it has
  // completed (the device side needs no wait: the new copy is stream-ordered after every kernel
  // that read the old contents).
  struct Pending {
    size_t begin, end;
    cudaEvent_t done;
  };
  // The last upload of each kind, kept while its stretch is not overwritten: the same mask or
  // positions passed again (every layer of a forward pass) reuse the device copy.
  struct Cached {
    std::vector<char> bytes;
    size_t begin = 0, end = 0;
    bool valid = false;
  };
  enum Kind { kTokens, kPositions, kMask, kSeqSlot, kKinds };

  char* host = nullptr;
  char* dev = nullptr;
  size_t capacity = 0, head = 0;
  std::deque<Pending> pending;
  std::vector<cudaEvent_t> spare_events;
  Cached cached[kKinds];
  std::vector<int32_t> mask_words;  // host assembly of a mask upload

  // Device scratch: fp32 staging for conversions, bf16 for overlapping copies, fp32 inverse
  // frequencies converted from a bf16 buffer without an fp32 shadow.
  float* f32 = nullptr;
  size_t f32_count = 0;
  void* copy_tmp = nullptr;
  size_t copy_bytes = 0;
  float* freq_tmp = nullptr;
  size_t freq_count = 0;

  // fp32 copies of small uploaded weights, by the weight's device pointer.
  std::unordered_map<const void*, float*> shadows;

  const void* stage(cudaStream_t stream, Kind kind, const void* src, size_t bytes);
  float* f32_scratch(cudaStream_t stream, size_t count);
  void* copy_scratch(cudaStream_t stream, size_t bytes);
  float* freq_scratch(cudaStream_t stream, size_t count);
  void release_all() noexcept;

 private:
  void grow(cudaStream_t stream, size_t bytes);
  void wait_for(size_t begin, size_t end);
};

// What run_recorded keeps between calls (cuda_graphs.cu).
struct CudaBackend::Recorder {
  struct Graph {
    std::vector<uint64_t> signature;
    cudaGraphExec_t exec = nullptr;
    uint64_t last_used = 0;
  };
  // The last staged input of each kind in this pass: the same bytes again reuse its place.
  struct LastInput {
    size_t offset = 0, bytes = 0;
    bool valid = false;
  };

  // The pass in progress: every launch's arguments, and whether all of its ops can be recorded.
  std::vector<uint64_t> signature;
  bool recordable = true;
  // The input arena: the host arguments of one call, uploaded in one copy before a replay.
  // `host` is pinned; `uploaded` marks when the last upload has read it.
  char* host = nullptr;
  size_t host_capacity = 0;
  char* dev = nullptr;
  size_t dev_capacity = 0;
  size_t bytes = 0;
  LastInput last[State::kKinds];
  cudaEvent_t uploaded = nullptr;

  std::unordered_map<uint64_t, std::vector<Graph>> graphs;  // by signature hash
  size_t graph_count = 0;
  uint64_t clock = 0;
  std::unordered_map<uint64_t, int> seen;  // signature hash -> calls not yet captured

  void begin_pass();
  size_t place(int kind, const void* src, size_t bytes, bool write);
  void reserve_host(size_t bytes);
  void grow_dev(cudaStream_t stream, size_t bytes);
  Graph* find(uint64_t key);
  void add(cudaStream_t stream, uint64_t key, std::vector<uint64_t> signature,
           cudaGraphExec_t exec);
  void release_all() noexcept;
};

}  // namespace ssd
