// CpuBackend::attention: each (row, head) sums in a fixed order of its own, so a row's result
// never depends on which other rows share the call (the batch-invariance contract); rows of one
// sequence share the reads of the K/V rows they all see.
//
// The q.k dot products and the weighted sum of V run in the GEMM's vector lanes (simd.h): a
// plain `dot += q[d] * k[d]` is one dependent chain of head_dim multiply-adds, which the compiler
// may not re-associate, and at a context of 128 it cost a llama-124m AR step about 1.5 ms and
// a 5-row verification about 5 ms of attention alone.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/kv_sweep.h"
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

// One query row of an attention call: its q and output ([heads][head_dim]), the slots it sees
// in order, and its scores ((h1 - h0) * count floats for the call's heads [h0, h1)).
struct QueryRow {
  float* out;
  const float* q;
  const int32_t* visible;
  int count;
  float* score;
};

// What the rows of one sequence share in one call: their K/V rows, the heads taken, the shape.
struct HeadBlock {
  const float* k_seq;
  const float* v_seq;
  size_t kv_dim;
  int h0, h1, group, head_dim;
  float scale;
};

// kSlotBlock slots at a time: their K (V) rows stay in L1 across the heads and the rows, and
// each head's kSlotBlock dot products are reduced together (simd::reduce_vecs, reduce_vec's
// bits): one at a time, the reduction tree cost twice the dot's own multiply-adds.
constexpr int kSlotBlock = 16;

// A head's dot products with kSlotBlock consecutive K rows whose head_dim is Vectors whole
// vectors, q in registers and the slots outermost: each K row's vectors from one pointer. With
// head_dim outermost (the general loop below) each fma's K address was the previous one plus
// kv_dim, a chain of integer adds beside the fmas. Each accumulator takes its vectors in the
// same order from zero, so the sums are the same bits.
template <int Vectors>
void consecutive_slot_dots(const float* qh, const float* k0, size_t kv_dim,
                           vec (&acc)[1][kSlotBlock]) {
  vec q[Vectors];
#pragma GCC unroll 16
  for (int d = 0; d < Vectors; ++d) q[d] = simd::load_vec(qh + d * kLanes);
#pragma GCC unroll 16
  for (int t = 0; t < kSlotBlock; ++t) {
    const float* kt = k0 + t * kv_dim;
    vec a = simd::zero_vec();
#pragma GCC unroll 16
    for (int d = 0; d < Vectors; ++d) a = simd::fma_vec(q[d], simd::load_vec(kt + d * kLanes), a);
    acc[0][t] = a;
  }
}

// Scores of the row's list entries [from, to), every head of the block: q.k * scale. Each score
// is its own dot product, summed the same way in the blocks and one by one (finish_dot =
// reduce_vec + add_tail), so where the blocks start never changes a bit.
void row_scores(const QueryRow& row, int from, int to, const HeadBlock& b) {
  const int head_dim = b.head_dim, whole = head_dim - head_dim % kLanes;
  const int tail = head_dim - whole;
  int i = from;
  for (; i + kSlotBlock <= to; i += kSlotBlock) {
    const float* k[kSlotBlock];
    for (int t = 0; t < kSlotBlock; ++t) k[t] = b.k_seq + size_t(row.visible[i + t]) * b.kv_dim;
    // Consecutive slots (every block of a causal prefix) are one pointer stepping by kv_dim:
    // sixteen pointers do not fit the general registers, and reloading them from the stack
    // took a load beside every fma.
    bool consecutive = true;
    for (int t = 1; t < kSlotBlock; ++t) consecutive &= row.visible[i + t] == row.visible[i] + t;
    for (int h = b.h0; h < b.h1; ++h) {
      const float* qh = row.q + size_t(h) * head_dim;
      const size_t at = size_t(h / b.group) * head_dim;
      vec acc[1][kSlotBlock];
      // q and 16 accumulators in registers: AVX-512's 32 hold them, AVX2's 16 do not.
      constexpr bool kWide = simd::kRegisters >= 32;
      if (kWide && consecutive && head_dim == 4 * kLanes) {
        consecutive_slot_dots<4>(qh, k[0] + at, b.kv_dim, acc);
      } else if (kWide && consecutive && head_dim == 8 * kLanes) {
        consecutive_slot_dots<8>(qh, k[0] + at, b.kv_dim, acc);
      } else if (consecutive) {
#pragma GCC unroll 16
        for (int t = 0; t < kSlotBlock; ++t) acc[0][t] = simd::zero_vec();
        for (int d = 0; d < whole; d += kLanes) {
          const vec qv = simd::load_vec(qh + d);
          const float* kt = k[0] + at + d;
#pragma GCC unroll 16
          for (int t = 0; t < kSlotBlock; ++t, kt += b.kv_dim)
            acc[0][t] = simd::fma_vec(qv, simd::load_vec(kt), acc[0][t]);
        }
      } else {
#pragma GCC unroll 16
        for (int t = 0; t < kSlotBlock; ++t) acc[0][t] = simd::zero_vec();
        for (int d = 0; d < whole; d += kLanes) {
          const vec qv = simd::load_vec(qh + d);
#pragma GCC unroll 16
          for (int t = 0; t < kSlotBlock; ++t)
            acc[0][t] = simd::fma_vec(qv, simd::load_vec(k[t] + at + d), acc[0][t]);
        }
      }
      float dots[1][kSlotBlock];
      simd::reduce_vecs(acc, dots);
      float* out_scores = row.score + size_t(h - b.h0) * row.count + i;
      if (tail == 0) {
        // A vector multiply rounds each lane as the scalar one does; lane by lane, GCC took
        // each dot out of the reduction's register on its own.
        const vec scale = simd::broadcast_vec(b.scale);
        for (int t = 0; t < kSlotBlock; t += kLanes)
          simd::store_vec(out_scores + t, simd::load_vec(dots[0] + t) * scale);
      } else {
        for (int t = 0; t < kSlotBlock; ++t)
          out_scores[t] = simd::add_tail(dots[0][t], qh + whole, k[t] + at + whole, tail) * b.scale;
      }
    }
  }
  for (; i < to; ++i) {
    const float* k = b.k_seq + size_t(row.visible[i]) * b.kv_dim;
    for (int h = b.h0; h < b.h1; ++h)
      row.score[size_t(h - b.h0) * row.count + i] =
          dot(row.q + size_t(h) * head_dim, k + size_t(h / b.group) * head_dim, head_dim) * b.scale;
  }
}

// Softmax in place: score becomes each slot's probability, exp(s - top) / total, the
// exponentials 16 lanes at a time and their total in double (kernels/exp_weights.h): exp one
// call at a time, chained through the running total, was 40% of a 5-row verification's
// attention.
void row_softmax(const QueryRow& row, const HeadBlock& b) {
  for (int j = 0; j < b.h1 - b.h0; ++j) {
    float* scores = row.score + size_t(j) * row.count;
    const float top = max_ignoring_nan(scores, row.count);
    const float total = float(exp_weights(scores, row.count, top, 1.0f, scores));
    for (int i = 0; i < row.count; ++i) scores[i] = scores[i] / total;
  }
}

// out += sum_i p_i v_i over the row's list entries [from, to), in list order: each of head_dim
// sums is its own chain of fmas (vector lanes and std::fma round alike), so the blocks' starts
// never change a bit. A head's output stays in registers across a block of kSlotBlock slots
// (their V rows in L1), where it was loaded and stored every 4 slots: one layer at context
// 224, 3 interleaved runs, 5 rows 77-79 -> 67-71 us, one row 16.0-16.6 -> 13.9-14.4 us.
//
// Each output vector's chain of kSlotBlock fmas waits on the fma before it, and each fma loaded
// its own V vector: a head of 4 vectors (head_dim 64 in 16 lanes) kept 4 chains in flight where
// the two fma pipes need about 8, and the loads bound the loop. The heads of one K/V group read
// the same V rows, so heads_in_block takes several heads of a group together: one V load for
// all of them, the chains side by side. Same sums, same order.
template <int Vectors, int Heads>
void heads_in_block(const QueryRow& row, int i, const float* const* v, int h, const HeadBlock& b) {
  vec acc[Heads][Vectors];
  const float* p[Heads];
  float* o[Heads];
  const size_t at = size_t(h / b.group) * b.head_dim;  // every head here is in h's group
#pragma GCC unroll 4
  for (int n = 0; n < Heads; ++n) {
    p[n] = row.score + size_t(h + n - b.h0) * row.count + i;
    o[n] = row.out + size_t(h + n) * b.head_dim;
#pragma GCC unroll 16
    for (int d = 0; d < Vectors; ++d) acc[n][d] = simd::load_vec(o[n] + d * kLanes);
  }
  for (int t = 0; t < kSlotBlock; ++t) {
    vec weight[Heads];
#pragma GCC unroll 4
    for (int n = 0; n < Heads; ++n) weight[n] = simd::broadcast_vec(p[n][t]);
    const float* vt = v[t] + at;
#pragma GCC unroll 16
    for (int d = 0; d < Vectors; ++d) {
      vec values = simd::load_vec(vt + d * kLanes);
      simd::keep_in_register<Heads, float>(values);  // one load for the heads, not one each
#pragma GCC unroll 4
      for (int n = 0; n < Heads; ++n) acc[n][d] = simd::fma_vec(weight[n], values, acc[n][d]);
    }
  }
#pragma GCC unroll 4
  for (int n = 0; n < Heads; ++n)
#pragma GCC unroll 16
    for (int d = 0; d < Vectors; ++d) simd::store_vec(o[n] + d * kLanes, acc[n][d]);
}

// Heads [h, h + n) of one group through heads_in_block, as many at a time as half the vector
// registers hold (all 3 of a llama-124m group with AVX-512: as 2 + 1, the lone head's 4 chains
// waited on each other).
template <int Vectors>
void group_heads_in_block(const QueryRow& row, int i, const float* const* v, int h, int n,
                          const HeadBlock& b) {
  constexpr int kMost = std::max(1, simd::kRegisters / 2 / Vectors);  // AVX2: one head at a time
  for (; n > 0; h += kMost, n -= kMost) {
    switch (std::min(n, kMost)) {
      case 1:
        heads_in_block<Vectors, 1>(row, i, v, h, b);
        break;
      case 2:
        heads_in_block<Vectors, 2>(row, i, v, h, b);
        break;
      case 3:
        if constexpr (kMost >= 3) heads_in_block<Vectors, 3>(row, i, v, h, b);
        break;
      default:
        if constexpr (kMost >= 4) heads_in_block<Vectors, 4>(row, i, v, h, b);
        break;
    }
  }
}

// The block's heads group by group (a group's heads in [h0, h1)), where head_dim is 4 or 8
// whole vectors; false (nothing done) for other head sizes.
bool values_by_group(const QueryRow& row, int i, const float* const* v, const HeadBlock& b) {
  const int vectors = b.head_dim / kLanes;
  if (b.head_dim % kLanes != 0 || (vectors != 4 && vectors != 8)) return false;
  for (int h = b.h0; h < b.h1;) {
    const int end = std::min(b.h1, (h / b.group + 1) * b.group);
    if (vectors == 4)
      group_heads_in_block<4>(row, i, v, h, end - h, b);
    else
      group_heads_in_block<8>(row, i, v, h, end - h, b);
    h = end;
  }
  return true;
}

void row_values(const QueryRow& row, int from, int to, const HeadBlock& b) {
  const int head_dim = b.head_dim, whole = head_dim - head_dim % kLanes;
  int i = from;
  for (; i + kSlotBlock <= to; i += kSlotBlock) {
    const float* v[kSlotBlock];
    for (int t = 0; t < kSlotBlock; ++t) v[t] = b.v_seq + size_t(row.visible[i + t]) * b.kv_dim;
    if (values_by_group(row, i, v, b)) continue;
    for (int h = b.h0; h < b.h1; ++h) {
      const float* p = row.score + size_t(h - b.h0) * row.count + i;
      const size_t at = size_t(h / b.group) * head_dim;
      float* o = row.out + size_t(h) * head_dim;
      // The block's weights broadcast once for all of head_dim (each was loaded again for
      // every vector of it: two loads per fma, which bound this loop).
      vec weight[kSlotBlock];
#pragma GCC unroll 16
      for (int t = 0; t < kSlotBlock; ++t) weight[t] = simd::broadcast_vec(p[t]);
      for (int d = 0; d < whole; d += kLanes) {
        vec acc = simd::load_vec(o + d);
#pragma GCC unroll 16
        for (int t = 0; t < kSlotBlock; ++t)
          acc = simd::fma_vec(weight[t], simd::load_vec(v[t] + at + d), acc);
        simd::store_vec(o + d, acc);
      }
      for (int d = whole; d < head_dim; ++d) {
        float acc = o[d];
        for (int t = 0; t < kSlotBlock; ++t) acc = std::fma(p[t], v[t][at + d], acc);
        o[d] = acc;
      }
    }
  }
  for (; i < to; ++i) {
    const float* v = b.v_seq + size_t(row.visible[i]) * b.kv_dim;
    for (int h = b.h0; h < b.h1; ++h) {
      const float p = row.score[size_t(h - b.h0) * row.count + i];
      const float* vh = v + size_t(h / b.group) * head_dim;
      float* o = row.out + size_t(h) * head_dim;
      for (int d = 0; d < head_dim; ++d) o[d] = std::fma(p, vh[d], o[d]);
    }
  }
}

// The columns of a K/V row that the block's heads use: [first, last).
size_t first_column(const HeadBlock& b) {
  return size_t(b.h0 / b.group) * b.head_dim;
}
size_t last_column(const HeadBlock& b) {
  return size_t((b.h1 - 1) / b.group + 1) * b.head_dim;
}

// The shared K (V) rows of slots [from, to) into L2 ahead of the pass (kv_sweep.h).
void sweep_rows(const float* cache, int from, int to, const HeadBlock& b) {
  kv_sweep::sweep(cache, b.kv_dim, from, to, first_column(b), last_column(b));
}

// Query heads [h0, h1) of n rows of one sequence whose lists all begin with the same `common`
// slots (a verification window, or SSD branches over one committed prefix): softmax(q.k *
// scale) weighted sum of the V rows. The shared slots go block by block with every row inside
// the block, so each K and V row comes from memory once for all the rows: row by row, a
// 5-row step at a context of 512 re-read 3 MB of K/V per layer per row from L3. Slot-major
// within a row: each visible slot's K (then V) row is read once, contiguously, for all the
// heads (head by head it strode kv_dim floats from slot to slot, which the prefetchers do not
// follow). A row's sums are the same whatever the grouping.
void attend(const QueryRow* rows, int n, int common, const HeadBlock& b) {
  const int shared = common - common % kSlotBlock;
  const int chunk = kv_sweep::rows_per_sweep(last_column(b) - first_column(b), kSlotBlock);
  for (int c = 0; c < shared; c += chunk) {
    const int end = std::min(shared, c + chunk);
    sweep_rows(b.k_seq, c, end, b);
    for (int i = c; i < end; i += kSlotBlock)
      for (int r = 0; r < n; ++r) row_scores(rows[r], i, i + kSlotBlock, b);
  }
  for (int r = 0; r < n; ++r) {
    row_scores(rows[r], shared, rows[r].count, b);
    row_softmax(rows[r], b);
    std::fill(rows[r].out + size_t(b.h0) * b.head_dim, rows[r].out + size_t(b.h1) * b.head_dim,
              0.0f);
  }
  for (int c = 0; c < shared; c += chunk) {
    const int end = std::min(shared, c + chunk);
    sweep_rows(b.v_seq, c, end, b);
    for (int i = c; i < end; i += kSlotBlock)
      for (int r = 0; r < n; ++r) row_values(rows[r], i, i + kSlotBlock, b);
  }
  for (int r = 0; r < n; ++r) row_values(rows[r], shared, rows[r].count, b);
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
  // Sized first and filled in place: a push_back per slot was 11% of a 5-row call's perf samples
  // at a context of 128 (3% now).
  std::vector<size_t> begin(size_t(mask.rows) + 1, 0);
  for (int r = 0; r < mask.rows; ++r)
    begin[size_t(r) + 1] = begin[size_t(r)] + size_t(mask.prefix[r]) +
                           size_t(mask.extra_begin[r + 1] - mask.extra_begin[r]);
  std::vector<int32_t> visible(begin.back());
  for (int r = 0; r < mask.rows; ++r) {
    int32_t* list = visible.data() + begin[size_t(r)];
    std::iota(list, list + mask.prefix[r], 0);
    std::copy(mask.extra_slots + mask.extra_begin[r], mask.extra_slots + mask.extra_begin[r + 1],
              list + mask.prefix[r]);
  }
  // Consecutive rows of one sequence attend together; their lists share the slots before the
  // smallest prefix.
  std::vector<int> group_begin{0};
  for (int r = 1; r <= mask.rows; ++r)
    if (r == mask.rows || mask.seq[r] != mask.seq[r - 1]) group_begin.push_back(r);
  const int groups = int(group_begin.size()) - 1;
  // Groups split into blocks of heads only as far as the threads need work: one block per
  // group with one thread, so each K/V row is read once per group.
  const int blocks = std::min(heads, std::max(1, (threads + groups - 1) / groups));
  const int per_block = (heads + blocks - 1) / blocks;
  const int work = groups * blocks;
#pragma omp parallel num_threads(threads) if (work > 1 && threads > 1)
  {
    std::vector<float> score;
    std::vector<QueryRow> rows;
#pragma omp for schedule(static)
    for (int item = 0; item < work; ++item) {
      const int g = item / blocks, h0 = (item % blocks) * per_block;
      const int h1 = std::min(heads, h0 + per_block);
      if (h0 >= h1) continue;
      const int r0 = group_begin[size_t(g)], r1 = group_begin[size_t(g) + 1];
      size_t floats = 0;
      int common = mask.prefix[r0];
      for (int r = r0; r < r1; ++r) {
        floats += size_t(h1 - h0) * (begin[size_t(r) + 1] - begin[size_t(r)]);
        common = std::min(common, mask.prefix[r]);
      }
      score.resize(floats);
      rows.clear();
      float* next_score = score.data();
      for (int r = r0; r < r1; ++r) {
        const int count = int(begin[size_t(r) + 1] - begin[size_t(r)]);
        const size_t at = size_t(r) * heads * hd;
        rows.push_back({out + at, q + at, visible.data() + begin[size_t(r)], count, next_score});
        next_score += size_t(h1 - h0) * count;
      }
      const size_t seq_base = size_t(mask.seq[r0]) * layout.capacity * kv_dim;
      const HeadBlock b{k_cache + seq_base, v_cache + seq_base, kv_dim, h0, h1, group, hd, scale};
      attend(rows.data(), r1 - r0, common, b);
    }
  }
}

}  // namespace ssd
