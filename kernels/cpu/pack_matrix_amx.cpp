// Packing bf16 weights into the AMX GEMM's layout (amx_layout.h) and reading rows back out.
#include <omp.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/amx_layout.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/dtype.h"

namespace ssd {

using amx_layout::amx_k_vectors;
using amx_layout::amx_offset;
using amx_layout::amx_panels;
using amx_layout::kAmxK;
using amx_layout::kAmxPanel;

size_t amx_packed_matrix_count(int out_dim, int in) {
  return size_t(amx_panels(out_dim)) * kAmxPanel * size_t(amx_k_vectors(in)) * kAmxK;
}

void pack_matrix_bf16_amx_from_f32(uint16_t* dst, const float* w, int out_dim, int in,
                                   int threads) {
  const int count = amx_panels(out_dim), vectors = amx_k_vectors(in);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int p = 0; p < count; ++p)
    for (int j = 0; j < kAmxPanel; ++j) {
      const int row = p * kAmxPanel + j;
      for (int v = 0; v < vectors; ++v) {
        uint16_t* out = dst + amx_offset(row, v * kAmxK, in);
        for (int t = 0; t < kAmxK; ++t) {
          const int k = v * kAmxK + t;
          out[t] = row < out_dim && k < in ? float_to_bf16(w[size_t(row) * in + k]) : 0;
        }
      }
    }
}

void pack_matrix_bf16_amx(uint16_t* dst, const uint16_t* w, int out_dim, int in) {
  std::vector<float> wide(size_t(out_dim) * in);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = bf16_to_float(w[i]);
  pack_matrix_bf16_amx_from_f32(dst, wide.data(), out_dim, in, 1);
}

void packed_amx_matrix_row_bf16(float* dst, const uint16_t* w, int row, int in) {
  for (int k = 0; k < in; ++k) dst[k] = bf16_to_float(w[amx_offset(row, k, in)]);
}

}  // namespace ssd
