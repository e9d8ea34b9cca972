// Packing matrices into the GEMM's panel layout (packed_layout.h) and reading rows back out.
#include <omp.h>

#include <cstdint>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/packed_layout.h"

namespace ssd {
namespace {

using packed_layout::kPanel;
using packed_layout::offset_in_panel;
using packed_layout::panels;

// Source element -> stored element: a copy, or fp32 rounded to bf16 (nearest even).
inline float stored(float v, float*) {
  return v;
}
inline uint16_t stored(uint16_t v, uint16_t*) {
  return v;
}
inline uint16_t stored(float v, uint16_t*) {
  return float_to_bf16(v);
}
inline float stored(uint16_t v, float*) {
  return bf16_to_float(v);
}

// bf16 weights at the fp32-compute GEMM's lane count go in pairs of k-vectors where the build
// reads them so (packed_layout::kPairedBf16).
template <typename W>
bool paired_layout(int lanes) {
  return packed_layout::kPairedBf16 && sizeof(W) == 2 && lanes == simd::kLanes;
}

// Writes the packed matrix front to back, panel by panel (each panel's k-vectors, then its k
// tail), so that every write is sequential; panels are independent, so threads take them in
// turn. A 1.5B model's matrices went from an element-by-element offset computation over
// `row, k` order (scattered writes) to this.
template <typename W, typename S>
void pack(W* dst, const S* w, int out_dim, int in, int lanes, int threads = 1) {
  const int in_vec = in / lanes * lanes, tail = in - in_vec;
  const int pair = 2 * lanes, in_pairs = paired_layout<W>(lanes) ? in / pair * pair : 0;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int p = 0; p < panels(out_dim); ++p) {
    W* out = dst + size_t(p) * kPanel * in;
    for (int k = 0; k < in_pairs; k += pair)
      for (int j = 0; j < kPanel; ++j, out += pair) {
        const int row = p * kPanel + j;
        for (int q = 0; q < pair; ++q)
          out[packed_layout::pair_position(q)] =
              row < out_dim ? stored(w[size_t(row) * in + k + q], out) : W(0);
      }
    for (int k = in_pairs; k < in_vec; k += lanes)
      for (int j = 0; j < kPanel; ++j, out += lanes) {
        const int row = p * kPanel + j;
        if (row >= out_dim) {
          for (int t = 0; t < lanes; ++t) out[t] = W(0);
          continue;
        }
        const S* src = w + size_t(row) * in + k;
        for (int t = 0; t < lanes; ++t) out[t] = stored(src[t], out);
      }
    for (int j = 0; j < kPanel; ++j, out += tail) {
      const int row = p * kPanel + j;
      for (int t = 0; t < tail; ++t)
        out[t] = row < out_dim ? stored(w[size_t(row) * in + in_vec + t], out) : W(0);
    }
  }
}

// Row `row` of a packed matrix, widened to fp32.
template <typename W>
void unpack_row(float* dst, const W* w, int row, int in, int lanes = simd::kLanes) {
  const W* panel = w + size_t(row / kPanel) * kPanel * in;
  const bool paired = paired_layout<W>(lanes);
  for (int k = 0; k < in; ++k)
    dst[k] = simd::widen(panel[offset_in_panel(row % kPanel, k, in, lanes, paired)]);
}

// The layout `format` names, from fp32 values or bf16 bits (S).
template <typename S>
void pack_in_format(void* dst, const S* w, int out_dim, int in, PackedFormat format, int threads) {
  switch (format) {
    case PackedFormat::F32:
      return pack(static_cast<float*>(dst), w, out_dim, in, simd::kLanes, threads);
    case PackedFormat::BF16:
      return pack(static_cast<uint16_t*>(dst), w, out_dim, in, simd::kLanes, threads);
    case PackedFormat::BF16Dot:
      return pack(static_cast<uint16_t*>(dst), w, out_dim, in, packed_layout::kDotLanes, threads);
  }
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
  pack(dst, w, out_dim, in, simd::kLanes);
}

void pack_matrix_bf16(uint16_t* dst, const uint16_t* w, int out_dim, int in) {
  pack(dst, w, out_dim, in, simd::kLanes);
}

void pack_matrix_bf16_dot(uint16_t* dst, const uint16_t* w, int out_dim, int in) {
  pack(dst, w, out_dim, in, packed_layout::kDotLanes);
}

void pack_matrix_from_f32(void* dst, const float* w, int out_dim, int in, PackedFormat format,
                          int threads) {
  pack_in_format(dst, w, out_dim, in, format, threads);
}

void pack_matrix_from_bf16(void* dst, const uint16_t* w, int out_dim, int in, PackedFormat format,
                           int threads) {
  pack_in_format(dst, w, out_dim, in, format, threads);
}

}  // namespace ssd
