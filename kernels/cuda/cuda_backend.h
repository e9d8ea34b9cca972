// The CUDA backend: bf16 weights, activations and KV cache with fp32 accumulation, all work on
// one dedicated stream of one GPU.
//
// Buffers: Buffer::data is device memory, Buffer::count is in elements, every element is a
// __nv_bfloat16 (weights, activations, KV cache alike). to_host/from_host/upload_weight convert
// from and to fp32. The one exception is internal: upload_weight also keeps an fp32 copy of
// small tensors (<= kFp32ShadowMax elements), which rope() reads for the inverse frequencies,
// since bf16 frequencies would put the angle position * inv_freq off by up to 2^-9 * position
// radians (HF, too, keeps inv_freq in fp32).
//
// Ordering: every op is enqueued on stream() and returns without waiting, except the transfers
// to or from host memory (to_host, from_host, upload_weight), which return once the host memory
// has been read or written, like the CPU backend. Host-side arrays passed to ops (tokens,
// positions, the AttentionMask) are copied into the backend's own staging memory before the op
// returns, so callers may reuse them at once.
//
// GEMM (matmul): two kernels.
//   - rows <= invariant_max_rows() (default 64: decode, verification, branch decoding): our
//     batch-invariant kernel. Each output element out[r][j] is one dot product summed in an
//     order fixed by `in` alone (per-thread 8-wide chunks in k order, then a fixed warp
//     butterfly, then the 4 warps' partials in a fixed tree), never by `rows` or by which other
//     rows share the call. A row's logits are therefore bit-identical in a 1-row decode, a
//     K+1-row verification and a many-row branch batch: greedy SD == AR token for token.
//     CudaGemm::AutoTc / InvariantTc (--gemm invariant-tc) run the same contract on the tensor
//     cores instead (matmul_tc_kernel.cu; another fixed order, so its bits differ from the
//     default's). Since its loads go through a cp.async ring (2026-12-04) it is the faster
//     kernel at every row count on an H200: one-row steps 1-2% (8B) and 4-5% (1B) shorter,
//     5, 16 and 32 rows 0.82, 0.45 and 0.34 of the default's time (docs/gpu-notes.md). It stays
//     a choice because it is another multiply: the default (--compute f32) is fp32 FMAs, each
//     add rounded as IEEE fp32; the tensor cores' fp32 sums are the MMA unit's own.
//   - rows > invariant_max_rows() (prefill): cuBLAS (cublasGemmEx, bf16 in and out, fp32
//     compute, tensor cores). cuBLAS may choose a different algorithm for each M, so these rows
//     are not batch-invariant; AR and SD issue the identical prefill call for the same prompt,
//     so their prefill results agree anyway. Calls with more than invariant_max_rows() rows that
//     must be invariant (a verification of batch * (K+1) > 64 rows) need a larger threshold:
//     the run raises it to its largest step (keep_batch_invariant_up_to).
//
// Graphs (run_recorded, cuda_graphs.cu): a forward pass is hundreds of small launches, and a
// decode step of a 1B model spent more time launching them than the GPU spent on them.
// run_recorded first runs the ops in a collect pass that checks their arguments, copies their
// host arguments into an input arena and notes every launch's arguments (the signature), but
// launches nothing. A signature seen before is a CUDA graph already captured: one upload of the
// arena and one graph launch replace the launches. A signature seen for the second time is
// captured then (a shape seen once runs op by op). A replay is the same launches with the same
// arguments, so its results are those of running the ops one by one, bit for bit.
// SSD_CUDA_GRAPHS=0 in the environment (or set_graphs(false)) runs every op as it comes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"

namespace ssd {

// Auto: the invariant kernel up to invariant_max_rows() rows, cuBLAS above (the default).
// Invariant: the invariant kernel for every call (bit-exact for any batch shape, slow prefill).
// Cublas: cuBLAS for every call (throughput studies; not batch-invariant).
// AutoTc, InvariantTc: as Auto and Invariant with the tensor-core invariant kernel.
enum class CudaGemm { Auto, Invariant, Cublas, AutoTc, InvariantTc };

class CudaBackend final : public Backend {
 public:
  // Tensors of at most this many elements also keep an fp32 copy on the device (see above).
  static constexpr size_t kFp32ShadowMax = 1024;
  static constexpr int kDefaultInvariantMaxRows = 64;

  // Binds to CUDA device `device` (creating its stream and cuBLAS handle). `threads` is only
  // reported by threads() (the host-side work is single-threaded). Throws std::runtime_error
  // when the device cannot be used.
  explicit CudaBackend(int device, int threads = 1, CudaGemm gemm = CudaGemm::Auto);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  std::string device_name() const override;  // e.g. "NVIDIA H100 80GB HBM3"
  // "NVIDIA H100 80GB HBM3 (cuda:0, PCI 0000:1B:00.0, cc 9.0)"
  std::string device_description() const override;
  std::string gpu_model() const override { return device_description(); }
  // The CUDA driver, runtime and cuBLAS (cuda_versions(), kernels/cuda/cuda_device.h).
  std::vector<std::pair<std::string, std::string>> library_versions() const override;
  int threads() const override { return threads_; }
  size_t element_bytes() const override { return 2; }  // bf16

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  int sm_count() const { return sm_count_; }
  CudaGemm gemm() const { return gemm_; }
  int invariant_max_rows() const { return invariant_max_rows_; }
  void set_invariant_max_rows(int rows);
  // Raises invariant_max_rows() to `rows` (never lowers it).
  void keep_batch_invariant_up_to(int rows) override;

  // CUDA graphs for run_recorded (on unless SSD_CUDA_GRAPHS=0; see above).
  bool graphs() const { return graphs_; }
  void set_graphs(bool on);
  // What run_recorded has done: graphs captured, replays of a captured graph, and calls run op
  // by op (shapes seen once, calls with a cuBLAS GEMM, graphs off).
  struct GraphStats {
    int64_t captures = 0, replays = 0, op_by_op = 0;
  };
  GraphStats graph_stats() const { return graph_stats_; }

  Buffer alloc(size_t count) override;
  void release(Buffer& buffer) override;
  Buffer upload_weight(const float* host, size_t count) override;
  DType weight_storage(DType) const override { return DType::BF16; }  // every weight is bf16
  // Every kernel takes bf16 x and w: the CUDA-core kernel (invariant) widens them and runs fp32
  // FMAs, the tensor-core kernel (invariant-tc) and cuBLAS multiply bf16 x bf16 -> fp32. Under
  // Auto "f32" is the multi-row steps' kernel; prefill past invariant_max_rows() is cuBLAS's.
  std::string compute_for(DType) const override {
    return gemm_ == CudaGemm::Auto || gemm_ == CudaGemm::Invariant ? "f32" : "bf16";
  }
  bool weights_in_host_memory() const override { return false; }
  void to_host(float* dst, const Buffer& src, size_t offset, size_t count) override;
  void from_host(Buffer& dst, size_t offset, const float* src, size_t count) override;
  void copy(Buffer& dst, size_t dst_offset, const Buffer& src, size_t src_offset,
            size_t count) override;
  void synchronize() override;
  void run_recorded(const std::function<void()>& ops) override;

  void embed(Buffer& out, const Buffer& table, const int32_t* tokens, int rows, int dim) override;
  void rmsnorm(Buffer& out, const Buffer& x, const Buffer& weight, int rows, int dim,
               float eps) override;
  void matmul(Buffer& out, const Buffer& x, const Buffer& w, int rows, int in,
              int out_dim) override;
  void rope(Buffer& x, const int32_t* positions, int rows, int heads, int head_dim,
            const Buffer& inv_freq) override;
  void kv_store(Buffer& k_cache, Buffer& v_cache, const KVLayout& layout, const Buffer& k,
                const Buffer& v, const AttentionMask& mask) override;
  void kv_move(Buffer& k_cache, Buffer& v_cache, const KVLayout& layout, int src_seq, int src_slot,
               int dst_seq, int dst_slot, int count) override;
  void attention(Buffer& out, const Buffer& q, const Buffer& k_cache, const Buffer& v_cache,
                 const KVLayout& layout, int heads, const AttentionMask& mask) override;
  void swiglu(Buffer& out, const Buffer& gate, const Buffer& up, size_t count) override;
  void add(Buffer& x, const Buffer& y, size_t count) override;
  void add_bias(Buffer& x, const Buffer& bias, int rows, int dim) override;

  // The GEMM with an explicit kernel choice (tests, benchmarks); matmul() picks by gemm().
  void matmul_with(CudaGemm kernel, Buffer& out, const Buffer& x, const Buffer& w, int rows, int in,
                   int out_dim);

  // Makes this backend's device current on the calling thread (every method does this itself;
  // code that calls the CUDA runtime directly next to a backend may need it).
  void make_current() const;

 private:
  struct State;     // staging memory, scratch buffers, fp32 shadows (cuda_backend_internal.cuh)
  struct Recorder;  // run_recorded's input arena, signature and graphs (cuda_graphs.cu)
  // Eager: ops launch as they come. Collect: ops check, stage and note, but launch nothing.
  // Capture: ops launch into a stream capture.
  enum class Pass { Eager, Collect, Capture };

  void matmul_cublas(Buffer& out, const Buffer& x, const Buffer& w, int rows, int in, int out_dim);
  const int32_t* upload_mask(const AttentionMask& mask);
  // A host argument's device copy: the staging ring when eager, the recorder's arena otherwise.
  const void* stage_input(int kind, const void* src, size_t bytes);
  // Every op calls this with its launch arguments just before launching: false in a collect
  // pass (the op returns without launching), true otherwise.
  bool note_launch(std::initializer_list<uint64_t> words);
  // An op that cannot be recorded (a cuBLAS GEMM) calls this: false in a collect pass (the
  // call will run op by op), true when eager.
  bool recordable_launch();
  void collect_pass(const std::function<void()>& ops);
  void capture_graph(const std::function<void()>& ops);

  int device_ = 0;
  int threads_ = 1;
  CudaGemm gemm_ = CudaGemm::Auto;
  int invariant_max_rows_ = kDefaultInvariantMaxRows;
  int sm_count_ = 1;
  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  void* cublas_ = nullptr;  // cublasHandle_t
  std::unique_ptr<State> state_;
  bool graphs_ = true;
  Pass pass_ = Pass::Eager;
  GraphStats graph_stats_;
  std::unique_ptr<Recorder> recorder_;
};

// Times work on a backend's stream with CUDA events: start() and stop() record events on
// stream(); elapsed_ms() waits for the stop event and returns the time between them.
class CudaTimer {
 public:
  explicit CudaTimer(const CudaBackend& backend);
  ~CudaTimer();
  CudaTimer(const CudaTimer&) = delete;
  CudaTimer& operator=(const CudaTimer&) = delete;
  void start();
  void stop();
  double elapsed_ms();

 private:
  int device_;
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// out[i] = sum over r in [0, ranks) of gathered[r * count + i], added in rank order in fp32 and
// rounded to bf16 once (NCCL all-reduce; see comm/nccl_all_reduce.cpp). Both pointers are
// device bf16 arrays; enqueued on `stream`.
void cuda_sum_ranks_bf16(void* out, const void* gathered, size_t count, int ranks,
                         cudaStream_t stream);

}  // namespace ssd
