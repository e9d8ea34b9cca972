// The CUDA sampling kernels (label `gpu`): argmax, top-k and softmax over device logits against
// the same computed on the host. Skips, printing why, where no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampling_kernels.h"
#include "tests/cuda_test_support.h"

namespace ssd {
namespace {

using namespace cuda_test;

class CudaSampling : public GpuTest {};

TEST_F(CudaSampling, ArgmaxTopKSoftmaxMatchHost) {
  CudaBackend gpu(0);
  const int rows = 3, vocab = 1000, k = 5;
  std::vector<float> logits = random_bf16(size_t(rows) * vocab, 77, 10.0f);
  logits[10] = logits[20] = 50.0f;  // a tie in row 0: the lower index wins
  logits[size_t(vocab) + 999] = 40.0f;
  float *d_logits = nullptr, *d_probs = nullptr, *d_values = nullptr;
  int32_t *d_argmax = nullptr, *d_indices = nullptr;
  SSD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_logits), logits.size() * sizeof(float)));
  SSD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_probs), logits.size() * sizeof(float)));
  SSD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_values), rows * k * sizeof(float)));
  SSD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_argmax), rows * sizeof(int32_t)));
  SSD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_indices), rows * k * sizeof(int32_t)));
  SSD_CUDA_CHECK(
      cudaMemcpy(d_logits, logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice));
  const DeviceLogits dl{d_logits, LogitsType::F32, rows, vocab};
  cuda_argmax(d_argmax, dl, gpu.stream());
  cuda_top_k(d_values, d_indices, dl, k, gpu.stream());
  cuda_softmax(d_probs, dl, 0.7f, gpu.stream());
  gpu.synchronize();
  std::vector<int32_t> argmax(rows), indices(size_t(rows) * k);
  std::vector<float> values(size_t(rows) * k), probs(logits.size());
  SSD_CUDA_CHECK(
      cudaMemcpy(argmax.data(), d_argmax, rows * sizeof(int32_t), cudaMemcpyDeviceToHost));
  SSD_CUDA_CHECK(cudaMemcpy(indices.data(), d_indices, indices.size() * sizeof(int32_t),
                            cudaMemcpyDeviceToHost));
  SSD_CUDA_CHECK(
      cudaMemcpy(values.data(), d_values, values.size() * sizeof(float), cudaMemcpyDeviceToHost));
  SSD_CUDA_CHECK(
      cudaMemcpy(probs.data(), d_probs, probs.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int r = 0; r < rows; ++r) {
    const float* row = logits.data() + size_t(r) * vocab;
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    EXPECT_EQ(argmax[size_t(r)], order[0]) << "row " << r;
    for (int i = 0; i < k; ++i) {
      EXPECT_EQ(indices[size_t(r) * k + i], order[size_t(i)]) << "row " << r << " rank " << i;
      EXPECT_EQ(values[size_t(r) * k + i], row[order[size_t(i)]]);
    }
    double m = row[order[0]] / 0.7, total = 0;
    for (int i = 0; i < vocab; ++i) total += std::exp(row[i] / 0.7 - m);
    for (int i = 0; i < vocab; ++i)
      EXPECT_NEAR(probs[size_t(r) * vocab + i], std::exp(row[i] / 0.7 - m) / total, 1e-5);
  }
  EXPECT_EQ(argmax[0], 10);
  for (void* p :
       {static_cast<void*>(d_logits), static_cast<void*>(d_probs), static_cast<void*>(d_values),
        static_cast<void*>(d_argmax), static_cast<void*>(d_indices)})
    SSD_CUDA_CHECK(cudaFree(p));
}

}  // namespace
}  // namespace ssd
