// The CPU GEMMs: matmul_invariant against a double-precision reference, its bit-exact batch and
// thread-count invariance (what makes greedy SD equal AR), and matmul_openblas's accuracy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace ssd {
namespace {

using MatmulFn = void (*)(float*, const float*, const float*, int, int, int, int);

std::vector<float> random_values(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// out[r][j] = sum_k x[r][k] * w[j][k] in double, plus sum_k |x w| to scale the tolerance.
void reference(const std::vector<float>& x, const std::vector<float>& w, int rows, int in,
               int out_dim, std::vector<double>& out, std::vector<double>& magnitude) {
  out.assign(size_t(rows) * out_dim, 0.0);
  magnitude.assign(out.size(), 0.0);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < out_dim; ++j) {
      double sum = 0, mag = 0;
      for (int k = 0; k < in; ++k) {
        const double p = double(x[size_t(r) * in + k]) * double(w[size_t(j) * in + k]);
        sum += p;
        mag += std::fabs(p);
      }
      out[size_t(r) * out_dim + j] = sum;
      magnitude[size_t(r) * out_dim + j] = mag;
    }
}

// Runs `fn` into an output pre-filled with NaN, so an element it never writes is caught.
std::vector<float> run(MatmulFn fn, const std::vector<float>& x, const std::vector<float>& w,
                       int rows, int in, int out_dim, int threads) {
  std::vector<float> out(size_t(rows) * out_dim, std::numeric_limits<float>::quiet_NaN());
  fn(out.data(), x.data(), w.data(), rows, in, out_dim, threads);
  return out;
}

void expect_close_to_reference(MatmulFn fn, int rows, int in, int out_dim, int threads) {
  const std::vector<float> x = random_values(size_t(rows) * in, 1000 + rows * 7 + in);
  const std::vector<float> w = random_values(size_t(out_dim) * in, 2000 + out_dim * 13 + in);
  std::vector<double> want, magnitude;
  reference(x, w, rows, in, out_dim, want, magnitude);
  const std::vector<float> got = run(fn, x, w, rows, in, out_dim, threads);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i]))
        << "element " << i << " not written, rows=" << rows << " in=" << in << " out=" << out_dim;
    // Relative to the sum of |products|, the natural scale of fp32 summation error.
    EXPECT_LE(std::fabs(got[i] - want[i]), 1e-4 * (magnitude[i] + 1e-30))
        << "rows=" << rows << " in=" << in << " out=" << out_dim << " element " << i << " got "
        << got[i] << " want " << want[i];
  }
}

const int kIns[] = {1, 3, 13, 67, 130, 259};
const int kOuts[] = {1, 5, 7, 11, 37, 64, 100};

TEST(MatmulInvariant, MatchesDoubleReference) {
  for (int rows = 1; rows <= 9; ++rows)
    for (int in : kIns)
      for (int out : kOuts) {
        expect_close_to_reference(matmul_invariant, rows, in, out, 1);
        if (HasFatalFailure()) return;
      }
  // Threads split the columns; check a couple of shapes with more than one.
  expect_close_to_reference(matmul_invariant, 5, 259, 100, 2);
  expect_close_to_reference(matmul_invariant, 3, 67, 37, 3);
}

TEST(MatmulInvariant, LargerShapeMatchesReference) {
  expect_close_to_reference(matmul_invariant, 7, 777, 131, 2);
}

// Every row of a rows-row call is bit-identical to that row computed alone, for each thread
// count and at shapes that exercise the 8-column, 3-column and leftover-column paths.
TEST(MatmulInvariant, BatchInvariantBitExact) {
  struct Shape {
    int in, out;
  };
  for (const Shape s : {Shape{203, 37}, Shape{64, 100}, Shape{19, 8}, Shape{259, 5}}) {
    const int max_rows = 17;
    const std::vector<float> x = random_values(size_t(max_rows) * s.in, 77 + s.in);
    const std::vector<float> w = random_values(size_t(s.out) * s.in, 88 + s.out);
    for (int threads : {1, 2}) {
      std::vector<std::vector<float>> alone(max_rows);
      for (int r = 0; r < max_rows; ++r) {
        const std::vector<float> xr(x.begin() + size_t(r) * s.in, x.begin() + size_t(r + 1) * s.in);
        alone[r] = run(matmul_invariant, xr, w, 1, s.in, s.out, threads);
      }
      for (int rows = 1; rows <= max_rows; ++rows) {
        const std::vector<float> batch = run(matmul_invariant, x, w, rows, s.in, s.out, threads);
        for (int r = 0; r < rows; ++r)
          EXPECT_EQ(0, std::memcmp(batch.data() + size_t(r) * s.out, alone[r].data(),
                                   sizeof(float) * s.out))
              << "row " << r << " of " << rows << " differs from rows=1; in=" << s.in
              << " out=" << s.out << " threads=" << threads;
      }
    }
  }
}

TEST(MatmulInvariant, IdenticalAcrossThreadCounts) {
  for (int rows : {1, 3, 4, 9}) {
    const int in = 131, out = 97;
    const std::vector<float> x = random_values(size_t(rows) * in, 5 + rows);
    const std::vector<float> w = random_values(size_t(out) * in, 6);
    const std::vector<float> one = run(matmul_invariant, x, w, rows, in, out, 1);
    for (int threads : {2, 3, 4, 7}) {
      const std::vector<float> many = run(matmul_invariant, x, w, rows, in, out, threads);
      EXPECT_EQ(0, std::memcmp(one.data(), many.data(), sizeof(float) * one.size()))
          << "rows=" << rows << " threads=" << threads;
    }
  }
}

TEST(MatmulInvariant, CpuBackendMatmulUsesIt) {
  const int rows = 3, in = 45, out = 29;
  const std::vector<float> x = random_values(size_t(rows) * in, 1);
  const std::vector<float> w = random_values(size_t(out) * in, 2);
  const std::vector<float> want = run(matmul_invariant, x, w, rows, in, out, 2);
  CpuBackend backend(2, GemmKind::Invariant);
  Buffer bx = backend.upload_weight(x.data(), x.size());
  Buffer bw = backend.upload_weight(w.data(), w.size());
  Buffer bo = backend.alloc(size_t(rows) * out);
  backend.matmul(bo, bx, bw, rows, in, out);
  std::vector<float> got(want.size());
  backend.to_host(got.data(), bo, 0, got.size());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * got.size()));
  for (Buffer* b : {&bx, &bw, &bo}) backend.release(*b);
}

// bf16 weights widened in registers give bit for bit the fp32 kernel's result on the widened
// weights (so --weight-dtype bf16 and f32 decode a bf16 checkpoint identically), at every row
// count the tiling treats differently and with tails of k and of columns.
TEST(MatmulInvariantBf16, EqualsFp32OnTheWidenedWeightsBitExact) {
  struct Shape {
    int in, out;
  };
  for (const Shape s : {Shape{203, 37}, Shape{768, 40}, Shape{19, 8}, Shape{64, 3}}) {
    const int max_rows = 17;
    const std::vector<float> x = random_values(size_t(max_rows) * s.in, 41 + s.in);
    const std::vector<float> w = random_values(size_t(s.out) * s.in, 42 + s.out);
    std::vector<uint16_t> w16(w.size());
    std::vector<float> wide(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      w16[i] = float_to_bf16(w[i]);
      wide[i] = bf16_to_float(w16[i]);
    }
    for (int threads : {1, 2})
      for (int rows = 1; rows <= max_rows; ++rows) {
        const std::vector<float> want = run(matmul_invariant, x, wide, rows, s.in, s.out, threads);
        std::vector<float> got(want.size(), std::numeric_limits<float>::quiet_NaN());
        matmul_invariant_bf16(got.data(), x.data(), w16.data(), rows, s.in, s.out, threads);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * got.size()))
            << "rows=" << rows << " in=" << s.in << " out=" << s.out << " threads=" << threads;
      }
  }
}

TEST(MatmulInvariantBf16, CpuBackendKeepsBf16Weights) {
  const int rows = 5, in = 45, out = 29;
  const std::vector<float> x = random_values(size_t(rows) * in, 3);
  std::vector<float> w = random_values(size_t(out) * in, 4);
  for (float& v : w) v = round_to_bf16(v);  // a bf16 checkpoint's values
  CpuBackend backend(1, GemmKind::Invariant);
  EXPECT_EQ(backend.weight_storage(DType::BF16), DType::BF16);
  EXPECT_EQ(backend.weight_storage(DType::F16), DType::F32);  // no f16 kernel: kept in fp32
  Buffer b32 = backend.upload_weight_as(w.data(), w.size(), DType::F32);
  Buffer b16 = backend.upload_weight_as(w.data(), w.size(), DType::BF16);
  EXPECT_EQ(b16.dtype, DType::BF16);
  std::vector<float> back(w.size());
  backend.to_host(back.data(), b16, 0, back.size());  // widening is exact
  EXPECT_EQ(0, std::memcmp(back.data(), w.data(), sizeof(float) * w.size()));
  Buffer bx = backend.upload_weight(x.data(), x.size());
  Buffer o32 = backend.alloc(size_t(rows) * out), o16 = backend.alloc(size_t(rows) * out);
  backend.matmul(o32, bx, b32, rows, in, out);
  backend.matmul(o16, bx, b16, rows, in, out);
  std::vector<float> r32(size_t(rows) * out), r16(r32.size());
  backend.to_host(r32.data(), o32, 0, r32.size());
  backend.to_host(r16.data(), o16, 0, r16.size());
  EXPECT_EQ(0, std::memcmp(r32.data(), r16.data(), sizeof(float) * r32.size()));
  // The embedding lookup of a bf16 table widens its rows.
  const int32_t tokens[2] = {3, 0};
  Buffer e = backend.alloc(2 * in);
  backend.embed(e, b16, tokens, 2, in);
  std::vector<float> rows_back(2 * in);
  backend.to_host(rows_back.data(), e, 0, rows_back.size());
  EXPECT_EQ(0, std::memcmp(rows_back.data(), w.data() + 3 * in, sizeof(float) * in));
  EXPECT_EQ(0, std::memcmp(rows_back.data() + in, w.data(), sizeof(float) * in));
  for (Buffer* b : {&b32, &b16, &bx, &o32, &o16, &e}) backend.release(*b);
}

TEST(MatmulOpenBlas, MatchesDoubleReference) {
  for (int rows : {1, 2, 5, 9})
    for (int in : kIns)
      for (int out : kOuts) {
        expect_close_to_reference(matmul_openblas, rows, in, out, 1);
        if (HasFatalFailure()) return;
      }
  expect_close_to_reference(matmul_openblas, 16, 768, 257, 2);
}

}  // namespace
}  // namespace ssd
