// The CUDA backend's ops (label `gpu`): every op but the matrix product against the CPU backend,
// and the batch invariance of RMSNorm. The GEMMs and their batch invariance are in
// test_cuda_gemm.cpp, the sampling kernels in test_cuda_sampling.cpp; whole models, backend
// selection and NCCL tensor parallelism in test_cuda_model.cpp. Compiled only in CUDA builds; on
// a machine without a GPU (or without a driver) every test skips, printing why.
//
// Tolerances. The CUDA backend stores weights, activations and the KV cache in bf16 (8
// significant bits: every rounding is off by at most 2^-9 = 0.2% relative) and accumulates in
// fp32; the CPU backend is fp32 throughout. The op tests feed both backends the same
// bf16-representable inputs, so the only differences are the GPU's final rounding of each output
// to bf16 (<= 2^-9 relative) and fp32 summation order (~1e-6): they allow 1% relative plus a
// small absolute term. Whole-model logits differ by the accumulated roundings of every layer: a
// CPU emulation of this backend's roundings (each op's output and the weights rounded to bf16,
// inv_freq kept fp32) measured max |diff| = 0.6-1.2% of max |logit| on the tiny presets and
// llama-12m, while plausible bugs (RoPE skipped, attention missing one slot) measured 12-55%.
// So the model tests require max |diff| < 5% of max |logit| (and rms relative error < 3%).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "tests/cuda_test_support.h"

namespace ssd {
namespace {

using namespace cuda_test;

// --- element and memory ops against the CPU backend ---

class CudaOps : public GpuAgainstCpu {};

TEST_F(CudaOps, TransfersRoundToBf16AndKeepOffsets) {
  const std::vector<float> values = {1.0f,    1.00390625f,   1.005859375f, -3.14159f,
                                     1e-3f,   65504.0f,      0.0f,         -0.0f,
                                     3.0e38f, 1.1754944e-38f};
  Buffer b = gpu->alloc(values.size() + 5);
  const std::vector<float> zeros = get(*gpu, b, values.size() + 5);
  for (float z : zeros) EXPECT_EQ(z, 0.0f) << "alloc must zero";
  gpu->from_host(b, 5, values.data(), values.size());
  std::vector<float> back(values.size());
  gpu->to_host(back.data(), b, 5, values.size());
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(back[i], bf16_round(values[i])) << "element " << i << " = " << values[i];
  EXPECT_THROW(gpu->to_host(back.data(), b, 6, values.size()), std::out_of_range);
  gpu->release(b);

  // upload_weight: the same rounding, large enough to take several conversion chunks.
  const std::vector<float> big = random_bf16((size_t(1) << 22) + 12345, 7, 100.0f);
  Buffer w = gpu->upload_weight(big.data(), big.size());
  EXPECT_TRUE(bits_equal(get(*gpu, w, big.size()), big));
  gpu->release(w);
}

TEST_F(CudaOps, CopyHasMemmoveSemantics) {
  const std::vector<float> v = random_bf16(1000, 3);
  for (const auto& [src, dst, n] : {std::tuple{0, 100, 600}, std::tuple{300, 10, 600},
                                    std::tuple{5, 6, 900}, std::tuple{0, 500, 400}}) {
    Buffer g = put(*gpu, v), c = put(cpu, v);
    gpu->copy(g, size_t(dst), g, size_t(src), size_t(n));
    cpu.copy(c, size_t(dst), c, size_t(src), size_t(n));
    EXPECT_TRUE(bits_equal(get(*gpu, g, v.size()), get(cpu, c, v.size())))
        << "copy " << src << " -> " << dst << " x " << n;
    gpu->release(g);
    cpu.release(c);
  }
}

TEST_F(CudaOps, EmbedIsExact) {
  const int vocab = 50, dim = 72, rows = 6;
  const std::vector<float> table = random_bf16(size_t(vocab) * dim, 11);
  const Tokens tokens = {3, 0, 49, 3, 17, 8};
  Buffer tg = put(*gpu, table), tc = put(cpu, table);
  Buffer og = gpu->alloc(size_t(rows) * dim), oc = cpu.alloc(size_t(rows) * dim);
  gpu->embed(og, tg, tokens.data(), rows, dim);
  cpu.embed(oc, tc, tokens.data(), rows, dim);
  EXPECT_TRUE(bits_equal(get(*gpu, og, size_t(rows) * dim), get(cpu, oc, size_t(rows) * dim)));
  const Tokens bad = {50};
  EXPECT_THROW(gpu->embed(og, tg, bad.data(), 1, dim), std::out_of_range);
  for (Buffer* b : {&tg, &og}) gpu->release(*b);
  for (Buffer* b : {&tc, &oc}) cpu.release(*b);
}

TEST_F(CudaOps, RmsNormMatchesCpu) {
  for (const int dim : {16, 64, 300, 4096}) {
    const int rows = 5;
    const std::vector<float> x = random_bf16(size_t(rows) * dim, 100 + dim, 3.0f);
    const std::vector<float> w = random_bf16(size_t(dim), 200 + dim, 2.0f);
    Buffer xg = put(*gpu, x), wg = gpu->upload_weight(w.data(), w.size());
    Buffer xc = put(cpu, x), wc = cpu.upload_weight(w.data(), w.size());
    Buffer og = gpu->alloc(x.size()), oc = cpu.alloc(x.size());
    gpu->rmsnorm(og, xg, wg, rows, dim, 1e-5f);
    cpu.rmsnorm(oc, xc, wc, rows, dim, 1e-5f);
    expect_close(get(*gpu, og, x.size()), get(cpu, oc, x.size()), 1e-2, 1e-3,
                 "rmsnorm dim " + std::to_string(dim));
    // In place, as forward() does for Qwen3's q/k norms.
    gpu->rmsnorm(xg, xg, wg, rows, dim, 1e-5f);
    EXPECT_TRUE(bits_equal(get(*gpu, xg, x.size()), get(*gpu, og, x.size())))
        << "in-place rmsnorm dim " << dim;
    for (Buffer* b : {&xg, &wg, &og}) gpu->release(*b);
    for (Buffer* b : {&xc, &wc, &oc}) cpu.release(*b);
  }
}

// A row's RMSNorm is the same bits alone or among others, and whether its buffers are 16-byte
// aligned (vector loads) or not (2-byte loads into the same chunks, the same summation order).
TEST_F(CudaOps, RmsNormIsBatchAndAlignmentInvariant) {
  for (const int dim : {20, 128, 300, 2048, 4100, 16384, 20000}) {
    const int rows = 5;
    const size_t n = size_t(rows) * dim;
    // One leading element so that a view from element 1 is 2 bytes off 16-byte alignment.
    const std::vector<float> x = random_bf16(n + 1, 300 + dim, 3.0f);
    const std::vector<float> w = random_bf16(size_t(dim) + 1, 400 + dim, 2.0f);
    Buffer xg = put(*gpu, x), wg = put(*gpu, w);
    Buffer og = gpu->alloc(n + 1), one = gpu->alloc(n + 1);
    auto view = [](Buffer& b, size_t first, size_t count) {
      return Buffer{static_cast<char*>(b.data) + first * 2, count};
    };
    // Aligned when dim % 8 == 0: all rows at once, from element 0.
    std::vector<float> x0(x.begin() + 1, x.end()), w0(w.begin() + 1, w.end());
    Buffer xa = put(*gpu, x0), wa = put(*gpu, w0);
    gpu->rmsnorm(og, xa, wa, rows, dim, 1e-5f);
    const std::vector<float> all = get(*gpu, og, n);
    for (int r = 0; r < rows; ++r) {
      // Row r alone, from the misaligned copies (element 1 onwards).
      Buffer xr = view(xg, 1 + size_t(r) * dim, size_t(dim)), wr = view(wg, 1, size_t(dim));
      Buffer orow = view(one, 1, size_t(dim));
      gpu->rmsnorm(orow, xr, wr, 1, dim, 1e-5f);
      const std::vector<float> alone = get(*gpu, orow, size_t(dim));
      EXPECT_TRUE(bits_equal(alone, std::vector<float>(all.begin() + size_t(r) * dim,
                                                       all.begin() + size_t(r + 1) * dim)))
          << "dim " << dim << " row " << r;
    }
    for (Buffer* b : {&xg, &wg, &og, &one, &xa, &wa}) gpu->release(*b);
  }
  // Past the widest row the kernel holds in registers: a clear error, not a wrong answer.
  const int too_wide = 65536 + 8;
  Buffer xg = gpu->alloc(size_t(too_wide)), wg = gpu->alloc(size_t(too_wide));
  EXPECT_THROW(gpu->rmsnorm(xg, xg, wg, 1, too_wide, 1e-5f), std::invalid_argument);
  for (Buffer* b : {&xg, &wg}) gpu->release(*b);
}

TEST_F(CudaOps, RopeMatchesCpu) {
  const Tokens positions = {0, 7, 1000, 70000};
  for (const int head_dim : {16, 128}) {
    const int rows = int(positions.size()), heads = 3;
    const std::vector<float> x = random_bf16(size_t(rows) * heads * head_dim, 5 + head_dim);
    std::vector<float> inv_freq(size_t(head_dim / 2));
    for (int i = 0; i < head_dim / 2; ++i)
      inv_freq[size_t(i)] = float(1.0 / std::pow(500000.0, 2.0 * i / head_dim));
    Buffer xg = put(*gpu, x), fg = gpu->upload_weight(inv_freq.data(), inv_freq.size());
    Buffer xc = put(cpu, x), fc = cpu.upload_weight(inv_freq.data(), inv_freq.size());
    gpu->rope(xg, positions.data(), rows, heads, head_dim, fg);
    cpu.rope(xc, positions.data(), rows, heads, head_dim, fc);
    // Output rounding plus cos/sin of angles up to 7e4 rad (each library within ~1 ulp).
    expect_close(get(*gpu, xg, x.size()), get(cpu, xc, x.size()), 1e-2, 2e-3,
                 "rope head_dim " + std::to_string(head_dim));
    for (Buffer* b : {&xg, &fg}) gpu->release(*b);
    for (Buffer* b : {&xc, &fc}) cpu.release(*b);
  }
}

TEST_F(CudaOps, KvStoreAndMoveAreExact) {
  const KVLayout layout{3, 20, 2, 16};
  const size_t kv_dim = size_t(layout.kv_heads) * layout.head_dim;
  const std::vector<float> start = random_bf16(layout.elements(), 9);
  Buffer kg = put(*gpu, start), vg = put(*gpu, start), kc = put(cpu, start), vc = put(cpu, start);
  const Tokens seq = {0, 2, 2, 1}, slot = {0, 19, 4, 7}, prefix = {1, 20, 5, 8};
  const Tokens extra_begin = {0, 0, 0, 0, 0};
  const AttentionMask mask{4, seq.data(), slot.data(), prefix.data(), extra_begin.data(), nullptr};
  const std::vector<float> k = random_bf16(4 * kv_dim, 10), v = random_bf16(4 * kv_dim, 11);
  Buffer kng = put(*gpu, k), vng = put(*gpu, v), knc = put(cpu, k), vnc = put(cpu, v);
  gpu->kv_store(kg, vg, layout, kng, vng, mask);
  cpu.kv_store(kc, vc, layout, knc, vnc, mask);
  // Moves within a sequence (overlapping both ways) and across sequences.
  for (const auto& [ss, sl, ds, dl, n] :
       {std::tuple{2, 4, 2, 2, 6}, std::tuple{2, 2, 2, 5, 6}, std::tuple{0, 0, 1, 10, 10}}) {
    gpu->kv_move(kg, vg, layout, ss, sl, ds, dl, n);
    cpu.kv_move(kc, vc, layout, ss, sl, ds, dl, n);
  }
  EXPECT_TRUE(bits_equal(get(*gpu, kg, layout.elements()), get(cpu, kc, layout.elements())));
  EXPECT_TRUE(bits_equal(get(*gpu, vg, layout.elements()), get(cpu, vc, layout.elements())));
  // seq and slot are all kv_store needs.
  const Tokens seq2 = {1}, slot2 = {19};
  const AttentionMask partial{1, seq2.data(), slot2.data(), nullptr, nullptr, nullptr};
  gpu->kv_store(kg, vg, layout, kng, vng, partial);
  cpu.kv_store(kc, vc, layout, knc, vnc, partial);
  EXPECT_TRUE(bits_equal(get(*gpu, kg, layout.elements()), get(cpu, kc, layout.elements())));
  const Tokens bad_slot = {20};
  const AttentionMask bad{1,      seq.data(), bad_slot.data(), prefix.data(), extra_begin.data(),
                          nullptr};
  EXPECT_THROW(gpu->kv_store(kg, vg, layout, kng, vng, bad), std::out_of_range);
  for (Buffer* b : {&kg, &vg, &kng, &vng}) gpu->release(*b);
  for (Buffer* b : {&kc, &vc, &knc, &vnc}) cpu.release(*b);
}

TEST_F(CudaOps, AttentionMatchesCpu) {
  // Prefixes shorter and longer than one 128-entry tile, extra slots in any order, GQA.
  for (const int head_dim : {16, 64, 128, 256}) {
    const int heads = 4;
    const KVLayout layout{2, 400, 2, head_dim};
    const std::vector<float> k = random_bf16(layout.elements(), 50 + head_dim, 2.0f);
    const std::vector<float> v = random_bf16(layout.elements(), 60 + head_dim);
    const Tokens seq = {0, 1, 1, 0, 1};
    const Tokens slot = {3, 300, 301, 399, 5};
    const Tokens prefix = {4, 129, 128, 390, 0};
    const Tokens extra_begin = {0, 0, 3, 3, 5, 7};
    const Tokens extra_slots = {350, 399, 129, 395, 398, 5, 2};
    const AttentionMask mask{
        5, seq.data(), slot.data(), prefix.data(), extra_begin.data(), extra_slots.data()};
    const std::vector<float> q = random_bf16(size_t(5) * heads * head_dim, 70 + head_dim);
    Buffer kg = put(*gpu, k), vg = put(*gpu, v), qg = put(*gpu, q), og = gpu->alloc(q.size());
    Buffer kc = put(cpu, k), vc = put(cpu, v), qc = put(cpu, q), oc = cpu.alloc(q.size());
    gpu->attention(og, qg, kg, vg, layout, heads, mask);
    cpu.attention(oc, qc, kc, vc, layout, heads, mask);
    expect_close(get(*gpu, og, q.size()), get(cpu, oc, q.size()), 1e-2, 2e-3,
                 "attention head_dim " + std::to_string(head_dim));
    for (Buffer* b : {&kg, &vg, &qg, &og}) gpu->release(*b);
    for (Buffer* b : {&kc, &vc, &qc, &oc}) cpu.release(*b);
  }
}

TEST_F(CudaOps, SwigluAndAddMatchCpu) {
  const size_t n = 100003;
  const std::vector<float> g = random_bf16(n, 1, 6.0f), u = random_bf16(n, 2, 3.0f);
  Buffer gg = put(*gpu, g), ug = put(*gpu, u), gc = put(cpu, g), uc = put(cpu, u);
  gpu->swiglu(gg, gg, ug, n);  // in place, as forward() calls it
  cpu.swiglu(gc, gc, uc, n);
  expect_close(get(*gpu, gg, n), get(cpu, gc, n), 1e-2, 1e-6, "swiglu");
  gpu->add(ug, gg, n);
  cpu.add(uc, gc, n);
  expect_close(get(*gpu, ug, n), get(cpu, uc, n), 1e-2, 1e-2, "add");
  for (Buffer* b : {&gg, &ug}) gpu->release(*b);
  for (Buffer* b : {&gc, &uc}) cpu.release(*b);
}

TEST_F(CudaOps, TimerMeasuresStreamWork) {
  CudaTimer timer(*gpu);
  const std::vector<float> x = random_bf16(size_t(4) * 4096, 1);
  const std::vector<float> w = random_bf16(size_t(4096) * 4096, 2);
  Buffer xg = put(*gpu, x), wg = gpu->upload_weight(w.data(), w.size()), og = gpu->alloc(4 * 4096);
  timer.start();
  for (int i = 0; i < 10; ++i) gpu->matmul(og, xg, wg, 4, 4096, 4096);
  timer.stop();
  const double ms = timer.elapsed_ms();
  EXPECT_GT(ms, 0.0);
  // 10 reads of 32 MB: report the bandwidth for the log.
  std::printf("[ info ] invariant matmul 4x4096x4096: %.3f ms per call, %.0f GB/s\n", ms / 10,
              10 * 4096.0 * 4096 * 2 / (ms * 1e-3) / 1e9);
  for (Buffer* b : {&xg, &wg, &og}) gpu->release(*b);
}

}  // namespace
}  // namespace ssd
