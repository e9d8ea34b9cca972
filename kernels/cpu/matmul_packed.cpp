// The batch-invariant GEMM on weights laid out for it (packed_layout.h, CpuBackend::upload_matrix):
// a tile reads its panel front to back, once for all of its rows. Every dot product is summed
// exactly as matmul_invariant sums it (the same simd.h accumulate, reduction tree and tail), so a
// packed matrix gives matmul_invariant's bits, for any number of rows and threads.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/interleaved_x.h"
#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/packed_tile.h"
#include "kernels/cpu/paired_bf16.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/simd.h"

namespace ssd {
namespace {

using namespace simd;

using packed_layout::kPanel;
using packed_layout::panels;
using packed_tile::kMaxTileRows;
using packed_tile::kTwoPanelMaxRows;
using packed_tile::PanelPass;
using packed_tile::run_tile;
using packed_tile::Saved;
using packed_tile::two_panel_rows;

// k-blocks. A tile reads its rows of x once per panel, and they stay in L1 only while they fit
// there beside the weight stream. 5 rows of a 2048-wide down_proj are 40 KB (a Zen 5 L1 holds
// 48): bf16 5-row calls then took 1.6x the time of one row (bench_gemm, 124m.down: 148 against
// 81 us). So when one tile's x exceeds kXFitsBytes, the GEMM walks k in blocks of x that fit
// (kXBlockBytes): for each block, every panel of a group of kGroupPanels adds the block's
// products to its accumulators, which wait in a scratch between blocks. Each lane still takes its
// k-vectors in order, and storing a vector and loading it back is exact, so the sums are bit for
// bit those of one pass. Only tiles of 3 to kMaxTileRows rows block: those are compute-bound and
// gained 25-35% (bf16) and ~5% (fp32); two rows are memory-bound, and fp32's read a block-sized
// chunk per panel more slowly than one long stream (1b.down 1.78 -> 2.04 ms); more rows than one
// tile re-read the scratch once per tile, and 16-row calls ran 1.5x slower blocked.
constexpr size_t kXFitsBytes = 24 * 1024;
constexpr size_t kXBlockBytes = 16 * 1024;
constexpr int kGroupPanels = 32;

// Elements of k per block for `rows` rows (a multiple of kLanes), or in_vec for one pass.
int k_block(int rows, int in_vec) {
  if (rows < 3 || rows > kMaxTileRows || size_t(rows) * in_vec * sizeof(float) <= kXFitsBytes)
    return in_vec;
  return std::max(kLanes, int(kXBlockBytes / sizeof(float) / size_t(rows)) / kLanes * kLanes);
}

// Row tiles over panel groups, for 6 to kRowTilesMaxRows rows (a batch's verification, SSD's
// branches): x of that many rows does not fit in L1 (16 rows of a 768-wide x are 48 KB), so
// taking every row tile against one panel before the next streamed all of x from L2 once per
// panel. Instead the panels come in groups of kRowTilesGroupBytes, which stay in the 1 MiB L2,
// and each row tile walks the whole group with its rows of x in L1. The first tile reads the group
// from memory; the later ones read it from L2 and prefetch the next group, so that its first tile
// finds it in L2 too. Which dot products run together changes, never how one is summed.
// bench_gemm bf16, 16 rows, interleaved with the per-panel order: 124m.gate 305 -> 283 us,
// 124m.down 305 -> 264, 124m.head 4.83 -> 4.39 ms (fp32: 13-16% less); at 32 and 80 rows the
// two orders measured level, and at 128 (prefill) fp32 was up to 15% slower in groups, so more
// rows keep the per-panel order.
constexpr size_t kRowTilesGroupBytes = 256 * 1024;
constexpr int kRowTilesMaxRows = 32;

// Paired bf16 (the AVX2 build) takes groups of half that: its tiles ask for the next group while
// they read the current one (PrefetchShare), and both must stay in the L2 of such a core, 512 KB
// on Zen 2 and 3. bench_gemm bf16 on a Zen 3 core, 2 interleaved repetitions: q1.5b.gate 5 rows
// 2.39-2.45 ms at 128 KB against 2.62-2.77 at 256; other shapes within 3%, but for the small
// q1.5b.qo at 16 rows (1.13 against 1.00 ms).
template <typename W>
constexpr size_t row_tiles_group_bytes() {
  return SSD_PAIRED_BF16 && std::is_same_v<W, uint16_t> ? kRowTilesGroupBytes / 2
                                                        : kRowTilesGroupBytes;
}

// All rows against one panel.
template <typename W>
void panel_rows(const PanelPass<W>& pass, int rows) {
  for_each_row_tile<kMaxTileRows>(rows,
                                  [&](int r0, int tile_rows) { run_tile(pass, r0, tile_rows); });
}

// Panels [first, last) over every k-block; `scratch` holds the group's accumulators (rows x
// kPanel vectors per panel) when there is more than one block.
template <typename W>
void panel_group(float* out, const float* x, const W* w, int rows, int in, int out_dim, int first,
                 int last, float* scratch, const float* x_interleaved) {
  const int in_vec = in / kLanes * kLanes, block = k_block(rows, in_vec);
  const size_t panel_bytes = size_t(kPanel) * in * sizeof(W);
  // One pass: the panels follow each other, one stream. Blocks: a block's slice of the next
  // panels is what comes next.
  const size_t ahead = block >= in_vec ? kPrefetchAhead : 2 * panel_bytes;
  int k0 = 0;
  do {  // once when in_vec is 0: the k tail alone
    const int k1 = std::min(k0 + block, in_vec);
    PanelPass<W> pass{
        out, x, w, in, out_dim, 0, 0, k0, k1, Saved{scratch}, ahead, block < in_vec, x_interleaved};
    for (int p = first; p < last; ++p) {
      pass.panel = w + size_t(p) * kPanel * in;
      pass.j0 = p * kPanel;
      pass.columns = std::min(kPanel, out_dim - pass.j0);
      pass.saved.at = scratch + size_t(p - first) * rows * kPanel * kLanes;
      panel_rows(pass, rows);
    }
    k0 = k1;
  } while (k0 < in_vec);
}

// The tiles prefetch kPrefetchAhead bytes ahead of what they read, so nothing asks for a matrix's
// first kPrefetchAhead bytes early: ask for them all at once, as many lines in flight as the core
// allows. bench_decode llama-124m bf16, 5 rows, 2 interleaved pairs: 6.56 -> 6.49 ms. (bench_gemm
// cannot show it: the copies it cycles through lie end to end, so one call's prefetches run into
// the next call's matrix.)
inline void prefetch_start(const void* matrix, size_t bytes) {
  const char* start = static_cast<const char*>(matrix);
  for (size_t at = 0; at < std::min(kPrefetchAhead, bytes); at += 64)
    __builtin_prefetch(start + at, 0, 1);
}

// See kRowTilesGroupBytes. Later row tiles prefetch the next group: at the same place in it as
// they read in this one; with paired bf16 every tile asks for its share (PrefetchShare).
template <typename W>
void row_tiles_over_groups(float* out, const float* x, const W* w, int rows, int in, int out_dim,
                           int threads) {
  const int count = panels(out_dim), in_vec = in / kLanes * kLanes;
  const size_t panel_size = size_t(kPanel) * in;
  const int group = std::max<int>(1, int(row_tiles_group_bytes<W>() / (panel_size * sizeof(W))));
  const int groups = (count + group - 1) / group;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int g = 0; g < groups; ++g) {
    const int first = g * group, last = std::min(count, first + group);
    const size_t group_bytes = size_t(last - first) * panel_size * sizeof(W);
    for_each_row_tile<kMaxTileRows>(rows, [&](int r0, int tile_rows) {
      // The first tile prefetches as one pass does; the later ones take the blocked form (one
      // k-block, [0, in_vec)), whose prefetch distance is read at run time: the group's size.
      const bool later = r0 > 0;
      PanelPass<W> pass{.out = out,
                        .x = x,
                        .panel = w,
                        .in = in,
                        .out_dim = out_dim,
                        .j0 = 0,
                        .columns = 0,
                        .k0 = 0,
                        .k1 = in_vec,
                        .saved = Saved{nullptr},
                        .prefetch_ahead = later ? group_bytes : kPrefetchAhead,
                        .blocked = later,
                        .x_interleaved = nullptr};
#if SSD_PAIRED_BF16
      PrefetchShare share;
      if constexpr (std::is_same_v<W, uint16_t>) {
        share = PrefetchShare::of_rows(
            w + size_t(last) * panel_size,
            size_t(std::clamp(count - last, 0, group)) * panel_size * sizeof(W), group_bytes, r0,
            tile_rows, rows);
        pass.share = &share;
        pass.blocked = false;
      }
#endif
      for (int p = first; p < last; ++p) {
        pass.panel = w + size_t(p) * panel_size;
        pass.j0 = p * kPanel;
        pass.columns = std::min(kPanel, out_dim - pass.j0);
        run_tile(pass, r0, tile_rows);
      }
    });
  }
}

template <typename W>
void packed(float* out, const float* x, const W* w, int rows, int in, int out_dim, int threads) {
  const int count = panels(out_dim);
  const size_t panel_size = size_t(kPanel) * in;
  if (rows <= kTwoPanelMaxRows &&
      size_t(rows) * in * sizeof(float) <= packed_tile::two_panel_x_bytes(rows, kXBlockBytes)) {
    // Panels p, p + stride (and p + 2 stride): the last of them possibly the short last panel,
    // fewer where the count runs out.
    const int sets = rows == 1 ? packed_tile::kOneRowPanels : 2;
    const int stride = (count + sets - 1) / sets;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int p = 0; p < stride; ++p) {
      const int n = std::min(sets, (count - 1 - p) / stride + 1), last = p + (n - 1) * stride;
      const int columns_last = std::min(kPanel, out_dim - last * kPanel);
      const auto panel = [&](int i) { return w + size_t(p + i * stride) * panel_size; };
      if (n == 3) {
        const W* const set[3] = {panel(0), panel(1), panel(2)};
        const int first[3] = {p * kPanel, (p + stride) * kPanel, last * kPanel};
        packed_tile::panels_at_once<1, 3>(out, x, set, in, out_dim, first, columns_last);
      } else if (n == 1) {
        panel_group(out, x, w, rows, in, out_dim, p, p + 1, nullptr, nullptr);
      } else if (rows == 1) {
        two_panel_rows<1>(out, x, panel(0), panel(1), in, out_dim, p * kPanel, last * kPanel,
                          columns_last);
      } else {
        two_panel_rows<2>(out, x, panel(0), panel(1), in, out_dim, p * kPanel, last * kPanel,
                          columns_last);
      }
    }
    return;
  }
  const int in_vec = in / kLanes * kLanes;
  prefetch_start(w, size_t(count) * panel_size * sizeof(W));
  if (rows > kMaxTileRows && rows <= kRowTilesMaxRows)
    return row_tiles_over_groups(out, x, w, rows, in, out_dim, threads);
  // A call of one tile of 3 or more rows reads x interleaved (interleaved_x.h). Each tile of a
  // call of several, interleaved in turn, measured mixed: bench_gemm 8 and 16 rows 2-7% faster
  // for most shapes, bf16 124m.down 8 rows 142 -> 171 us. Kept per thread, so that a call
  // allocates nothing once its size has been seen.
  static thread_local InterleavedX interleaved;
  const float* xi = rows >= 3 && rows <= kMaxTileRows ? interleaved.build(x, rows, in) : nullptr;
  if (k_block(rows, in_vec) >= in_vec) {
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int p = 0; p < count; ++p)
      panel_group(out, x, w, rows, in, out_dim, p, p + 1, nullptr, xi);
    return;
  }
  const int groups = (count + kGroupPanels - 1) / kGroupPanels;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::vector<float> scratch(size_t(kGroupPanels) * rows * kPanel * kLanes);
#pragma omp for schedule(static)
    for (int g = 0; g < groups; ++g)
      panel_group(out, x, w, rows, in, out_dim, g * kGroupPanels,
                  std::min(count, (g + 1) * kGroupPanels), scratch.data(), xi);
  }
}

}  // namespace

void matmul_packed(float* out, const float* x, const float* w, int rows, int in, int out_dim,
                   int threads) {
  packed(out, x, w, rows, in, out_dim, threads);
}

void matmul_packed_bf16(float* out, const float* x, const uint16_t* w, int rows, int in,
                        int out_dim, int threads) {
  packed(out, x, w, rows, in, out_dim, threads);
}

}  // namespace ssd
