// Masked grouped-query attention over the bf16 KV cache, split along the key list
// (flash-decoding).
//
// The slots a row sees form a list: the causal prefix [0, prefix) first, then its explicit
// extra slots in the given order. The list is cut into splits of kSplit entries at fixed list
// positions (0, kSplit, 2 kSplit, ...), and one block of 128 threads takes one (row, head,
// split), so a decode step with a long context runs many blocks at once instead of walking
// the whole list in rows * heads blocks (each step of that walk waited a full memory latency).
// Pass 1, per split:
//   1. the split's slot numbers go to shared memory;
//   2. each warp computes the scores of entries warp, warp + 4, ... (kUnroll at once, so their
//      key loads are in flight together): lane l sums q[d] * k[d] over d = l, l + 32, ... in
//      order, then a warp butterfly; score = dot * 1/sqrt(head_dim);
//   3. warp 0 takes the split's max m and p = exp(score - m), and their sum l (lane l sums
//      entries l, l + 32, ... in order, then a butterfly);
//   4. thread t accumulates o[d] = sum_i p_i * v_i[d] for its dims d = t, t + 128, in list
//      order (kUnroll value loads issued before they are added, in order).
//   It writes (m, l, o[0..head_dim)) as fp32 partials.
// Pass 2, per (row, head): M = max of the splits' m, L = sum_s l_s exp(m_s - M) and
// o = sum_s o_s exp(m_s - M), both in split order; out = o / L.
// Every step's order depends only on the list's length and head_dim, and each list entry is
// addressed by its position in the list, never by its slot number: a branch row (prefix P plus
// its path's scratch slots) therefore gets bit-identical output to the same tokens decoded
// causally (prefix P + depth), and a row's output never depends on the other rows in the call
// (batch invariance).
#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda_kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kSplit = 32;  // list entries per block (pass 1)
constexpr int kUnroll = 8;  // list entries whose K or V loads are issued together
constexpr int kDimsPerThread = kMaxAttentionHeadDim / kThreads;
static_assert(kSplit <= kThreads, "one thread writes each split entry's slot");
static_assert(kMaxAttentionHeadDim % kThreads == 0, "whole dims per thread");

// Splits for the longest list (at least one, so the grid is never empty); see kernels.cuh.
int split_count(int longest_list) {
  const int needed = std::max(1, (longest_list + kSplit - 1) / kSplit);
  int splits = 1;
  while (splits < needed) splits *= 2;
  return splits;
}

__device__ __forceinline__ int list_length(const DeviceMask& mask, int row) {
  return mask.prefix[row] + (mask.extra_begin[row + 1] - mask.extra_begin[row]);
}

// Where the partials of (row, head, split) start: [m, l, o[0], ..., o[head_dim - 1]].
__device__ __forceinline__ size_t partial_offset(int row_head, int split, int splits,
                                                 int head_dim) {
  return (size_t(row_head) * size_t(splits) + size_t(split)) * size_t(head_dim + 2);
}

__global__ void __launch_bounds__(kThreads)
    attention_split_kernel(float* __restrict__ part, const bf16* __restrict__ q,
                           const bf16* __restrict__ k_cache, const bf16* __restrict__ v_cache,
                           DeviceMask mask, int heads, int group, int head_dim, int capacity,
                           size_t kv_dim, float scale, int splits) {
  __shared__ float s_q[kMaxAttentionHeadDim];
  __shared__ float s_p[kSplit];
  __shared__ int s_slot[kSplit];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int row_head = int(blockIdx.x), split = int(blockIdx.y);
  const int row = row_head / heads;
  const int head = row_head % heads;
  const int n = list_length(mask, row);
  const int begin = split * kSplit;
  if (begin >= n) return;  // past this row's list: pass 2 never reads it
  const int len = min(kSplit, n - begin);
  const int prefix = mask.prefix[row];
  const int extra_begin = mask.extra_begin[row];
  const int kv_head = head / group;
  const size_t seq_base = size_t(mask.seq[row]) * size_t(capacity);
  const size_t head_offset = size_t(kv_head) * size_t(head_dim);
  const size_t q_offset = size_t(row_head) * size_t(head_dim);

  for (int d = tid; d < head_dim; d += kThreads) s_q[d] = __bfloat162float(q[q_offset + d]);
  if (tid < len) {
    const int i = begin + tid;
    s_slot[tid] = i < prefix ? i : mask.extra_slots[extra_begin + (i - prefix)];
  }
  __syncthreads();  // s_q and s_slot ready

  for (int i0 = warp; i0 < len; i0 += kWarps * kUnroll) {
    float dot[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dot[u] = 0.0f;
    for (int d0 = 0; d0 < head_dim; d0 += 32) {
      const int d = d0 + lane;
      float kv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = i0 + u * kWarps;
        kv[u] = i < len && d < head_dim
                    ? __bfloat162float(
                          k_cache[(seq_base + size_t(s_slot[i])) * kv_dim + head_offset + d])
                    : 0.0f;
      }
      if (d < head_dim) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) dot[u] = fmaf(s_q[d], kv[u], dot[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = i0 + u * kWarps;
      const float sum = warp_sum(dot[u]);
      if (lane == 0 && i < len) s_p[i] = sum * scale;
    }
  }
  __syncthreads();  // scores ready

  float* out = part + partial_offset(row_head, split, splits, head_dim);
  if (warp == 0) {
    // Each lane reads and then overwrites only its own entries lane, lane + 32, ...
    float m = -INFINITY;
    for (int i = lane; i < len; i += 32) m = fmaxf(m, s_p[i]);
    m = warp_max(m);
    float l = 0.0f;
    for (int i = lane; i < len; i += 32) {
      const float p = expf(s_p[i] - m);
      s_p[i] = p;
      l += p;
    }
    l = warp_sum(l);
    if (lane == 0) {
      out[0] = m;
      out[1] = l;
    }
  }
  __syncthreads();  // probabilities ready

#pragma unroll
  for (int j = 0; j < kDimsPerThread; ++j) {
    const int d = tid + j * kThreads;
    if (d < head_dim) {
      const bf16* v = v_cache + seq_base * kv_dim + head_offset + size_t(d);
      float o = 0.0f;
      for (int i0 = 0; i0 < len; i0 += kUnroll) {
        float vv[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
          vv[u] = i0 + u < len ? __bfloat162float(v[size_t(s_slot[i0 + u]) * kv_dim]) : 0.0f;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
          if (i0 + u < len) o = fmaf(s_p[i0 + u], vv[u], o);
      }
      out[2 + d] = o;
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    attention_combine_kernel(bf16* __restrict__ out, const float* __restrict__ part,
                             DeviceMask mask, int heads, int head_dim, int splits) {
  const int row_head = int(blockIdx.x);
  const int n = list_length(mask, row_head / heads);
  const int used = (n + kSplit - 1) / kSplit;
  float m = -INFINITY;
  for (int s = 0; s < used; ++s) m = fmaxf(m, part[partial_offset(row_head, s, splits, head_dim)]);
  float total = 0.0f;
  for (int s = 0; s < used; ++s) {
    const float* p = part + partial_offset(row_head, s, splits, head_dim);
    total += p[1] * expf(p[0] - m);
  }
  for (int d = int(threadIdx.x); d < head_dim; d += kThreads) {
    float o = 0.0f;
    for (int s = 0; s < used; ++s) {
      const float* p = part + partial_offset(row_head, s, splits, head_dim);
      o = fmaf(p[2 + d], expf(p[0] - m), o);
    }
    // A row that sees no slot gets zeros, as on the CPU (forward() rejects such rows anyway).
    out[size_t(row_head) * size_t(head_dim) + size_t(d)] =
        __float2bfloat16(used > 0 ? o / total : 0.0f);
  }
}

}  // namespace

int attention_splits(int longest_list) {
  return split_count(longest_list);
}

size_t attention_partial_floats(int rows, int heads, int head_dim, int longest_list) {
  const int splits = split_count(longest_list);
  return size_t(rows) * size_t(heads) * size_t(splits) * size_t(head_dim + 2);
}

void attention(bf16* out, float* partials, const bf16* q, const bf16* k_cache, const bf16* v_cache,
               const DeviceMask& mask, int rows, int heads, int kv_heads, int head_dim,
               int capacity, int longest_list, cudaStream_t stream) {
  if (rows <= 0 || heads <= 0) return;
  const int splits = split_count(longest_list);
  const unsigned row_heads = unsigned(size_t(rows) * size_t(heads));
  // The scale as the CPU backend forms it: 1 / sqrt(float(head_dim)).
  const float scale = 1.0f / std::sqrt(float(head_dim));
  attention_split_kernel<<<dim3(row_heads, unsigned(splits)), kThreads, 0, stream>>>(
      partials, q, k_cache, v_cache, mask, heads, heads / kv_heads, head_dim, capacity,
      size_t(kv_heads) * size_t(head_dim), scale, splits);
  SSD_CUDA_CHECK_LAUNCH();
  attention_combine_kernel<<<row_heads, kThreads, 0, stream>>>(out, partials, mask, heads, head_dim,
                                                               splits);
  SSD_CUDA_CHECK_LAUNCH();
}

}  // namespace ssd::cuda_kernels
