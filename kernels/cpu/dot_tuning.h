// The bf16 GEMM's cache tuning (matmul_bf16_dot.cpp): which walk a call of some rows takes, by
// the core's L1 data cache. Internal to kernels/cpu; the tests' override is cpu_backend.h's
// set_bf16_dot_l1d_bytes.
#pragma once

#include <cstddef>

namespace ssd {

// The thresholds that fit x and the weights into the core's L1 data cache, and the rows the
// k-blocked walk takes, were measured on two cores: Zen 4 (32 KiB L1D, AVX-512 in 256-bit
// halves, one vdpbf16ps a cycle) and Zen 5 (48 KiB, 12 ways, full-width AVX-512, two a cycle:
// the bf16 peak 494 GFLOP/s against 235, the read rate 42 GB/s against 27). The L1D size the C
// library reports picks the profile; where it reports none, Zen 4's. Neither changes a row's
// bits (matmul_bf16_dot.cpp's batch invariance): only which rows and panels are taken together.
//
// Zen 5's choices, tried on a Zen 4 guest (bench_gemm, 1 thread, one binary with the profile's
// fields switched by a temporary environment variable, two or three interleaved passes, 3-80 rows
// of the q1.5b, q0.5b and 1b shapes): prefetchnta 1.6-2.3x slower at 5-10 rows (q1.5b.gate 8
// rows 1281-1330 -> 2903-3221 us) and up to 1.75x at 3-4 (faster only at 3 rows of down_proj,
// 0.88-0.94, which the 2 + 1 tiles beat); 8 rows as 3 + 3 + 2 level to 1.09x slower; the k-blocked
// walk to 16 rows 1.03-1.15x slower at 16; the many-rows k-blocks and one-panel groups to 512 KiB
// level (0.87-1.13, inside that noisy host's spread). Zen 4 keeps its own.
struct DotTuning {
  size_t x_fits_bytes;  // 3-5 rows keep x whole up to this
  // The most rows the k-blocked walk takes (row_tiles_over_k_blocks): of x kWideRowElements
  // (4096) or more wide (every down_proj), and of narrower x (matmul_bf16_dot.cpp's
  // walks_k_blocks, where the measurements are).
  int blocked_max_rows;
  int narrow_blocked_max_rows;
  bool eight_in_threes;  // 8 rows of the k-blocked walk as 3 + 3 + 2, not 4 + 4
  // The weights prefetched with prefetchnta (Zen 5): 3-5 rows keep x whole at any width (from L1,
  // or past x_fits_bytes from L2), and the walks of 6-10 rows prefetch so too. Else (Zen 4,
  // where prefetchnta was the slow one, above) plain prefetches, 3-5 rows of x past x_fits_bytes
  // walk k-blocks, and x that fits is left to the hardware prefetcher.
  bool nta_prefetch;
  // More rows than blocked_max_rows of x 4096 or more wide: 0 keeps the group walk; else k in
  // blocks of this many elements (many_rows_over_k_blocks; faster on Zen 5, level on Zen 4)
  int many_rows_k_block;
  // The group walk (row_tiles_over_groups) takes one panel at a time, every row tile reading
  // its x from L2, while the call's x is at most this; groups of panels past it. Zen 5, x in
  // chunks of the row tiles, one panel against groups: 128 rows q1.5b.gate 8574-8695 ->
  // 7450-7715 us, 1b.gate 10499-10915 -> 9926-9989, 1b.qo and q1.5b.qo 0.87-0.92 of the time;
  // 80 rows of 2048 level to 0.97; 768-wide x level (bench_gemm, two interleaved passes)
  size_t one_panel_x_bytes;
};

// The profile for the L1D set by set_bf16_dot_l1d_bytes, else for the CPU's.
DotTuning dot_tuning();

}  // namespace ssd
