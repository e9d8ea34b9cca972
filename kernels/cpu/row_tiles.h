// How a GEMM call's rows split into the tiles its kernels keep in registers, shared by the
// packed fp32-compute GEMM (matmul_packed.cpp) and the bf16 one (matmul_bf16_dot.cpp). Internal
// to kernels/cpu.
#pragma once

namespace ssd {

// The row tiles of a call: at most MaxTileRows rows each. With MaxTileRows 5 (32 registers), up
// to 5 rows are one tile and more run as tiles of 4 (a leftover single row would run at a quarter
// of the multiply-add rate, so rows % 4 == 1 ends 2 + 3); with 2 (16 registers), as tiles of 2
// and a last 1. Calls f(r0, R) in order of rows.
template <int MaxTileRows, typename F>
void for_each_row_tile(int rows, F&& f) {
  if (MaxTileRows >= 5 && rows <= 5) return f(0, rows);
  const int widest = MaxTileRows >= 5 ? 4 : 2;
  int r = 0;
  const int full = rows % widest == 1 && widest == 4 ? rows / 4 - 1 : rows / widest;
  for (int t = 0; t < full; ++t, r += widest) f(r, widest);
  if (rows - r == 5) {
    f(r, 2);
    f(r + 2, 3);
  } else if (rows > r) {
    f(r, rows - r);
  }
}

}  // namespace ssd
