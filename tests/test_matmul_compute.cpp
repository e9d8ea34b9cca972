// The CPU backend's GEMM under both --compute modes: a row's result is bit for bit the same alone
// and in a call of any 1-20 rows (and the larger calls of batched verification and prefill), for
// 1 and 2 threads, at shapes with k tails and short last panels; bf16 compute is within its error
// bound of an exact dot product of the bf16-rounded inputs, and the backend refuses what it
// cannot do. (A tied table's lookup in the bf16 layout: test_matmul_packed.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace ssd {
namespace {

std::vector<float> random_values(size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Shape {
  int in, out;
};
// k tails past the 32-wide (bf16) and 16-wide (fp32) k-vectors (203, 19, 45, 1000), whole
// vectors (64, 768), short last panels (37, 3, 29, 13), a single column (1); 768 x 300 has more
// than one group of panels for six rows and more in either mode; 5000 x 13 walks k in blocks for
// three to five rows (their x is wider than L1) in either mode, with a tail, and so do six to ten
// rows under bf16 compute (a tile's x and panel wider than L1), at 1500 x 171 over two groups of
// panels, one per thread; 4500 x 90 takes more rows than that walk in k-blocks too (x 4096 or
// more wide, Zen 5's tuning: many_rows_over_k_blocks), a short last block and a tail, over three
// groups of panels. Under amx compute, 5000 x 13 and 4500 x 90 take k in chunks from 20 rows on
// (their x and a pair of panels past 512 KiB), their accumulators parked between chunks.
const Shape kShapes[] = {{203, 37}, {19, 8},    {64, 40},   {45, 29},    {1000, 13},
                         {16, 1},   {768, 300}, {5000, 13}, {1500, 171}, {4500, 90}};
const int kRowCounts[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14,
                          15, 16, 17, 18, 19, 20, 32, 33, 40, 41, 64, 80, 100};
constexpr int kMaxRows = 100;

bool has_bf16() {
  return cpu_has_bf16_dot();
}

bool has_amx() {
  return cpu_has_amx_bf16();
}

std::string compute_name(CpuCompute c) {
  return c == CpuCompute::BF16 ? "bf16" : c == CpuCompute::Amx ? "amx" : "f32";
}

// x (rows x in) times the matrix, as the forward pass calls it: upload_matrix, then matmul.
class Gemm {
 public:
  Gemm(CpuCompute compute, int threads, const std::vector<float>& w, int out, int in)
      : backend_(threads, GemmKind::Invariant, compute), out_(out), in_(in) {
    w_ = backend_.upload_matrix(w.data(), out, in, DType::BF16);
  }
  ~Gemm() { backend_.release(w_); }
  std::vector<float> operator()(const float* x, int rows) {
    Buffer bx = backend_.upload_weight(x, size_t(rows) * in_);
    Buffer bo = backend_.alloc(size_t(rows) * out_);
    std::vector<float> nan(size_t(rows) * out_, std::numeric_limits<float>::quiet_NaN());
    backend_.from_host(bo, 0, nan.data(), nan.size());  // an element never written stays NaN
    backend_.matmul(bo, bx, w_, rows, in_, out_);
    std::vector<float> got(nan.size());
    backend_.to_host(got.data(), bo, 0, got.size());
    backend_.release(bx);
    backend_.release(bo);
    return got;
  }
  const CpuBackend& backend() const { return backend_; }

 private:
  CpuBackend backend_;
  Buffer w_;
  int out_, in_;
};

void expect_batch_invariant(CpuCompute compute) {
  for (const Shape s : kShapes) {
    const std::vector<float> x = random_values(size_t(kMaxRows) * s.in, 77 + s.in);
    const std::vector<float> w = random_values(size_t(s.out) * s.in, 88 + s.out);
    for (int threads : {1, 2}) {
      Gemm gemm(compute, threads, w, s.out, s.in);
      ASSERT_EQ(gemm.backend().compute_for(DType::BF16), compute_name(compute));
      std::vector<std::vector<float>> alone(kMaxRows);
      for (int r = 0; r < kMaxRows; ++r) alone[r] = gemm(x.data() + size_t(r) * s.in, 1);
      EXPECT_TRUE(gemm(x.data(), 0).empty());  // a call of no rows writes nothing, and returns
      for (const int rows : kRowCounts) {
        const std::vector<float> batch = gemm(x.data(), rows);
        for (int r = 0; r < rows; ++r)
          ASSERT_EQ(0, std::memcmp(batch.data() + size_t(r) * s.out, alone[r].data(),
                                   sizeof(float) * s.out))
              << compute_name(compute) << ": row " << r << " of " << rows
              << " differs from the row alone; in=" << s.in << " out=" << s.out
              << " threads=" << threads;
      }
    }
  }
}

TEST(MatmulCompute, F32BatchInvariantEveryRowCount) {
  expect_batch_invariant(CpuCompute::F32);
}

// Under both of the bf16 GEMM's tunings, whichever L1D this host has: Zen 4's (32 KiB: x whole to
// 12 KiB, the k-blocked walk to 10 rows) and Zen 5's (48 KiB: 24 KiB, wider x of 3-5 rows whole
// from L2, the k-blocked walk to 40 rows of x 4096 or wider and 20 of narrower, 8 rows in
// threes), which take other rows, panels and blocks together.
TEST(MatmulCompute, Bf16BatchInvariantEveryRowCount) {
  if (!has_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU or in this build";
  for (const size_t l1d : {32 * 1024, 48 * 1024}) {
    SCOPED_TRACE("bf16 GEMM tuned for an L1D of " + std::to_string(l1d) + " bytes");
    set_bf16_dot_l1d_bytes(l1d);
    expect_batch_invariant(CpuCompute::BF16);
  }
  set_bf16_dot_l1d_bytes(0);
}

// AMX tiles: rows share a tile in blocks of up to 16 (17-20 rows as two blocks of 9-10, 80 as five
// of 16, 100 as seven of 15 taken two at a time over pairs of panels), and a call of one block
// takes four panels side by side.
TEST(MatmulCompute, AmxBatchInvariantEveryRowCount) {
  if (!has_amx()) GTEST_SKIP() << "no AMX-BF16 tiles on this CPU, in this build or from this OS";
  expect_batch_invariant(CpuCompute::Amx);
}

// Against the exact (double) dot product of the bf16-rounded x and the bf16 weights: the products
// of two bf16 values are exact in fp32, so what remains is fp32 summation. With n the longest
// chain of additions, the error is at most about n * 2^-24 * sum |x w| (each rounding loses at
// most half an ulp of a partial sum no larger than sum |x w|); the test allows 2n. `chain` gives n
// for a row of `in`.
template <typename Chain>
void expect_within_summation_error(CpuCompute compute, Chain chain_for) {
  for (const Shape s : kShapes)
    for (const int rows : {1, 2, 5, 16, 20}) {
      const std::vector<float> x = random_values(size_t(rows) * s.in, 5 + s.in, 3.0f);
      const std::vector<float> w = random_values(size_t(s.out) * s.in, 6 + s.out, 0.1f);
      Gemm gemm(compute, 2, w, s.out, s.in);
      const std::vector<float> got = gemm(x.data(), rows);
      const int chain = chain_for(s.in);
      int rounded_nearer = 0;
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < s.out; ++j) {
          double sum = 0, magnitude = 0, unrounded = 0;
          for (int k = 0; k < s.in; ++k) {
            const double wk = round_to_bf16(w[size_t(j) * s.in + k]);
            const double xk = x[size_t(r) * s.in + k];
            const double p = double(round_to_bf16(float(xk))) * wk;
            sum += p;
            magnitude += std::fabs(p);
            unrounded += xk * wk;
          }
          const float value = got[size_t(r) * s.out + j];
          EXPECT_LE(std::fabs(value - sum), 2.0 * chain * std::ldexp(magnitude, -24))
              << compute_name(compute) << " rows=" << rows << " in=" << s.in << " out=" << s.out
              << " [" << r << "][" << j << "]";
          // x really is rounded: the result lies nearer the rounded inputs' dot product than the
          // unrounded one's (for most elements: a few may round to where both are as near).
          rounded_nearer += std::fabs(value - sum) < std::fabs(value - unrounded);
        }
      EXPECT_GT(2 * rounded_nearer, rows * s.out) << "in=" << s.in << ": x was not rounded to bf16";
    }
}

// vdpbf16ps: 16 lanes of in/32 steps (two additions each), a 4-level tree and the tail's FMAs.
TEST(MatmulCompute, Bf16WithinFp32SummationErrorOfTheRoundedInputs) {
  if (!has_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU or in this build";
  expect_within_summation_error(CpuCompute::BF16,
                                [](int in) { return 2 * (in / 32) + 4 + in % 32; });
}

// TDPBF16PS: the SDM defines each instruction as 32 products added one after another into the
// accumulator, so the chain is as long as k padded to whole tiles (the hardware may round less
// often; the bound holds either way).
TEST(MatmulCompute, AmxWithinFp32SummationErrorOfTheRoundedInputs) {
  if (!has_amx()) GTEST_SKIP() << "no AMX-BF16 tiles on this CPU, in this build or from this OS";
  expect_within_summation_error(CpuCompute::Amx, [](int in) { return (in + 31) / 32 * 32; });
}

// What bf16 and amx compute refuse: fp32 weights (it would change the model silently), the
// OpenBLAS GEMM, a CPU without the instructions; auto keeps fp32 weights in fp32, and multiplies
// bf16 weights on AMX tiles where it can, else with vdpbf16ps where it can.
TEST(MatmulCompute, Bf16RefusesWhatItCannotDo) {
  const std::vector<float> w = random_values(64, 1);
  if (!has_bf16()) {
    EXPECT_THROW(CpuBackend(1, GemmKind::Invariant, CpuCompute::BF16), std::invalid_argument);
  } else {
    CpuBackend bf16(1, GemmKind::Invariant, CpuCompute::BF16);
    EXPECT_THROW(bf16.upload_matrix(w.data(), 4, 16, DType::F32), std::invalid_argument);
    EXPECT_EQ(bf16.compute_for(DType::BF16), "bf16");
  }
  if (!has_amx()) {
    EXPECT_THROW(CpuBackend(1, GemmKind::Invariant, CpuCompute::Amx), std::invalid_argument);
  } else {
    CpuBackend amx(1, GemmKind::Invariant, CpuCompute::Amx);
    EXPECT_THROW(amx.upload_matrix(w.data(), 4, 16, DType::F32), std::invalid_argument);
    EXPECT_EQ(amx.compute_for(DType::BF16), "amx");
  }
  EXPECT_THROW(CpuBackend(1, GemmKind::OpenBLAS, CpuCompute::BF16), std::invalid_argument);
  EXPECT_THROW(CpuBackend(1, GemmKind::OpenBLAS, CpuCompute::Amx), std::invalid_argument);
  CpuBackend automatic(1, GemmKind::Invariant, CpuCompute::Auto);
  EXPECT_EQ(automatic.compute_for(DType::F32), "f32");
  EXPECT_EQ(automatic.compute_for(DType::BF16), has_amx() ? "amx" : has_bf16() ? "bf16" : "f32");
  Buffer m = automatic.upload_matrix(w.data(), 4, 16, DType::F32);
  automatic.release(m);
}

}  // namespace
}  // namespace ssd
