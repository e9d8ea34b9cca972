// Element-wise and memory kernels of the CUDA backend: dtype conversion, embedding lookup,
// RMSNorm, RoPE, KV-cache stores, SwiGLU, residual add, and the rank-order sum of the NCCL
// all-reduce. Arithmetic is fp32; every result is rounded to bf16 once (round to nearest even).
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda_kernels {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 65536;  // grid-stride loops cover the rest

unsigned blocks_for(size_t count, int threads = kThreads) {
  const size_t blocks = (count + size_t(threads) - 1) / size_t(threads);
  return unsigned(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

__device__ __forceinline__ size_t thread_index() {
  return size_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ size_t thread_stride() {
  return size_t(gridDim.x) * blockDim.x;
}
__device__ __forceinline__ float f(bf16 v) {
  return __bfloat162float(v);
}

__global__ void f32_to_bf16_kernel(bf16* __restrict__ out, const float* __restrict__ in, size_t n) {
  for (size_t i = thread_index(); i < n; i += thread_stride()) out[i] = __float2bfloat16(in[i]);
}

__global__ void bf16_to_f32_kernel(float* __restrict__ out, const bf16* __restrict__ in, size_t n) {
  for (size_t i = thread_index(); i < n; i += thread_stride()) out[i] = f(in[i]);
}

// One block per row.
__global__ void embed_kernel(bf16* __restrict__ out, const bf16* __restrict__ table,
                             const int32_t* __restrict__ tokens, int dim) {
  const size_t row = blockIdx.x;
  const bf16* src = table + size_t(tokens[row]) * dim;
  bf16* dst = out + row * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
}

// One block per row; blockDim.x is a multiple of 32 chosen from `dim` alone, so a row's sum is
// formed the same way whatever the number of rows. `out` may equal `x`: every element is read
// and written by the one thread that owns it, and the barrier separates the passes.
__global__ void rmsnorm_kernel(bf16* out, const bf16* x, const bf16* __restrict__ w, int dim,
                               float eps) {
  __shared__ float warp_sums[32];
  __shared__ float inv_rms;
  const size_t base = size_t(blockIdx.x) * dim;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warps = int(blockDim.x >> 5);
  float sum = 0.0f;
  for (int i = tid; i < dim; i += blockDim.x) {
    const float v = f(x[base + i]);
    sum = fmaf(v, v, sum);
  }
  sum = warp_sum(sum);
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (tid == 0) {
    float total = 0.0f;
    for (int i = 0; i < warps; ++i) total += warp_sums[i];
    // Same order of operations as HF's LlamaRMSNorm (and the CPU backend): normalise, then
    // scale by the weight.
    inv_rms = 1.0f / sqrtf(total / float(dim) + eps);
  }
  __syncthreads();
  const float inv = inv_rms;
  for (int i = tid; i < dim; i += blockDim.x)
    out[base + i] = __float2bfloat16(f(w[i]) * (f(x[base + i]) * inv));
}

// One thread per (row, head, i < half) rotates the pair (i, i + half); no two threads touch the
// same element.
__global__ void rope_kernel(bf16* x, const int32_t* __restrict__ positions,
                            const float* __restrict__ inv_freq, int heads, int head_dim,
                            size_t total) {
  const int half = head_dim / 2;
  for (size_t idx = thread_index(); idx < total; idx += thread_stride()) {
    const int i = int(idx % size_t(half));
    const size_t row_head = idx / size_t(half);
    const size_t row = row_head / size_t(heads);
    // HF forms the angle as an fp32 product of the position and the frequency.
    const float angle = float(positions[row]) * inv_freq[i];
    float s, c;
    sincosf(angle, &s, &c);
    bf16* v = x + row_head * size_t(head_dim);
    const float a = f(v[i]), b = f(v[i + half]);
    v[i] = __float2bfloat16(a * c - b * s);
    v[i + half] = __float2bfloat16(b * c + a * s);
  }
}

// One block per row. Rows of one call write distinct slots (forward() never repeats a slot in
// a batch); two rows naming the same slot would race.
__global__ void kv_store_kernel(bf16* __restrict__ k_cache, bf16* __restrict__ v_cache,
                                const bf16* __restrict__ k, const bf16* __restrict__ v,
                                const int32_t* __restrict__ seq, const int32_t* __restrict__ slot,
                                int capacity, int kv_dim) {
  const size_t row = blockIdx.x;
  const size_t dst = (size_t(seq[row]) * size_t(capacity) + size_t(slot[row])) * size_t(kv_dim);
  const size_t src = row * size_t(kv_dim);
  for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    k_cache[dst + i] = k[src + i];
    v_cache[dst + i] = v[src + i];
  }
}

// out may equal gate or up (element-wise).
__global__ void swiglu_kernel(bf16* out, const bf16* gate, const bf16* up, size_t n) {
  for (size_t i = thread_index(); i < n; i += thread_stride()) {
    const float g = f(gate[i]), u = f(up[i]);
    out[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
  }
}

__global__ void add_kernel(bf16* x, const bf16* y, size_t n) {
  for (size_t i = thread_index(); i < n; i += thread_stride())
    x[i] = __float2bfloat16(f(x[i]) + f(y[i]));
}

__global__ void sum_ranks_kernel(bf16* __restrict__ out, const bf16* __restrict__ gathered,
                                 size_t n, int ranks) {
  for (size_t i = thread_index(); i < n; i += thread_stride()) {
    float total = f(gathered[i]);
    for (int r = 1; r < ranks; ++r) total += f(gathered[size_t(r) * n + i]);
    out[i] = __float2bfloat16(total);
  }
}

}  // namespace

void f32_to_bf16(bf16* out, const float* in, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  f32_to_bf16_kernel<<<blocks_for(count), kThreads, 0, stream>>>(out, in, count);
  SSD_CUDA_CHECK_LAUNCH();
}

void bf16_to_f32(float* out, const bf16* in, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  bf16_to_f32_kernel<<<blocks_for(count), kThreads, 0, stream>>>(out, in, count);
  SSD_CUDA_CHECK_LAUNCH();
}

void embed(bf16* out, const bf16* table, const int32_t* tokens, int rows, int dim,
           cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return;
  embed_kernel<<<unsigned(rows), 128, 0, stream>>>(out, table, tokens, dim);
  SSD_CUDA_CHECK_LAUNCH();
}

void rmsnorm(bf16* out, const bf16* x, const bf16* w, int rows, int dim, float eps,
             cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return;
  // Depends on dim only (batch invariance): one warp for per-head norms, more for hidden.
  const int threads = dim <= 256 ? 32 : (dim <= 2048 ? 128 : 256);
  rmsnorm_kernel<<<unsigned(rows), threads, 0, stream>>>(out, x, w, dim, eps);
  SSD_CUDA_CHECK_LAUNCH();
}

void rope(bf16* x, const int32_t* positions, const float* inv_freq, int rows, int heads,
          int head_dim, cudaStream_t stream) {
  const size_t total = size_t(rows) * size_t(heads) * size_t(head_dim / 2);
  if (total == 0) return;
  rope_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, positions, inv_freq, heads, head_dim,
                                                          total);
  SSD_CUDA_CHECK_LAUNCH();
}

void kv_store(bf16* k_cache, bf16* v_cache, const bf16* k, const bf16* v, const int32_t* seq,
              const int32_t* slot, int rows, int capacity, int kv_dim, cudaStream_t stream) {
  if (rows <= 0 || kv_dim <= 0) return;
  kv_store_kernel<<<unsigned(rows), 128, 0, stream>>>(k_cache, v_cache, k, v, seq, slot, capacity,
                                                      kv_dim);
  SSD_CUDA_CHECK_LAUNCH();
}

void swiglu(bf16* out, const bf16* gate, const bf16* up, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  swiglu_kernel<<<blocks_for(count), kThreads, 0, stream>>>(out, gate, up, count);
  SSD_CUDA_CHECK_LAUNCH();
}

void add(bf16* x, const bf16* y, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  add_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, y, count);
  SSD_CUDA_CHECK_LAUNCH();
}

void sum_ranks(bf16* out, const bf16* gathered, size_t count, int ranks, cudaStream_t stream) {
  if (count == 0 || ranks <= 0) return;
  sum_ranks_kernel<<<blocks_for(count), kThreads, 0, stream>>>(out, gathered, count, ranks);
  SSD_CUDA_CHECK_LAUNCH();
}

}  // namespace ssd::cuda_kernels
