// The bf16 x bf16 -> fp32 GEMM (CpuCompute::BF16): x's rows rounded to bf16, multiplied with bf16
// weights by AVX512_BF16's vdpbf16ps, which adds two products into each of 16 fp32 lanes. That is
// twice the multiply-adds of an fp32 FMA per instruction, with no widening of the weights: the
// regime a GPU's tensor cores run verification and SSD's branch rows in.
//
// Batch invariance: each output element is summed in an order fixed by `in` alone. Its 16 lanes
// take the k-vectors in order (one vdpbf16ps each), the lanes reduce in simd.h's fixed tree, and
// the k tail past the last whole vector follows in k order with fp32 FMAs of the same rounded
// values. Which rows, panels and threads share a call changes which dot products run together,
// never how one is summed, so a row's bits are the same alone or among any number of rows.
//
// The matrix is packed as pack_matrix_bf16 packs it (packed_layout.h), with 32-wide k-vectors: a
// tile reads its panel front to back, one 64-byte operand per column per k-step.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/simd.h"

namespace ssd {

#if defined(__AVX512BF16__) && defined(__AVX512F__)

bool cpu_has_bf16_dot() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

namespace {

using packed_layout::kDotLanes;
using packed_layout::kPanel;
using packed_layout::panels;
using simd::vec;

constexpr int kMaxTileRows = 5;  // 5 x 5 accumulators + 5 rows of x + a weight: 31 registers

// Panels per group for 6 or more rows (see row_tiles_over_groups): one panel while the call's x
// fits in a quarter of a 1 MiB L2 beside it; for a wider x, 256 KiB of weights, which stay in L2
// while every row tile walks them with its own rows of x.
constexpr size_t kGroupBytes = 256 * 1024;
constexpr size_t kPanelGroupsXBytes = 256 * 1024;

inline __m512bh as_bf16(__m512i v) {
  return (__m512bh)v;  // the same 512 bits, typed as 32 bf16 (a vector cast, no instruction)
}

// x of a call, rounded to bf16 (vcvtne2ps2bf16: nearest even, as the GPU rounds) and laid out for
// the tiles: the vector part interleaved by row, [k-vector][row][kDotLanes], so that a tile's rows
// at one k-vector are one contiguous run; the k tail past in_vec per row, as the fp32 values of the
// rounded bf16. Kept per thread, so a call allocates nothing once its size has been seen.
class RoundedX {
 public:
  void build(const float* x, int rows, int in) {
    rows_ = rows;
    in_vec_ = in / kDotLanes * kDotLanes;
    tail_ = in - in_vec_;
    vectors_.resize(size_t(rows) * in_vec_ + 32);
    tails_.resize(size_t(rows) * tail_);
    uint16_t* base = aligned();
    for (int r = 0; r < rows; ++r) {
      const float* row = x + size_t(r) * in;
      for (int k = 0; k < in_vec_; k += kDotLanes) {
        const __m512bh pair =
            _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + k + 16), _mm512_loadu_ps(row + k));
        _mm512_store_si512(base + (size_t(k) * rows + size_t(r) * kDotLanes), (__m512i)pair);
      }
      if (tail_ > 0) {  // the same instruction rounds the tail
        const __mmask32 keep = (__mmask32(1) << tail_) - 1;
        const __m512 lo = _mm512_maskz_loadu_ps(__mmask16(keep), row + in_vec_);
        const __m512 hi = _mm512_maskz_loadu_ps(__mmask16(keep >> 16), row + in_vec_ + 16);
        const __m512bh pair = _mm512_cvtne2ps_pbh(hi, lo);
        alignas(64) uint16_t bits[kDotLanes];
        _mm512_store_si512(bits, (__m512i)pair);
        for (int t = 0; t < tail_; ++t) tails_[size_t(r) * tail_ + t] = bf16_to_float(bits[t]);
      }
    }
  }
  // Row r's k-vectors: the one at k lies at vectors(r) + k * rows.
  const uint16_t* vectors(int r) const { return aligned() + size_t(r) * kDotLanes; }
  const float* tail(int r) const { return tails_.data() + size_t(r) * tail_; }
  int rows() const { return rows_; }

 private:
  uint16_t* aligned() const {
    return reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(vectors_.data()) + 63) &
                                       ~uintptr_t(63));
  }
  int rows_ = 0, in_vec_ = 0, tail_ = 0;
  mutable std::vector<uint16_t> vectors_;
  std::vector<float> tails_;
};

// Where the tile writes, and which part of the weights it reads.
struct PanelRef {
  const uint16_t* panel;
  int j0, columns;  // output columns [j0, j0 + columns); columns < kPanel in the last panel only
};

// R rows of x (from row r0) against P panels side by side. P = 2 for one or two rows: two weight
// streams in flight where one row's dot products leave the core waiting on one (as the fp32
// GEMM's two_panel_rows). prefetch_ahead: how far ahead of its reads the tile asks for the weight
// stream (kOneRowPrefetchAhead for one row); 0 for none (one row in the last, lone panel, and
// 3-5 rows with x whole, whose one sequential stream the hardware prefetcher follows).
//
// Blocked (one panel, see KBlock): the k-vectors [block.k0, block.k1) only, from the accumulators
// block.saved holds unless k0 is 0, saving them there unless k1 ends the vector part. Storing an
// accumulator and loading it back is exact, so the sums are bit for bit those of one pass. A
// template argument, so that one pass compiles without the run-time range (the fp32 GEMM's tiles
// measured 3-5% slower with it).
struct KBlock {
  int k0 = 0, k1 = 0;
  float* saved = nullptr;  // row r, column j at saved[(r * kPanel + j) * 16]
};

// A tile's accumulators: [panel][row][column], 16 fp32 lanes each. The pieces of dot_tile below
// take them by reference and are forced inline, so that they stay in registers as one function's
// would (a call would put them on the stack).
template <int R, int P>
using TileAccumulators = vec[P][R][kPanel];

// Zero, or the sums a blocked tile saved at its previous block.
template <int R, int P, bool Blocked>
[[gnu::always_inline]] inline void start_accumulators(TileAccumulators<R, P>& acc,
                                                      const KBlock& block) {
#pragma GCC unroll 16
  for (int h = 0; h < P; ++h)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < kPanel; ++j)
        acc[h][r][j] = !Blocked || block.k0 == 0
                           ? simd::zero_vec()
                           : simd::load_vec(block.saved + (r * kPanel + j) * simd::kLanes);
}

// The k-vectors [k0, k1): one weight load per column feeds every row's vdpbf16ps.
template <int R, int P>
[[gnu::always_inline]] inline void multiply_k_vectors(TileAccumulators<R, P>& acc,
                                                      const RoundedX& x, int r0,
                                                      const PanelRef (&ref)[P], int k0, int k1,
                                                      size_t prefetch_ahead) {
  const size_t x_step = size_t(x.rows()) * kDotLanes;
  const uint16_t* xp = x.vectors(r0) + size_t(k0 / kDotLanes) * x_step;
  for (int k = k0; k < k1; k += kDotLanes, xp += x_step) {
    __m512bh xv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) xv[r] = as_bf16(_mm512_load_si512(xp + r * kDotLanes));
#pragma GCC unroll 2
    for (int h = 0; h < P; ++h) {
      const uint16_t* wp = ref[h].panel + size_t(k) * kPanel;
#pragma GCC unroll 16
      for (int j = 0; j < kPanel; ++j) {
        if (R > 1 || P > 1)
          if (prefetch_ahead > 0)
            __builtin_prefetch(reinterpret_cast<const char*>(wp + j * kDotLanes) + prefetch_ahead,
                               0, 1);
        __m512i wv = _mm512_loadu_si512(wp + j * kDotLanes);  // panels of odd `in` are not aligned
        // Several rows: one load for all of them, not one folded into each vdpbf16ps.
        if constexpr (R > 1) asm("" : "+v"(wv));
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          acc[h][r][j] = _mm512_dpbf16_ps(acc[h][r][j], xv[r], as_bf16(wv));
      }
    }
  }
}

// One panel's sums: its lanes reduced, the k tail added in fp32 FMAs, then every column
// finished before `columns` of them are written (a run-time index into acc makes GCC keep acc
// on the stack: matmul_packed.cpp's panel_tile).
template <int R>
[[gnu::always_inline]] inline void write_panel(float* out, const vec (&acc)[R][kPanel],
                                               const RoundedX& x, int r0, const PanelRef& ref,
                                               int in_vec, int tail, int out_dim) {
  float sums[R][kPanel];
  simd::reduce_vecs(acc, sums);
  const uint16_t* tail_part = ref.panel + size_t(kPanel) * in_vec;
  if (tail > 0)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < kPanel; ++j)
        for (int t = 0; t < tail; ++t)
          sums[r][j] =
              std::fma(x.tail(r0 + r)[t], bf16_to_float(tail_part[j * tail + t]), sums[r][j]);
  float* o = out + size_t(r0) * out_dim + ref.j0;
  if (ref.columns == kPanel) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < kPanel; ++j) o[size_t(r) * out_dim + j] = sums[r][j];
  } else {
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < ref.columns; ++j) o[size_t(r) * out_dim + j] = sums[r][j];
  }
}

template <int R, int P, bool Blocked>
inline void dot_tile(float* out, const RoundedX& x, int r0, const PanelRef (&ref)[P], int in,
                     int out_dim, size_t prefetch_ahead, KBlock block) {
  static_assert(!Blocked || P == 1);
  const int in_vec = in / kDotLanes * kDotLanes, tail = in - in_vec;
  if constexpr (!Blocked) block.k0 = 0, block.k1 = in_vec;
  TileAccumulators<R, P> acc;
  start_accumulators<R, P, Blocked>(acc, block);
  multiply_k_vectors<R, P>(acc, x, r0, ref, block.k0, block.k1, prefetch_ahead);
  if (Blocked && block.k1 < in_vec) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < kPanel; ++j)
        simd::store_vec(block.saved + (r * kPanel + j) * simd::kLanes, acc[0][r][j]);
    return;
  }
#pragma GCC unroll 2
  for (int h = 0; h < P; ++h) write_panel<R>(out, acc[h], x, r0, ref[h], in_vec, tail, out_dim);
}

PanelRef panel_ref(const uint16_t* w, int p, int in, int out_dim) {
  return {w + size_t(p) * kPanel * in, p * kPanel, std::min(kPanel, out_dim - p * kPanel)};
}

template <int P, bool Blocked = false>
void run_tile(float* out, const RoundedX& x, int r0, int tile_rows, const PanelRef (&ref)[P],
              int in, int out_dim, size_t ahead, KBlock block = {}) {
  switch (tile_rows) {
    case 1:
      return dot_tile<1, P, Blocked>(out, x, r0, ref, in, out_dim, ahead, block);
    case 2:
      return dot_tile<2, P, Blocked>(out, x, r0, ref, in, out_dim, ahead, block);
    case 3:
      if constexpr (P == 1)
        return dot_tile<3, 1, Blocked>(out, x, r0, ref, in, out_dim, ahead, block);
      break;
    case 4:
      if constexpr (P == 1)
        return dot_tile<4, 1, Blocked>(out, x, r0, ref, in, out_dim, ahead, block);
      break;
    case 5:
      if constexpr (P == 1)
        return dot_tile<5, 1, Blocked>(out, x, r0, ref, in, out_dim, ahead, block);
      break;
  }
  // Unreachable: every caller splits rows into tiles of 1 to 5 (a throw here, inside an OpenMP
  // region, would end the process).
  throw std::logic_error("matmul_bf16_dot: no tile of that shape");
}

// One row's software prefetch distance, ahead of each weight read. One row left to the hardware
// prefetcher (as the fp32 GEMM's one row is) ran llama-124m's bf16 decode step 1.10-1.16x slower
// than the fp32 path, though each GEMM alone was as fast or faster. bench_decode, 1 thread, 3
// interleaved rounds, Zen 4: no prefetch 8.66-8.83 ms against fp32's 7.65-7.86; 512 B ahead
// 7.70-8.63, 1 KiB 7.62-7.94, 1.5 KiB 7.73-7.83, 2 KiB 7.58-8.00, 3 KiB 7.60-8.28, 4 KiB and
// more 9.2-9.9; four streams (P = 4) or one were slower than two. Locality hint 3 (into L1) cost
// 15%: the hint stays the multi-row tiles' 1.
constexpr size_t kOneRowPrefetchAhead = 2 * 1024;

// One or two rows: panel p beside panel p + half, two streams in flight, prefetched as one row's
// (kOneRowPrefetchAhead). Two rows used the multi-row tiles' 32 KiB and cost as much as four:
// bench_gemm, 1 thread, Zen 4, four interleaved passes, 2 rows at 2 KiB against 32 KiB, median
// 0.70-0.96 of the time over 12 shapes (1b.qo 446-511 -> 345-408 us, 1b.gate 1727-1984 ->
// 1361-1501, 124m.head 2630-2793 -> 2027-2612), 12m.gate (a 350 KB matrix, 15 us) 1.12.
// bench_decode llama-3.2-1b bf16, 2 rows, four interleaved pairs: 125-130 -> 102-120 ms (one
// row 88-102). The 3-5-row tiles keep 32 KiB: 2 KiB there was mixed (3 rows of the 768-wide
// llama-124m projections 0.82-0.88, 4 and 5 rows of its kv and llama-12m's gate 2-2.3x slower),
// and the blocked tiles ran 1.3-1.7x slower with it.
void two_panel_rows(float* out, const RoundedX& x, const uint16_t* w, int rows, int in, int out_dim,
                    int threads) {
  const int count = panels(out_dim), half = (count + 1) / 2;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int p = 0; p < half; ++p) {
    if (p + half < count) {
      const PanelRef ref[2] = {panel_ref(w, p, in, out_dim), panel_ref(w, p + half, in, out_dim)};
      run_tile<2>(out, x, 0, rows, ref, in, out_dim, kOneRowPrefetchAhead);
    } else {
      const PanelRef ref[1] = {panel_ref(w, p, in, out_dim)};
      run_tile<1>(out, x, 0, rows, ref, in, out_dim, rows > 1 ? simd::kPrefetchAhead : 0);
    }
  }
}

// Three to five rows: one tile per panel. The tile reads its rows of x once per panel, from L1
// while they fit there beside the weight stream (kXFitsBytes, below). Wider x (5 rows of a
// 8960-wide down_proj are 90 KB) walks k in blocks that fit (kXBlockBytes): every panel of a group
// of kGroupPanels takes one block before the group moves on to the next, its accumulators waiting
// in a scratch between blocks, as the fp32 GEMM does (matmul_packed.cpp).
//
// The blocks: 8 KiB, a quarter of Zen 4's 32 KiB L1D. At 24 KiB unblocked and 16 KiB blocks, x
// shared L1 with the weight stream and its prefetches (which evicting which was not measured), and
// a 5-row call ran 1.3-1.9x a one-row call that reads the same weights. bench_gemm, 1 thread, Zen
// 4, two interleaved passes, 5 rows: 1b.qo 744-806 -> 532-535 us, 1b.gate 2555-2781 -> 1868-2069,
// 1b.down 2432-2487 -> 1960-2018, 124m.down 259-261 -> 182-187; 124m.gate (x of 7.5 KiB, never
// blocked) level. Blocks of 4 KiB were slower again (124m.gate 229-236, 1b.down 2355-2407); 6 and
// 10 KiB were level with 8 within noise. bench_decode llama-3.2-1b bf16, context 128, two
// interleaved pairs: 5 rows 169-172 -> 126-128 ms, 3 rows 148-152 -> 133-137, 1 row level.
//
// x is kept whole up to 12 KiB (kXFitsBytes), blocked past it. Whole, a tile reads its panels
// front to back, one sequential stream, and leaves it to the hardware prefetcher: a software
// prefetch 32 KiB ahead of every weight read (what the blocked and 6+-row tiles keep, whose reads
// jump between panels) cost these tiles a third of their read rate. bench_gemm, 1 thread, Zen 4,
// interleaved passes, q1.5b.qo, q1.5b.gate, q0.5b.gate: 3 rows 227-243 -> 151-152 us, 1290-1346
// -> 821-864 (faster than one row of the same matrix, 848; 28 -> 33 GB/s); 4 rows of 896 371-405
// -> 272-281, 5 rows 325-345 -> 280-288. 4, 8 and 16 KiB ahead fell between (3 rows of
// q1.5b.gate 1104-1369 us), NTA hints (prefetchnta) were slower than 32 KiB; the blocked tiles
// without their prefetch were 1.6-2x slower, and so were the fp32 GEMM's 3-5-row tiles
// (matmul_packed.cpp: q1.5b.qo 4 rows 497-552 against 233-243 us), whose FMAs take longer
// than the stream.
//
// Why 12 KiB: x stays in L1 beside the stream while both fit its 8 ways per set (x and a panel
// pass through it alternately). 4 rows of the pair's 1536-wide target (12 KiB, its K = 3
// verification) whole ran 1.45x faster than blocked (q1.5b.gate 1356-1394 -> 882-925 us, as one
// row); 5 rows of 1536 (15 KiB) whole were 1.2x slower than blocked (1121-1187 -> 1515), as
// they were with the prefetch (1.11-1.20x, 73a48d7). Blocked, 5 rows of 1536 walk k in blocks of
// 800 and 736; even blocks (768 + 768), 12 KiB blocks, groups of 16 or 64 panels and splitting
// the rows (3 + 2 over 256 KiB groups of panels, the second tile from L2) were no faster.
constexpr size_t kXFitsBytes = 12 * 1024;
constexpr size_t kXBlockBytes = 8 * 1024;
constexpr int kGroupPanels = 32;

void one_tile_per_panel(float* out, const RoundedX& x, const uint16_t* w, int rows, int in,
                        int out_dim, int threads) {
  const int count = panels(out_dim), in_vec = in / kDotLanes * kDotLanes;
  if (size_t(rows) * in * sizeof(uint16_t) <= kXFitsBytes) {
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int p = 0; p < count; ++p) {
      const PanelRef ref[1] = {panel_ref(w, p, in, out_dim)};
      run_tile<1>(out, x, 0, rows, ref, in, out_dim, 0);  // the hardware prefetcher's stream
    }
    return;
  }
  const int block =
      std::max(kDotLanes, int(kXBlockBytes / sizeof(uint16_t) / rows) / kDotLanes * kDotLanes);
  const size_t panel_bytes = size_t(kPanel) * in * sizeof(uint16_t);
  const int groups = (count + kGroupPanels - 1) / kGroupPanels;
  const size_t saved_per_panel = size_t(rows) * kPanel * simd::kLanes;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::vector<float> scratch(kGroupPanels * saved_per_panel + 16);
    float* saved = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) &
                                            ~uintptr_t(63));
#pragma omp for schedule(static)
    for (int g = 0; g < groups; ++g) {
      const int first = g * kGroupPanels, last = std::min(count, first + kGroupPanels);
      for (int k0 = 0; k0 < in_vec; k0 += block) {  // in_vec > 0: x is wider than kXFitsBytes
        // A block's slice of the next panel is what the tile reads next: two panels on.
        const KBlock blocked{k0, std::min(k0 + block, in_vec), nullptr};
        for (int p = first; p < last; ++p) {
          const PanelRef ref[1] = {panel_ref(w, p, in, out_dim)};
          KBlock b = blocked;
          b.saved = saved + size_t(p - first) * saved_per_panel;
          run_tile<1, true>(out, x, 0, rows, ref, in, out_dim, 2 * panel_bytes, b);
        }
      }
    }
  }
}

// Six rows and more (a batch's verification, SSD's branch rows, prefill): more rows than one tile
// holds, so the weights are read once per row tile. The panels come in groups that stay in
// cache; every row tile walks a whole group, the first reading it from memory, the later ones
// from cache, prefetching the next group at the same place so that its first tile finds it in
// cache too.
//
// A group is one panel unless x is wide (kPanelGroupsXBytes). bench_gemm, 1 thread, Zen 4,
// three interleaved repetitions, medians, against 256 KiB groups for every x: 8 rows 0.64-0.93
// over 6 shapes (q1.5b.qo 388 -> 271 us, q1.5b.gate 2165 -> 1395, 1b.gate 3214 -> 2098; 0.44
// -> 0.67 of the bf16 peak), 16 rows 0.87-0.95, 32 rows 0.87-1.00, 80 rows (x past 256 KiB but
// for q1.5b.qo and .gate) 0.95-0.99 and the shapes whose code did not change 0.86-1.06 (noise).
// One panel for every x made q1.5b.down (x of 8960 columns) 1.07x slower at 32 rows and 1.17x at
// 80 (11.4 -> 13.3 ms): its tiles re-read 573 KB and 1.4 MB of x for every panel instead of
// once per group. Leaving the first tile's stream to the hardware prefetcher, as the 3-5-row
// tiles with x whole do, was 1.5-2x slower, with one-panel groups or groups of 16-256 KiB
// (q1.5b.gate 8 rows 2232-2537 against 1229-1298 us, q1.5b.qo 386-483 against 208-231).
void row_tiles_over_groups(float* out, const RoundedX& x, const uint16_t* w, int rows, int in,
                           int out_dim, int threads) {
  const int count = panels(out_dim);
  const size_t panel_bytes = size_t(kPanel) * in * sizeof(uint16_t);
  const bool wide_x = size_t(rows) * in * sizeof(uint16_t) > kPanelGroupsXBytes;
  const int group = wide_x ? std::max<int>(1, int(kGroupBytes / panel_bytes)) : 1;
  const int groups = (count + group - 1) / group;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int g = 0; g < groups; ++g) {
    const int first = g * group, last = std::min(count, first + group);
    const size_t group_bytes = size_t(last - first) * panel_bytes;
    const auto tile_over_group = [&](int r0, int tile_rows) {
      const size_t ahead = r0 == 0 ? simd::kPrefetchAhead : group_bytes;
      for (int p = first; p < last; ++p) {
        const PanelRef ref[1] = {panel_ref(w, p, in, out_dim)};
        run_tile<1>(out, x, r0, tile_rows, ref, in, out_dim, ahead);
      }
    };
    // A multiple of five rows (a batch's K + 1 = 5 verification) in tiles of five: 25
    // vdpbf16ps per 10 loads where a tile of four has 20 per 9. Measured against tiles of four,
    // 80 rows, 3 shapes: 3-9% faster; 16 rows as 5 + 5 + 3 + 3 was mixed, so other counts keep
    // the tiles of four.
    if (rows % kMaxTileRows == 0)
      for (int r0 = 0; r0 < rows; r0 += kMaxTileRows) tile_over_group(r0, kMaxTileRows);
    else
      for_each_row_tile<kMaxTileRows>(rows, tile_over_group);
  }
}

}  // namespace

void matmul_bf16_dot(float* out, const float* x, const uint16_t* w, int rows, int in, int out_dim,
                     int threads) {
  if (!cpu_has_bf16_dot()) throw std::logic_error("matmul_bf16_dot: no AVX512_BF16 on this CPU");
  if (rows <= 0) return;  // a call with nothing to multiply (the fp32 GEMM's tiles do nothing too)
  static thread_local RoundedX rounded;
  rounded.build(x, rows, in);
  if (rows <= 2) return two_panel_rows(out, rounded, w, rows, in, out_dim, threads);
  if (rows <= kMaxTileRows) return one_tile_per_panel(out, rounded, w, rows, in, out_dim, threads);
  row_tiles_over_groups(out, rounded, w, rows, in, out_dim, threads);
}

#else  // no AVX512_BF16 in this build: bf16 compute is refused where it is asked for

bool cpu_has_bf16_dot() {
  return false;
}

void matmul_bf16_dot(float*, const float*, const uint16_t*, int, int, int, int) {
  throw std::logic_error("matmul_bf16_dot: this build has no AVX512_BF16 kernel");
}

#endif

}  // namespace ssd
