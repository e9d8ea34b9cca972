// The vectorised exponentials behind softmax and SAGUARO's distribution (kernels/exp_weights.h)
// against std::exp in double, and softmax against a double-precision reference: lossless
// verification compares the target's and the draft's probabilities from the same softmax, so
// what matters is that each is the distribution it claims to be, to float precision.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/exp_weights.h"
#include "ssd/sampling.h"

namespace ssd {
namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(ExpWeights, MatchesExpInDouble) {
  // Arguments across [-100, 0], with every short tail length (n % 16) on the way.
  std::vector<float> x;
  for (int i = 0; i <= 20000; ++i) x.push_back(-100.0f + 100.0f * float(i) / 20000.0f);
  for (int n : {1, 15, 16, 17, 33, int(x.size())}) {
    std::vector<float> out(static_cast<size_t>(n), -1.0f);
    const double total = exp_weights(x.data() + x.size() - size_t(n), n, 0.0f, 1.0f, out.data());
    double exact_total = 0.0, out_total = 0.0;
    for (int i = 0; i < n; ++i) {
      const float a = x[x.size() - size_t(n) + size_t(i)];
      const double want = a < -87.0f ? 0.0 : std::exp(double(a));
      exact_total += want;
      out_total += out[size_t(i)];
      ASSERT_LE(std::abs(double(out[size_t(i)]) - want), 2.5e-7 * want) << "a=" << a;
    }
    EXPECT_NEAR(total, out_total, 1e-12 * out_total);  // the sum of what it wrote, in double
    EXPECT_NEAR(total, exact_total, 2.5e-7 * exact_total);
  }
}

TEST(ExpWeights, ShiftScaleNanAndInfinity) {
  const std::vector<float> x = {3.0f, kNaN, -kInf, 1.0f, 3.0f};
  std::vector<float> out(x.size());
  const double total = exp_weights(x.data(), int(x.size()), 3.0f, 0.5f, out.data());
  EXPECT_EQ(out[0], 1.0f);  // the largest gets exp(0) exactly
  EXPECT_EQ(out[1], 0.0f);  // NaN weighs nothing
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_NEAR(out[3], std::exp(-1.0), 2.5e-7 * std::exp(-1.0));
  EXPECT_EQ(out[4], 1.0f);
  EXPECT_NEAR(total, 2.0 + std::exp(-1.0), 1e-7);
}

TEST(MaxIgnoringNan, MatchesAScalarScan) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int n : {1, 5, 16, 17, 40, 32001}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = normal(rng);
      if (trial % 3 == 0) x[rng() % x.size()] = kNaN;
      if (trial % 5 == 0) x[0] = kNaN;
      if (trial % 7 == 0) x[x.size() - 1] = 50.0f;  // the largest in the tail
      float want = -kInf;
      for (float v : x) want = v > want ? v : want;
      EXPECT_EQ(max_ignoring_nan(x.data(), n), want) << "n=" << n << " trial " << trial;
    }
  }
  const std::vector<float> none = {kNaN, -kInf, kNaN};
  EXPECT_EQ(max_ignoring_nan(none.data(), 3), -kInf);
}

TEST(SumInDouble, MatchesASequentialSum) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int n : {0, 1, 7, 8, 9, 100, 32001}) {
    std::vector<float> x(static_cast<size_t>(n));
    double want = 0.0;
    for (float& v : x) want += (v = u(rng));
    EXPECT_NEAR(sum_in_double(x.data(), n), want, 1e-12 * (want + 1.0)) << "n=" << n;
  }
}

TEST(SiluMul, MatchesTheScalarFormulaInDouble) {
  // Gates across [-100, 100] (both branches of the sigmoid, and exp's underflow below -87),
  // every short tail length, and in place as forward() calls it (out == gate).
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> up_dist(-3.0f, 3.0f);
  std::vector<float> gate, up;
  for (int i = 0; i <= 4000; ++i) {
    gate.push_back(-100.0f + 200.0f * float(i) / 4000.0f);
    up.push_back(up_dist(rng));
  }
  for (size_t n : {size_t(1), size_t(15), size_t(16), size_t(17), size_t(33), gate.size()}) {
    std::vector<float> out(n, kNaN), in_place(gate.begin(), gate.begin() + std::ptrdiff_t(n));
    silu_mul(gate.data(), up.data(), n, out.data());
    silu_mul(in_place.data(), up.data(), n, in_place.data());
    for (size_t i = 0; i < n; ++i) {
      const double g = gate[i];
      const double exact = g / (1.0 + std::exp(-g)) * double(up[i]);
      EXPECT_NEAR(out[i], exact, 5e-7 * std::fabs(exact) + 1e-30) << "gate " << g << ", n " << n;
      EXPECT_EQ(in_place[i], out[i]) << "in place, gate " << g;
    }
  }
  const std::vector<float> specials = {kNaN, kInf, 0.0f, -0.0f, 88.0f, -88.0f};
  const std::vector<float> ones(specials.size(), 1.0f);
  std::vector<float> out(specials.size());
  silu_mul(specials.data(), ones.data(), specials.size(), out.data());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], kInf);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_NEAR(out[4], 88.0f, 1e-5f);
  EXPECT_LE(std::fabs(out[5]), 1e-30f);
}

TEST(Softmax, MatchesADoubleReference) {
  std::mt19937 rng(4);
  for (int vocab : {1, 2, 17, 1000, 32000}) {
    for (double scale : {1.0, 4.0, 12.0}) {
      std::normal_distribution<float> normal(0.0f, float(scale));
      std::vector<float> z(static_cast<size_t>(vocab));
      for (float& v : z) v = normal(rng);
      for (double t : {0.1, 0.7, 1.0, 2.0}) {
        std::vector<float> p;
        softmax(z.data(), vocab, t, p);
        double top = -1e300, sum = 0.0, got_sum = 0.0;
        for (float v : z) top = std::max(top, double(v));
        for (float v : z) sum += std::exp((double(v) - top) / t);
        for (int i = 0; i < vocab; ++i) {
          const double want = std::exp((double(z[size_t(i)]) - top) / t) / sum;
          ASSERT_NEAR(p[size_t(i)], want, 1e-9 + 2e-6 * want)
              << "vocab " << vocab << " scale " << scale << " T " << t << " token " << i;
          got_sum += p[size_t(i)];
        }
        EXPECT_NEAR(got_sum, 1.0, 1e-5);
      }
    }
  }
}

TEST(Softmax, RowsWithoutAFiniteMaximum) {
  std::vector<float> p;
  const std::vector<float> none = {-kInf, kNaN, -kInf, -kInf};
  softmax(none.data(), 4, 1.0, p);
  for (float v : p) EXPECT_EQ(v, 0.25f);
  const std::vector<float> infinite = {0.0f, kInf, 1.0f};
  softmax(infinite.data(), 3, 1.0, p);
  EXPECT_EQ(p, (std::vector<float>{0.0f, 1.0f, 0.0f}));
  const std::vector<float> with_nan = {1.0f, kNaN, 1.0f};
  softmax(with_nan.data(), 3, 1.0, p);
  EXPECT_EQ(p, (std::vector<float>{0.5f, 0.0f, 0.5f}));
  const std::vector<float> nan_first = {kNaN, 1.0f, 1.0f};
  softmax(nan_first.data(), 3, 1.0, p);
  EXPECT_EQ(p, (std::vector<float>{0.0f, 0.5f, 0.5f}));
}

}  // namespace
}  // namespace ssd
