#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numbers>

#include "kernels/errors.h"

namespace ssd {

namespace {

using nlohmann::json;

// Reads typed fields of one JSON object; every error names the file and the field, so a user
// with a hand-edited config.json knows exactly which line to fix.
class FieldReader {
 public:
  FieldReader(const json& doc, std::string source, std::string prefix = "")
      : doc_(doc), source_(std::move(source)), prefix_(std::move(prefix)) {}

  // Absent and null both mean "not given", as in HF's from_dict.
  bool given(const std::string& field) const {
    auto it = doc_.find(field);
    return it != doc_.end() && !it->is_null();
  }

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw InputError(source_ + ": " + prefix_ + field + " " + what);
  }

  int integer(const std::string& field) const {
    if (!given(field)) fail(field, "is missing (required integer)");
    const json& value = doc_.at(field);
    if (!value.is_number_integer()) fail(field, "must be an integer, got " + value.dump());
    // Read as int64 so that huge values are reported instead of wrapping.
    const int64_t wide = value.is_number_unsigned()
                             ? int64_t(std::min<uint64_t>(value.get<uint64_t>(), INT64_MAX))
                             : value.get<int64_t>();
    if (wide > std::numeric_limits<int>::max() || wide < std::numeric_limits<int>::min()) {
      fail(field, "is out of range: " + value.dump());
    }
    return int(wide);
  }
  int integer(const std::string& field, int fallback) const {
    return given(field) ? integer(field) : fallback;
  }
  int positive(const std::string& field) const { return check_positive(field, integer(field)); }
  int positive(const std::string& field, int fallback) const {
    return check_positive(field, integer(field, fallback));
  }

  double number(const std::string& field) const {
    if (!given(field)) fail(field, "is missing (required number)");
    const json& value = doc_.at(field);
    if (!value.is_number()) fail(field, "must be a number, got " + value.dump());
    return value.get<double>();
  }
  double number(const std::string& field, double fallback) const {
    return given(field) ? number(field) : fallback;
  }
  double positive_number(const std::string& field, double fallback) const {
    const double value = number(field, fallback);
    if (!(value > 0) || !std::isfinite(value)) fail(field, "must be a positive number");
    return value;
  }

  bool boolean(const std::string& field, bool fallback) const {
    if (!given(field)) return fallback;
    const json& value = doc_.at(field);
    if (!value.is_boolean()) fail(field, "must be true or false, got " + value.dump());
    return value.get<bool>();
  }

  std::string string(const std::string& field, const std::string& fallback) const {
    if (!given(field)) return fallback;
    const json& value = doc_.at(field);
    if (!value.is_string()) fail(field, "must be a string, got " + value.dump());
    return value.get<std::string>();
  }

  // An integer or a list of integers (eos_token_id); absent or null is an empty list.
  std::vector<int> integer_list(const std::string& field) const {
    if (!given(field)) return {};
    const json& value = doc_.at(field);
    if (value.is_number_integer()) return {integer(field)};
    if (!value.is_array()) fail(field, "must be an integer or a list of integers");
    std::vector<int> out;
    for (const json& item : value) {
      if (!item.is_number_integer()) fail(field, "must be an integer or a list of integers");
      out.push_back(item.get<int>());
    }
    return out;
  }

 private:
  int check_positive(const std::string& field, int value) const {
    if (value <= 0) fail(field, "must be positive, got " + std::to_string(value));
    return value;
  }

  const json& doc_;
  std::string source_;
  std::string prefix_;
};

RopeScaling parse_rope_scaling(const json& doc, const std::string& source) {
  FieldReader top(doc, source);
  if (!top.given("rope_scaling")) return {};
  const json& node = doc.at("rope_scaling");
  if (!node.is_object()) top.fail("rope_scaling", "must be null or an object");
  FieldReader fields(node, source, "rope_scaling.");
  // Newer HF configs say rope_type, older ones type; rope_type wins when both are present.
  const std::string type =
      fields.given("rope_type") ? fields.string("rope_type", "") : fields.string("type", "default");
  if (type == "default") return {};
  if (type != "llama3") {
    fields.fail("rope_type", "'" + type + "' is not supported (expected llama3 or default)");
  }
  RopeScaling scaling;
  scaling.enabled = true;
  scaling.factor = fields.number("factor");
  scaling.low_freq_factor = fields.number("low_freq_factor");
  scaling.high_freq_factor = fields.number("high_freq_factor");
  scaling.original_max_position_embeddings = fields.positive("original_max_position_embeddings");
  if (!(scaling.factor >= 1.0)) fields.fail("factor", "must be >= 1");
  if (!(scaling.low_freq_factor > 0)) fields.fail("low_freq_factor", "must be positive");
  if (!(scaling.high_freq_factor > scaling.low_freq_factor)) {
    fields.fail("high_freq_factor", "must be greater than low_freq_factor");
  }
  return scaling;
}

void reject_unsupported_features(const FieldReader& fields, ModelType type) {
  const std::string act = fields.string("hidden_act", "silu");
  if (act != "silu") fields.fail("hidden_act", "'" + act + "' is not supported (expected silu)");
  // Llama's attention_bias also puts a bias on o_proj, which Qwen2 (biased q/k/v, always, with
  // no such field) does not have: only Qwen2's form is implemented.
  if (type != ModelType::Qwen2 && fields.boolean("attention_bias", false))
    fields.fail("attention_bias", "true is not supported");
  // Qwen2's sliding-window attention (off in every released Qwen2.5 config).
  if (fields.boolean("use_sliding_window", false))
    fields.fail("use_sliding_window", "true is not supported");
  if (fields.boolean("mlp_bias", false)) fields.fail("mlp_bias", "true is not supported");
}

}  // namespace

ModelConfig parse_model_config(const json& doc, const std::string& source) {
  if (!doc.is_object()) throw InputError(source + ": expected a JSON object");
  FieldReader fields(doc, source);
  ModelConfig c;
  const std::string model_type = fields.string("model_type", "");
  if (model_type == "llama") {
    c.type = ModelType::Llama;
  } else if (model_type == "qwen2") {
    c.type = ModelType::Qwen2;
  } else if (model_type == "qwen3") {
    c.type = ModelType::Qwen3;
  } else {
    fields.fail("model_type",
                "'" + model_type + "' is not supported (expected llama, qwen2 or qwen3)");
  }
  reject_unsupported_features(fields, c.type);

  c.hidden_size = fields.positive("hidden_size");
  c.intermediate_size = fields.positive("intermediate_size");
  c.num_hidden_layers = fields.positive("num_hidden_layers");
  c.num_attention_heads = fields.positive("num_attention_heads");
  c.num_key_value_heads = fields.positive("num_key_value_heads", c.num_attention_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    fields.fail("num_key_value_heads", "(" + std::to_string(c.num_key_value_heads) +
                                           ") must divide num_attention_heads (" +
                                           std::to_string(c.num_attention_heads) + ")");
  }
  if (fields.given("head_dim")) {
    c.head_dim = fields.positive("head_dim");
  } else if (c.hidden_size % c.num_attention_heads != 0) {
    fields.fail("head_dim", "is missing and hidden_size is not divisible by num_attention_heads");
  } else {
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) fields.fail("head_dim", "must be even for rotary embeddings");

  // Fallbacks are HF's LlamaConfig / Qwen3Config defaults.
  c.rms_norm_eps = fields.positive_number("rms_norm_eps", 1e-6);
  c.rope_theta = fields.positive_number("rope_theta", 10000.0);
  c.rope_scaling = parse_rope_scaling(doc, source);
  c.tie_word_embeddings = fields.boolean("tie_word_embeddings", false);
  c.vocab_size = fields.positive("vocab_size");
  c.max_position_embeddings = fields.positive("max_position_embeddings");
  c.bos_token_id = fields.integer("bos_token_id", -1);
  c.eos_token_ids = fields.integer_list("eos_token_id");
  // transformers >= 4.56 writes "dtype" instead of "torch_dtype".
  c.torch_dtype = fields.string("torch_dtype", fields.string("dtype", "float32"));
  return c;
}

ModelConfig load_model_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open model config");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number overflow
    throw InputError(path + ": invalid JSON: " + e.what());
  }
  return parse_model_config(doc, path);
}

std::string ModelConfig::model_type() const {
  switch (type) {
    case ModelType::Qwen2:
      return "qwen2";
    case ModelType::Qwen3:
      return "qwen3";
    case ModelType::Llama:
      break;
  }
  return "llama";
}

json model_config_to_json(const ModelConfig& c) {
  const bool qwen3 = c.type == ModelType::Qwen3, qwen2 = c.type == ModelType::Qwen2;
  json doc;
  doc["architectures"] = {qwen3   ? "Qwen3ForCausalLM"
                          : qwen2 ? "Qwen2ForCausalLM"
                                  : "LlamaForCausalLM"};
  doc["model_type"] = c.model_type();
  doc["hidden_size"] = c.hidden_size;
  doc["intermediate_size"] = c.intermediate_size;
  doc["num_hidden_layers"] = c.num_hidden_layers;
  doc["num_attention_heads"] = c.num_attention_heads;
  doc["num_key_value_heads"] = c.num_key_value_heads;
  doc["head_dim"] = c.head_dim;
  doc["hidden_act"] = "silu";
  if (qwen2) {
    doc["use_sliding_window"] = false;  // Qwen2Config has neither bias field: q/k/v always have one
  } else {
    doc["attention_bias"] = false;
    if (!qwen3) doc["mlp_bias"] = false;  // Qwen3Config has no such field
  }
  doc["rms_norm_eps"] = c.rms_norm_eps;
  doc["rope_theta"] = c.rope_theta;
  if (c.rope_scaling.enabled) {
    doc["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", c.rope_scaling.factor},
        {"low_freq_factor", c.rope_scaling.low_freq_factor},
        {"high_freq_factor", c.rope_scaling.high_freq_factor},
        {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  } else {
    doc["rope_scaling"] = nullptr;
  }
  doc["tie_word_embeddings"] = c.tie_word_embeddings;
  doc["vocab_size"] = c.vocab_size;
  doc["max_position_embeddings"] = c.max_position_embeddings;
  doc["bos_token_id"] = c.bos_token_id >= 0 ? json(c.bos_token_id) : json(nullptr);
  if (c.eos_token_ids.empty()) {
    doc["eos_token_id"] = nullptr;
  } else if (c.eos_token_ids.size() == 1) {
    doc["eos_token_id"] = c.eos_token_ids[0];
  } else {
    doc["eos_token_id"] = c.eos_token_ids;
  }
  doc["torch_dtype"] = c.torch_dtype;
  return doc;
}

int64_t ModelConfig::parameter_count() const {
  const int64_t hidden = hidden_size;
  const int64_t embed = int64_t(vocab_size) * hidden;
  int64_t layer = 2 * hidden;                        // input and post-attention norms
  layer += 2 * hidden * q_dim();                     // q_proj, o_proj
  layer += 2 * hidden * kv_dim();                    // k_proj, v_proj
  layer += 3 * hidden * int64_t(intermediate_size);  // gate, up, down
  if (has_qk_norm()) layer += 2 * int64_t(head_dim);
  if (has_qkv_bias()) layer += q_dim() + 2 * int64_t(kv_dim());
  return embed + layer * num_hidden_layers + hidden + (tie_word_embeddings ? 0 : embed);
}

bool ModelConfig::is_eos(int token) const {
  return std::find(eos_token_ids.begin(), eos_token_ids.end(), token) != eos_token_ids.end();
}

std::vector<float> rope_inv_freq(const ModelConfig& c) {
  const int half = c.head_dim / 2;
  const RopeScaling& s = c.rope_scaling;
  const double original = s.original_max_position_embeddings;
  const double low_freq_wavelen = original / s.low_freq_factor;
  const double high_freq_wavelen = original / s.high_freq_factor;
  std::vector<float> out(half);
  for (int i = 0; i < half; ++i) {
    const double inv_freq = 1.0 / std::pow(c.rope_theta, 2.0 * i / c.head_dim);
    double scaled = inv_freq;
    if (s.enabled) {
      const double wavelen = 2 * std::numbers::pi / inv_freq;
      if (wavelen > low_freq_wavelen) {
        scaled = inv_freq / s.factor;
      } else if (wavelen >= high_freq_wavelen) {
        const double smooth =
            (original / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        scaled = (1 - smooth) * inv_freq / s.factor + smooth * inv_freq;
      }
    }
    out[i] = float(scaled);
  }
  return out;
}

}  // namespace ssd
