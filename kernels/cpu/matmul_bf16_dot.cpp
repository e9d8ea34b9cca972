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
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dot_tuning.h"
#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/simd.h"

#if defined(__AVX512BF16__) && defined(__AVX512F__)
#include "kernels/cpu/dot_k_blocked_walk.h"
#include "kernels/cpu/dot_tile.h"
#endif

namespace ssd {

#if defined(__AVX512BF16__) && defined(__AVX512F__)

bool cpu_has_bf16_dot() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

namespace {

using dot_tile::for_each_blocked_row_tile;
using dot_tile::k_blocked_walk;
using dot_tile::kMaxTileRows;
using dot_tile::panel_ref;
using dot_tile::PanelRef;
using dot_tile::Prefetch;
using dot_tile::RoundedX;
using dot_tile::run_tile;
using packed_layout::kDotLanes;
using packed_layout::kPanel;
using packed_layout::panels;

// Panels per group for 6 or more rows (see row_tiles_over_groups): one panel while the call's x
// fits in L2 beside it (DotTuning's one_panel_x_bytes: a quarter or a half of a 1 MiB L2); for a
// wider x, 256 KiB of weights, staying in L2 while every row tile walks them with its rows of x.
constexpr size_t kGroupBytes = 256 * 1024;

// How the multi-row walks prefetch their weights on this core (DotTuning::nta_prefetch).
Prefetch tuned_prefetch() {
  return dot_tuning().nta_prefetch ? Prefetch::NonTemporal : Prefetch::Plain;
}

// 3-5 rows with x whole, on Zen 5 (one_tile_per_panel): the weights prefetched this far ahead
// with prefetchnta. 6-8 KiB ran fastest: 4 KiB 1.1x slower, 12-16 KiB 1.1-1.15x (a copy of the
// tile, 5 rows of 1b.gate, 1.5b.gate, 124m.head, 15 interleaved passes); calls in turn in one
// process (12-03): 6 KiB 0.92-0.99, others 0.97-1.18, panels p, p + half in turn 1.15-1.37x.
constexpr size_t kWholeXNtaAhead = 8 * 1024;

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
// while they fit there beside the weight stream (dot_tuning.h's x_fits_bytes, below). Wider x (4
// rows of a 8960-wide down_proj are 70 KB) takes the 6-10-row walk, row_tiles_over_k_blocks
// (below): k in blocks, every panel of a group of kGroupPanels taking one block before the group
// moves on to the next, its accumulators waiting in a scratch between blocks, as the fp32 GEMM
// does (matmul_packed.cpp); 3, 4 and 5 rows as tiles of 2 + 1, 2 + 2 and 3 + 2
// (for_each_blocked_row_tile, where the measurements are).
//
// Before 3 + 2, all of them took one tile in blocks of 8 KiB, a quarter of Zen 4's 32 KiB L1D. At
// 24 KiB unblocked and 16 KiB blocks, x shared L1 with the weight stream and its prefetches (which
// evicting which was not measured), and a 5-row call ran 1.3-1.9x a one-row call that reads the
// same weights. bench_gemm, 1 thread, Zen 4, two interleaved passes, 5 rows: 1b.qo 744-806 ->
// 532-535 us, 1b.gate 2555-2781 -> 1868-2069, 1b.down 2432-2487 -> 1960-2018, 124m.down 259-261 ->
// 182-187; 124m.gate (x of 7.5 KiB, never blocked) level. Blocks of 4 KiB were slower again
// (124m.gate 229-236, 1b.down 2355-2407); 6 and 10 KiB were level with 8 within noise. bench_decode
// llama-3.2-1b bf16, context 128, two interleaved pairs: 5 rows 169-172 -> 126-128 ms, 3 rows
// 148-152 -> 133-137, 1 row level.
//
// x is kept whole up to 12 KiB on Zen 4 (x_fits_bytes), blocked past it. Whole, a tile reads its
// panels front to back, one sequential stream, and leaves it to the hardware prefetcher: a software
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
// they were with the prefetch (1.11-1.20x, 73a48d7). Whole x of 5 rows stays one tile of five:
// as 3 + 2 (the second tile reading the panel from L1) 124m.gate ran 110 -> 155 us, q0.5b.gate
// 312-336 -> 472-478.
//
// On Zen 5, whose L1D is 48 KiB, x is kept whole up to 24 KiB (DotTuning): 5 rows of 1536 (15
// KiB) and of 2048 (20 KiB), blocked as 3 + 2 on Zen 4, ran 1.1-1.2x faster whole. bench_gemm, 1
// thread, Zen 5, two interleaved passes: 12 against 20 and 24 KiB, q1.5b.gate 890-938 -> 732-742
// us (one row: 598), q1.5b.qo 157-177 -> 129-131; 18 against 24 and 32 KiB, 1b.gate 1149-1225
// -> 1039-1048 (32: 1027-1039), 1b.qo 284-303 -> 256-267, 124m.down 109 -> 97-98. A plain software
// prefetch 1-32 KiB ahead of these tiles was level there within noise (3-5 rows of q1.5b.gate
// and .qo, two passes); prefetchnta 8 KiB ahead was not (one_tile_per_panel).
constexpr int kGroupPanels = 32;

// The row tiles of row_tiles_over_groups' calls of 6 or more rows: a multiple of five rows (a
// batch's K + 1 = 5 verification) in tiles of five, 25 vdpbf16ps per 10 loads where a tile of
// four has 20 per 9; measured against tiles of four, 80 rows, 3 shapes: 3-9% faster. 16 rows as
// 5 + 5 + 3 + 3 was mixed, so other counts keep row_tiles.h's tiles of four.
template <typename F>
void for_each_dot_row_tile(int rows, F&& f) {
  if (rows % kMaxTileRows == 0)
    for (int r0 = 0; r0 < rows; r0 += kMaxTileRows) f(r0, kMaxTileRows);
  else
    for_each_row_tile<kMaxTileRows>(rows, f);
}

// The row tiles of the k-blocked walk of 3-40 rows, as k_blocked_walk takes them (the tuning read
// once a call).
auto blocked_row_tiles() {
  return [threes = dot_tuning().eight_in_threes](int rows, const auto& f) {
    for_each_blocked_row_tile(rows, threes, f);
  };
}

void row_tiles_over_k_blocks(float* out, const RoundedX& x, const uint16_t* w, int rows, int in,
                             int out_dim, int threads);

void one_tile_per_panel(float* out, const RoundedX& x, const uint16_t* w, int rows, int in,
                        int out_dim, int threads) {
  const int count = panels(out_dim);
  const DotTuning tuning = dot_tuning();
  const bool fits = size_t(rows) * in * sizeof(uint16_t) <= tuning.x_fits_bytes;
  // On Zen 5, x whole for every call, its weights prefetched 8 KiB ahead with prefetchnta: from
  // L1 while x fits there, from L2 past it. A plain prefetch (or none, the hardware prefetcher's
  // stream) let the weight stream evict x from L1: 5 rows of x held in one 64-byte k-vector ran as
  // fast as one row, of 20 KiB of x 1.36x slower (a stand-alone copy of the tile, 1b.gate). With
  // prefetchnta, bench_gemm, 1 thread, Zen 5, two interleaved passes, against 45f74d0 (x that fits
  // on the hardware prefetcher, wider x prefetched 32 KiB ahead plainly): 5 rows 1b.gate 993-1006
  // -> 830-868 us (one row 715-767), 1b.qo 249-255 -> 208-217, q1.5b.gate 728-737 -> 676-707,
  // 124m.head 1336-1395 -> 1107-1113 (one row 1091-1144), q0.5b.gate 240-248 -> 196-200; x from
  // L2: 1b.down 1072-1090 -> 1001-1006, q1.5b.down 893-926 -> 824-835; 3 and 4 rows 0.78-0.97 of
  // the time over 11 shapes; one and two rows (two_panel_rows) were level with prefetchnta. Earlier
  // (45f74d0): wider x prefetched plainly ran 0.82-0.94 of the k-blocked walk's time, 3-5 rows of
  // q1.5b.down, 1b.down and q0.5b.down. Zen 4 keeps the hardware prefetcher and the k-blocked walk:
  // prefetchnta there ran up to 1.75x slower at 3-4 rows and 1.65-2.1x at 5 (dot_tuning.h).
  if (tuning.nta_prefetch) {
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int p = 0; p < count; ++p) {
      const PanelRef ref[1] = {panel_ref(w, p, in, out_dim)};
      run_tile<1, false, Prefetch::NonTemporal>(out, x, 0, rows, ref, in, out_dim, kWholeXNtaAhead);
    }
    return;
  }
  if (fits) {
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int p = 0; p < count; ++p) {
      const PanelRef ref[1] = {panel_ref(w, p, in, out_dim)};
      run_tile<1>(out, x, 0, rows, ref, in, out_dim, 0);
    }
    return;
  }
  // x is wider than x_fits_bytes, so in has whole k-vectors to block.
  row_tiles_over_k_blocks(out, x, w, rows, in, out_dim, threads);
}

// Six rows and more (a batch's verification, SSD's branch rows, prefill; six to ten rows of wide x
// walk k-blocks instead, row_tiles_over_k_blocks): more rows than one tile holds, so the weights
// are read once per row tile. The panels come in groups that stay in cache; every row tile walks
// a whole group, the first reading it from memory, the later ones from cache, prefetching the
// next group at the same place so that its first tile finds it in cache too.
//
// A group is one panel unless x is wide (one_panel_x_bytes). bench_gemm, 1 thread, Zen 4,
// three interleaved repetitions, medians, against 256 KiB groups for every x: 8 rows 0.64-0.93
// over 6 shapes (q1.5b.qo 388 -> 271 us, q1.5b.gate 2165 -> 1395, 1b.gate 3214 -> 2098; 0.44
// -> 0.67 of the bf16 peak), 16 rows 0.87-0.95, 32 rows 0.87-1.00, 80 rows (x past 256 KiB but
// for q1.5b.qo and .gate) 0.95-0.99 and the shapes whose code did not change 0.86-1.06 (noise).
// One panel for every x made q1.5b.down (x of 8960 columns) 1.07x slower at 32 rows and 1.17x at
// 80 (11.4 -> 13.3 ms): its tiles re-read 573 KB and 1.4 MB of x for every panel instead of
// once per group. Leaving the first tile's stream to the hardware prefetcher, as the 3-5-row
// tiles with x whole do, was 1.5-2x slower, with one-panel groups or groups of 16-256 KiB
// (q1.5b.gate 8 rows 2232-2537 against 1229-1298 us, q1.5b.qo 386-483 against 208-231).
//
// Up to 10 rows (two tiles) prefetch with prefetchnta on Zen 5 (tuned_prefetch): 8 and 10 rows of
// 768- and 896-wide x ran 0.81-0.94 of 45f74d0's time (124m.qo 8 rows 39-42 -> 32-33 us,
// q0.5b.gate 277-280 -> 250-254, 124m.head 1673-1753 -> 1457-1470; bench_gemm, 1 thread, two
// interleaved passes). In a build that chose the hint per call, 16 rows ran level to 1.05x slower
// with it and 80 and 128 rows of 1b.gate and 1b.qo 1.05-1.06x slower, so more rows keep the plain
// prefetch.
void row_tiles_over_groups(float* out, const RoundedX& x, const uint16_t* w, int rows, int in,
                           int out_dim, int threads) {
  const int count = panels(out_dim);
  const size_t panel_bytes = size_t(kPanel) * in * sizeof(uint16_t);
  const bool wide_x = size_t(rows) * in * sizeof(uint16_t) > dot_tuning().one_panel_x_bytes;
  const int group = wide_x ? std::max<int>(1, int(kGroupBytes / panel_bytes)) : 1;
  const int groups = (count + group - 1) / group;
  const Prefetch hint = rows <= 2 * kMaxTileRows ? tuned_prefetch() : Prefetch::Plain;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int g = 0; g < groups; ++g) {
    const int first = g * group, last = std::min(count, first + group);
    const size_t group_bytes = size_t(last - first) * panel_bytes;
    const auto tile_over_group = [&](int r0, int tile_rows) {
      const size_t ahead = r0 == 0 ? simd::kPrefetchAhead : group_bytes;
      for (int p = first; p < last; ++p) {
        const PanelRef ref[1] = {panel_ref(w, p, in, out_dim)};
        if (hint == Prefetch::NonTemporal)
          run_tile<1, false, Prefetch::NonTemporal>(out, x, r0, tile_rows, ref, in, out_dim, ahead);
        else
          run_tile<1>(out, x, r0, tile_rows, ref, in, out_dim, ahead);
      }
    };
    for_each_dot_row_tile(rows, tile_over_group);
  }
}

// Six to ten rows with wide rows of x (q1.5b's down_proj, 8960 wide), and three to five rows of x
// wider than x_fits_bytes (one_tile_per_panel): k_blocked_walk, every row tile of the call
// (for_each_blocked_row_tile) taking each panel's block in turn. A tile
// of row_tiles_over_groups reads its rows of x whole from L2 beside a panel that does not fit L1
// either (4 rows of down_proj's x are 70 KB, its panel 87.5 KB); here a block's x and weights stay
// in L1 while the call's tiles take them. Every tile asks for the weights two panels on (where the
// block's slice of the panel after next lies), the later tiles as well as the first: with the
// first alone, 8 rows of q1.5b.down ran 2.2-2.3 ms, as in groups, against 1.3-1.5 with all.
//
// Measured (bench_gemm, 1 thread, Zen 4, interleaved passes, against row_tiles_over_groups):
// q1.5b.down 8 rows 2329-2574 -> 1376-1574 us, 10 rows 2051-2233 -> 1722-1923; q0.5b.down 8
// rows 647-731 -> 430-468, 10 rows 670-723 -> 502-598; 8 rows of 1b.qo 546-624 -> 429-441,
// 1b.gate 2091-2628 -> 1702-1743, 1b.down 2628-2857 -> 1868-2071, 124m.down 208-217 -> 171-175;
// 1536-wide x (q1.5b.qo, .gate, .kv) level or faster. Where a tile's x and its panel fit L1
// together (896 wide: q0.5b.qo, .gate, .kv at 10 rows) the groups stay: blocked, they ran 1.1-1.3x
// slower (the accumulators' stores and loads between blocks). So do 16 rows and more (q1.5b.down 16
// rows 2381-2410 -> 2516-3070: the compute-bound steps, whose blocks shrink as rows grow). The
// blocks hold up to 16 KiB of x, split evenly: 8 KiB was 1.1-1.2x slower at 10 rows, 24 KiB level
// with 16.
//
// Zen 5 takes up to 40 rows this way (DotTuning), where its doubled dot-product rate leaves 16-40
// rows nearer the weight stream than the multiply-adds. bench_gemm, 1 thread, Zen 5, two
// interleaved passes, the group walk against this: 16 rows q1.5b.gate 1965-1967 -> 1270-1315 us,
// q1.5b.qo 341-342 -> 219-224, q1.5b.down 2049-2072 -> 1296-1298, 1b.gate 2496-2519 ->
// 1541-1568, 1b.down 2472-2507 -> 1545-1600, 124m.down 237-238 -> 145-149, q0.5b.down 648-649 ->
// 398-446; 32 rows q1.5b.down 3706-3943 -> 2603-2650, 1b.down 4578-4595 -> 3153-3330 (narrower
// x there: below), q0.5b.down 1187-1210 -> 831-863; 40 rows q0.5b.down 1350-1360 -> 1153-1169. 80
// rows ran 1.8-1.9x slower (q1.5b.gate 5954-6257 -> 11102-11596 us: blocks of 3 k-vectors), so 80
// stay in groups. (One earlier run had q0.5b.down's 16 rows slower blocked, 640-654 -> 739-758 us;
// three later ones did not.) 896-wide x (q0.5b.qo, .gate) fits L1 beside its panel and keeps the
// groups (kTileFitsBytes), 1.6-1.8x faster there.
//
// Up to 10 rows prefetch with prefetchnta on Zen 5 (tuned_prefetch). bench_gemm, 1 thread, two
// interleaved passes against 288abe9: 8 rows 0.80-0.89 of the time (1b.gate 1146-1184 ->
// 980-981 us, q1.5b.down 978-1055 -> 809-838, q0.5b.down 301-308 -> 257-266), 10 rows 0.89-0.95;
// 1-5 and 16-80 rows 0.93-1.04 over 23 shapes. A first try had 16 and 32 rows (their tiles keep
// the plain prefetch) 1.13-1.48x slower: with the prefetchnta tiles in the build, GCC called
// simd::reduce_vecs out of line from the blocked tiles, whose accumulators then went through the
// stack at every block's end; write_panel now forces it inline there.
//
// Since the group walk reads x in chunks of its row tiles (RoundedX), x narrower than 4096 takes
// this walk to 20 rows only (narrow_blocked_max_rows): bench_gemm, Zen 5, two interleaved passes,
// groups against blocked, 24 rows q1.5b.gate 2141-2191 -> 1864-1881 us, 32 rows 3010-3187 ->
// 2295-2354 (1b.gate 3687-3847 -> 2917-3011), 20 rows level. Wider x keeps 40: its other walk
// (many_rows_over_k_blocks) ran 1.1-1.25x slower at 20-24 rows, level at 32.
constexpr size_t kTileFitsBytes = 24 * 1024;  // a tile's x and its panel, beside the stream
constexpr size_t kCallXBlockBytes = 16 * 1024;
constexpr int kWideRowElements = 4096;  // down_proj's x and wider (many_rows_over_k_blocks)

// Whether the group walk's widest tile (for_each_dot_row_tile) would read x and its panel from L2.
bool walks_k_blocks(int rows, int in) {
  int widest_tile = 0;
  for_each_dot_row_tile(
      rows, [&](int, int tile_rows) { widest_tile = std::max(widest_tile, tile_rows); });
  const DotTuning tuning = dot_tuning();
  const int max_rows =
      in >= kWideRowElements ? tuning.blocked_max_rows : tuning.narrow_blocked_max_rows;
  return rows <= max_rows && in >= 2 * kDotLanes &&
         size_t(widest_tile + kPanel) * in * sizeof(uint16_t) > kTileFitsBytes;
}

void row_tiles_over_k_blocks(float* out, const RoundedX& x, const uint16_t* w, int rows, int in,
                             int out_dim, int threads) {
  const int vectors = in / kDotLanes;  // >= 2 (walks_k_blocks; 3-5 rows: x past x_fits_bytes)
  const int per_block = std::max(1, int(kCallXBlockBytes / sizeof(uint16_t) / kDotLanes / rows));
  const int blocks = (vectors + per_block - 1) / per_block;
  const int block = (vectors + blocks - 1) / blocks * kDotLanes;
  if (rows <= 2 * kMaxTileRows && tuned_prefetch() == Prefetch::NonTemporal)
    return k_blocked_walk<decltype(blocked_row_tiles()), Prefetch::NonTemporal>(
        out, x, w, rows, in, out_dim, threads, block, kGroupPanels, blocked_row_tiles());
  k_blocked_walk(out, x, w, rows, in, out_dim, threads, block, kGroupPanels, blocked_row_tiles());
}

// More rows than the k-blocked walk of 6-40 rows takes, of x at least kWideRowElements wide
// (every down_proj): row_tiles_over_groups' tiles of five read a tile's x (80 KB at 8192 wide)
// and its panel (as much) from L2 at every k-vector. In blocks of DotTuning's many_rows_k_block
// elements, a panel's block stays in L1 while every row tile of the call takes it, reading its
// block of x (10 KB) from L2, and the accumulators of 8 panels' worth of rows wait in L2.
// bench_gemm, 1 thread, Zen 5, two interleaved passes, against the groups: 80 rows 1b.down
// 7468-7846 -> 6681-6954 us, q1.5b.down 6491-6724 -> 5504-5737; 128 rows 1b.down 12709-13215
// -> 10923-11404, q1.5b.down 11220-11495 -> 9043-9279. Blocks of 2048 were 1.03-1.06x slower,
// of 512 in groups of 16 1.1x, groups of 32 level with 8; row tiles outside panels (a tile's
// block of x in L1 over the group's panels from L2) 1.07-1.1x slower. Narrower x keeps the
// groups: 1536 and 2048 wide (gate, qo) ran 1.0-1.25x slower blocked (1b.gate 80 rows 6047-6114
// -> 6141-6838, q1.5b.gate 4713-4852 -> 5047-5983).
constexpr int kManyRowsGroupPanels = 8;

bool many_rows_walk_k_blocks(int rows, int in) {
  const DotTuning tuning = dot_tuning();
  return tuning.many_rows_k_block > 0 && rows > tuning.blocked_max_rows && in >= kWideRowElements;
}

void many_rows_over_k_blocks(float* out, const RoundedX& x, const uint16_t* w, int rows, int in,
                             int out_dim, int threads) {
  k_blocked_walk(out, x, w, rows, in, out_dim, threads, dot_tuning().many_rows_k_block,
                 kManyRowsGroupPanels, [](int n, const auto& f) { for_each_dot_row_tile(n, f); });
}

}  // namespace

void matmul_bf16_dot(float* out, const float* x, const uint16_t* w, int rows, int in, int out_dim,
                     int threads) {
  if (!cpu_has_bf16_dot()) throw std::logic_error("matmul_bf16_dot: no AVX512_BF16 on this CPU");
  if (rows <= 0) return;  // a call with nothing to multiply (the fp32 GEMM's tiles do nothing too)
  static thread_local RoundedX rounded;
  if (rows <= kMaxTileRows || walks_k_blocks(rows, in)) {
    // One chunk: a k-block of every row's x is one contiguous run. In chunks of the blocked
    // walk's tiles, 16 and 32 rows ran 1.05-1.15x slower (1b.gate 32 rows 3171 -> 3655 us; their
    // tiles' slices of a block lie a multiple of 4 KiB apart, on the same L1 sets), 8 and 10
    // rows 0.92-1.0 of the time (q1.5b.gate 8 rows 879-936 -> 812-828 us), within what one binary
    // against itself showed at 8 and 10 rows (0.95-1.03, three passes); bench_gemm, Zen 5.
    rounded.build(x, rows, in);
    if (rows <= 2) return two_panel_rows(out, rounded, w, rows, in, out_dim, threads);
    if (rows <= kMaxTileRows)
      return one_tile_per_panel(out, rounded, w, rows, in, out_dim, threads);
    return row_tiles_over_k_blocks(out, rounded, w, rows, in, out_dim, threads);
  }
  // In chunks of the walk's row tiles, each tile's x one contiguous run (RoundedX). bench_gemm, 1
  // thread, Zen 5, two interleaved passes, against one chunk: 80 rows 1b.gate 9252-9428 ->
  // 6203-6413 us, 1b.qo 2358-2380 -> 1506-1525, q1.5b.gate 5741-5825 -> 4720-4796; 128 rows
  // 1b.gate 15685-15848 -> 10576-10608, q1.5b.qo 2279-2306 -> 1456-1465.
  rounded.build(x, rows, in, [rows](const auto& chunk) { for_each_dot_row_tile(rows, chunk); });
  if (many_rows_walk_k_blocks(rows, in))
    return many_rows_over_k_blocks(out, rounded, w, rows, in, out_dim, threads);
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
