// The safetensors reader and writer, and the checkpoint checks built on them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/errors.h"
#include "model/checkpoint.h"
#include "model/presets.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "tests/test_support.h"

namespace ssd {
namespace {

namespace fs = std::filesystem;

// Writes a file byte by byte: header length (or `claimed_length`), header text, data.
void write_raw(const fs::path& path, const std::string& header, const std::string& data,
               uint64_t claimed_length = 0) {
  const uint64_t length = claimed_length ? claimed_length : header.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&length), 8);
  out << header << data;
}

std::string raw_bytes(const void* data, size_t bytes) {
  return std::string(static_cast<const char*>(data), bytes);
}

// Runs `action`, which must throw E, and checks the message names every one of `needles`.
template <typename E = InputError, typename F>
void expect_error(F action, const std::vector<std::string>& needles) {
  try {
    action();
    ADD_FAILURE() << "no exception; expected one naming " << needles[0];
  } catch (const E& e) {
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << "'" << e.what() << "' does not name " << needle;
    }
  }
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * (float(i) - float(n) / 3) + 0.1f * float(i % 7);
  return v;
}

TEST(Safetensors, F32RoundTripAndSlices) {
  const fs::path path = test::fresh_dir("st_f32") / "t.safetensors";
  const std::vector<float> a = ramp(3 * 5, 0.37f), b = ramp(7, -1.5f);
  write_safetensors(path, {{"a", {3, 5}, DType::F32, a.data()}, {"b", {7}, DType::F32, b.data()}});

  const SafetensorsFile file(path.string());
  EXPECT_EQ(file.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(file.info("a").shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(file.info("b").rows(), 1);
  EXPECT_EQ(file.info("b").cols(), 7);
  std::vector<float> out(15);
  file.read_f32("a", 0, 3, 0, 5, out.data());
  EXPECT_EQ(out, a);
  file.read_f32("a", 1, 2, 2, 3, out.data());  // rows 1..2, cols 2..4
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(out[r * 3 + c], a[(1 + r) * 5 + 2 + c]);
  }
  file.read_f32("b", 0, 1, 3, 4, out.data());
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 4),
            std::vector<float>(b.begin() + 3, b.end()));
  EXPECT_THROW(file.read_f32("a", 2, 2, 0, 5, out.data()), std::logic_error);
  EXPECT_THROW(file.read_f32("a", 0, 1, 4, 2, out.data()), std::logic_error);
  expect_error([&] { file.info("c"); }, {path.string(), "'c'"});

  // The header is padded to 8 bytes and carries the metadata HF writes.
  std::ifstream in(path, std::ios::binary);
  uint64_t header_size = 0;
  in.read(reinterpret_cast<char*>(&header_size), 8);
  EXPECT_EQ(header_size % 8, 0u);
  std::string header(header_size, '\0');
  in.read(header.data(), std::streamsize(header_size));
  EXPECT_EQ(nlohmann::json::parse(header)["__metadata__"]["format"], "pt");
  EXPECT_EQ(fs::file_size(path), 8 + header_size + (15 + 7) * 4);
}

TEST(Safetensors, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);             // tie, 0x3f80 is even
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);         // tie, rounds up to even
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above the tie
  EXPECT_EQ(float_to_bf16(-2.0f), 0xc000);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(INFINITY)), INFINITY);

  const fs::path path = test::fresh_dir("st_bf16") / "t.safetensors";
  const std::vector<float> a = ramp(4 * 6, 0.731f);
  write_safetensors(path, {{"w", {4, 6}, DType::BF16, a.data()}});
  const SafetensorsFile file(path.string());
  EXPECT_EQ(file.info("w").dtype, DType::BF16);
  std::vector<float> out(a.size());
  file.read_f32("w", 0, 4, 0, 6, out.data());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(out[i], bf16_to_float(float_to_bf16(a[i])));
    EXPECT_LE(std::fabs(out[i] - a[i]), std::fabs(a[i]) * 0x1p-8f);
  }
}

TEST(Safetensors, ReadsF16) {
  const fs::path path = test::fresh_dir("st_f16") / "h.safetensors";
  // 1, -2, 0.5, 65504 (largest half), 2^-24 (smallest subnormal), +inf
  const uint16_t halves[6] = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x7c00};
  write_raw(path, R"({"h":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]}})",
            raw_bytes(halves, sizeof(halves)));
  const SafetensorsFile file(path.string());
  float out[6];
  file.read_f32("h", 0, 2, 0, 3, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 0.5f);
  EXPECT_EQ(out[3], 65504.0f);
  EXPECT_EQ(out[4], 0x1p-24f);
  EXPECT_EQ(out[5], INFINITY);
  file.read_f32("h", 1, 1, 1, 1, out);
  EXPECT_EQ(out[0], 0x1p-24f);
}

TEST(Safetensors, BadFilesNameFileAndTensor) {
  const fs::path dir = test::fresh_dir("st_bad");
  const std::string p = (dir / "bad.safetensors").string();
  const std::string four_floats(16, '\0');
  const auto open = [&] { SafetensorsFile file(p); };

  const std::vector<float> values = ramp(8, 1.0f);
  write_safetensors(p, {{"weight", {2, 4}, DType::F32, values.data()}});
  fs::resize_file(p, fs::file_size(p) - 4);
  expect_error(open, {p, "weight", "truncated"});

  write_raw(p, R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", four_floats,
            1'000'000);
  expect_error(open, {p, "header length"});

  write_raw(p, R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]})", four_floats);
  expect_error(open, {p, "invalid JSON"});

  write_raw(p, R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", four_floats);
  expect_error(open, {p, "ids", "I64"});

  write_raw(p, R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", four_floats);
  expect_error(open, {p, "'w'", "[3]"});

  write_raw(p,
            R"({"x":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},
                "y":{"dtype":"BF16","shape":[4],"data_offsets":[4,12]}})",
            four_floats);
  expect_error(open, {p, "overlap"});

  write_raw(p, R"({"w":{"dtype":"F32","shape":[4]}})", four_floats);
  expect_error(open, {p, "'w'", "data_offsets"});

  std::ofstream(p, std::ios::binary) << "abc";
  expect_error(open, {p, "too short"});
  expect_error([&] { SafetensorsFile file((dir / "absent").string()); }, {"absent"});
}

// A checkpoint directory for `preset` whose weight file holds exactly `tensors` (taken from the
// synthetic source where the name is a real tensor, else zeros of the given shape).
fs::path checkpoint_with(const std::string& name, const std::string& preset,
                         std::vector<TensorSpec> tensors) {
  const fs::path dir = test::fresh_dir(name);
  std::unique_ptr<WeightSource> source = open_weight_source("synthetic:" + preset, 1);
  std::ofstream(dir / "config.json") << model_config_to_json(source->config()).dump();
  std::vector<std::vector<float>> data;
  std::vector<TensorToWrite> out;
  for (const TensorSpec& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    data.emplace_back(size_t(n), 0.0f);
    out.push_back({t.name, t.shape, DType::F32, data.back().data()});
  }
  write_safetensors(dir / "model.safetensors", out);
  return dir;
}

TEST(CheckpointValidation, RejectsMissingMisShapedAndExtraTensors) {
  const ModelConfig config = *find_preset("tiny-llama");
  std::vector<TensorSpec> good = expected_tensors(config);
  const std::string weights_file = "model.safetensors";

  std::vector<TensorSpec> missing = good;
  missing.erase(missing.begin() + 3);
  fs::path dir = checkpoint_with("ck_missing", "tiny-llama", missing);
  expect_error([&] { open_weight_source(dir.string(), 0); }, {good[3].name, "missing"});

  std::vector<TensorSpec> misshaped = good;
  misshaped[2].shape[0] += 1;
  dir = checkpoint_with("ck_misshaped", "tiny-llama", misshaped);
  expect_error([&] { open_weight_source(dir.string(), 0); },
               {weights_file, good[2].name, shape_string(misshaped[2].shape)});

  std::vector<TensorSpec> extra = good;
  extra.push_back({"model.layers.2.mlp.up_proj.weight", {160, 64}});
  dir = checkpoint_with("ck_extra", "tiny-llama", extra);
  expect_error([&] { open_weight_source(dir.string(), 0); },
               {weights_file, "model.layers.2.mlp.up_proj.weight", "unexpected"});

  // A tied model may carry a copy of its head, as HF sometimes saves it; nothing else extra.
  std::vector<TensorSpec> tied = expected_tensors(*find_preset("tiny-llama-tied"));
  tied.push_back({"lm_head.weight", {256, 64}});
  dir = checkpoint_with("ck_tied_head", "tiny-llama-tied", tied);
  EXPECT_NO_THROW(open_weight_source(dir.string(), 0));
  tied.back().shape = {255, 64};
  dir = checkpoint_with("ck_tied_bad_head", "tiny-llama-tied", tied);
  expect_error([&] { open_weight_source(dir.string(), 0); }, {"lm_head.weight"});
}

TEST(CheckpointValidation, RejectsBadDirectories) {
  const fs::path dir = test::fresh_dir("ck_dirs");
  expect_error([&] { open_weight_source(dir.string(), 0); }, {dir.string(), "config.json"});
  std::ofstream(dir / "config.json") << model_config_to_json(*find_preset("tiny-llama")).dump();
  expect_error([&] { open_weight_source(dir.string(), 0); }, {dir.string(), "model.safetensors"});
  expect_error([&] { open_weight_source((dir / "nope").string(), 0); }, {"nope"});
  expect_error([&] { open_weight_source("tiny-llama", 0); }, {"synthetic:tiny-llama"});
  expect_error([&] { open_weight_source("synthetic:llama-7", 0); },
               {"llama-7", "tiny-llama", "llama-3.1-8b"});
}

TEST(CheckpointValidation, RejectsBrokenShardIndex) {
  const fs::path dir = test::fresh_dir("ck_index");
  make_sharded_checkpoint("tiny-llama", dir.string(), 3, "f32", 2);
  const fs::path index_path = dir / "model.safetensors.index.json";
  nlohmann::json index = nlohmann::json::parse(std::ifstream(index_path));
  const std::string first = "model-00001-of-00002.safetensors";
  ASSERT_EQ(index["weight_map"]["model.embed_tokens.weight"], first);
  const auto rewrite = [&](const nlohmann::json& doc) { std::ofstream(index_path) << doc.dump(); };
  const auto open = [&] { open_weight_source(dir.string(), 0); };

  nlohmann::json bad = index;
  bad["weight_map"]["model.embed_tokens.weight"] = "model-00009-of-00002.safetensors";
  rewrite(bad);
  expect_error(open, {"model-00009-of-00002.safetensors", "does not exist"});

  bad = index;
  bad["weight_map"]["model.norm.weight"] = first;  // lives in the second file
  rewrite(bad);
  expect_error(open, {"model.norm.weight", first});

  bad = index;
  bad["weight_map"].erase("model.norm.weight");
  rewrite(bad);
  expect_error(open, {"model.norm.weight"});

  rewrite(index);
  EXPECT_NO_THROW(open());
}

}  // namespace
}  // namespace ssd
