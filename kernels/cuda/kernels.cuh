// Internal to kernels/cuda: the kernel launchers behind CudaBackend and the device helpers they
// share. All pointers are device memory, every launcher enqueues on `stream` and checks the
// launch; none synchronises.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ssd::cuda_kernels {

using bf16 = __nv_bfloat16;

// --- device helpers ---

// Butterfly reductions over a full warp: every lane ends with the same bits (each step adds
// v_l + v_{l^m}, and fp32 addition is commutative), in an order that depends on nothing but
// the lane values.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// The two bf16 values packed in a 32-bit word (element 2i in the low half, 2i+1 in the high
// half: bf16 is the top half of an fp32, so widening is exact).
__device__ __forceinline__ float bf16_lo(uint32_t u) {
  return __uint_as_float(u << 16);
}
__device__ __forceinline__ float bf16_hi(uint32_t u) {
  return __uint_as_float(u & 0xffff0000u);
}

// Whether a kernel may read p 16 bytes at a time (host side, at launch).
inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// --- element-wise and memory kernels (elementwise_kernels.cu) ---

void f32_to_bf16(bf16* out, const float* in, size_t count, cudaStream_t stream);
void bf16_to_f32(float* out, const bf16* in, size_t count, cudaStream_t stream);
// out[r][:] = table[tokens[r]][:]
void embed(bf16* out, const bf16* table, const int32_t* tokens, int rows, int dim,
           cudaStream_t stream);
// out[r][:] = w[:] * (x[r][:] / rms(x[r][:])), fp32 sum of squares; out may equal x.
void rmsnorm(bf16* out, const bf16* x, const bf16* w, int rows, int dim, float eps,
             cudaStream_t stream);
// HF rotate_half RoPE in place on x[rows][heads][head_dim]; angle = float(pos) * inv_freq[i].
void rope(bf16* x, const int32_t* positions, const float* inv_freq, int rows, int heads,
          int head_dim, cudaStream_t stream);
// k_cache/v_cache[(seq[r] * capacity + slot[r]) * kv_dim + :] = k/v[r][:]
void kv_store(bf16* k_cache, bf16* v_cache, const bf16* k, const bf16* v, const int32_t* seq,
              const int32_t* slot, int rows, int capacity, int kv_dim, cudaStream_t stream);
void swiglu(bf16* out, const bf16* gate, const bf16* up, size_t count, cudaStream_t stream);
void add(bf16* x, const bf16* y, size_t count, cudaStream_t stream);
void add_bias(bf16* x, const bf16* bias, int rows, int dim, cudaStream_t stream);
// out[i] = sum_r gathered[r * count + i] in rank order, fp32, one rounding.
void sum_ranks(bf16* out, const bf16* gathered, size_t count, int ranks, cudaStream_t stream);

// --- attention (attention_kernel.cu) ---

constexpr int kMaxAttentionHeadDim = 256;

// The AttentionMask's arrays in device memory.
struct DeviceMask {
  const int32_t* seq;
  const int32_t* slot;
  const int32_t* prefix;
  const int32_t* extra_begin;  // rows + 1 entries
  const int32_t* extra_slots;
};

// out[r][h][:] = softmax(q[r][h] . K_visible / sqrt(head_dim)) V_visible over the slots row r
// sees (prefix first, then its extra slots, in that order). head_dim <= kMaxAttentionHeadDim.
// Scratch the attention needs: fp32 partials for every (row, head, split of kSplit entries).
size_t attention_partial_floats(int rows, int heads, int head_dim, int longest_list);
// Splits of the key list a launch uses for its longest list: a power of two, so a recorded
// decode step (CudaBackend::run_recorded) stays valid while the context grows. Splits past a
// row's list return at once and the merge never reads them: the split count never changes a
// result.
int attention_splits(int longest_list);
void attention(bf16* out, float* partials, const bf16* q, const bf16* k_cache, const bf16* v_cache,
               const DeviceMask& mask, int rows, int heads, int kv_heads, int head_dim,
               int capacity, int longest_list, cudaStream_t stream);

// --- GEMM (matmul_kernel.cu, matmul_tc_kernel.cu) ---

// out[r][j] = sum_k x[r][k] * w[j][k], the batch-invariant kernel on the CUDA cores (see
// matmul_kernel.cu).
void matmul_invariant(bf16* out, const bf16* x, const bf16* w, int rows, int in, int out_dim,
                      int sm_count, cudaStream_t stream);
// The same product, batch-invariant too, on the tensor cores (see matmul_tc_kernel.cu); its
// summation order differs from matmul_invariant's, so the two never mix within a run.
void matmul_invariant_tc(bf16* out, const bf16* x, const bf16* w, int rows, int in, int out_dim,
                         int sm_count, cudaStream_t stream);

}  // namespace ssd::cuda_kernels
