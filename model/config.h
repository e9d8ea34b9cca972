// ModelConfig: the shape and hyper-parameters of a Llama, Qwen2 or Qwen3 model, read from a Hugging
// Face config.json or taken from a built-in preset.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ssd {

enum class ModelType { Llama, Qwen2, Qwen3 };

// rope_scaling of type "llama3" (Llama 3.1/3.2); disabled means plain RoPE.
struct RopeScaling {
  bool enabled = false;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

struct ModelConfig {
  ModelType type = ModelType::Llama;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;  // defaults to hidden_size / num_attention_heads
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;
  std::string torch_dtype = "float32";

  bool has_qk_norm() const { return type == ModelType::Qwen3; }
  // Qwen2 is Llama plus biases on q_proj, k_proj and v_proj (and none on o_proj).
  bool has_qkv_bias() const { return type == ModelType::Qwen2; }
  std::string model_type() const;
  int q_dim() const { return num_attention_heads * head_dim; }
  int kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t parameter_count() const;
  bool is_eos(int token) const;
};

// Parses an HF config.json document. `source` names the file in error messages. Throws
// ssd::InputError naming the offending field for anything missing or unsupported.
ModelConfig parse_model_config(const nlohmann::json& doc, const std::string& source);
ModelConfig load_model_config(const std::string& path);
// The HF config.json for a config (what make-checkpoint writes).
nlohmann::json model_config_to_json(const ModelConfig& config);

// RoPE inverse frequencies (head_dim / 2 entries) with llama3 scaling applied, as HF computes
// them in _compute_llama3_parameters.
std::vector<float> rope_inv_freq(const ModelConfig& config);

}  // namespace ssd
