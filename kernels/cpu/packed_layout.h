// The packed weight layout of the batch-invariant GEMM (matmul_packed.cpp), shared with the
// packer (pack_matrix.cpp). Internal to kernels/cpu.
//
// Row-major [out][in] weights make a tile of J output columns read J rows at once: J short
// streams that jump ahead by J rows at every column block. One core's hardware prefetcher
// follows that less well than one sequential stream: bench_decode (llama-124m, one thread,
// row-major and packed interleaved, 4 repetitions) ran bf16 decode steps at 89-113 tok/s
// row-major, 87-124 packed (median 91 -> 117), fp32 at 49-55 and 55-59. So each matrix is
// stored as panels of kPanel output rows, a panel as its kLanes-wide k-vectors interleaved
// across the panel's rows:
//
//   panel p = rows [p*kPanel, p*kPanel + kPanel), zero rows past out_dim
//   vector part: for each k-vector kb, for each row j: w[j][kb*kLanes .. kb*kLanes + kLanes)
//   tail part:   for each row j: w[j][in_vec .. in)        (in_vec = in rounded down to kLanes)
//
// and a tile reads its panel front to back, once for all of its rows.
#pragma once

#include <cstddef>

#include "kernels/cpu/simd.h"

namespace ssd {
namespace packed_layout {

// Output rows per panel: the tile's column count, fixed by the layout for every row count.
// Five columns fit 32 registers with up to 5 rows (5 x 5 accumulators + 5 weights + 1 x), 16
// registers with up to 2 (2 x 5 + 5 + 1). Measured against 4 (bench_gemm, 3 repetitions):
// bf16 5-row tiles 15 -> 20 GB/s and 16-row ones level with row-major, where 4 columns lost a
// quarter at 16 rows.
constexpr int kPanel = 5;

inline int panels(int out_dim) {
  return (out_dim + kPanel - 1) / kPanel;
}

// bf16 weights for the fp32-compute GEMM in the AVX2 build: k-vectors in pairs. Widening one
// k-vector of 8 bf16 takes a zero-extending load and a shift, two vector ops beside a 2-row
// tile's 10 FMAs per k-vector, and the FMAs share their vector pipes with them: on a Zen 3 core
// (no AVX-512) a 5-row verification of the 1.5B target cost 2.3 one-row steps. So a row's two
// k-vectors of a pair (16 values) are stored as one block that interleaving zero words below them
// (vpunpcklwd, vpunpckhwd, the load folded in) widens into the two k-vectors in k order: one op
// per k-vector. Each lane still takes its k in the same order, so the sums, and their bits, are
// those of the unpaired layout. The vector part becomes: for each pair of k-vectors, for each
// row j, its 16 values as k 0-3, 8-11, 4-7, 12-15 of the pair (pair_position); an odd last
// k-vector stays single, as above; the tail is unchanged.
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#define SSD_PAIRED_BF16 1  // for the kernel's loops over pairs, which only this build compiles
#else
#define SSD_PAIRED_BF16 0
#endif
constexpr bool kPairedBf16 = SSD_PAIRED_BF16;
constexpr int kPairLanes = 2 * simd::kLanes;

// Where element q (0-15) of a pair of 8-lane k-vectors lies within its row's block.
constexpr int pair_position(int q) {
  return (q & 3) | ((q & 4) << 1) | ((q & 8) >> 1);
}

// Where element k of row j (of its panel) lies within the panel, with k-vectors of `lanes`
// elements: simd::kLanes for the fp32-compute GEMM, kDotLanes for the bf16 one; `paired`: the
// k-vectors in pairs (kPairedBf16's layout, 8 lanes only).
inline size_t offset_in_panel(int j, int k, int in, int lanes = simd::kLanes, bool paired = false) {
  const int in_vec = in / lanes * lanes, tail = in - in_vec;
  if (k >= in_vec) return size_t(kPanel) * in_vec + size_t(j) * tail + (k - in_vec);
  const int pair = 2 * lanes, in_pairs = in / pair * pair;
  if (paired && k < in_pairs)
    return (size_t(k / pair) * kPanel + j) * pair + size_t(pair_position(k % pair));
  return (size_t(k / lanes) * kPanel + j) * lanes + k % lanes;
}

// The bf16-compute GEMM's k-vector (matmul_bf16_dot.cpp): 32 bf16 values, one 512-bit operand of
// vdpbf16ps, which multiplies them pairwise into 16 fp32 lanes.
constexpr int kDotLanes = 32;

// Tried and not kept (2026-12-03): wide matrices (in >= 4096, every down_proj) stored
// k-block-major for this GEMM: panels in groups of 16, each group block by block of 32 k-vectors,
// panel by panel within a block, so that a k-blocked walk (x's block in L1 beside the stream)
// reads the weights front to back. In the panel-major layout such a walk jumps from one panel's
// block to the next panel's, and 5 rows of 1b.down's 8192-wide x run fastest whole from L2, at
// 1.31-1.44x a row alone. A stand-alone copy of the tiles (Zen 5, 1 thread, interleaved passes,
// medians, 1b.down): 5 rows whole 937-1041 us, k-blocked in panel-major 1197-1310, k-blocked
// k-block-major 726-848; in the kernel (bench_gemm, 3-5 passes) 4 and 5 rows of 1b.down and
// q1.5b.down ran 0.82-0.91 of the time, 3 rows 0.97-0.99. But one row lost: one sequential stream
// 1b.down 829-934 against 787-816 (two panel-major streams), q1.5b.down 705-806 against 650-666;
// two streams within a group or from groups half the matrix apart were slower still (1.1-1.4x).
// Part of the loss may be the k-blocked tile calls', not the layout's: one row's two panel-major
// streams taken in blocked calls (accumulators saved between blocks, pointers stepped as the
// whole-k tile steps them), six interleaved passes, medians: 1b.down 1115 us in blocks of 32
// k-vectors, 1002 in blocks of 128, 964 whole; q1.5b.down 904, 828, 798. A second run of six
// passes, on a noisier host (whole-k 962-1153 us), put blocks of 32 at 0.99x and 1.06x of whole
// (starting each block from zero and adding the saved sums after: 1.04x, 1.01x): the effect is
// the size of this host's noise.
// bench_decode llama-3.2-1b bf16 (row tiles of 6-20 rows in sub-blocks of 16 KiB of x, more rows in
// chunks of two tiles), four interleaved passes: 1 row 0.84-1.02, 5 rows 0.94-1.00, 16 rows
// 0.77-1.00, 80 rows 0.84-1.13 of the time, inside the host's noise, with down_proj's one-row loss
// systematic.

}  // namespace packed_layout
}  // namespace ssd
