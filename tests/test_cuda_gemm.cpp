// The CUDA backend's matrix products (label `gpu`): the batch-invariant kernels (CUDA cores and
// tensor cores) and cuBLAS against the CPU backend, the switch between them, and the bit-for-bit
// batch invariance that makes greedy SD equal AR. The other ops are in test_cuda_ops.cpp, whose
// head explains the tolerances; racecheck (scripts/gpu-check.sh) runs over the invariant-kernel
// tests here. Compiled only in CUDA builds; without a GPU every test skips, printing why.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "tests/cuda_test_support.h"

namespace ssd {
namespace {

using namespace cuda_test;

class CudaMatmul : public GpuAgainstCpu {};

// out = x w^T on both backends; the CPU result is the exact fp32 reference for bf16 inputs.
void check_matmul(CudaBackend& gpu, CpuBackend& cpu, CudaGemm kernel, int rows, int in,
                  int out_dim) {
  const std::vector<float> x = random_bf16(size_t(rows) * in, 1000 + rows * 7 + in);
  const std::vector<float> w = random_bf16(size_t(out_dim) * in, 2000 + out_dim * 13 + in);
  Buffer xg = put(gpu, x), wg = gpu.upload_weight(w.data(), w.size());
  Buffer xc = put(cpu, x), wc = cpu.upload_weight(w.data(), w.size());
  Buffer og = gpu.alloc(size_t(rows) * out_dim), oc = cpu.alloc(size_t(rows) * out_dim);
  gpu.matmul_with(kernel, og, xg, wg, rows, in, out_dim);
  cpu.matmul(oc, xc, wc, rows, in, out_dim);
  // The output's bf16 rounding (2^-9 relative) plus fp32 summation differences, scaled by
  // the typical magnitude of a sum of `in` products of values in [-1, 1].
  const char* name = kernel == CudaGemm::Cublas        ? "cublas"
                     : kernel == CudaGemm::InvariantTc ? "invariant-tc"
                                                       : "invariant";
  expect_close(get(gpu, og, size_t(rows) * out_dim), get(cpu, oc, size_t(rows) * out_dim), 8e-3,
               1e-5 * in,
               std::string(name) + " matmul " + std::to_string(rows) + "x" + std::to_string(in) +
                   " -> " + std::to_string(out_dim));
  for (Buffer* b : {&xg, &wg, &og}) gpu.release(*b);
  for (Buffer* b : {&xc, &wc, &oc}) cpu.release(*b);
}

// The two batch-invariant kernels: CUDA cores (the default) and tensor cores (--gemm
// invariant-tc).
constexpr CudaGemm kInvariantKernels[] = {CudaGemm::Invariant, CudaGemm::InvariantTc};

TEST_F(CudaMatmul, InvariantMatmulMatchesCpu) {
  // Vector / tensor-core path (in % 8 == 0) with every row tile (1, 2, 4, 8 and several 8-row
  // passes; 8, 16 and 32 on tensor cores) and column grouping, a partial last k-step (in 48, 160,
  // 1000), and the scalar path (in % 8 != 0).
  for (const CudaGemm kernel : kInvariantKernels)
    for (const auto& [rows, in, out] :
         {std::tuple{1, 64, 64}, std::tuple{2, 48, 96}, std::tuple{3, 160, 64},
          std::tuple{1, 4096, 1024}, std::tuple{7, 1024, 4096}, std::tuple{16, 2048, 300},
          std::tuple{64, 256, 1000}, std::tuple{1, 100, 37}, std::tuple{5, 13, 9},
          std::tuple{12, 1001, 70}, std::tuple{40, 1000, 33}})
      check_matmul(*gpu, cpu, kernel, rows, in, out);
}

TEST_F(CudaMatmul, CublasMatmulMatchesCpu) {
  for (const auto& [rows, in, out] :
       {std::tuple{65, 64, 160}, std::tuple{200, 1024, 512}, std::tuple{1, 64, 64}})
    check_matmul(*gpu, cpu, CudaGemm::Cublas, rows, in, out);
}

TEST_F(CudaMatmul, AutoGemmSwitchesToCublasAboveTheThreshold) {
  EXPECT_EQ(gpu->invariant_max_rows(), CudaBackend::kDefaultInvariantMaxRows);
  // Both sides of the threshold compute the product correctly.
  check_matmul(*gpu, cpu, CudaGemm::Auto, 64, 256, 128);
  check_matmul(*gpu, cpu, CudaGemm::Auto, 65, 256, 128);
}

// A run raises the bound to its largest step (batch x (K + 1)): an 80-row verification (batch
// 16, K = 4) then stays on the batch-invariant kernel, each row equal to itself alone (at the
// default bound this call would go to cuBLAS, whose summation order is its own).
TEST_F(CudaMatmul, KeepBatchInvariantUpToRaisesTheThreshold) {
  for (const CudaGemm automatic : {CudaGemm::Auto, CudaGemm::AutoTc}) {
    CudaBackend b(0, 1, automatic);
    b.keep_batch_invariant_up_to(80);
    EXPECT_EQ(b.invariant_max_rows(), 80);
    b.keep_batch_invariant_up_to(8);
    EXPECT_EQ(b.invariant_max_rows(), 80) << "never lowered";
    const int rows = 80, in = 4096, out = 256;
    const std::vector<float> x = random_bf16(size_t(rows) * in, 53);
    const std::vector<float> w = random_bf16(size_t(out) * in, 59);
    Buffer wg = b.upload_weight(w.data(), w.size());
    Buffer xg = put(b, x);
    Buffer og = b.alloc(size_t(rows) * out);
    b.matmul(og, xg, wg, rows, in, out);
    const std::vector<float> full = get(b, og, size_t(rows) * out);
    for (const int r : {0, 37, 79}) {
      Buffer one =
          put(b, std::vector<float>(x.begin() + size_t(r) * in, x.begin() + size_t(r + 1) * in));
      b.matmul(og, one, wg, 1, in, out);
      expect_bitwise_equal(
          get(b, og, size_t(out)),
          std::vector<float>(full.begin() + size_t(r) * out, full.begin() + size_t(r + 1) * out),
          std::string(automatic == CudaGemm::AutoTc ? "invariant-tc" : "invariant") + ": row " +
              std::to_string(r) + " of 80 against alone");
      b.release(one);
    }
    for (Buffer* buf : {&wg, &xg, &og}) b.release(*buf);
  }
}

// Row r of a many-row call equals row r computed alone and in every smaller call, bit for bit:
// what makes greedy SD equal AR.
TEST_F(CudaMatmul, InvariantMatmulIsBatchInvariant) {
  for (const CudaGemm kernel : kInvariantKernels)
    for (const auto& [in, out] : {std::pair{4096, 300}, std::pair{64, 64}, std::pair{1024, 2048},
                                  std::pair{100, 37}, std::pair{8, 5}}) {
      const int max_rows = 16;
      const std::vector<float> x = random_bf16(size_t(max_rows) * in, 31 + in);
      const std::vector<float> w = random_bf16(size_t(out) * in, 37 + out);
      Buffer wg = gpu->upload_weight(w.data(), w.size());
      Buffer xg = put(*gpu, x);
      Buffer og = gpu->alloc(size_t(100) * out);
      gpu->matmul_with(kernel, og, xg, wg, max_rows, in, out);
      const std::vector<float> full = get(*gpu, og, size_t(max_rows) * out);
      const std::string shape =
          std::string(kernel == CudaGemm::InvariantTc ? "invariant-tc " : "invariant ") +
          std::to_string(in) + " -> " + std::to_string(out);
      for (int rows = 1; rows < max_rows; ++rows) {
        gpu->matmul_with(kernel, og, xg, wg, rows, in, out);
        expect_bitwise_equal(get(*gpu, og, size_t(rows) * out),
                             std::vector<float>(full.begin(), full.begin() + size_t(rows) * out),
                             shape + ": first " + std::to_string(rows) + " rows");
      }
      // Each row alone, from its own buffer (as a 1-row decode would).
      for (int r = 0; r < max_rows; ++r) {
        Buffer one = put(
            *gpu, std::vector<float>(x.begin() + size_t(r) * in, x.begin() + size_t(r + 1) * in));
        gpu->matmul_with(kernel, og, one, wg, 1, in, out);
        expect_bitwise_equal(
            get(*gpu, og, size_t(out)),
            std::vector<float>(full.begin() + size_t(r) * out, full.begin() + size_t(r + 1) * out),
            shape + ": row " + std::to_string(r) + " alone");
        gpu->release(one);
      }
      // Many rows (several 8-row passes): the first 16 rows are unchanged.
      std::vector<float> many = x;
      const std::vector<float> more = random_bf16(size_t(100 - max_rows) * in, 41 + in);
      many.insert(many.end(), more.begin(), more.end());
      Buffer xm = put(*gpu, many);
      gpu->matmul_with(kernel, og, xm, wg, 100, in, out);
      expect_bitwise_equal(get(*gpu, og, size_t(max_rows) * out), full,
                           shape + ": first 16 of 100 rows");
      for (Buffer* b : {&wg, &xg, &og, &xm}) gpu->release(*b);
    }
}

}  // namespace
}  // namespace ssd
