// Softmax, argmax and top-k over device logits: one block of 256 threads per row.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"
#include "kernels/cuda/sampling_kernels.h"

namespace ssd {
namespace {

using cuda_kernels::bf16;
using cuda_kernels::warp_max;
using cuda_kernels::warp_sum;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <typename T>
__device__ __forceinline__ float load_logit(const T* p, size_t i);
template <>
__device__ __forceinline__ float load_logit<float>(const float* p, size_t i) {
  const float v = p[i];
  return isnan(v) ? -INFINITY : v;
}
template <>
__device__ __forceinline__ float load_logit<bf16>(const bf16* p, size_t i) {
  const float v = __bfloat162float(p[i]);
  return isnan(v) ? -INFINITY : v;
}

// (value, index) candidates, ordered by value descending then index ascending: a strict total
// order, so the best of a set is the same whatever order it is reduced in.
struct Candidate {
  float value;
  int index;
};
__device__ __forceinline__ bool better(const Candidate& a, const Candidate& b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}
// Whether `e` comes strictly after `prev` in that order (not yet selected by top-k).
__device__ __forceinline__ bool after(const Candidate& e, const Candidate& prev) {
  return e.value < prev.value || (e.value == prev.value && e.index > prev.index);
}
constexpr int kNoIndex = 0x7fffffff;

__device__ Candidate warp_best(Candidate c) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) {
    Candidate o;
    o.value = __shfl_xor_sync(0xffffffffu, c.value, m);
    o.index = __shfl_xor_sync(0xffffffffu, c.index, m);
    if (better(o, c)) c = o;
  }
  return c;
}

// The best candidate of the block, returned to every thread. Uses `scratch` (kWarps entries)
// and ends with a barrier, so it may be called again at once.
__device__ Candidate block_best(Candidate c, Candidate* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  c = warp_best(c);
  if (lane == 0) scratch[warp] = c;
  __syncthreads();
  Candidate best = scratch[0];
  for (int w = 1; w < kWarps; ++w)
    if (better(scratch[w], best)) best = scratch[w];
  __syncthreads();
  return best;
}

// Block-wide fp32 reductions in a fixed order (per-thread strides, warp butterfly, warps in
// order), returned to every thread; end with a barrier.
__device__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kWarps; ++w) total += scratch[w];
  __syncthreads();
  return total;
}
__device__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = scratch[0];
  for (int w = 1; w < kWarps; ++w) m = fmaxf(m, scratch[w]);
  __syncthreads();
  return m;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    softmax_kernel(float* __restrict__ probs, const T* __restrict__ logits, int vocab,
                   float inv_temperature) {
  __shared__ float scratch[kWarps];
  const size_t base = size_t(blockIdx.x) * size_t(vocab);
  float m = -INFINITY;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    m = fmaxf(m, load_logit(logits, base + i) * inv_temperature);
  m = block_max(m, scratch);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    // A row of all -inf gets exp(-inf - -inf) = NaN: there is no distribution to return.
    const float p = expf(load_logit(logits, base + i) * inv_temperature - m);
    probs[base + i] = p;
    sum += p;
  }
  sum = block_sum(sum, scratch);
  const float inv = 1.0f / sum;
  // Each thread rescales exactly the entries it wrote above.
  for (int i = threadIdx.x; i < vocab; i += kThreads) probs[base + i] *= inv;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(int32_t* __restrict__ out, const T* __restrict__ logits, int vocab) {
  __shared__ Candidate scratch[kWarps];
  const size_t base = size_t(blockIdx.x) * size_t(vocab);
  Candidate best{-INFINITY, kNoIndex};
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const Candidate c{load_logit(logits, base + i), i};
    if (better(c, best)) best = c;
  }
  best = block_best(best, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = best.index;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    top_k_kernel(float* __restrict__ values, int32_t* __restrict__ indices,
                 const T* __restrict__ logits, int vocab, int k) {
  __shared__ Candidate scratch[kWarps];
  const size_t base = size_t(blockIdx.x) * size_t(vocab);
  Candidate prev{INFINITY, -1};  // everything comes after it
  for (int sel = 0; sel < k; ++sel) {
    Candidate best{-INFINITY, kNoIndex};
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const Candidate c{load_logit(logits, base + i), i};
      if (after(c, prev) && better(c, best)) best = c;
    }
    best = block_best(best, scratch);
    if (threadIdx.x == 0) {
      values[size_t(blockIdx.x) * size_t(k) + size_t(sel)] = best.value;
      indices[size_t(blockIdx.x) * size_t(k) + size_t(sel)] = best.index;
    }
    prev = best;
  }
}

void check(const DeviceLogits& logits, const char* what) {
  if (!logits.data || logits.rows < 0 || logits.vocab <= 0)
    throw std::invalid_argument(std::string(what) + ": bad logits (null, no rows or no vocab)");
}

}  // namespace

void cuda_softmax(float* probs, const DeviceLogits& logits, float temperature,
                  cudaStream_t stream) {
  check(logits, "cuda_softmax");
  if (!(temperature > 0.0f)) throw std::invalid_argument("cuda_softmax: temperature must be > 0");
  if (logits.rows == 0) return;
  const float inv_t = 1.0f / temperature;
  if (logits.type == LogitsType::F32)
    softmax_kernel<float><<<unsigned(logits.rows), kThreads, 0, stream>>>(
        probs, static_cast<const float*>(logits.data), logits.vocab, inv_t);
  else
    softmax_kernel<bf16><<<unsigned(logits.rows), kThreads, 0, stream>>>(
        probs, static_cast<const bf16*>(logits.data), logits.vocab, inv_t);
  SSD_CUDA_CHECK_LAUNCH();
}

void cuda_argmax(int32_t* out, const DeviceLogits& logits, cudaStream_t stream) {
  check(logits, "cuda_argmax");
  if (logits.rows == 0) return;
  if (logits.type == LogitsType::F32)
    argmax_kernel<float><<<unsigned(logits.rows), kThreads, 0, stream>>>(
        out, static_cast<const float*>(logits.data), logits.vocab);
  else
    argmax_kernel<bf16><<<unsigned(logits.rows), kThreads, 0, stream>>>(
        out, static_cast<const bf16*>(logits.data), logits.vocab);
  SSD_CUDA_CHECK_LAUNCH();
}

void cuda_top_k(float* values, int32_t* indices, const DeviceLogits& logits, int k,
                cudaStream_t stream) {
  check(logits, "cuda_top_k");
  if (k < 1 || k > logits.vocab) throw std::invalid_argument("cuda_top_k: k must be in [1, vocab]");
  if (logits.rows == 0) return;
  if (logits.type == LogitsType::F32)
    top_k_kernel<float><<<unsigned(logits.rows), kThreads, 0, stream>>>(
        values, indices, static_cast<const float*>(logits.data), logits.vocab, k);
  else
    top_k_kernel<bf16><<<unsigned(logits.rows), kThreads, 0, stream>>>(
        values, indices, static_cast<const bf16*>(logits.data), logits.vocab, k);
  SSD_CUDA_CHECK_LAUNCH();
}

}  // namespace ssd
