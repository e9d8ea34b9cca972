// CudaBackend's ops: argument checks, staging of host-side arguments (tokens, positions,
// masks) and the kernel launches (*_kernel(s).cu); the GEMM dispatch between the
// batch-invariant kernel and cuBLAS. Each op notes its launch's arguments just before it
// launches (note_launch), which is all a collect pass of run_recorded (cuda_graphs.cu) needs.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_internal.cuh"
#include "kernels/cuda/kernels.cuh"

namespace ssd {

using namespace cuda_backend_detail;

namespace {

void check_elements(const Buffer& b, size_t count, const char* what) {
  if (count > b.count)
    throw std::out_of_range(std::string(what) + ": needs " + std::to_string(count) +
                            " elements, buffer has " + std::to_string(b.count));
}

}  // namespace

void CudaBackend::embed(Buffer& out, const Buffer& table, const int32_t* tokens, int rows,
                        int dim) {
  if (rows <= 0) return;
  if (dim <= 0) throw std::invalid_argument("CudaBackend::embed: dim must be > 0");
  check_elements(out, size_t(rows) * size_t(dim), "CudaBackend::embed (out)");
  const size_t vocab = table.count / size_t(dim);
  for (int r = 0; r < rows; ++r)
    if (tokens[r] < 0 || size_t(tokens[r]) >= vocab)
      throw std::out_of_range("CudaBackend::embed: token " + std::to_string(tokens[r]) +
                              " outside the table");
  make_current();
  const auto* dev_tokens = static_cast<const int32_t*>(
      stage_input(State::kTokens, tokens, size_t(rows) * sizeof(int32_t)));
  if (!note_launch(
          {kOpEmbed, word(out.data), word(table.data), word(dev_tokens), word(rows), word(dim)}))
    return;
  cuda_kernels::embed(data(out), data(table), dev_tokens, rows, dim, stream_);
}

void CudaBackend::rmsnorm(Buffer& out, const Buffer& x, const Buffer& weight, int rows, int dim,
                          float eps) {
  if (rows <= 0) return;
  if (dim <= 0) throw std::invalid_argument("CudaBackend::rmsnorm: dim must be > 0");
  check_elements(x, size_t(rows) * size_t(dim), "CudaBackend::rmsnorm (x)");
  check_elements(out, size_t(rows) * size_t(dim), "CudaBackend::rmsnorm (out)");
  check_elements(weight, size_t(dim), "CudaBackend::rmsnorm (weight)");
  make_current();
  if (!note_launch({kOpRmsnorm, word(out.data), word(x.data), word(weight.data), word(rows),
                    word(dim), word(eps)}))
    return;
  cuda_kernels::rmsnorm(data(out), data(x), data(weight), rows, dim, eps, stream_);
}

void CudaBackend::matmul(Buffer& out, const Buffer& x, const Buffer& w, int rows, int in,
                         int out_dim) {
  matmul_with(gemm_, out, x, w, rows, in, out_dim);
}

void CudaBackend::matmul_with(CudaGemm kernel, Buffer& out, const Buffer& x, const Buffer& w,
                              int rows, int in, int out_dim) {
  if (rows <= 0 || out_dim <= 0) return;
  if (in <= 0) throw std::invalid_argument("CudaBackend::matmul: in must be > 0");
  check_elements(x, size_t(rows) * size_t(in), "CudaBackend::matmul (x)");
  check_elements(w, size_t(out_dim) * size_t(in), "CudaBackend::matmul (w)");
  check_elements(out, size_t(rows) * size_t(out_dim), "CudaBackend::matmul (out)");
  if (kernel == CudaGemm::Auto)
    kernel = rows <= invariant_max_rows_ ? CudaGemm::Invariant : CudaGemm::Cublas;
  if (kernel == CudaGemm::AutoTc)
    kernel = rows <= invariant_max_rows_ ? CudaGemm::InvariantTc : CudaGemm::Cublas;
  make_current();
  if (kernel == CudaGemm::Invariant || kernel == CudaGemm::InvariantTc) {
    const bool tc = kernel == CudaGemm::InvariantTc;
    if (!note_launch({kOpMatmul, word(int(tc)), word(out.data), word(x.data), word(w.data),
                      word(rows), word(in), word(out_dim)}))
      return;
    if (tc)
      cuda_kernels::matmul_invariant_tc(data(out), data(x), data(w), rows, in, out_dim, sm_count_,
                                        stream_);
    else
      cuda_kernels::matmul_invariant(data(out), data(x), data(w), rows, in, out_dim, sm_count_,
                                     stream_);
  } else {
    // cuBLAS may allocate or pick its algorithm at run time: never recorded (prefill only).
    if (!recordable_launch()) return;
    matmul_cublas(out, x, w, rows, in, out_dim);
  }
}

void CudaBackend::matmul_cublas(Buffer& out, const Buffer& x, const Buffer& w, int rows, int in,
                                int out_dim) {
  // Row-major out[rows][out] = x[rows][in] * w[out][in]^T is, column-major,
  // out^T [out x rows] = (w viewed as [in x out])^T * (x viewed as [in x rows]).
  const float alpha = 1.0f, beta = 0.0f;
  SSD_CUBLAS_CHECK(cublasGemmEx(handle(cublas_), CUBLAS_OP_T, CUBLAS_OP_N, out_dim, rows, in,
                                &alpha, w.data, CUDA_R_16BF, in, x.data, CUDA_R_16BF, in, &beta,
                                out.data, CUDA_R_16BF, out_dim, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::rope(Buffer& x, const int32_t* positions, int rows, int heads, int head_dim,
                       const Buffer& inv_freq) {
  if (rows <= 0 || heads <= 0) return;
  if (head_dim <= 0 || head_dim % 2 != 0)
    throw std::invalid_argument("CudaBackend::rope: head_dim must be even and > 0");
  const int half = head_dim / 2;
  check_elements(x, size_t(rows) * size_t(heads) * size_t(head_dim), "CudaBackend::rope (x)");
  check_elements(inv_freq, size_t(half), "CudaBackend::rope (inv_freq)");
  make_current();
  auto shadow = state_->shadows.find(inv_freq.data);
  // Not an uploaded weight: its bf16 values, converted into scratch.
  const bool converted = shadow == state_->shadows.end();
  float* scratch = converted ? state_->freq_scratch(stream_, size_t(half)) : nullptr;
  const float* freq = converted ? scratch : shadow->second;
  const auto* dev_positions = static_cast<const int32_t*>(
      stage_input(State::kPositions, positions, size_t(rows) * sizeof(int32_t)));
  if (!note_launch({kOpRope, word(x.data), word(dev_positions), word(freq), word(inv_freq.data),
                    word(int(converted)), word(rows), word(heads), word(head_dim)}))
    return;
  if (converted) cuda_kernels::bf16_to_f32(scratch, data(inv_freq), size_t(half), stream_);
  cuda_kernels::rope(data(x), dev_positions, freq, rows, heads, head_dim, stream_);
}

const int32_t* CudaBackend::upload_mask(const AttentionMask& mask) {
  // One upload: seq[rows] slot[rows] prefix[rows] extra_begin[rows + 1] extra_slots[...].
  const size_t rows = size_t(mask.rows);
  const int32_t extras = mask.extra_begin[rows];
  if (mask.extra_begin[0] != 0 || extras < 0)
    throw std::invalid_argument("CudaBackend: AttentionMask extra_begin must start at 0");
  std::vector<int32_t>& w = state_->mask_words;
  w.resize(4 * rows + 1 + size_t(extras));
  std::copy(mask.seq, mask.seq + rows, w.begin());
  std::copy(mask.slot, mask.slot + rows, w.begin() + rows);
  std::copy(mask.prefix, mask.prefix + rows, w.begin() + 2 * rows);
  std::copy(mask.extra_begin, mask.extra_begin + rows + 1, w.begin() + 3 * rows);
  if (extras > 0) std::copy(mask.extra_slots, mask.extra_slots + extras, w.begin() + 4 * rows + 1);
  return static_cast<const int32_t*>(
      stage_input(State::kMask, w.data(), w.size() * sizeof(int32_t)));
}

void CudaBackend::kv_store(Buffer& k_cache, Buffer& v_cache, const KVLayout& layout,
                           const Buffer& k, const Buffer& v, const AttentionMask& mask) {
  if (mask.rows <= 0) return;
  for (int r = 0; r < mask.rows; ++r)
    if (mask.seq[r] < 0 || mask.seq[r] >= layout.sequences || mask.slot[r] < 0 ||
        mask.slot[r] >= layout.capacity)
      throw std::out_of_range("kv_store: slot outside the KV cache");
  const size_t kv_dim = size_t(layout.kv_heads) * size_t(layout.head_dim);
  check_elements(k_cache, layout.elements(), "CudaBackend::kv_store (k_cache)");
  check_elements(v_cache, layout.elements(), "CudaBackend::kv_store (v_cache)");
  check_elements(k, size_t(mask.rows) * kv_dim, "CudaBackend::kv_store (k)");
  check_elements(v, size_t(mask.rows) * kv_dim, "CudaBackend::kv_store (v)");
  make_current();
  const size_t rows = size_t(mask.rows);
  const int32_t* m = nullptr;
  if (mask.prefix && mask.extra_begin) {
    m = upload_mask(mask);  // the whole mask: attention() on the same mask reuses the upload
  } else {
    // kv_store needs only seq and slot (callers outside forward() may pass no more).
    std::vector<int32_t>& w = state_->mask_words;
    w.assign(mask.seq, mask.seq + rows);
    w.insert(w.end(), mask.slot, mask.slot + rows);
    m = static_cast<const int32_t*>(
        stage_input(State::kSeqSlot, w.data(), w.size() * sizeof(int32_t)));
  }
  if (!note_launch({kOpKvStore, word(k_cache.data), word(v_cache.data), word(k.data), word(v.data),
                    word(m), word(mask.rows), word(layout.capacity), word(kv_dim)}))
    return;
  cuda_kernels::kv_store(data(k_cache), data(v_cache), data(k), data(v), m, m + rows, mask.rows,
                         layout.capacity, int(kv_dim), stream_);
}

void CudaBackend::kv_move(Buffer& k_cache, Buffer& v_cache, const KVLayout& layout, int src_seq,
                          int src_slot, int dst_seq, int dst_slot, int count) {
  if (count <= 0) return;
  const auto inside = [&](int seq, int slot) {
    return seq >= 0 && seq < layout.sequences && slot >= 0 && slot + count <= layout.capacity;
  };
  if (!inside(src_seq, src_slot) || !inside(dst_seq, dst_slot))
    throw std::out_of_range("kv_move: slots outside the KV cache");
  const size_t kv_dim = size_t(layout.kv_heads) * size_t(layout.head_dim);
  const size_t src = (size_t(src_seq) * size_t(layout.capacity) + size_t(src_slot)) * kv_dim;
  const size_t dst = (size_t(dst_seq) * size_t(layout.capacity) + size_t(dst_slot)) * kv_dim;
  copy(k_cache, dst, k_cache, src, size_t(count) * kv_dim);
  copy(v_cache, dst, v_cache, src, size_t(count) * kv_dim);
}

void CudaBackend::attention(Buffer& out, const Buffer& q, const Buffer& k_cache,
                            const Buffer& v_cache, const KVLayout& layout, int heads,
                            const AttentionMask& mask) {
  if (mask.rows <= 0 || heads <= 0) return;
  if (layout.kv_heads <= 0 || heads % layout.kv_heads != 0)
    throw std::invalid_argument("CudaBackend::attention: heads must be a multiple of kv_heads");
  if (layout.head_dim <= 0 || layout.head_dim > cuda_kernels::kMaxAttentionHeadDim)
    throw std::invalid_argument("CudaBackend::attention: head_dim must be in [1, " +
                                std::to_string(cuda_kernels::kMaxAttentionHeadDim) + "]");
  int longest = 0;
  for (int r = 0; r < mask.rows; ++r) {
    if (mask.seq[r] < 0 || mask.seq[r] >= layout.sequences || mask.prefix[r] < 0 ||
        mask.prefix[r] > layout.capacity || mask.extra_begin[r + 1] < mask.extra_begin[r])
      throw std::out_of_range("CudaBackend::attention: mask row outside the KV cache");
    longest = std::max(longest, mask.prefix[r] + (mask.extra_begin[r + 1] - mask.extra_begin[r]));
    for (int e = mask.extra_begin[r]; e < mask.extra_begin[r + 1]; ++e)
      if (mask.extra_slots[e] < 0 || mask.extra_slots[e] >= layout.capacity)
        throw std::out_of_range("CudaBackend::attention: extra slot outside the KV cache");
  }
  const size_t q_elements = size_t(mask.rows) * size_t(heads) * size_t(layout.head_dim);
  check_elements(q, q_elements, "CudaBackend::attention (q)");
  check_elements(out, q_elements, "CudaBackend::attention (out)");
  check_elements(k_cache, layout.elements(), "CudaBackend::attention (k_cache)");
  check_elements(v_cache, layout.elements(), "CudaBackend::attention (v_cache)");
  make_current();
  const int32_t* m = upload_mask(mask);
  const size_t rows = size_t(mask.rows);
  const cuda_kernels::DeviceMask dm{m, m + rows, m + 2 * rows, m + 3 * rows, m + 4 * rows + 1};
  float* partials = state_->f32_scratch(
      stream_, cuda_kernels::attention_partial_floats(mask.rows, heads, layout.head_dim, longest));
  if (!note_launch({kOpAttention, word(out.data), word(partials), word(q.data), word(k_cache.data),
                    word(v_cache.data), word(m), word(mask.rows), word(heads),
                    word(layout.kv_heads), word(layout.head_dim), word(layout.capacity),
                    word(cuda_kernels::attention_splits(longest))}))
    return;
  cuda_kernels::attention(data(out), partials, data(q), data(k_cache), data(v_cache), dm, mask.rows,
                          heads, layout.kv_heads, layout.head_dim, layout.capacity, longest,
                          stream_);
}

void CudaBackend::swiglu(Buffer& out, const Buffer& gate, const Buffer& up, size_t count) {
  check_elements(out, count, "CudaBackend::swiglu (out)");
  check_elements(gate, count, "CudaBackend::swiglu (gate)");
  check_elements(up, count, "CudaBackend::swiglu (up)");
  make_current();
  if (!note_launch({kOpSwiglu, word(out.data), word(gate.data), word(up.data), word(count)}))
    return;
  cuda_kernels::swiglu(data(out), data(gate), data(up), count, stream_);
}

void CudaBackend::add(Buffer& x, const Buffer& y, size_t count) {
  check_elements(x, count, "CudaBackend::add (x)");
  check_elements(y, count, "CudaBackend::add (y)");
  make_current();
  if (!note_launch({kOpAdd, word(x.data), word(y.data), word(count)})) return;
  cuda_kernels::add(data(x), data(y), count, stream_);
}

void CudaBackend::add_bias(Buffer& x, const Buffer& bias, int rows, int dim) {
  check_elements(x, size_t(rows) * dim, "CudaBackend::add_bias (x)");
  check_elements(bias, size_t(dim), "CudaBackend::add_bias (bias)");
  make_current();
  if (!note_launch({kOpAddBias, word(x.data), word(bias.data), word(rows), word(dim)})) return;
  cuda_kernels::add_bias(data(x), data(bias), rows, dim, stream_);
}

}  // namespace ssd
