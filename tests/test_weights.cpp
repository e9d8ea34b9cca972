// Weight sources (synthetic and checkpoint), generated checkpoints, and tensor-parallel loading.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "kernels/errors.h"
#include "model/checkpoint.h"
#include "model/presets.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "tests/test_support.h"

namespace ssd {
namespace {

namespace fs = std::filesystem;

Slice whole(const TensorSpec& t) {
  return {0, t.shape.size() == 1 ? 1 : t.shape[0], 0, t.shape.back()};
}

std::vector<float> read_whole(WeightSource& source, const TensorSpec& t) {
  return source.read(t.name, whole(t));
}

struct Moments {
  double mean = 0, std = 0;
};
Moments moments(const std::vector<float>& v) {
  double sum = 0, sum_sq = 0;
  for (float x : v) sum += x, sum_sq += double(x) * x;
  const double mean = sum / double(v.size());
  return {mean, std::sqrt(sum_sq / double(v.size()) - mean * mean)};
}

// Every tensor of `spec` read from `dir` equals the synthetic source's values, after the
// storage dtype's rounding.
void expect_checkpoint_matches(const fs::path& dir, const std::string& spec, uint64_t seed,
                               bool bf16) {
  std::unique_ptr<WeightSource> synthetic = open_weight_source("synthetic:" + spec, seed);
  std::unique_ptr<WeightSource> loaded = open_weight_source(dir.string(), 0);
  EXPECT_EQ(loaded->describe(), "safetensors:" + dir.string());
  ModelConfig expected_config = synthetic->config();
  expected_config.torch_dtype = bf16 ? "bfloat16" : "float32";
  EXPECT_EQ(model_config_to_json(loaded->config()), model_config_to_json(expected_config));
  for (const TensorSpec& t : expected_tensors(synthetic->config())) {
    SCOPED_TRACE(t.name);
    std::vector<float> want = read_whole(*synthetic, t);
    if (bf16) {
      for (float& x : want) x = bf16_to_float(float_to_bf16(x));
    }
    ASSERT_EQ(read_whole(*loaded, t), want);
  }
}

TEST(Synthetic, DeterministicAndSeeded) {
  std::unique_ptr<WeightSource> a = open_weight_source("synthetic:tiny-llama", 5);
  std::unique_ptr<WeightSource> b = open_weight_source("synthetic:tiny-llama", 5);
  std::unique_ptr<WeightSource> c = open_weight_source("synthetic:tiny-llama", 6);
  EXPECT_EQ(a->describe(), "synthetic:tiny-llama seed=5");
  const TensorSpec q = {"model.layers.1.self_attn.q_proj.weight", {64, 64}};
  const TensorSpec k = {"model.layers.1.self_attn.k_proj.weight", {32, 64}};
  const std::vector<float> q5 = read_whole(*a, q);
  EXPECT_EQ(q5, read_whole(*a, q));
  EXPECT_EQ(q5, read_whole(*b, q));
  EXPECT_NE(q5, read_whole(*c, q));
  // Different tensors are not copies of each other either.
  EXPECT_NE(std::vector<float>(q5.begin(), q5.begin() + 32 * 64), read_whole(*a, k));
}

TEST(Synthetic, SlicesEqualThePartOfTheFullTensor) {
  std::unique_ptr<WeightSource> source = open_weight_source("synthetic:tiny-qwen3", 11);
  for (const TensorSpec& t : expected_tensors(source->config())) {
    SCOPED_TRACE(t.name);
    const std::vector<float> full = read_whole(*source, t);
    const Slice s = whole(t);
    const Slice part = {s.row_count / 3, s.row_count - s.row_count / 3, s.col_count / 4,
                        s.col_count / 2};
    const std::vector<float> got = source->read(t.name, part);
    ASSERT_EQ(got.size(), size_t(part.row_count * part.col_count));
    for (int64_t r = 0; r < part.row_count; ++r) {
      for (int64_t c = 0; c < part.col_count; ++c) {
        ASSERT_EQ(got[r * part.col_count + c],
                  full[(part.row_begin + r) * s.col_count + part.col_begin + c]);
      }
    }
  }
  EXPECT_THROW(source->read("model.layers.9.mlp.up_proj.weight", {0, 1, 0, 1}), std::logic_error);
  EXPECT_THROW(source->read("model.norm.weight", {0, 1, 60, 5}), std::logic_error);
  EXPECT_THROW(source->read("model.norm.weight", {1, 1, 0, 1}), std::logic_error);
}

TEST(Synthetic, ScalesKeepActivationsMeaningful) {
  std::unique_ptr<WeightSource> source = open_weight_source("synthetic:llama-124m", 1);
  const ModelConfig& c = source->config();
  const double fan_in = 1 / std::sqrt(768.0), residual = 1 / std::sqrt(2.0 * 12);
  const auto check = [&](const std::string& name, Slice slice, double std) {
    SCOPED_TRACE(name);
    const Moments m = moments(source->read(name, slice));
    EXPECT_NEAR(m.mean, 0, std * 0.02);
    EXPECT_NEAR(m.std, std, std * 0.02);
  };
  check("model.embed_tokens.weight", {0, 200, 0, 768}, 1.0);
  check("model.layers.3.self_attn.q_proj.weight", {0, 768, 0, 768}, fan_in);
  check("model.layers.3.self_attn.o_proj.weight", {0, 768, 0, 768}, fan_in * residual);
  check("model.layers.3.mlp.down_proj.weight", {0, 768, 0, 2048}, residual / std::sqrt(2048.0));
  check("lm_head.weight", {0, 200, 0, 768}, 3 * fan_in);
  for (const char* norm : {"model.norm.weight", "model.layers.0.input_layernorm.weight"}) {
    EXPECT_EQ(source->read(norm, {0, 1, 0, c.hidden_size}), std::vector<float>(768, 1.0f));
  }
  // A tied embedding doubles as the head, so it takes the head's scale.
  std::unique_ptr<WeightSource> tied = open_weight_source("synthetic:llama-12m", 1);
  const Moments m = moments(tied->read("model.embed_tokens.weight", {0, 300, 0, 256}));
  EXPECT_NEAR(m.std, 3 / 16.0, 0.02 * 3 / 16.0);
  std::unique_ptr<WeightSource> qwen = open_weight_source("synthetic:tiny-qwen3", 1);
  EXPECT_EQ(qwen->read("model.layers.0.self_attn.k_norm.weight", {0, 1, 0, 32}),
            std::vector<float>(32, 1.0f));
}

TEST(Synthetic, FromConfigFile) {
  const fs::path dir = test::fresh_dir("synthetic_config");
  const fs::path path = dir / "other.json";
  std::ofstream(path) << model_config_to_json(*find_preset("tiny-llama-other")).dump();
  std::unique_ptr<WeightSource> from_file = open_weight_source("synthetic:" + path.string(), 2);
  std::unique_ptr<WeightSource> preset = open_weight_source("synthetic:tiny-llama-other", 2);
  EXPECT_EQ(from_file->config().head_dim, 12);
  for (const TensorSpec& t : expected_tensors(preset->config())) {
    ASSERT_EQ(read_whole(*from_file, t), read_whole(*preset, t)) << t.name;
  }
}

TEST(Checkpoint, F32EqualsSynthetic) {
  for (const std::string spec : {"tiny-llama", "tiny-qwen3", "tiny-llama-tied"}) {
    SCOPED_TRACE(spec);
    const fs::path dir = test::fresh_dir("ck_f32_" + spec);
    make_checkpoint("synthetic:" + spec, dir.string(), 7, "f32");
    expect_checkpoint_matches(dir, spec, 7, false);
  }
}

TEST(Checkpoint, Bf16IsTheRoundedSynthetic) {
  const fs::path dir = test::fresh_dir("ck_bf16");
  make_checkpoint("tiny-qwen3-untied", dir.string(), 8, "bf16");
  expect_checkpoint_matches(dir, "tiny-qwen3-untied", 8, true);
  EXPECT_EQ(SafetensorsFile((dir / "model.safetensors").string()).info("lm_head.weight").dtype,
            DType::BF16);
}

TEST(Checkpoint, ShardedEqualsSynthetic) {
  const fs::path dir = test::fresh_dir("ck_sharded");
  make_sharded_checkpoint("tiny-llama", dir.string(), 9, "f32", 3);
  for (int i = 1; i <= 3; ++i) {
    EXPECT_TRUE(fs::exists(dir / ("model-0000" + std::to_string(i) + "-of-00003.safetensors")));
  }
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  expect_checkpoint_matches(dir, "tiny-llama", 9, false);
  EXPECT_THROW(make_sharded_checkpoint("tiny-llama", dir.string(), 9, "f32", 0, true), InputError);
}

TEST(Checkpoint, RefusesOverwriteUnlessAsked) {
  const fs::path dir = test::fresh_dir("ck_overwrite");
  make_sharded_checkpoint("tiny-llama", dir.string(), 1, "f32", 2);
  try {
    make_checkpoint("tiny-llama", dir.string(), 2, "f32");
    FAIL() << "overwrote a checkpoint";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.string()), std::string::npos) << e.what();
  }
  // Replacing a sharded checkpoint by a single file must not leave the old index in charge.
  make_checkpoint("tiny-llama", dir.string(), 2, "f32", true);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  expect_checkpoint_matches(dir, "tiny-llama", 2, false);
}

TEST(Checkpoint, RefusesHugeAndUnknownModels) {
  const fs::path dir = test::fresh_dir("ck_huge");
  EXPECT_THROW(make_checkpoint("llama-3.1-8b", dir.string(), 1, "bf16"), InputError);
  EXPECT_THROW(make_checkpoint("tiny-llama", dir.string(), 1, "fp8"), InputError);
  EXPECT_THROW(make_checkpoint("no-such-model", dir.string(), 1, "f32"), InputError);
  EXPECT_FALSE(fs::exists(dir / "config.json"));
}

// Keeps uploads in host vectors and insists every buffer is released exactly once; the
// compute ops are not needed to test loading.
class RecordingBackend final : public Backend {
 public:
  std::string name() const override { return "recording"; }
  std::string device_name() const override { return "host vectors"; }
  int threads() const override { return 1; }

  Buffer alloc(size_t count) override {
    auto memory = std::make_unique<std::vector<float>>(count);
    Buffer b{memory->data(), count};
    live[b.data] = std::move(memory);
    return b;
  }
  void release(Buffer& buffer) override {
    if (!live.erase(buffer.data)) throw std::logic_error("release of a buffer not live");
    buffer = {};
  }
  Buffer upload_weight(const float* host, size_t count) override {
    Buffer b = alloc(count);
    std::copy(host, host + count, static_cast<float*>(b.data));
    ++uploads;
    return b;
  }
  void to_host(float* dst, const Buffer& src, size_t offset, size_t count) override {
    std::copy_n(static_cast<const float*>(src.data) + offset, count, dst);
  }
  void from_host(Buffer&, size_t, const float*, size_t) override { unused(); }
  void copy(Buffer&, size_t, const Buffer&, size_t, size_t) override { unused(); }
  void synchronize() override {}
  void embed(Buffer&, const Buffer&, const int32_t*, int, int) override { unused(); }
  void rmsnorm(Buffer&, const Buffer&, const Buffer&, int, int, float) override { unused(); }
  void matmul(Buffer&, const Buffer&, const Buffer&, int, int, int) override { unused(); }
  void rope(Buffer&, const int32_t*, int, int, int, const Buffer&) override { unused(); }
  void kv_store(Buffer&, Buffer&, const KVLayout&, const Buffer&, const Buffer&,
                const AttentionMask&) override {
    unused();
  }
  void kv_move(Buffer&, Buffer&, const KVLayout&, int, int, int, int, int) override { unused(); }
  void attention(Buffer&, const Buffer&, const Buffer&, const Buffer&, const KVLayout&, int,
                 const AttentionMask&) override {
    unused();
  }
  void swiglu(Buffer&, const Buffer&, const Buffer&, size_t) override { unused(); }
  void add(Buffer&, const Buffer&, size_t) override { unused(); }
  void add_bias(Buffer&, const Buffer&, int, int) override { unused(); }

  std::vector<float> contents(const Buffer& b) {
    std::vector<float> out(b.count);
    to_host(out.data(), b, 0, b.count);
    return out;
  }

  std::map<void*, std::unique_ptr<std::vector<float>>> live;
  int uploads = 0;

 private:
  [[noreturn]] static void unused() { throw std::logic_error("RecordingBackend: no ops"); }
};

std::vector<float> sub(WeightSource& s, const std::string& name, Slice slice) {
  return s.read(name, slice);
}

TEST(LoadWeights, TensorParallelShardsHoldTheirSlices) {
  std::unique_ptr<WeightSource> source = open_weight_source("synthetic:tiny-qwen3-untied", 3);
  const ModelConfig& c = source->config();  // 4 heads, 2 kv heads, head_dim 32, inter 128
  size_t total_bytes = 0;
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    RecordingBackend backend;
    Weights w = load_weights(*source, backend, {rank, 2});
    ASSERT_EQ(w.layers.size(), 2u);
    const LayerWeights& l = w.layers[1];
    const std::string p = "model.layers.1.";
    const int64_t q = 64, kv = 32, inter = 64, hidden = 64;  // per-rank sizes
    EXPECT_EQ(backend.contents(l.wq),
              sub(*source, p + "self_attn.q_proj.weight", {rank * q, q, 0, hidden}));
    EXPECT_EQ(backend.contents(l.wk),
              sub(*source, p + "self_attn.k_proj.weight", {rank * kv, kv, 0, hidden}));
    EXPECT_EQ(backend.contents(l.wv),
              sub(*source, p + "self_attn.v_proj.weight", {rank * kv, kv, 0, hidden}));
    EXPECT_EQ(backend.contents(l.wo),
              sub(*source, p + "self_attn.o_proj.weight", {0, hidden, rank * q, q}));
    EXPECT_EQ(backend.contents(l.w_gate),
              sub(*source, p + "mlp.gate_proj.weight", {rank * inter, inter, 0, hidden}));
    EXPECT_EQ(backend.contents(l.w_up),
              sub(*source, p + "mlp.up_proj.weight", {rank * inter, inter, 0, hidden}));
    EXPECT_EQ(backend.contents(l.w_down),
              sub(*source, p + "mlp.down_proj.weight", {0, hidden, rank * inter, inter}));
    EXPECT_EQ(l.q_norm.count, 32u);
    EXPECT_EQ(backend.contents(w.embed),
              sub(*source, "model.embed_tokens.weight", {0, c.vocab_size, 0, hidden}));
    EXPECT_EQ(backend.contents(w.lm_head),
              sub(*source, "lm_head.weight", {0, c.vocab_size, 0, hidden}));
    EXPECT_NE(w.lm_head.data, w.embed.data);
    EXPECT_EQ(backend.uploads, 3 + 11 * 2);  // embed, norm, head; 11 tensors per Qwen3 layer
    total_bytes += w.bytes;
    release_weights(w, backend);
    EXPECT_TRUE(backend.live.empty());
    EXPECT_EQ(w.embed.data, nullptr);
  }
  // Replicated tensors are counted on both ranks, split ones once overall.
  const int64_t replicated = 2 * int64_t(c.vocab_size) * 64 + 64 + 2 * (2 * 64 + 2 * 32);
  EXPECT_EQ(int64_t(total_bytes) / 4, c.parameter_count() + replicated);
}

TEST(LoadWeights, TiedHeadSharesTheEmbedding) {
  std::unique_ptr<WeightSource> source = open_weight_source("synthetic:tiny-llama-tied", 4);
  RecordingBackend backend;
  Weights w = load_weights(*source, backend, {});
  EXPECT_EQ(w.lm_head.data, w.embed.data);
  EXPECT_EQ(w.layers.size(), 3u);
  EXPECT_EQ(w.layers[0].q_norm.data, nullptr);
  EXPECT_EQ(int64_t(w.bytes), source->config().parameter_count() * 4);
  release_weights(w, backend);  // RecordingBackend throws on a double free
  EXPECT_TRUE(backend.live.empty());
}

TEST(LoadWeights, TensorParallelSizeMustDivide) {
  std::unique_ptr<WeightSource> llama = open_weight_source("synthetic:tiny-llama", 1);
  std::unique_ptr<WeightSource> qwen = open_weight_source("synthetic:tiny-qwen3", 1);
  RecordingBackend backend;
  const auto expect_refused = [&](WeightSource& s, int tp, const std::string& what) {
    try {
      load_weights(s, backend, {0, tp});
      ADD_FAILURE() << "TP " << tp << " accepted";
    } catch (const InputError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("tensor-parallel group of " + std::to_string(tp)), std::string::npos)
          << message;
      EXPECT_NE(message.find(what), std::string::npos) << message;
    }
  };
  expect_refused(*llama, 3, "num_attention_heads");
  expect_refused(*qwen, 4, "num_key_value_heads");
  expect_refused(*llama, 0, "at least 1");
  EXPECT_EQ(backend.uploads, 0);
}

}  // namespace
}  // namespace ssd
