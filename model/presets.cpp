#include "model/presets.h"

#include <functional>
#include <utility>

namespace ssd {

namespace {

RopeScaling llama3_scaling(double factor, int original_max_position_embeddings) {
  RopeScaling s;
  s.enabled = true;
  s.factor = factor;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 4.0;
  s.original_max_position_embeddings = original_max_position_embeddings;
  return s;
}

ModelConfig shape(ModelType type, int hidden, int intermediate, int layers, int heads, int kv_heads,
                  int head_dim) {
  ModelConfig c;
  c.type = type;
  c.hidden_size = hidden;
  c.intermediate_size = intermediate;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = head_dim;
  return c;
}

// Llama 3.1 / 3.2 as published (meta-llama/Llama-3.1-8B-Instruct etc.).
ModelConfig llama3(int hidden, int intermediate, int layers, int heads, int head_dim,
                   double rope_factor, bool tied) {
  ModelConfig c = shape(ModelType::Llama, hidden, intermediate, layers, heads, 8, head_dim);
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.rope_scaling = llama3_scaling(rope_factor, 8192);
  c.tie_word_embeddings = tied;
  c.vocab_size = 128256;
  c.max_position_embeddings = 131072;
  c.bos_token_id = 128000;
  c.eos_token_ids = {128001, 128008, 128009};
  c.torch_dtype = "bfloat16";
  return c;
}

// What Qwen2.5 and Qwen3 share: the tokenizer (vocabulary, BOS, EOS), RMSNorm eps and RoPE base.
ModelConfig qwen_family(ModelConfig c, bool tied, int max_position_embeddings) {
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.tie_word_embeddings = tied;
  c.vocab_size = 151936;
  c.max_position_embeddings = max_position_embeddings;
  c.bos_token_id = 151643;
  c.eos_token_ids = {151645};
  c.torch_dtype = "bfloat16";
  return c;
}

// Qwen3 as published (Qwen/Qwen3-32B etc.).
ModelConfig qwen3(int hidden, int intermediate, int layers, int heads, bool tied) {
  return qwen_family(shape(ModelType::Qwen3, hidden, intermediate, layers, heads, 8, 128), tied,
                     40960);
}

// Qwen2.5(-Coder) as the project's real pair runs them (scripts/get-model.sh): the PyPI GGUF
// files carry an output matrix, so lm_head is untied; head_dim = hidden / heads, 2 KV heads.
ModelConfig qwen2(int hidden, int intermediate, int layers, int heads) {
  return qwen_family(
      shape(ModelType::Qwen2, hidden, intermediate, layers, heads, 2, hidden / heads), false,
      32768);
}

// Llama-architecture models sized for CPUs, with the Llama 2 vocabulary size and Llama 3 RoPE.
ModelConfig small_llama(int hidden, int intermediate, int layers, int heads, int kv_heads,
                        bool tied) {
  ModelConfig c = shape(ModelType::Llama, hidden, intermediate, layers, heads, kv_heads, 64);
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.rope_scaling = llama3_scaling(8.0, 8192);
  c.tie_word_embeddings = tied;
  c.vocab_size = 32000;
  c.max_position_embeddings = 4096;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  c.torch_dtype = "bfloat16";  // like the Llama checkpoints they imitate
  return c;
}

ModelConfig with_test_vocab(ModelConfig c) {
  c.vocab_size = 256;
  c.max_position_embeddings = 512;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  c.torch_dtype = "float32";
  return c;
}

ModelConfig tiny_llama(bool tied) {
  ModelConfig c = with_test_vocab(shape(ModelType::Llama, 64, 160, tied ? 3 : 2, 4, 2, 16));
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  // A small original context so that the llama3 scaling actually moves some frequencies at
  // this head_dim; with 8192 every tiny-model frequency would fall in the unscaled band.
  c.rope_scaling = llama3_scaling(8.0, 32);
  c.tie_word_embeddings = tied;
  return c;
}

// head_dim 32 != hidden / heads, as in the real Qwen3 models.
ModelConfig tiny_qwen3(bool tied) {
  ModelConfig c = with_test_vocab(shape(ModelType::Qwen3, 64, 128, 2, 4, 2, 32));
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.tie_word_embeddings = tied;
  return c;
}

// Qwen2: Llama with q/k/v biases; 6 heads over 2 KV heads so that TP=2 splits both.
ModelConfig tiny_qwen2(bool tied) {
  ModelConfig c = with_test_vocab(shape(ModelType::Qwen2, 96, 160, 2, 6, 2, 16));
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.tie_word_embeddings = tied;
  return c;
}

ModelConfig tiny_llama_other() {
  ModelConfig c = with_test_vocab(shape(ModelType::Llama, 48, 96, 2, 4, 4, 12));
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  return c;
}

const std::vector<std::pair<std::string, std::function<ModelConfig()>>>& presets() {
  static const std::vector<std::pair<std::string, std::function<ModelConfig()>>> table = {
      {"llama-3.1-70b", [] { return llama3(8192, 28672, 80, 64, 128, 8.0, false); }},
      {"llama-3.1-8b", [] { return llama3(4096, 14336, 32, 32, 128, 8.0, false); }},
      {"llama-3.2-1b", [] { return llama3(2048, 8192, 16, 32, 64, 32.0, true); }},
      {"qwen3-32b", [] { return qwen3(5120, 25600, 64, 64, false); }},
      {"qwen3-0.6b", [] { return qwen3(1024, 3072, 28, 16, true); }},
      // The real pair's shapes, for machines without its weights (a GPU node, characterize).
      {"qwen2.5-coder-1.5b", [] { return qwen2(1536, 8960, 28, 12); }},
      {"qwen2.5-coder-0.5b", [] { return qwen2(896, 4864, 24, 14); }},
      {"llama-124m", [] { return small_llama(768, 2048, 12, 12, 4, false); }},
      {"llama-12m", [] { return small_llama(256, 688, 4, 4, 2, true); }},
      {"tiny-llama", [] { return tiny_llama(false); }},
      {"tiny-llama-tied", [] { return tiny_llama(true); }},
      {"tiny-qwen3", [] { return tiny_qwen3(true); }},
      {"tiny-qwen3-untied", [] { return tiny_qwen3(false); }},
      {"tiny-qwen2", [] { return tiny_qwen2(false); }},
      {"tiny-llama-other", [] { return tiny_llama_other(); }},
  };
  return table;
}

}  // namespace

std::optional<ModelConfig> find_preset(const std::string& name) {
  for (const auto& [preset, make] : presets()) {
    if (preset == name) return make();
  }
  return std::nullopt;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& entry : presets()) names.push_back(entry.first);
  return names;
}

}  // namespace ssd
