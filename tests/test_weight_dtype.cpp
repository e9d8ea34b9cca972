// --weight-dtype: a bf16 checkpoint kept in bf16 (widened to fp32 in registers) decodes exactly
// like the same checkpoint kept in fp32, logits and greedy tokens, at half the bytes; auto
// follows the checkpoint (synthetic presets: their config's torch_dtype).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/errors.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "model/weights.h"
#include "ssd/sampling.h"
#include "tests/test_support.h"

namespace ssd {
namespace {

// Greedy decoding of `steps` tokens after a prompt, with every step's logits.
std::vector<float> greedy_logits(WeightSource& source, DType storage, int steps,
                                 std::vector<int32_t>& tokens, size_t& weight_bytes) {
  CpuBackend backend(1);
  Model model = load_model(source, backend, {}, nullptr, storage);
  weight_bytes = model.weights.bytes;
  EXPECT_EQ(model.weights.dtype, storage);
  KVCache cache = create_kv_cache(model, 1, 64);
  Activations acts;
  std::vector<float> all, logits;
  tokens = {1, 17, 5, 9, 33};
  ForwardBatch prefill;
  prefill.add_causal(0, 0, tokens, ForwardBatch::Logits::Last);
  forward(model, cache, prefill, acts, logits);
  cache.length[0] = int(tokens.size());
  const int vocab = model.config.vocab_size;
  for (int step = 0; step < steps; ++step) {
    all.insert(all.end(), logits.begin(), logits.end());
    tokens.push_back(argmax(logits.data(), vocab));
    ForwardBatch next;
    next.add_causal(0, cache.length[0], {tokens.back()}, ForwardBatch::Logits::All);
    forward(model, cache, next, acts, logits);
    cache.length[0] += 1;
  }
  release_activations(acts, backend);
  release_kv_cache(cache, backend);
  release_model(model);
  return all;
}

TEST(WeightDtype, Bf16StorageDecodesExactlyLikeFp32) {
  for (const char* preset : {"tiny-llama", "tiny-qwen3", "tiny-llama-tied"}) {
    const auto dir = test::fresh_dir(std::string("weight_dtype_") + preset);
    make_checkpoint(preset, dir.string(), 7, "bf16");
    std::unique_ptr<WeightSource> source = open_weight_source(dir.string(), 0);
    EXPECT_EQ(source->dtype(), DType::BF16);
    EXPECT_EQ(resolve_weight_dtype("auto", *source), DType::BF16);
    std::vector<int32_t> t32, t16;
    size_t b32 = 0, b16 = 0;
    const std::vector<float> l32 = greedy_logits(*source, DType::F32, 12, t32, b32);
    const std::vector<float> l16 = greedy_logits(*source, DType::BF16, 12, t16, b16);
    EXPECT_EQ(t32, t16) << preset;
    ASSERT_EQ(l32.size(), l16.size());
    EXPECT_EQ(0, std::memcmp(l32.data(), l16.data(), sizeof(float) * l32.size())) << preset;
    // Matrices in half the bytes; the norms stay fp32.
    EXPECT_LT(b16, b32 * 0.51) << preset;
    EXPECT_GT(b16, b32 * 0.49) << preset;
  }
}

TEST(WeightDtype, AutoFollowsTheCheckpointAndThePreset) {
  const auto dir = test::fresh_dir("weight_dtype_f32");
  make_checkpoint("tiny-llama", dir.string(), 7, "f32");
  std::unique_ptr<WeightSource> f32 = open_weight_source(dir.string(), 0);
  EXPECT_EQ(resolve_weight_dtype("auto", *f32), DType::F32);
  EXPECT_EQ(resolve_weight_dtype("bf16", *f32), DType::BF16);
  // The CPU-sized presets imitate bf16 Llama checkpoints: their values are bf16 numbers.
  std::unique_ptr<WeightSource> preset = open_weight_source("synthetic:llama-12m", 3);
  EXPECT_EQ(resolve_weight_dtype("auto", *preset), DType::BF16);
  const std::vector<float> values =
      preset->read("model.layers.0.mlp.up_proj.weight", {0, 4, 0, 64});
  for (float v : values) EXPECT_EQ(v, round_to_bf16(v));
  try {
    resolve_weight_dtype("fp8", *preset);
    FAIL() << "fp8 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("weight dtype 'fp8'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ssd
