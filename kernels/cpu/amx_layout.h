// The AMX GEMM's weight layout (CpuCompute::Amx): panels of 16 output rows, each stored k-vector
// by k-vector as a 16 x 32 bf16 tile (1 KiB, the TDPBF16PS A operand), k past `in` and rows past
// out_dim zero. Shared by the packing (pack_matrix_amx.cpp) and the kernel (matmul_bf16_amx.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ssd::amx_layout {

constexpr int kAmxPanel = 16;  // output rows per panel: the A tile's rows
constexpr int kAmxK = 32;      // k per tile: the A tile's 64 bytes of bf16 per row
constexpr int kAmxTileBytes = kAmxPanel * kAmxK * int(sizeof(uint16_t));

inline int amx_panels(int out_dim) {
  return (out_dim + kAmxPanel - 1) / kAmxPanel;
}
inline int amx_k_vectors(int in) {
  return (in + kAmxK - 1) / kAmxK;
}

// Row `row`'s element k lies in panel row / 16, k-vector k / 32, at row % 16, k % 32.
inline size_t amx_offset(int row, int k, int in) {
  const size_t tile = size_t(row / kAmxPanel) * amx_k_vectors(in) + size_t(k / kAmxK);
  return tile * (kAmxPanel * kAmxK) + size_t(row % kAmxPanel) * kAmxK + size_t(k % kAmxK);
}

}  // namespace ssd::amx_layout
