// Packing matrices into the GEMM's panel layout (packed_layout.h) and reading rows back out.
#include <cstdint>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/packed_layout.h"

namespace ssd {
namespace {

using packed_layout::kPanel;
using packed_layout::offset_in_panel;
using packed_layout::panels;

template <typename W>
void pack(W* dst, const W* w, int out_dim, int in, int lanes = simd::kLanes) {
  for (int p = 0; p < panels(out_dim); ++p) {
    W* panel = dst + size_t(p) * kPanel * in;
    for (int j = 0; j < kPanel; ++j) {
      const int row = p * kPanel + j;
      for (int k = 0; k < in; ++k)
        panel[offset_in_panel(j, k, in, lanes)] = row < out_dim ? w[size_t(row) * in + k] : W(0);
    }
  }
}

// Row `row` of a packed matrix, widened to fp32.
template <typename W>
void unpack_row(float* dst, const W* w, int row, int in, int lanes = simd::kLanes) {
  const W* panel = w + size_t(row / kPanel) * kPanel * in;
  for (int k = 0; k < in; ++k)
    dst[k] = simd::widen(panel[offset_in_panel(row % kPanel, k, in, lanes)]);
}

}  // namespace

void packed_matrix_row(float* dst, const float* w, int row, int in) {
  unpack_row(dst, w, row, in);
}

void packed_matrix_row_bf16(float* dst, const uint16_t* w, int row, int in) {
  unpack_row(dst, w, row, in);
}

void packed_dot_matrix_row_bf16(float* dst, const uint16_t* w, int row, int in) {
  unpack_row(dst, w, row, in, packed_layout::kDotLanes);
}

size_t packed_matrix_count(int out_dim, int in) {
  return size_t(panels(out_dim)) * kPanel * size_t(in);
}

void pack_matrix(float* dst, const float* w, int out_dim, int in) {
  pack(dst, w, out_dim, in);
}

void pack_matrix_bf16(uint16_t* dst, const uint16_t* w, int out_dim, int in) {
  pack(dst, w, out_dim, in);
}

void pack_matrix_bf16_dot(uint16_t* dst, const uint16_t* w, int out_dim, int in) {
  pack(dst, w, out_dim, in, packed_layout::kDotLanes);
}

}  // namespace ssd
