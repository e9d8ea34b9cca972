// Masked grouped-query attention over the bf16 KV cache.
//
// One block of 128 threads per (row, head). The slots the row sees form a list: the causal
// prefix [0, prefix) first, then its explicit extra slots in the given order. The list is
// walked in tiles of 128 entries with an online softmax (running max and sum, fp32):
//   1. the tile's slot numbers go to shared memory;
//   2. each warp computes scores for entries warp, warp + 4, ...: lane l sums q[d] * k[d] over
//      d = l, l + 32, ... in order, then a warp butterfly; score = dot * 1/sqrt(head_dim);
//   3. warp 0 takes the tile max, rescales the running state and turns scores into
//      p = exp(score - max) (lane l sums entries l, l + 32, ... in order, then a butterfly);
//   4. thread t accumulates o[d] = o[d] * rescale + sum_i p_i * v_i[d] for its dims
//      d = t, t + 128, in list order.
// Finally o / sum. Every step's order depends only on the list's length and head_dim, and each
// list entry is addressed by its position in the list, never by its slot number: a branch row
// (prefix P plus its path's scratch slots) therefore gets bit-identical output to the same
// tokens decoded causally (prefix P + depth), and a row's output never depends on the other
// rows in the call (batch invariance).
//
// Decode with few rows runs only rows * heads blocks; a split-KV (flash-decoding) variant with a
// split count fixed by the list length would raise occupancy for long contexts.
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda_kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 128;  // list entries per tile; step 1 needs kTile <= kThreads
constexpr int kDimsPerThread = kMaxAttentionHeadDim / kThreads;
static_assert(kTile <= kThreads, "one thread writes each tile entry's slot");
static_assert(kMaxAttentionHeadDim % kThreads == 0, "whole dims per thread");

__global__ void __launch_bounds__(kThreads)
    attention_kernel(bf16* __restrict__ out, const bf16* __restrict__ q,
                     const bf16* __restrict__ k_cache, const bf16* __restrict__ v_cache,
                     DeviceMask mask, int heads, int group, int head_dim, int capacity,
                     size_t kv_dim, float scale) {
  __shared__ float s_q[kMaxAttentionHeadDim];
  __shared__ float s_p[kTile];
  __shared__ int s_slot[kTile];
  __shared__ float s_rescale;
  __shared__ float s_total;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int row = int(blockIdx.x / unsigned(heads));
  const int head = int(blockIdx.x % unsigned(heads));
  const int kv_head = head / group;
  const int prefix = mask.prefix[row];
  const int extra_begin = mask.extra_begin[row];
  const int n = prefix + (mask.extra_begin[row + 1] - extra_begin);
  const size_t seq_base = size_t(mask.seq[row]) * size_t(capacity);
  const size_t head_offset = size_t(kv_head) * size_t(head_dim);
  const size_t qo_offset = (size_t(row) * size_t(heads) + size_t(head)) * size_t(head_dim);

  for (int d = tid; d < head_dim; d += kThreads) s_q[d] = __bfloat162float(q[qo_offset + d]);

  float acc[kDimsPerThread];
#pragma unroll
  for (int j = 0; j < kDimsPerThread; ++j) acc[j] = 0.0f;
  // Running max and sum; only warp 0's copies are maintained (identical in all its lanes).
  float running_max = -INFINITY, running_sum = 0.0f;

  for (int t0 = 0; t0 < n; t0 += kTile) {
    const int len = min(kTile, n - t0);
    if (tid < len) {
      const int i = t0 + tid;
      s_slot[tid] = i < prefix ? i : mask.extra_slots[extra_begin + (i - prefix)];
    }
    __syncthreads();  // s_slot (and, on the first tile, s_q) ready

    for (int i = warp; i < len; i += kWarps) {
      const bf16* k = k_cache + (seq_base + size_t(s_slot[i])) * kv_dim + head_offset;
      float dot = 0.0f;
      for (int d = lane; d < head_dim; d += 32) dot = fmaf(s_q[d], __bfloat162float(k[d]), dot);
      dot = warp_sum(dot);
      if (lane == 0) s_p[i] = dot * scale;
    }
    __syncthreads();  // scores ready

    if (warp == 0) {
      // Each lane reads and then overwrites only its own entries lane, lane + 32, ...
      float tile_max = -INFINITY;
      for (int i = lane; i < len; i += 32) tile_max = fmaxf(tile_max, s_p[i]);
      tile_max = warp_max(tile_max);
      const float new_max = fmaxf(running_max, tile_max);
      float tile_sum = 0.0f;
      for (int i = lane; i < len; i += 32) {
        const float p = expf(s_p[i] - new_max);
        s_p[i] = p;
        tile_sum += p;
      }
      tile_sum = warp_sum(tile_sum);
      // exp(-inf) = 0 on the first tile, when nothing has been accumulated yet.
      const float rescale = expf(running_max - new_max);
      running_sum = running_sum * rescale + tile_sum;
      running_max = new_max;
      if (lane == 0) s_rescale = rescale;
    }
    __syncthreads();  // probabilities and rescale ready

    const float rescale = s_rescale;
#pragma unroll
    for (int j = 0; j < kDimsPerThread; ++j) {
      const int d = tid + j * kThreads;
      if (d < head_dim) {
        float o = acc[j] * rescale;
        const bf16* v = v_cache + seq_base * kv_dim + head_offset + size_t(d);
        for (int i = 0; i < len; ++i)
          o = fmaf(s_p[i], __bfloat162float(v[size_t(s_slot[i]) * kv_dim]), o);
        acc[j] = o;
      }
    }
    __syncthreads();  // everyone is done with s_slot, s_p and s_rescale of this tile
  }

  if (tid == 0) s_total = running_sum;  // thread 0 is lane 0 of warp 0
  __syncthreads();
  const float total = s_total;
#pragma unroll
  for (int j = 0; j < kDimsPerThread; ++j) {
    const int d = tid + j * kThreads;
    // A row that sees no slot gets zeros, as on the CPU (forward() rejects such rows anyway).
    if (d < head_dim) out[qo_offset + d] = __float2bfloat16(n > 0 ? acc[j] / total : 0.0f);
  }
}

}  // namespace

void attention(bf16* out, const bf16* q, const bf16* k_cache, const bf16* v_cache,
               const DeviceMask& mask, int rows, int heads, int kv_heads, int head_dim,
               int capacity, cudaStream_t stream) {
  if (rows <= 0 || heads <= 0) return;
  const size_t blocks = size_t(rows) * size_t(heads);
  // The scale as the CPU backend forms it: 1 / sqrt(float(head_dim)).
  const float scale = 1.0f / std::sqrt(float(head_dim));
  attention_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(
      out, q, k_cache, v_cache, mask, heads, heads / kv_heads, head_dim, capacity,
      size_t(kv_heads) * size_t(head_dim), scale);
  SSD_CUDA_CHECK_LAUNCH();
}

}  // namespace ssd::cuda_kernels
