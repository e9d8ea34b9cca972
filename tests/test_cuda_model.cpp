// The CUDA backend on whole models (label `gpu`): logits against the fp32 CPU backend (the
// tolerances are explained at the top of test_cuda_ops.cpp), the batch invariance of forward()
// that greedy SD relies on (branch masks: tests/test_forward.cpp, on every backend), backend
// selection with and without a GPU, and NCCL tensor parallelism over two GPUs. Compiled only in
// CUDA builds; without a GPU every test but the no-GPU path skips, printing why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "harness/backend_select.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/sampling_kernels.h"
#include "kernels/errors.h"
#include "model/model.h"
#include "model/weights.h"
#if defined(SSD_HAVE_NCCL)
#include "comm/nccl_all_reduce.h"
#endif

#include "tests/cuda_test_support.h"
#include "tests/test_support.h"

namespace ssd {
namespace {

using namespace cuda_test;

// --- whole models ---

struct Loaded {
  std::unique_ptr<WeightSource> source;
  std::unique_ptr<Backend> backend;
  Model model;
  Loaded(const std::string& preset, std::unique_ptr<Backend> be)
      : source(open_weight_source("synthetic:" + preset, 5)),
        backend(std::move(be)),
        model(load_model(*source, *backend)) {}
  ~Loaded() { release_model(model); }
  int vocab() const { return model.config.vocab_size; }
};

std::unique_ptr<Backend> cuda(CudaGemm gemm = CudaGemm::Auto) {
  return std::make_unique<CudaBackend>(0, 1, gemm);
}

// One KV cache and its activations (tests/test_support.h) over a Loaded model.
struct Session : test::ForwardSession {
  Session(Loaded& loaded, int sequences, int capacity)
      : ForwardSession(loaded.model, sequences, capacity) {}
};

const Tokens kPrefix = {1, 17, 200, 3, 45, 99, 250};

class CudaModel : public GpuTest {};

// Prefill then decode steps: CUDA logits within bf16 tolerance of the fp32 CPU logits.
void check_logits_vs_cpu(const std::string& preset, int invariant_max_rows,
                         CudaGemm gemm = CudaGemm::Auto) {
  auto backend = std::make_unique<CudaBackend>(0, 1, gemm);
  backend->set_invariant_max_rows(invariant_max_rows);
  Loaded g(preset, std::move(backend));
  Loaded c(preset, std::make_unique<CpuBackend>(2));
  Session sg(g, 1, 64), sc(c, 1, 64);
  const std::string what = preset + " (" + (gemm == CudaGemm::AutoTc ? "tensor-core " : "") +
                           "invariant up to " + std::to_string(invariant_max_rows) + " rows)";
  expect_logits_close(sg.append(0, kPrefix), sc.append(0, kPrefix), what + " prefill");
  for (int32_t token : {5, 250, 7, 7, 130, 2, 99})
    expect_logits_close(sg.append(0, {token}), sc.append(0, {token}),
                        what + " decode token " + std::to_string(token));
  // A 4-token verification-style append.
  ForwardBatch b;
  b.add_causal(0, sg.cache.length[0], {11, 12, 13, 14}, Logits::All);
  expect_logits_close(sg.run(b), sc.run(b), what + " 4-token append");
}

TEST_F(CudaModel, LlamaLogitsMatchCpu) {
  check_logits_vs_cpu("tiny-llama", CudaBackend::kDefaultInvariantMaxRows);
}
TEST_F(CudaModel, Qwen3LogitsMatchCpu) {
  check_logits_vs_cpu("tiny-qwen3", CudaBackend::kDefaultInvariantMaxRows);
}
// Qwen2: the q/k/v biases (bias_add on the GPU), 6 heads over 2 KV heads.
TEST_F(CudaModel, Qwen2LogitsMatchCpu) {
  check_logits_vs_cpu("tiny-qwen2", CudaBackend::kDefaultInvariantMaxRows);
}
TEST_F(CudaModel, OtherShapesLogitsMatchCpu) {
  check_logits_vs_cpu("tiny-llama-other", CudaBackend::kDefaultInvariantMaxRows);
  check_logits_vs_cpu("tiny-llama-tied", CudaBackend::kDefaultInvariantMaxRows);
}
TEST_F(CudaModel, TensorCoreGemmLogitsMatchCpu) {
  check_logits_vs_cpu("tiny-llama", CudaBackend::kDefaultInvariantMaxRows, CudaGemm::AutoTc);
  check_logits_vs_cpu("tiny-qwen3", CudaBackend::kDefaultInvariantMaxRows, CudaGemm::AutoTc);
  check_logits_vs_cpu("tiny-qwen2", CudaBackend::kDefaultInvariantMaxRows, CudaGemm::AutoTc);
}
TEST_F(CudaModel, CublasPrefillLogitsMatchCpu) {
  // Threshold 1: the 7-token prefill and the 4-token append go through cuBLAS.
  check_logits_vs_cpu("tiny-llama", 1);
  check_logits_vs_cpu("tiny-qwen3", 1);
}

// A sequence decoded alone equals the same sequence in a batch of three, and a K+1-token
// verification equals K+1 one-token decodes, bit for bit.
void check_batch_invariance(const std::string& preset, CudaGemm gemm = CudaGemm::Auto) {
  Loaded m(preset, cuda(gemm));
  const int vocab = m.vocab();
  const std::vector<Tokens> prompts = {{4, 5, 6}, {1, 17, 200, 3, 45, 99, 250, 31, 2}, {77}};
  const std::vector<Tokens> steps = {{20, 21, 22}, {30, 31, 32}, {40, 41, 42}, {50, 51, 52}};
  Session batched(m, 3, 32);
  ForwardBatch prefill;
  for (int s = 0; s < 3; ++s) prefill.add_causal(s, 0, prompts[size_t(s)], Logits::Last);
  const std::vector<float> prefill_logits = batched.run(prefill);
  for (int s = 0; s < 3; ++s) batched.cache.length[size_t(s)] = int(prompts[size_t(s)].size());
  for (int s = 0; s < 3; ++s) {
    Session alone(m, 1, 32);
    expect_bitwise_equal(row_of(prefill_logits, s, vocab), alone.append(0, prompts[size_t(s)]),
                         preset + " prefill of sequence " + std::to_string(s));
  }
  Session alone(m, 1, 32);
  alone.append(0, prompts[1]);
  for (size_t i = 0; i < steps.size(); ++i) {
    ForwardBatch step;
    for (int s = 0; s < 3; ++s)
      step.add_causal(s, batched.cache.length[size_t(s)], {steps[i][size_t(s)]}, Logits::Last);
    const std::vector<float> logits = batched.run(step);
    for (int s = 0; s < 3; ++s) batched.cache.length[size_t(s)] += 1;
    expect_bitwise_equal(row_of(logits, 1, vocab), alone.append(0, {steps[i][1]}),
                         preset + " decode step " + std::to_string(i));
  }

  const Tokens draft = {5, 250, 7, 7, 130};
  Session verify(m, 1, 32), ar(m, 1, 32);
  verify.append(0, kPrefix);
  ar.append(0, kPrefix);
  ForwardBatch batch;
  batch.add_causal(0, verify.cache.length[0], draft, Logits::All);
  const std::vector<float> logits = verify.run(batch);
  for (size_t i = 0; i < draft.size(); ++i)
    expect_bitwise_equal(row_of(logits, int(i), vocab), ar.append(0, {draft[i]}),
                         preset + " verify position " + std::to_string(i));
}

TEST_F(CudaModel, LlamaBatchInvariant) {
  check_batch_invariance("tiny-llama");
}
TEST_F(CudaModel, Qwen3BatchInvariant) {
  check_batch_invariance("tiny-qwen3");
}
TEST_F(CudaModel, Qwen2BatchInvariant) {
  check_batch_invariance("tiny-qwen2");
}
TEST_F(CudaModel, TensorCoreGemmIsBatchInvariant) {
  check_batch_invariance("tiny-llama", CudaGemm::AutoTc);
  check_batch_invariance("tiny-qwen3", CudaGemm::AutoTc);
  check_batch_invariance("tiny-qwen2", CudaGemm::AutoTc);
}

// --- backend selection ---

class CudaBackendSelect : public GpuTest {};

TEST_F(CudaBackendSelect, CudaAndAutoPickTheGpu) {
  const BackendSetup be = make_backend("cuda", 1, "invariant", "f32", "");
  EXPECT_EQ(be.backend->name(), "cuda");
  EXPECT_EQ(make_backend("auto", 1, "invariant", "f32", "").backend->name(), "cuda");
  EXPECT_EQ(make_backend("cuda", 1, "cublas", "f32", "0").backend->name(), "cuda");
  const BackendSetup cpu = make_backend("cpu", 1, "invariant", "f32", "");
  EXPECT_EQ(cpu.backend->name(), "cpu");
  EXPECT_EQ(cpu.backend->gpu_model(), "");
  const std::string description = be.backend->device_description();
  EXPECT_NE(description.find("PCI"), std::string::npos) << description;
  EXPECT_EQ(be.backend->gpu_model(), description);
  std::printf("[ info ] %s\n", description.c_str());
  for (const auto& [key, value] : be.libraries)
    std::printf("[ info ] %s = %s\n", key.c_str(), value.c_str());
  EXPECT_GE(be.libraries.size(), 3u);
  EXPECT_THROW(make_backend("cuda", 1, "openblas", "f32", ""), InputError);
  EXPECT_THROW(make_backend("cuda", 1, "invariant", "f32", "99"), InputError);
  EXPECT_THROW(make_backend("cuda", 1, "invariant", "f32", "0,x"), InputError);
  EXPECT_THROW(make_backend("gpu", 1, "invariant", "f32", ""), InputError);
  // --compute: the CUDA-core kernel runs fp32 FMAs, the tensor-core one bf16 x bf16 -> fp32.
  EXPECT_EQ(be.backend->compute_for(DType::BF16), "f32");
  EXPECT_EQ(make_backend("cuda", 1, "invariant-tc", "bf16", "").backend->compute_for(DType::BF16),
            "bf16");
  EXPECT_THROW(make_backend("cuda", 1, "invariant", "bf16", ""), InputError);
  EXPECT_THROW(make_backend("cuda", 1, "invariant", "nope", ""), InputError);
}

// --gemm invariant-tc reaches the tensor-core kernel and --gemm invariant the CUDA-core one.
// Every other test of the two would pass if the flag ran the same kernel both times: their
// results agree to rounding and each is batch-invariant. What tells them apart is their
// summation orders, visible in a few of the bf16-rounded outputs of a large product.
TEST_F(CudaBackendSelect, GemmFlagPicksTheKernel) {
  const int rows = 16, in = 4096, out = 4096;
  const std::vector<float> x = random_bf16(size_t(rows) * in, 51);
  const std::vector<float> w = random_bf16(size_t(out) * in, 53);
  std::vector<float> by_flag[2], by_kernel[2];
  const char* flags[2] = {"invariant", "invariant-tc"};
  const CudaGemm kernels[2] = {CudaGemm::Invariant, CudaGemm::InvariantTc};
  for (int i = 0; i < 2; ++i) {
    const BackendSetup be = make_backend("cuda", 1, flags[i], "f32", "");
    auto& gpu = dynamic_cast<CudaBackend&>(*be.backend);
    Buffer xg = put(gpu, x), wg = gpu.upload_weight(w.data(), w.size());
    Buffer og = gpu.alloc(size_t(rows) * out);
    gpu.matmul(og, xg, wg, rows, in, out);  // the kernel --gemm chose
    by_flag[i] = get(gpu, og, size_t(rows) * out);
    gpu.matmul_with(kernels[i], og, xg, wg, rows, in, out);
    by_kernel[i] = get(gpu, og, size_t(rows) * out);
    for (Buffer* b : {&xg, &wg, &og}) gpu.release(*b);
  }
  for (int i = 0; i < 2; ++i)
    expect_bitwise_equal(by_flag[i], by_kernel[i], std::string("--gemm ") + flags[i]);
  // Each output's fp32 sum differs between the orders by ~1e-4 where a bf16 step is ~0.1: of
  // 65536 outputs, some tens round differently (a chance of none: ~e^-40).
  size_t differ = 0;
  for (size_t k = 0; k < by_kernel[0].size(); ++k)
    differ += std::memcmp(&by_kernel[0][k], &by_kernel[1][k], sizeof(float)) != 0;
  std::printf("[ info ] invariant vs invariant-tc: %zu of %zu outputs differ in their bits\n",
              differ, by_kernel[0].size());
  EXPECT_GT(differ, 0u) << "the two kernels gave identical bits: one kernel ran twice";
}

// Runs without a GPU too (the CPU-only CI): the no-driver path must answer, not crash.
TEST(CudaBackendSelectWithoutGpu, CudaIsAnInputErrorAndAutoFallsBack) {
  if (no_gpu_reason().empty()) GTEST_SKIP() << "a GPU is visible; this checks the no-GPU path";
  try {
    make_backend("cuda", 1, "invariant", "f32", "");
    ADD_FAILURE() << "make_backend(cuda) without a GPU did not throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--backend cuda: no usable GPU on"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(make_backend("auto", 1, "invariant", "f32", "").backend->name(), "cpu");
}

// --- tensor parallelism over NCCL ---

class CudaTensorParallel : public GpuTest {};

TEST_F(CudaTensorParallel, TwoGpusMatchOneAndStayBatchInvariant) {
#if !defined(SSD_HAVE_NCCL)
  GTEST_SKIP() << "built without NCCL";
#else
  const int gpus = cuda_device_count();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, " << gpus << " visible";
  const std::string preset = "tiny-llama";
  CudaBackend b0(0), b1(1);
  auto comms = NcclComm::create_local({&b0, &b1});
  NcclAllReduce ar0(std::move(comms[0])), ar1(std::move(comms[1]));
  auto s0 = open_weight_source("synthetic:" + preset, 5);
  auto s1 = open_weight_source("synthetic:" + preset, 5);
  Model m0 = load_model(*s0, b0, Shard{0, 2}, &ar0);
  Model m1 = load_model(*s1, b1, Shard{1, 2}, &ar1);
  KVCache c0 = create_kv_cache(m0, 1, 32), c1 = create_kv_cache(m1, 1, 32);
  Activations a0, a1;
  // Both ranks run the same batch at once (each all-reduce needs both).
  const auto both = [&](const ForwardBatch& batch, std::vector<float>& l0, std::vector<float>& l1) {
    std::exception_ptr error;
    std::thread rank1([&] {
      try {
        forward(m1, c1, batch, a1, l1);
      } catch (...) {
        error = std::current_exception();
      }
    });
    forward(m0, c0, batch, a0, l0);
    rank1.join();
    if (error) std::rethrow_exception(error);
  };
  Loaded single(preset, cuda());
  Session one(single, 1, 32);

  std::vector<float> l0, l1;
  ForwardBatch prefill;
  prefill.add_causal(0, 0, kPrefix, Logits::Last);
  both(prefill, l0, l1);
  c0.length[0] = c1.length[0] = int(kPrefix.size());
  expect_bitwise_equal(l1, l0, "rank 1 == rank 0 (prefill)");
  // Partial sums added in another order than one GPU's GEMM: close, not equal.
  expect_logits_close(l0, one.append(0, kPrefix), "TP=2 vs one GPU (prefill)");

  // Verification of 5 tokens == 5 one-token decodes, bit for bit, across the all-reduce.
  const Tokens draft = {5, 250, 7, 7, 130};
  ForwardBatch verify;
  verify.add_causal(0, c0.length[0], draft, Logits::All);
  std::vector<float> v0, v1;
  both(verify, v0, v1);
  expect_bitwise_equal(v1, v0, "rank 1 == rank 0 (verify)");
  for (size_t i = 0; i < draft.size(); ++i) {
    ForwardBatch step;
    step.add_causal(0, c0.length[0], {draft[i]}, Logits::Last);
    both(step, l0, l1);
    c0.length[0] += 1;
    c1.length[0] += 1;
    expect_bitwise_equal(row_of(v0, int(i), single.vocab()), l0,
                         "TP=2 verify position " + std::to_string(i));
  }
  EXPECT_GT(ar0.stats().calls, 0);
  release_activations(a0, b0);
  release_activations(a1, b1);
  release_kv_cache(c0, b0);
  release_kv_cache(c1, b1);
  release_model(m0);
  release_model(m1);
#endif
}

}  // namespace
}  // namespace ssd
