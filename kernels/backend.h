// The backend interface: every operation the transformer forward pass needs, implemented once
// per device (kernels/cpu, kernels/cuda). The forward pass and everything above it only ever
// hold Buffer handles and call these methods, so orchestration code never knows where it runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/dtype.h"

namespace ssd {

// A handle to memory owned by a backend: host memory for the CPU backend, device memory for
// CUDA. `count` is in elements; the element type is the backend's business (fp32 on CPU,
// bf16 on CUDA), callers only ever move fp32 in and out through to_host/from_host.
struct Buffer {
  void* data = nullptr;
  size_t count = 0;
  // The stored element type, where the backend keeps weights in more than one (the CPU keeps
  // each weight in the checkpoint's type); fp32 for everything else.
  DType dtype = DType::F32;
  // A matrix the backend laid out for its own GEMM (upload_matrix): only matmul reads it.
  bool packed = false;
};

// Which KV-cache slots each query row of an attention call may see. Row r belongs to cache
// sequence seq[r], wrote its own K/V into slot[r], and attends to slots [0, prefix[r]) of that
// sequence plus the explicit slots extra_slots[extra_begin[r] .. extra_begin[r+1]).
// Plain causal decoding uses prefix = own slot + 1 and no extras; SSD branch decoding uses the
// committed prefix plus the slots of the branch's own path (paper, Figure 8 / Appendix B.1).
struct AttentionMask {
  int rows = 0;
  const int32_t* seq = nullptr;
  const int32_t* slot = nullptr;
  const int32_t* prefix = nullptr;
  const int32_t* extra_begin = nullptr;  // rows + 1 entries
  const int32_t* extra_slots = nullptr;
};

// Shape of one layer of the KV cache: [sequences][capacity slots][kv_heads * head_dim] for K
// and the same for V.
struct KVLayout {
  int sequences = 0;
  int capacity = 0;
  int kv_heads = 0;
  int head_dim = 0;
  size_t elements() const { return size_t(sequences) * capacity * kv_heads * head_dim; }
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;         // "cpu", "cuda"
  virtual std::string device_name() const = 0;  // CPU model or GPU name
  virtual int threads() const = 0;
  // The device as the console header and the rank table show it: the CPU model, or
  // "NVIDIA H100 80GB HBM3 (cuda:0, PCI 0000:1B:00.0, cc 9.0)" (which GPU of a node, not only
  // which kind).
  virtual std::string device_description() const { return device_name(); }
  // The GPU this backend computes on, described as device_description() does; "" for a backend
  // that runs on the host's cores (results record "none" then).
  virtual std::string gpu_model() const { return {}; }
  // {name, version} of the libraries the backend itself calls, e.g. {"cublas", "13.0.2"}, for
  // the console header and the result file's /libraries. What every run links (OpenBLAS, MPI)
  // is reported elsewhere, so the CPU backend has none of its own.
  virtual std::vector<std::pair<std::string, std::string>> library_versions() const { return {}; }
  // Bytes one stored element takes (4 for fp32, 2 for bf16): what a weight read moves.
  virtual size_t element_bytes() const { return sizeof(float); }

  // --- memory ---
  virtual Buffer alloc(size_t count) = 0;  // zero-initialised activation/cache memory
  virtual void release(Buffer& buffer) = 0;
  // Uploads a weight tensor given in fp32; the backend stores it in its weight format.
  virtual Buffer upload_weight(const float* host, size_t count) = 0;
  // The same, asking for `storage` (the checkpoint's type, or --weight-dtype): a backend that
  // keeps one weight format for everything ignores the request (see weight_storage).
  virtual Buffer upload_weight_as(const float* host, size_t count, DType /*storage*/) {
    return upload_weight(host, count);
  }
  // A weight matrix, HF [out_dim, in], that enters matmul as `w` (and embed as `table`, a
  // tied embedding; never to_host or copy): the backend may lay it out for its GEMM, and its
  // embed then reads that layout. By default it is stored as upload_weight_as stores it.
  virtual Buffer upload_matrix(const float* host, int out_dim, int in, DType storage) {
    return upload_weight_as(host, size_t(out_dim) * size_t(in), storage);
  }
  // A weight given as bf16 bits (a bf16 checkpoint's, WeightSource::read_bf16_into): a matrix
  // [rows, cols] stored as upload_matrix stores it, or else stored as upload_weight_as stores
  // rows * cols values, where uploads_bf16(storage, matrix). Exactly what their fp32 values
  // would give (every bf16 widens to fp32 and rounds back to itself), without the widening. A
  // backend that does not take them throws std::logic_error; the loader then widens to fp32.
  virtual bool uploads_bf16(DType /*storage*/, bool /*matrix*/) const { return false; }
  virtual Buffer upload_bf16(const uint16_t* /*host*/, int /*rows*/, int /*cols*/,
                             DType /*storage*/, bool /*matrix*/) {
    throw std::logic_error("upload_bf16: this backend takes weights in fp32");
  }
  // The type a weight requested as `storage` is actually kept in.
  virtual DType weight_storage(DType storage) const { return storage; }
  // What the GEMMs multiply a matrix kept as `storage` in: "f32" (weights widened, fp32
  // products) or "bf16" (activations rounded to bf16, bf16 x bf16 products summed in fp32). For
  // the header, /config and characterize.
  virtual std::string compute_for(DType /*storage*/) const { return "f32"; }
  // Whether weights live in the host's memory, so that a decode step is bound by what the
  // host's cores can read (a GPU backend's bound is its device memory).
  virtual bool weights_in_host_memory() const { return true; }
  virtual void to_host(float* dst, const Buffer& src, size_t offset, size_t count) = 0;
  virtual void from_host(Buffer& dst, size_t offset, const float* src, size_t count) = 0;
  virtual void copy(Buffer& dst, size_t dst_offset, const Buffer& src, size_t src_offset,
                    size_t count) = 0;
  virtual void synchronize() = 0;

  // Runs `ops`, a sequence of this backend's ops (no transfer to the host, no synchronize, no
  // alloc or release, no other library's calls) that is the same sequence of launches whenever
  // the shapes and buffers are the same, with host arguments (tokens, positions, masks) that may
  // differ from call to call. A backend may record the sequence once per shape and replay the
  // recording (CUDA graphs: one launch instead of hundreds); the results are the same as running
  // the ops one by one. The default runs them one by one.
  virtual void run_recorded(const std::function<void()>& ops) { ops(); }

  // GEMM calls of up to `rows` rows must give each row the bits it gets alone (the decoding
  // loop's largest step: batch x (K + 1) verification rows), so greedy SD and SSD equal AR. The
  // CPU's kernels are batch-invariant at every row count; CUDA's batch-invariant kernels serve
  // calls of up to 64 rows by default and cuBLAS the rest (prefill), so it raises that bound.
  virtual void keep_batch_invariant_up_to(int /*rows*/) {}

  // --- ops; all matrices row-major ---
  // out[r][:] = table[tokens[r]][:] (table from upload_weight_as, or upload_matrix if tied)
  virtual void embed(Buffer& out, const Buffer& table, const int32_t* tokens, int rows,
                     int dim) = 0;
  // out[r][:] = x[r][:] / rms(x[r][:]) * weight[:]; also used per head (Qwen3 q/k norm).
  virtual void rmsnorm(Buffer& out, const Buffer& x, const Buffer& weight, int rows, int dim,
                       float eps) = 0;
  // out[r][j] = sum_k x[r][k] * w[j][k]   (w is an HF [out, in] weight). Each output element
  // is computed with a fixed summation order that does not depend on `rows`, so a row's
  // result is bit-identical whatever else is in the batch (greedy SD must equal AR).
  virtual void matmul(Buffer& out, const Buffer& x, const Buffer& w, int rows, int in,
                      int out_dim) = 0;
  // Rotary embedding, HF "rotate_half" layout, in place on x[rows][heads][head_dim], at the
  // given positions; inv_freq has head_dim/2 entries (llama3 scaling already applied).
  virtual void rope(Buffer& x, const int32_t* positions, int rows, int heads, int head_dim,
                    const Buffer& inv_freq) = 0;
  // Stores k[r], v[r] (rows x kv_heads*head_dim) into cache slot (mask.seq[r], mask.slot[r]).
  virtual void kv_store(Buffer& k_cache, Buffer& v_cache, const KVLayout& layout, const Buffer& k,
                        const Buffer& v, const AttentionMask& mask) = 0;
  // Copies `count` consecutive slots of one sequence to another place (SSD keeps the accepted
  // branch and drops the rest by moving its K/V from scratch slots into the committed region).
  virtual void kv_move(Buffer& k_cache, Buffer& v_cache, const KVLayout& layout, int src_seq,
                       int src_slot, int dst_seq, int dst_slot, int count) = 0;
  // Grouped-query attention of q[rows][heads][head_dim] over the cache under `mask`.
  virtual void attention(Buffer& out, const Buffer& q, const Buffer& k_cache, const Buffer& v_cache,
                         const KVLayout& layout, int heads, const AttentionMask& mask) = 0;
  // out[i] = silu(gate[i]) * up[i]
  virtual void swiglu(Buffer& out, const Buffer& gate, const Buffer& up, size_t count) = 0;
  // x[i] += y[i]
  virtual void add(Buffer& x, const Buffer& y, size_t count) = 0;
  // x[r][j] += bias[j] for each of `rows` rows of `dim` (Qwen2's q/k/v projection biases).
  virtual void add_bias(Buffer& x, const Buffer& bias, int rows, int dim) = 0;
};

// What an all-reduce has moved so far, for reports of communication cost.
struct CommStats {
  int64_t calls = 0;
  int64_t bytes = 0;
  double seconds = 0.0;  // 0 where the work is asynchronous on a device (time it there)
};

// Sums a buffer across the tensor-parallel group (comm/ implements it; TP=1 needs none).
class AllReduce {
 public:
  virtual ~AllReduce() = default;
  virtual void sum(Buffer& buffer, size_t count) = 0;
  // Zeros for an all-reduce that counts nothing (the identity of a one-rank group).
  virtual CommStats stats() const { return {}; }
};

}  // namespace ssd
