// The tensors a config implies, and the two places their values come from: a safetensors
// checkpoint directory, or seeded synthetic values at any config's real shapes.
#include <cmath>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "kernels/errors.h"
#include "model/counter_rng.h"
#include "model/presets.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace ssd {

namespace {

namespace fs = std::filesystem;

using ShapeMap = std::map<std::string, std::vector<int64_t>>;

ShapeMap shape_map(const ModelConfig& config) {
  ShapeMap shapes;
  for (TensorSpec& t : expected_tensors(config)) shapes.emplace(t.name, std::move(t.shape));
  return shapes;
}

// Looks up a tensor and checks the slice lies inside its 2-D view (last dimension = columns).
// Both failures are bugs in the caller, not bad input.
const std::vector<int64_t>& checked_shape(const ShapeMap& shapes, const std::string& name,
                                          const Slice& s) {
  auto it = shapes.find(name);
  if (it == shapes.end()) throw std::logic_error("WeightSource: no tensor " + name);
  const int64_t cols = it->second.back();
  const int64_t rows = it->second.size() == 1 ? 1 : it->second[0];
  if (s.row_begin < 0 || s.row_count < 0 || s.row_begin + s.row_count > rows || s.col_begin < 0 ||
      s.col_count < 0 || s.col_begin + s.col_count > cols) {
    throw std::logic_error("WeightSource: slice outside " + name + " " + shape_string(it->second));
  }
  return it->second;
}

class SafetensorsSource : public WeightSource {
 public:
  explicit SafetensorsSource(const std::string& dir) : dir_(dir) {
    const fs::path config_path = fs::path(dir) / "config.json";
    if (!fs::exists(config_path)) throw InputError(dir + ": checkpoint has no config.json");
    config_ = load_model_config(config_path.string());
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    const fs::path single = fs::path(dir) / "model.safetensors";
    if (fs::exists(index)) {
      checkpoint_ = SafetensorsCheckpoint::open_index(index.string());
    } else if (fs::exists(single)) {
      checkpoint_ = SafetensorsCheckpoint::open_file(single.string());
    } else {
      throw InputError(dir + ": checkpoint has neither model.safetensors nor " +
                       "model.safetensors.index.json");
    }
    shapes_ = shape_map(config_);
    validate();
  }

  std::string describe() const override { return "safetensors:" + dir_; }
  const ModelConfig& config() const override { return config_; }
  // The embedding's type: checkpoints store every matrix in one type (norms sometimes in
  // fp32, which this does not look at).
  DType dtype() const override { return checkpoint_.info("model.embed_tokens.weight").dtype; }

  void read_into(const std::string& name, const Slice& s, std::vector<float>& out) override {
    checked_shape(shapes_, name, s);
    out.resize(size_t(s.row_count * s.col_count));
    checkpoint_.read_f32(name, s.row_begin, s.row_count, s.col_begin, s.col_count, out.data());
  }
  bool read_bf16_into(const std::string& name, const Slice& s,
                      std::vector<uint16_t>& out) override {
    checked_shape(shapes_, name, s);
    if (checkpoint_.info(name).dtype != DType::BF16) return false;
    out.resize(size_t(s.row_count * s.col_count));
    checkpoint_.read_bf16(name, s.row_begin, s.row_count, s.col_begin, s.col_count, out.data());
    return true;
  }

 private:
  void validate() const {
    for (const auto& [name, shape] : shapes_) {
      if (!checkpoint_.has(name)) {
        throw InputError(dir_ + ": tensor " + name + " " + shape_string(shape) +
                         " is missing from the checkpoint");
      }
      const TensorInfo& info = checkpoint_.info(name);
      if (info.shape != shape) {
        throw InputError(checkpoint_.file_of(name).path() + ": tensor " + name + " has shape " +
                         shape_string(info.shape) + ", config.json implies " + shape_string(shape));
      }
    }
    const std::vector<int64_t> lm_head_shape = {config_.vocab_size, config_.hidden_size};
    for (const std::string& name : checkpoint_.names()) {
      if (shapes_.count(name)) continue;
      // HF sometimes saves the tied head anyway; it is the embedding, so it is ignored.
      if (config_.tie_word_embeddings && name == "lm_head.weight" &&
          checkpoint_.info(name).shape == lm_head_shape) {
        continue;
      }
      throw InputError(checkpoint_.file_of(name).path() + ": unexpected tensor " + name +
                       " for a " + config_.model_type() + " model with " +
                       std::to_string(config_.num_hidden_layers) + " layers" +
                       (config_.tie_word_embeddings ? " and tied embeddings" : ""));
    }
  }

  std::string dir_;
  ModelConfig config_;
  SafetensorsCheckpoint checkpoint_;
  ShapeMap shapes_;
};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// value = offset + amplitude * u with u uniform in [-1, 1) (standard deviation 1/sqrt(3)).
struct Distribution {
  float offset = 0, amplitude = 0;
};

// Chosen so activations stay finite and informative at any depth: fan-in scaling for the
// projections, GPT-2's 1/sqrt(2 * layers) on the two projections that write into the residual
// stream, norms exactly 1, and an LM head whose logits have a standard deviation near 3, so
// sampling is neither uniform nor greedy.
Distribution distribution(const ModelConfig& c, const std::string& name, int64_t cols) {
  const auto with_std = [](double std) { return Distribution{0, float(std * std::sqrt(3.0))}; };
  const double fan_in = 1.0 / std::sqrt(double(cols));
  if (ends_with(name, "norm.weight")) return {1, 0};
  if (name == "lm_head.weight") return with_std(3.0 / std::sqrt(double(c.hidden_size)));
  if (name == "model.embed_tokens.weight") {
    // A tied embedding is also the LM head, so it takes the head's scale; the first RMSNorm
    // makes the input side indifferent to it.
    return with_std(c.tie_word_embeddings ? 3.0 / std::sqrt(double(c.hidden_size)) : 1.0);
  }
  if (ends_with(name, "o_proj.weight") || ends_with(name, "down_proj.weight")) {
    return with_std(fan_in / std::sqrt(2.0 * c.num_hidden_layers));
  }
  return with_std(fan_in);
}

class SyntheticSource : public WeightSource {
 public:
  SyntheticSource(ModelConfig config, std::string what, uint64_t seed)
      : config_(std::move(config)), what_(std::move(what)), seed_(seed) {
    shapes_ = shape_map(config_);
    // HF's torch_dtype names; anything else (float32, absent) is fp32. float16 configs are
    // generated in fp32: the CPU backend keeps f16 models in fp32 anyway.
    dtype_ = config_.torch_dtype == "bfloat16" ? DType::BF16 : DType::F32;
  }

  std::string describe() const override {
    return "synthetic:" + what_ + " seed=" + std::to_string(seed_);
  }
  const ModelConfig& config() const override { return config_; }
  DType dtype() const override { return dtype_; }

  void read_into(const std::string& name, const Slice& s, std::vector<float>& out) override {
    const int64_t cols = checked_shape(shapes_, name, s).back();
    const Distribution d = distribution(config_, name, cols);
    const uint64_t key = tensor_key(seed_, name);
    out.resize(size_t(s.row_count * s.col_count));
    float* dst = out.data();
#pragma omp parallel for schedule(static) if (s.row_count * s.col_count >= (1 << 16))
    for (int64_t r = 0; r < s.row_count; ++r) {
      const uint64_t first = uint64_t((s.row_begin + r) * cols + s.col_begin);
      float* row = dst + r * s.col_count;
      for (int64_t c = 0; c < s.col_count; ++c) {
        row[c] = d.offset + d.amplitude * counter_uniform(key, first + uint64_t(c));
        // A bf16 config is a bf16 model: its values are bf16, whatever they are stored in.
        if (dtype_ == DType::BF16) row[c] = round_to_bf16(row[c]);
      }
    }
  }

 private:
  ModelConfig config_;
  std::string what_;
  uint64_t seed_;
  ShapeMap shapes_;
  DType dtype_ = DType::F32;
};

std::unique_ptr<WeightSource> open_synthetic(const std::string& what, uint64_t seed) {
  if (std::optional<ModelConfig> preset = find_preset(what)) {
    return std::make_unique<SyntheticSource>(*preset, what, seed);
  }
  if (fs::is_regular_file(what)) {
    return std::make_unique<SyntheticSource>(load_model_config(what), what, seed);
  }
  std::string valid;
  for (const std::string& name : preset_names()) valid += (valid.empty() ? "" : ", ") + name;
  throw InputError("synthetic:" + what +
                   ": unknown preset and no such config file (presets: " + valid + ")");
}

}  // namespace

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, hidden}});
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    out.push_back({p + "input_layernorm.weight", {hidden}});
    out.push_back({p + "self_attn.q_proj.weight", {c.q_dim(), hidden}});
    out.push_back({p + "self_attn.k_proj.weight", {c.kv_dim(), hidden}});
    out.push_back({p + "self_attn.v_proj.weight", {c.kv_dim(), hidden}});
    out.push_back({p + "self_attn.o_proj.weight", {hidden, c.q_dim()}});
    if (c.has_qkv_bias()) {
      out.push_back({p + "self_attn.q_proj.bias", {c.q_dim()}});
      out.push_back({p + "self_attn.k_proj.bias", {c.kv_dim()}});
      out.push_back({p + "self_attn.v_proj.bias", {c.kv_dim()}});
    }
    if (c.has_qk_norm()) {
      out.push_back({p + "self_attn.q_norm.weight", {c.head_dim}});
      out.push_back({p + "self_attn.k_norm.weight", {c.head_dim}});
    }
    out.push_back({p + "post_attention_layernorm.weight", {hidden}});
    out.push_back({p + "mlp.gate_proj.weight", {inter, hidden}});
    out.push_back({p + "mlp.up_proj.weight", {inter, hidden}});
    out.push_back({p + "mlp.down_proj.weight", {hidden, inter}});
  }
  out.push_back({"model.norm.weight", {hidden}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, hidden}});
  return out;
}

std::unique_ptr<WeightSource> open_weight_source(const std::string& spec, uint64_t seed) {
  const std::string prefix = "synthetic:";
  if (spec.compare(0, prefix.size(), prefix) == 0) {
    return open_synthetic(spec.substr(prefix.size()), seed);
  }
  std::error_code error;  // an unreadable path is reported below like a missing one
  if (fs::is_directory(spec, error)) return std::make_unique<SafetensorsSource>(spec);
  const std::string hint = find_preset(spec) ? " (did you mean synthetic:" + spec + "?)" : "";
  throw InputError("model spec '" + spec +
                   "' is neither a checkpoint directory nor synthetic:PRESET or "
                   "synthetic:CONFIG.json" +
                   hint);
}

}  // namespace ssd
