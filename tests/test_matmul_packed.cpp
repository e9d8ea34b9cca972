// The packed GEMM (kernels/cpu/matmul_packed.cpp): on a packed matrix it must give
// matmul_invariant's bits on the row-major one, for fp32 and bf16 weights, every row count the
// tiling treats differently, tails of k and a last panel with fewer than four rows; and the
// CPU backend must pack exactly the matrices the model uploads as matrices.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/simd.h"

namespace ssd {
namespace {

std::vector<float> random_values(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> nan_filled(size_t count) {
  return std::vector<float>(count, std::numeric_limits<float>::quiet_NaN());
}

struct Shape {
  int in, out;
};
// k tails (203, 19, 37, 2051), one panel short of rows (37, 5, 3, 1, 13), whole panels (8, 40,
// 768 x 64). One and two rows: two panels at a time (one row with AVX2: three, and two or one
// where the count leaves them), with an odd panel out where the count is odd (2051 is too wide for
// two rows: one panel at a time; 9001 too wide for one row on AVX-512 and not with AVX2's 16
// registers, packed_tile.h two_panel_x_bytes; 17000 too wide for both, with an odd last k-vector
// and a k tail). k-blocks (x of 4 or 5 rows beyond matmul_packed.cpp's kXFitsBytes): 2051 (two
// blocks for 4 rows, three for 5, and a tail), 1500 x 170 (5 rows; two groups of panels). Rows 6 to
// 32 run as row tiles over groups of panels, 1500 x 170 in several groups; 33 rows again panel by
// panel.
const Shape kShapes[] = {{203, 37}, {19, 8},    {259, 5},    {768, 64},  {37, 3},   {16, 1},
                         {64, 40},  {2051, 13}, {1500, 170}, {9001, 11}, {17000, 6}};
constexpr int kMaxRows = 33;

// The kernels of one weight type: the row-major reference, the packer and the packed GEMM.
template <typename W>
struct Kernels {
  void (*row_major)(float*, const float*, const W*, int, int, int, int);
  void (*pack)(W*, const W*, int, int);
  void (*packed)(float*, const float*, const W*, int, int, int, int);
};

// For every shape, row count and thread count, packed output == row-major output, bit for bit;
// `weights` gives the row-major weights in the kernels' type.
template <typename W, typename ToW>
void expect_packed_equals_row_major(const Kernels<W>& k, uint32_t seed, ToW weights) {
  for (const Shape s : kShapes) {
    const std::vector<float> x = random_values(size_t(kMaxRows) * s.in, seed + s.in);
    const std::vector<W> w = weights(random_values(size_t(s.out) * s.in, seed + 2 + s.out));
    std::vector<W> packed(packed_matrix_count(s.out, s.in));
    k.pack(packed.data(), w.data(), s.out, s.in);
    for (int threads : {1, 2})
      for (int rows = 1; rows <= kMaxRows; ++rows) {
        std::vector<float> want = nan_filled(size_t(rows) * s.out), got = want;
        k.row_major(want.data(), x.data(), w.data(), rows, s.in, s.out, threads);
        k.packed(got.data(), x.data(), packed.data(), rows, s.in, s.out, threads);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * got.size()))
            << "rows=" << rows << " in=" << s.in << " out=" << s.out << " threads=" << threads;
      }
  }
}

TEST(MatmulPacked, Fp32EqualsRowMajorBitExact) {
  expect_packed_equals_row_major(Kernels<float>{matmul_invariant, pack_matrix, matmul_packed}, 7,
                                 [](std::vector<float> w) { return w; });
}

TEST(MatmulPacked, Bf16EqualsRowMajorBitExact) {
  expect_packed_equals_row_major(
      Kernels<uint16_t>{matmul_invariant_bf16, pack_matrix_bf16, matmul_packed_bf16}, 17,
      [](const std::vector<float>& w) {
        std::vector<uint16_t> w16(w.size());
        for (size_t i = 0; i < w.size(); ++i) w16[i] = float_to_bf16(w[i]);
        return w16;
      });
}

// The last panel is padded with zero rows, which are never written out: an output buffer of
// exactly rows x out_dim is enough (ASan would catch a write past it).
TEST(MatmulPacked, PadsTheLastPanelWithZeros) {
  const int in = 20, out = 7;
  const std::vector<float> w = random_values(size_t(out) * in, 3);  // no exact zeros
  const size_t count = packed_matrix_count(out, in);
  ASSERT_EQ(count % in, 0u);
  const size_t padded_rows = count / in;
  ASSERT_GE(padded_rows, size_t(out));
  ASSERT_LT(padded_rows, size_t(2 * out));
  std::vector<float> packed(count, 1.0f);
  pack_matrix(packed.data(), w.data(), out, in);
  size_t zeros = 0;
  for (const float v : packed) zeros += v == 0.0f;
  EXPECT_EQ(zeros, (padded_rows - out) * in);
}

TEST(MatmulPacked, CpuBackendPacksMatricesOnlyForTheInvariantGemm) {
  const int rows = 5, in = 45, out = 29;
  const std::vector<float> x = random_values(size_t(rows) * in, 1);
  std::vector<float> w = random_values(size_t(out) * in, 2);
  for (float& v : w) v = round_to_bf16(v);
  for (const DType storage : {DType::F32, DType::BF16}) {
    CpuBackend invariant(1, GemmKind::Invariant), blas(1, GemmKind::OpenBLAS);
    Buffer row_major = invariant.upload_weight_as(w.data(), w.size(), storage);
    Buffer packed = invariant.upload_matrix(w.data(), out, in, storage);
    Buffer for_blas = blas.upload_matrix(w.data(), out, in, storage);
    EXPECT_FALSE(row_major.packed);
    EXPECT_TRUE(packed.packed);
    EXPECT_FALSE(for_blas.packed);  // sgemm reads row-major weights
    EXPECT_EQ(packed.dtype, invariant.weight_storage(storage));
    Buffer bx = invariant.upload_weight(x.data(), x.size());
    Buffer o1 = invariant.alloc(size_t(rows) * out), o2 = invariant.alloc(size_t(rows) * out);
    invariant.matmul(o1, bx, row_major, rows, in, out);
    invariant.matmul(o2, bx, packed, rows, in, out);
    std::vector<float> r1(size_t(rows) * out), r2(r1.size());
    invariant.to_host(r1.data(), o1, 0, r1.size());
    invariant.to_host(r2.data(), o2, 0, r2.size());
    EXPECT_EQ(0, std::memcmp(r1.data(), r2.data(), sizeof(float) * r1.size()));
    // Only matmul reads a packed matrix: reading it back as rows would return garbage.
    std::vector<float> back(w.size());
    EXPECT_THROW(invariant.to_host(back.data(), packed, 0, back.size()), std::logic_error);
    for (Buffer* b : {&row_major, &packed, &bx, &o1, &o2}) invariant.release(*b);
    blas.release(for_blas);
  }
}

// A tied embedding is stored packed for the head's GEMM; its lookup returns the table's rows,
// every row (first, middle, in the short last panel), with a k tail, in fp32 and bf16, and under
// bf16 compute (CpuCompute::BF16, its 32-wide layout) where this CPU has AVX512_BF16, and under
// amx compute (its 16 x 32 tiles) where it has AMX.
void expect_embed_reads_rows(CpuCompute compute, DType storage) {
  const int in = 45, out = 29;
  std::vector<float> w = random_values(size_t(out) * in, 4);
  for (float& v : w) v = round_to_bf16(v);
  std::vector<int32_t> tokens(out);
  for (int t = 0; t < out; ++t) tokens[size_t(t)] = (7 * t + 3) % out;
  CpuBackend backend(1, GemmKind::Invariant, compute);
  Buffer table = backend.upload_matrix(w.data(), out, in, storage);
  ASSERT_TRUE(table.packed);
  Buffer e = backend.alloc(size_t(out) * in);
  backend.embed(e, table, tokens.data(), out, in);
  std::vector<float> rows(size_t(out) * in);
  backend.to_host(rows.data(), e, 0, rows.size());
  for (int t = 0; t < out; ++t)
    EXPECT_EQ(0, std::memcmp(rows.data() + size_t(t) * in, w.data() + size_t(tokens[t]) * in,
                             sizeof(float) * in))
        << "token " << tokens[t] << ", " << backend.compute_for(storage) << " compute";
  backend.release(table);
  backend.release(e);
}

TEST(MatmulPacked, EmbedReadsRowsOfAPackedTable) {
  for (const DType storage : {DType::F32, DType::BF16})
    expect_embed_reads_rows(CpuCompute::F32, storage);
  if (cpu_has_bf16_dot()) expect_embed_reads_rows(CpuCompute::BF16, DType::BF16);
  if (cpu_has_amx_bf16()) expect_embed_reads_rows(CpuCompute::Amx, DType::BF16);
}

// A bf16 checkpoint's weights are stored from their bits (CpuBackend::upload_bf16), not widened
// to fp32 first: the packed bytes are those of their fp32 values in all three layouts, the CPU
// backend's GEMM multiplies them alike under f32 and bf16 compute, fp32 storage (--weight-dtype
// f32 on a bf16 checkpoint) included, and its row-major weights (an untied embedding, norms)
// hold the same values; OpenBLAS's row-major matrices and AMX's tiles are left to the fp32 path.
TEST(MatmulPacked, Bf16BitsStoreAsTheirFp32Values) {
  const int rows = 5, out = 29, in = 77;  // a short last panel; a k tail at 16 and 32 lanes
  std::vector<float> w = random_values(size_t(out) * in, 6);
  std::vector<uint16_t> bits(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    bits[i] = float_to_bf16(w[i]);
    w[i] = bf16_to_float(bits[i]);
  }
  const size_t count = packed_matrix_count(out, in);
  for (const PackedFormat format : {PackedFormat::F32, PackedFormat::BF16, PackedFormat::BF16Dot}) {
    const size_t bytes = count * (format == PackedFormat::F32 ? 4 : 2);
    std::vector<uint8_t> from_f32(bytes, 0xAB), from_bits(bytes, 0xCD);
    pack_matrix_from_f32(from_f32.data(), w.data(), out, in, format, 1);
    pack_matrix_from_bf16(from_bits.data(), bits.data(), out, in, format, 2);
    EXPECT_EQ(0, std::memcmp(from_f32.data(), from_bits.data(), bytes)) << int(format);
  }
  const std::vector<float> x = random_values(size_t(rows) * in, 7);
  std::vector<CpuCompute> computes = {CpuCompute::F32};
  if (cpu_has_bf16_dot()) computes.push_back(CpuCompute::BF16);
  if (cpu_has_amx_bf16()) computes.push_back(CpuCompute::Amx);
  for (const CpuCompute compute : computes)
    for (const GemmKind gemm : {GemmKind::Invariant, GemmKind::OpenBLAS})
      for (const DType storage : {DType::F32, DType::BF16}) {
        if (gemm == GemmKind::OpenBLAS && compute != CpuCompute::F32) continue;
        CpuBackend backend(1, gemm, compute);
        // Row-major: the values themselves.
        ASSERT_TRUE(backend.uploads_bf16(storage, false));
        Buffer ra = backend.upload_weight_as(w.data(), w.size(), storage);
        Buffer rb = backend.upload_bf16(bits.data(), out, in, storage, false);
        EXPECT_FALSE(rb.packed);
        EXPECT_EQ(ra.dtype, rb.dtype);
        std::vector<float> va(w.size()), vb(w.size());
        backend.to_host(va.data(), ra, 0, va.size());
        backend.to_host(vb.data(), rb, 0, vb.size());
        EXPECT_EQ(0, std::memcmp(va.data(), vb.data(), sizeof(float) * va.size()));
        backend.release(ra);
        backend.release(rb);
        if (compute != CpuCompute::F32 && storage == DType::F32) {
          EXPECT_THROW(backend.upload_bf16(bits.data(), out, in, storage, true),
                       std::invalid_argument);
          continue;
        }
        Buffer a = backend.upload_matrix(w.data(), out, in, storage);
        if (!backend.uploads_bf16(storage, true)) {  // OpenBLAS's row-major copy, AMX's tiles
          EXPECT_TRUE(gemm == GemmKind::OpenBLAS || compute == CpuCompute::Amx);
          EXPECT_THROW(backend.upload_bf16(bits.data(), out, in, storage, true), std::logic_error);
          backend.release(a);
          continue;
        }
        Buffer b = backend.upload_bf16(bits.data(), out, in, storage, true);
        EXPECT_TRUE(b.packed);
        EXPECT_EQ(a.dtype, b.dtype);
        ASSERT_EQ(a.count, b.count);
        Buffer bx = backend.upload_weight(x.data(), x.size());
        Buffer oa = backend.alloc(size_t(rows) * out), ob = backend.alloc(size_t(rows) * out);
        backend.matmul(oa, bx, a, rows, in, out);
        backend.matmul(ob, bx, b, rows, in, out);
        std::vector<float> ya(size_t(rows) * out), yb(ya.size());
        backend.to_host(ya.data(), oa, 0, ya.size());
        backend.to_host(yb.data(), ob, 0, yb.size());
        EXPECT_EQ(0, std::memcmp(ya.data(), yb.data(), sizeof(float) * ya.size()))
            << backend.compute_for(storage) << " compute, gemm " << int(gemm);
        for (Buffer* buf : {&a, &b, &bx, &oa, &ob}) backend.release(*buf);
      }
}

// simd::reduce_vecs, which finishes a packed tile's accumulators together, gives each the bits of
// simd::reduce_vec, which the row-major GEMM and attention use one at a time: lanes of mixed
// magnitudes, so that any other order of the additions rounds differently, for every accumulator
// count a tile has.
template <int R, int J>
void expect_reduce_vecs_equals_reduce_vec(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-24, 24);
  simd::vec acc[R][J];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) {
      float lanes[simd::kLanes];
      for (float& lane : lanes) lane = std::ldexp(mantissa(rng), exponent(rng));
      acc[r][j] = simd::load_vec(lanes);
    }
  float sums[R][J];
  simd::reduce_vecs(acc, sums);
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) {
      const float want = simd::reduce_vec(acc[r][j]);
      EXPECT_EQ(0, std::memcmp(&want, &sums[r][j], sizeof(float)))
          << R << " x " << J << " accumulators, [" << r << "][" << j << "]: " << sums[r][j]
          << " != " << want;
    }
}

TEST(MatmulPacked, ReduceVecsEqualsReduceVecBitExact) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    expect_reduce_vecs_equals_reduce_vec<1, 5>(seed);
    expect_reduce_vecs_equals_reduce_vec<2, 5>(seed);
    expect_reduce_vecs_equals_reduce_vec<3, 5>(seed);
    expect_reduce_vecs_equals_reduce_vec<4, 5>(seed);
    expect_reduce_vecs_equals_reduce_vec<5, 5>(seed);
    expect_reduce_vecs_equals_reduce_vec<4, 4>(seed);
    expect_reduce_vecs_equals_reduce_vec<7, 5>(seed);
  }
}

}  // namespace
}  // namespace ssd
