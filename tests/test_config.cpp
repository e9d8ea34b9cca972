// ModelConfig parsing, serialisation, RoPE frequencies and the built-in presets.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "kernels/errors.h"
#include "model/config.h"
#include "model/presets.h"
#include "tests/test_support.h"

namespace ssd {
namespace {

using nlohmann::json;

// meta-llama/Llama-3.1-8B-Instruct/config.json, as published.
json llama31_8b_json() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})");
}

// Qwen/Qwen3-0.6B/config.json, as published.
json qwen3_06b_json() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
    "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
    "vocab_size": 151936})");
}

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(model_config_to_json(a), model_config_to_json(b));
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rope_scaling.enabled, b.rope_scaling.enabled);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_EQ(a.parameter_count(), b.parameter_count());
}

TEST(Config, ParsesLlama31) {
  const ModelConfig c = parse_model_config(llama31_8b_json(), "config.json");
  EXPECT_EQ(c.type, ModelType::Llama);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // hidden / heads when absent
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_TRUE(c.rope_scaling.enabled);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.has_qk_norm());
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
  EXPECT_TRUE(c.is_eos(128009));
  EXPECT_FALSE(c.is_eos(128000));
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  expect_same(c, *find_preset("llama-3.1-8b"));
}

TEST(Config, ParsesQwen3) {
  const ModelConfig c = parse_model_config(qwen3_06b_json(), "config.json");
  EXPECT_EQ(c.type, ModelType::Qwen3);
  EXPECT_TRUE(c.has_qk_norm());
  EXPECT_EQ(c.head_dim, 128);  // given, and not hidden / heads = 64
  EXPECT_EQ(c.q_dim(), 2048);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_FALSE(c.rope_scaling.enabled);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{151645});  // a single int becomes a list
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  expect_same(c, *find_preset("qwen3-0.6b"));
}

TEST(Config, Defaults) {
  json doc = qwen3_06b_json();
  doc.erase("num_key_value_heads");
  doc["head_dim"] = nullptr;
  doc.erase("eos_token_id");
  doc["bos_token_id"] = nullptr;
  doc.erase("tie_word_embeddings");
  doc.erase("torch_dtype");
  doc.erase("rope_scaling");
  const ModelConfig c = parse_model_config(doc, "config.json");
  EXPECT_EQ(c.num_key_value_heads, 16);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, "float32");
  EXPECT_FALSE(c.rope_scaling.enabled);
}

TEST(Config, OlderRopeScalingSpelling) {
  json doc = llama31_8b_json();
  doc["rope_scaling"].erase("rope_type");
  doc["rope_scaling"]["type"] = "llama3";
  EXPECT_TRUE(parse_model_config(doc, "config.json").rope_scaling.enabled);
  doc["rope_scaling"]["type"] = "default";
  EXPECT_FALSE(parse_model_config(doc, "config.json").rope_scaling.enabled);
}

TEST(Config, RoundTripsEveryPreset) {
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    const ModelConfig preset = *find_preset(name);
    const json doc = model_config_to_json(preset);
    EXPECT_EQ(doc["hidden_act"], "silu");
    const char* architecture = preset.type == ModelType::Qwen3   ? "Qwen3ForCausalLM"
                               : preset.type == ModelType::Qwen2 ? "Qwen2ForCausalLM"
                                                                 : "LlamaForCausalLM";
    EXPECT_EQ(doc["architectures"][0], architecture);
    // Qwen2Config has no attention_bias: its q/k/v always carry one.
    EXPECT_EQ(doc.contains("attention_bias"), preset.type != ModelType::Qwen2);
    if (doc.contains("attention_bias")) {
      EXPECT_EQ(doc["attention_bias"], false);
    }
    expect_same(parse_model_config(doc, name), preset);
  }
}

// The fields of Qwen/Qwen2.5-Coder-1.5B-Instruct's config.json that matter here.
json qwen25_coder_json() {
  return json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
    "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
    "num_attention_heads": 12, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "max_position_embeddings": 32768, "sliding_window": 131072,
    "use_sliding_window": false, "max_window_layers": 21, "tie_word_embeddings": true,
    "vocab_size": 151936, "bos_token_id": 151643, "eos_token_id": 151645,
    "torch_dtype": "bfloat16"})");
}

TEST(Config, Qwen2HasQkvBiasesAndNoSlidingWindow) {
  const ModelConfig c = parse_model_config(qwen25_coder_json(), "qwen2.json");
  EXPECT_EQ(c.model_type(), "qwen2");
  EXPECT_TRUE(c.has_qkv_bias());
  EXPECT_FALSE(c.has_qk_norm());
  EXPECT_EQ(c.head_dim, 128);
  // HF's count for Qwen2.5-Coder-1.5B (tied). The GGUF the project converts quantizes its own
  // output.weight, so that checkpoint is untied: 151936 x 1536 more.
  EXPECT_EQ(c.parameter_count(), 1543714304);
  json sliding = qwen25_coder_json();
  sliding["use_sliding_window"] = true;
  EXPECT_THROW(parse_model_config(sliding, "qwen2.json"), InputError);
}

TEST(Config, LoadFromFile) {
  const auto dir = test::fresh_dir("config_load");
  const std::string path = (dir / "config.json").string();
  std::ofstream(path) << llama31_8b_json().dump(2);
  EXPECT_EQ(load_model_config(path).hidden_size, 4096);

  const std::string missing = (dir / "missing.json").string();
  try {
    load_model_config(missing);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  std::ofstream(path) << "{\"model_type\": \"llama\",";
  try {
    load_model_config(path);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("invalid JSON"), std::string::npos) << e.what();
  }
}

struct BadConfig {
  std::string field;  // what the error message must name
  std::function<void(json&)> edit;
};

TEST(Config, ErrorsNameTheField) {
  const std::vector<BadConfig> cases = {
      {"model_type", [](json& d) { d["model_type"] = "mistral"; }},
      {"model_type", [](json& d) { d.erase("model_type"); }},
      {"hidden_size", [](json& d) { d.erase("hidden_size"); }},
      {"hidden_size", [](json& d) { d["hidden_size"] = "4096"; }},
      {"hidden_size", [](json& d) { d["hidden_size"] = 4096.5; }},
      {"intermediate_size", [](json& d) { d["intermediate_size"] = 0; }},
      {"num_hidden_layers", [](json& d) { d["num_hidden_layers"] = -1; }},
      {"num_attention_heads", [](json& d) { d.erase("num_attention_heads"); }},
      {"num_key_value_heads", [](json& d) { d["num_key_value_heads"] = 5; }},
      {"head_dim", [](json& d) { d["head_dim"] = 0; }},
      {"head_dim", [](json& d) { d["head_dim"] = 127; }},
      {"head_dim", [](json& d) { d["num_attention_heads"] = 24, d["num_key_value_heads"] = 8; }},
      {"vocab_size", [](json& d) { d.erase("vocab_size"); }},
      {"max_position_embeddings", [](json& d) { d.erase("max_position_embeddings"); }},
      {"rms_norm_eps", [](json& d) { d["rms_norm_eps"] = "1e-5"; }},
      {"rms_norm_eps", [](json& d) { d["rms_norm_eps"] = 0; }},
      {"rope_theta", [](json& d) { d["rope_theta"] = -1.0; }},
      {"hidden_act", [](json& d) { d["hidden_act"] = "gelu"; }},
      {"attention_bias", [](json& d) { d["attention_bias"] = true; }},
      {"attention_bias", [](json& d) { d["attention_bias"] = "no"; }},
      {"mlp_bias", [](json& d) { d["mlp_bias"] = true; }},
      {"use_sliding_window", [](json& d) { d["use_sliding_window"] = true; }},
      {"tie_word_embeddings", [](json& d) { d["tie_word_embeddings"] = 1; }},
      {"eos_token_id", [](json& d) { d["eos_token_id"] = "</s>"; }},
      {"eos_token_id",
       [](json& d) {
         d["eos_token_id"] = {1, "x"};
       }},
      {"bos_token_id", [](json& d) { d["bos_token_id"] = 1.5; }},
      {"torch_dtype", [](json& d) { d["torch_dtype"] = 16; }},
      {"rope_scaling", [](json& d) { d["rope_scaling"] = 8; }},
      {"rope_scaling.rope_type", [](json& d) { d["rope_scaling"]["rope_type"] = "yarn"; }},
      {"rope_scaling.factor", [](json& d) { d["rope_scaling"].erase("factor"); }},
      {"rope_scaling.factor", [](json& d) { d["rope_scaling"]["factor"] = 0.5; }},
      {"rope_scaling.high_freq_factor",
       [](json& d) { d["rope_scaling"]["high_freq_factor"] = 1.0; }},
      {"rope_scaling.original_max_position_embeddings",
       [](json& d) { d["rope_scaling"]["original_max_position_embeddings"] = 8192.0; }},
  };
  for (const BadConfig& bad : cases) {
    json doc = llama31_8b_json();
    bad.edit(doc);
    SCOPED_TRACE(doc.dump());
    try {
      parse_model_config(doc, "some/config.json");
      ADD_FAILURE() << "accepted a bad " << bad.field;
    } catch (const InputError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(bad.field), std::string::npos) << message;
      EXPECT_NE(message.find("some/config.json"), std::string::npos) << message;
    }
  }
  EXPECT_THROW(parse_model_config(json::array(), "x"), InputError);
}

TEST(Config, RopeInvFreqTinyLlamaByHand) {
  // head_dim 16, theta 1e4, llama3 factor 8, low 1, high 4, original context 32: wavelengths
  // above 32 are divided by 8, below 8 kept, and in between smoothly interpolated.
  const std::vector<float> f = rope_inv_freq(*find_preset("tiny-llama"));
  ASSERT_EQ(f.size(), 8u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);                             // wavelength 2pi < 8: unchanged
  EXPECT_FLOAT_EQ(f[1], 0.09583998588296266f);             // wavelength 19.9: smooth = 0.2035
  EXPECT_FLOAT_EQ(f[2], 0.0125f);                          // wavelength 62.8 > 32: 0.1 / 8
  EXPECT_FLOAT_EQ(f[7], float(std::pow(10.0, -3.5) / 8));  // wavelength 19869
}

TEST(Config, RopeInvFreqLlama31) {
  const std::vector<float> f = rope_inv_freq(*find_preset("llama-3.1-8b"));
  ASSERT_EQ(f.size(), 64u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);                     // high frequency: unchanged
  EXPECT_FLOAT_EQ(f[31], 0.0008567514129196321f);  // medium: smoothed
  EXPECT_FLOAT_EQ(f[63], 3.068925988914511e-07f);  // low frequency: divided by 8
  const std::vector<float> plain = rope_inv_freq(*find_preset("qwen3-0.6b"));
  EXPECT_FLOAT_EQ(plain[32], float(std::pow(1e6, -0.5)));
}

TEST(Presets, ExactParameterCounts) {
  EXPECT_EQ(find_preset("llama-3.2-1b")->parameter_count(), 1'235'814'400);
  EXPECT_EQ(find_preset("llama-3.1-8b")->parameter_count(), 8'030'261'248);
  EXPECT_EQ(find_preset("qwen3-0.6b")->parameter_count(), 596'049'920);
  // Qwen2.5-1.5B and -0.5B as published (1,543,714,304 and 494,032,768 with tied embeddings)
  // plus the untied lm_head of the project's checkpoints (vocab 151936 x hidden).
  EXPECT_EQ(find_preset("qwen2.5-coder-1.5b")->parameter_count(), 1'543'714'304 + 151936 * 1536);
  EXPECT_EQ(find_preset("qwen2.5-coder-0.5b")->parameter_count(), 494'032'768 + 151936 * 896);
  EXPECT_EQ(find_preset("llama-3.1-70b")->parameter_count(), 70'553'706'496);
  EXPECT_EQ(find_preset("qwen3-32b")->parameter_count(), 32'762'123'264);
  const int64_t cpu_target = find_preset("llama-124m")->parameter_count();
  const int64_t cpu_draft = find_preset("llama-12m")->parameter_count();
  EXPECT_GE(cpu_target, 100'000'000);
  EXPECT_GT(cpu_target, 8 * cpu_draft);
}

TEST(Presets, NamesAndShapes) {
  const std::vector<std::string> names = preset_names();
  EXPECT_EQ(names.size(), 15u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const std::optional<ModelConfig> c = find_preset(name);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->num_attention_heads % c->num_key_value_heads, 0);
    EXPECT_FALSE(c->eos_token_ids.empty());
  }
  EXPECT_FALSE(find_preset("llama-9000b").has_value());
  const ModelConfig tiny = *find_preset("tiny-qwen3");
  EXPECT_NE(tiny.head_dim, tiny.hidden_size / tiny.num_attention_heads);
  EXPECT_TRUE(find_preset("tiny-llama-tied")->tie_word_embeddings);
  EXPECT_FALSE(find_preset("tiny-qwen3-untied")->tie_word_embeddings);
  EXPECT_TRUE(find_preset("tiny-qwen2")->has_qkv_bias());
  EXPECT_TRUE(find_preset("qwen2.5-coder-1.5b")->has_qkv_bias());
  EXPECT_FALSE(find_preset("qwen2.5-coder-0.5b")->tie_word_embeddings);
  EXPECT_TRUE(find_preset("llama-3.2-1b")->tie_word_embeddings);
  EXPECT_DOUBLE_EQ(find_preset("llama-3.2-1b")->rope_scaling.factor, 32.0);
}

}  // namespace
}  // namespace ssd
