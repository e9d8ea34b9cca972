// Element-wise and memory kernels of the CUDA backend: dtype conversion, embedding lookup,
// RMSNorm, RoPE, KV-cache stores, SwiGLU, residual add, and the rank-order sum of the NCCL
// all-reduce. Arithmetic is fp32; every result is rounded to bf16 once (round to nearest even).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

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

// RMSNorm moves a few KB a row, so it is bound by load latency, not bandwidth: the kernel it
// replaces walked x in 16 dependent 2-byte loads a thread and then read x and the weight again
// (~15 us a call on an H200, a fifth of a 1B decode step). Here every load a thread makes, its
// share of x and of the weight, is issued before the first is used, 16 bytes at a time, and x
// stays in registers for the scaling pass.
//
// One block per row. Thread t owns the 8-element chunks t, t + T, t + 2T, ... (T = blockDim.x,
// chosen from `dim` alone) and sums their squares in that order, then the warps' sums are added
// in warp order: a row's sum is formed the same way whatever the number of rows in the call
// (batch invariance) and whatever the buffers' alignment (unaligned buffers, or a dim that is
// not a multiple of 8, take 2-byte loads into the same chunks; elements past dim load as zero,
// and adding 0 * 0 leaves a sum of squares unchanged). `out` may equal `x`: each element is
// read and written by the one thread that owns it, reads first.
template <bool kVector>
__device__ __forceinline__ uint4 load_chunk(const bf16* p, int first, int dim) {
  if constexpr (kVector) {
    return *reinterpret_cast<const uint4*>(p + first);
  } else {
    uint16_t h[8];
#pragma unroll
    for (int e = 0; e < 8; ++e)
      h[e] = first + e < dim ? __bfloat16_as_ushort(p[first + e]) : uint16_t(0);
    return make_uint4(h[0] | uint32_t(h[1]) << 16, h[2] | uint32_t(h[3]) << 16,
                      h[4] | uint32_t(h[5]) << 16, h[6] | uint32_t(h[7]) << 16);
  }
}

__device__ __forceinline__ uint32_t scale_pair(uint32_t x, uint32_t w, float inv) {
  // Same order of operations as HF's LlamaRMSNorm (and the CPU backend): normalise, then scale
  // by the weight; each output rounded to bf16 once.
  const __nv_bfloat162 r =
      __floats2bfloat162_rn(bf16_lo(w) * (bf16_lo(x) * inv), bf16_hi(w) * (bf16_hi(x) * inv));
  return *reinterpret_cast<const uint32_t*>(&r);
}

template <int kChunks, bool kVector>
__global__ void rmsnorm_kernel(bf16* out, const bf16* x, const bf16* __restrict__ w, int dim,
                               float eps) {
  __shared__ float warp_sums[32];
  __shared__ float inv_rms;
  const size_t base = size_t(blockIdx.x) * dim;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warps = int(blockDim.x >> 5);
  uint4 xs[kChunks], ws[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int first = (tid + c * int(blockDim.x)) * 8;
    xs[c] = ws[c] = make_uint4(0, 0, 0, 0);
    if (first < dim) {
      xs[c] = load_chunk<kVector>(x + base, first, dim);
      ws[c] = load_chunk<kVector>(w, first, dim);
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const uint32_t words[4] = {xs[c].x, xs[c].y, xs[c].z, xs[c].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      sum = fmaf(bf16_lo(words[i]), bf16_lo(words[i]), sum);
      sum = fmaf(bf16_hi(words[i]), bf16_hi(words[i]), sum);
    }
  }
  sum = warp_sum(sum);
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (tid == 0) {
    float total = 0.0f;
    for (int i = 0; i < warps; ++i) total += warp_sums[i];
    inv_rms = 1.0f / sqrtf(total / float(dim) + eps);
  }
  __syncthreads();
  const float inv = inv_rms;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int first = (tid + c * int(blockDim.x)) * 8;
    if (first >= dim) continue;
    const uint4 r =
        make_uint4(scale_pair(xs[c].x, ws[c].x, inv), scale_pair(xs[c].y, ws[c].y, inv),
                   scale_pair(xs[c].z, ws[c].z, inv), scale_pair(xs[c].w, ws[c].w, inv));
    if constexpr (kVector) {
      *reinterpret_cast<uint4*>(out + base + first) = r;
    } else {
      const uint32_t words[4] = {r.x, r.y, r.z, r.w};
      for (int e = 0; e < 8 && first + e < dim; ++e)
        out[base + first + e] =
            __ushort_as_bfloat16(uint16_t(e % 2 ? words[e / 2] >> 16 : words[e / 2] & 0xffffu));
    }
  }
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

// Each element on its own: a row's result does not depend on the rows beside it.
__global__ void add_bias_kernel(bf16* x, const bf16* bias, size_t n, int dim) {
  for (size_t i = thread_index(); i < n; i += thread_stride())
    x[i] = __float2bfloat16(f(x[i]) + f(bias[i % size_t(dim)]));
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
  // Threads and chunks a thread depend on dim only (batch invariance): up to 256 threads with
  // 1-8 chunks each (dim <= 16384), else 1024 threads with up to 8 (dim <= 65536).
  const int chunks = (dim + 7) / 8;
  int threads = std::min(256, (chunks + 31) / 32 * 32);
  if (chunks > threads * 8) threads = 1024;
  const int per_thread = (chunks + threads - 1) / threads;
  if (per_thread > 8)
    throw std::invalid_argument("CUDA rmsnorm: dim " + std::to_string(dim) + " > 65536");
  const bool vector = dim % 8 == 0 && aligned16(out) && aligned16(x) && aligned16(w);
  const unsigned grid = unsigned(rows);
  auto launch = [&](auto kernel) { kernel<<<grid, threads, 0, stream>>>(out, x, w, dim, eps); };
  if (per_thread == 1)
    vector ? launch(rmsnorm_kernel<1, true>) : launch(rmsnorm_kernel<1, false>);
  else if (per_thread == 2)
    vector ? launch(rmsnorm_kernel<2, true>) : launch(rmsnorm_kernel<2, false>);
  else if (per_thread <= 4)
    vector ? launch(rmsnorm_kernel<4, true>) : launch(rmsnorm_kernel<4, false>);
  else
    vector ? launch(rmsnorm_kernel<8, true>) : launch(rmsnorm_kernel<8, false>);
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

void add_bias(bf16* x, const bf16* bias, int rows, int dim, cudaStream_t stream) {
  const size_t count = size_t(rows) * size_t(dim);
  if (count == 0) return;
  add_bias_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, bias, count, dim);
  SSD_CUDA_CHECK_LAUNCH();
}

void sum_ranks(bf16* out, const bf16* gathered, size_t count, int ranks, cudaStream_t stream) {
  if (count == 0 || ranks <= 0) return;
  sum_ranks_kernel<<<blocks_for(count), kThreads, 0, stream>>>(out, gathered, count, ranks);
  SSD_CUDA_CHECK_LAUNCH();
}

}  // namespace ssd::cuda_kernels
