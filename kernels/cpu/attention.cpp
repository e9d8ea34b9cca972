// CpuBackend::attention: each (row, head) attends on its own, in a fixed order, so a row's
// result never depends on which other rows share the call (the batch-invariance contract).
//
// The q.k dot products and the weighted sum of V run in the GEMM's vector lanes (simd.h): a
// plain `dot += q[d] * k[d]` is one dependent chain of head_dim multiply-adds, which the compiler
// may not re-associate, and at a context of 128 it cost a llama-124m AR step about 1.5 ms and
// a 5-row verification about 5 ms of attention alone.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/simd.h"
#include "kernels/exp_weights.h"

namespace ssd {
namespace {

using simd::kLanes;
using simd::vec;

// q . k over head_dim values: whole vectors in the lanes, their fixed reduction tree, then the
// tail in order (simd::finish_dot, as the GEMM finishes an element).
float dot(const float* q, const float* k, int head_dim) {
  const int whole = head_dim - head_dim % kLanes;
  vec acc = simd::zero_vec();
  for (int d = 0; d < whole; d += kLanes)
    acc = simd::fma_vec(simd::load_vec(q + d), simd::load_vec(k + d), acc);
  return simd::finish_dot(acc, q + whole, k + whole, head_dim - whole);
}

// Query heads [h0, h1) of one row over its visible slots: softmax(q.k * scale) weighted sum
// of the V rows. Slot-major: each visible slot's K (then V) row is read once, contiguously, for
// all the heads; head by head it strode kv_dim floats from slot to slot, a new page every slot
// or two, which the prefetchers do not follow (AR at a context of 512: 6.7 GB/s from the KV
// cache). Every head's sums are the same either way. `score`: (h1 - h0) * count floats.
void attend(float* out, const float* q, const float* k_seq, const float* v_seq, size_t kv_dim,
            const int32_t* visible, int count, int h0, int h1, int group, int head_dim, float scale,
            float* score) {
  const int n = h1 - h0;
  // kSlotBlock slots at a time: their K rows stay in L1 across the heads, and each head's
  // kSlotBlock dot products are reduced together (simd::reduce_vecs, reduce_vec's bits): one at
  // a time, the reduction tree cost twice the dot's own multiply-adds.
  constexpr int kSlotBlock = 16;
  const int whole = head_dim - head_dim % kLanes, tail = head_dim - whole;
  int i = 0;
  for (; i + kSlotBlock <= count; i += kSlotBlock) {
    const float* k[kSlotBlock];
    for (int t = 0; t < kSlotBlock; ++t) k[t] = k_seq + size_t(visible[i + t]) * kv_dim;
    for (int h = h0; h < h1; ++h) {
      const float* qh = q + size_t(h) * head_dim;
      const size_t at = size_t(h / group) * head_dim;
      vec acc[1][kSlotBlock];
#pragma GCC unroll 16
      for (int t = 0; t < kSlotBlock; ++t) acc[0][t] = simd::zero_vec();
      for (int d = 0; d < whole; d += kLanes) {
        const vec qv = simd::load_vec(qh + d);
#pragma GCC unroll 16
        for (int t = 0; t < kSlotBlock; ++t)
          acc[0][t] = simd::fma_vec(qv, simd::load_vec(k[t] + at + d), acc[0][t]);
      }
      float dots[1][kSlotBlock];
      simd::reduce_vecs(acc, dots);
      float* out_scores = score + size_t(h - h0) * count + i;
      for (int t = 0; t < kSlotBlock; ++t)
        out_scores[t] = simd::add_tail(dots[0][t], qh + whole, k[t] + at + whole, tail) * scale;
    }
  }
  for (; i < count; ++i) {
    const float* k = k_seq + size_t(visible[i]) * kv_dim;
    for (int h = h0; h < h1; ++h)
      score[size_t(h - h0) * count + i] =
          dot(q + size_t(h) * head_dim, k + size_t(h / group) * head_dim, head_dim) * scale;
  }
  // Softmax in place: score becomes each slot's probability, exp(s - top) / total, the
  // exponentials 16 lanes at a time and their total in double (kernels/exp_weights.h): exp one
  // call at a time, chained through the running total, was 40% of a 5-row verification's
  // attention.
  for (int j = 0; j < n; ++j) {
    float* row = score + size_t(j) * count;
    const float top = max_ignoring_nan(row, count);
    const float total = float(exp_weights(row, count, top, 1.0f, row));
    for (int i = 0; i < count; ++i) row[i] = row[i] / total;
  }
  // out = sum_i p_i v_i in visible order: each of head_dim sums is its own chain of fmas. A head's
  // output stays in registers across a block of kSlotBlock slots (their V rows in L1), where it
  // was loaded and stored every 4 slots: one layer at context 224, 3 interleaved runs, 5 rows
  // 77-79 -> 67-71 us, one row 16.0-16.6 -> 13.9-14.4 us.
  std::fill(out + size_t(h0) * head_dim, out + size_t(h1) * head_dim, 0.0f);
  i = 0;
  for (; i + kSlotBlock <= count; i += kSlotBlock) {
    const float* v[kSlotBlock];
    for (int t = 0; t < kSlotBlock; ++t) v[t] = v_seq + size_t(visible[i + t]) * kv_dim;
    for (int h = h0; h < h1; ++h) {
      const float* p = score + size_t(h - h0) * count + i;
      const size_t at = size_t(h / group) * head_dim;
      float* o = out + size_t(h) * head_dim;
      for (int d = 0; d < whole; d += kLanes) {
        vec acc = simd::load_vec(o + d);
#pragma GCC unroll 16
        for (int t = 0; t < kSlotBlock; ++t)
          acc = simd::fma_vec(simd::broadcast_vec(p[t]), simd::load_vec(v[t] + at + d), acc);
        simd::store_vec(o + d, acc);
      }
      for (int d = whole; d < head_dim; ++d) {
        float acc = o[d];
        for (int t = 0; t < kSlotBlock; ++t) acc = std::fma(p[t], v[t][at + d], acc);
        o[d] = acc;
      }
    }
  }
  for (; i < count; ++i) {
    const float* v = v_seq + size_t(visible[i]) * kv_dim;
    for (int h = h0; h < h1; ++h) {
      const float p = score[size_t(h - h0) * count + i];
      const float* vh = v + size_t(h / group) * head_dim;
      float* o = out + size_t(h) * head_dim;
      for (int d = 0; d < head_dim; ++d) o[d] = std::fma(p, vh[d], o[d]);
    }
  }
}

}  // namespace

void attention_cpu(float* out, const float* q, const float* k_cache, const float* v_cache,
                   const KVLayout& layout, int heads, const AttentionMask& mask, int threads) {
  if (mask.rows <= 0) return;  // an empty step (e.g. a draft with no sequence left to draft)
  const int hd = layout.head_dim;
  const int group = heads / layout.kv_heads;
  const size_t kv_dim = size_t(layout.kv_heads) * hd;
  const float scale = 1.0f / std::sqrt(float(hd));
  // The slots each row sees, in a fixed order: its prefix first, then its explicit extras.
  std::vector<size_t> begin(size_t(mask.rows) + 1, 0);
  std::vector<int32_t> visible;
  for (int r = 0; r < mask.rows; ++r) {
    for (int s = 0; s < mask.prefix[r]; ++s) visible.push_back(s);
    for (int e = mask.extra_begin[r]; e < mask.extra_begin[r + 1]; ++e)
      visible.push_back(mask.extra_slots[e]);
    begin[size_t(r) + 1] = visible.size();
  }
  // Rows split into blocks of heads only as far as the threads need work: one block per row
  // with one thread, so each K/V row is read once per query row.
  const int blocks = std::min(heads, std::max(1, (threads + mask.rows - 1) / mask.rows));
  const int per_block = (heads + blocks - 1) / blocks;
  const int work = mask.rows * blocks;
#pragma omp parallel num_threads(threads) if (work > 1 && threads > 1)
  {
    std::vector<float> score;
#pragma omp for schedule(static)
    for (int item = 0; item < work; ++item) {
      const int r = item / blocks, h0 = (item % blocks) * per_block;
      const int h1 = std::min(heads, h0 + per_block);
      if (h0 >= h1) continue;
      const int count = int(begin[size_t(r) + 1] - begin[size_t(r)]);
      score.resize(size_t(h1 - h0) * count);
      const size_t seq_base = size_t(mask.seq[r]) * layout.capacity * kv_dim;
      const size_t row = size_t(r) * heads * hd;
      attend(out + row, q + row, k_cache + seq_base, v_cache + seq_base, kv_dim,
             visible.data() + begin[size_t(r)], count, h0, h1, group, hd, scale, score.data());
    }
  }
}

}  // namespace ssd
