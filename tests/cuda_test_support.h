// Shared by the CUDA backend's tests (test_cuda_ops.cpp, test_cuda_gemm.cpp,
// test_cuda_sampling.cpp, test_cuda_model.cpp): the skip-without-a-GPU fixture and the op tests'
// GPU-beside-CPU one, bf16 rounding on the host, host<->device helpers and the comparisons with
// their tolerances (explained at the top of test_cuda_ops.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "model/model.h"
#include "tests/bitwise_compare.h"

namespace ssd::cuda_test {

using test::bits_equal;
using test::expect_bitwise_equal;
using test::row_of;

using Logits = ForwardBatch::Logits;
using Tokens = std::vector<int32_t>;

// Why no GPU can be used here ("" when one can).
inline std::string no_gpu_reason() {
  std::string why;
  if (cuda_device_count(&why) > 0) return "";
  return why.empty() ? "no CUDA device" : why;
}

// Every GPU test derives from this: skipped, with the reason, when no GPU is visible.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = no_gpu_reason();
    if (!why.empty()) GTEST_SKIP() << "no GPU visible: " << why;
  }
};

// The op tests' fixture: a CUDA backend on GPU 0 beside a one-thread CPU backend, the
// reference each op is compared with.
class GpuAgainstCpu : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    gpu = std::make_unique<CudaBackend>(0);
  }
  CpuBackend cpu{1};
  std::unique_ptr<CudaBackend> gpu;
};

// --- host helpers ---

// fp32 -> bf16 -> fp32, round to nearest even (what __float2bfloat16 does).
inline float bf16_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return f;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  std::memcpy(&f, &u, sizeof(u));
  return f;
}

// Uniform values in [-scale, scale], already bf16-representable.
inline std::vector<float> random_bf16(size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(count);
  for (float& x : v) x = bf16_round(dist(rng));
  return v;
}

inline Buffer put(Backend& be, const std::vector<float>& values) {
  Buffer b = be.alloc(values.size());
  be.from_host(b, 0, values.data(), values.size());
  return b;
}

inline std::vector<float> get(Backend& be, const Buffer& b, size_t count) {
  std::vector<float> out(count);
  be.to_host(out.data(), b, 0, count);
  return out;
}

// |got - want| <= abs_tol + rel_tol * |want| everywhere; reports the worst element.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                         double rel_tol, double abs_tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0, worst = 0;
  double worst_excess = -1.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::fabs(double(got[i]) - double(want[i]));
    const double allowed = abs_tol + rel_tol * std::fabs(double(want[i]));
    if (!(diff <= allowed)) ++bad;  // NaN counts as bad
    const double excess = std::isnan(diff) ? 1e30 : diff - allowed;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements off; worst ["
                     << worst << "] got " << got[worst] << " want " << want[worst];
}

// Whole-model logits: max |diff| < 5% of max |logit| and rms relative error < 3% (see top).
inline void expect_logits_close(const std::vector<float>& gpu, const std::vector<float>& cpu,
                                const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  ASSERT_FALSE(cpu.empty()) << what;
  double max_logit = 0, max_diff = 0, se = 0, sl = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double d = double(gpu[i]) - double(cpu[i]);
    max_logit = std::max(max_logit, std::fabs(double(cpu[i])));
    max_diff = std::max(max_diff, std::isnan(d) ? 1e30 : std::fabs(d));
    se += d * d;
    sl += double(cpu[i]) * double(cpu[i]);
  }
  EXPECT_LT(max_diff, 0.05 * max_logit)
      << what << ": max |diff| " << max_diff << ", max |logit| " << max_logit;
  EXPECT_LT(std::sqrt(se / sl), 0.03) << what << ": rms relative error";
}

}  // namespace ssd::cuda_test
