#include "model/weights.h"

#include "kernels/errors.h"

namespace ssd {

namespace {

void check_shard(const ModelConfig& c, const Shard& shard) {
  check_tensor_parallel(c, shard.size);
  if (shard.rank < 0 || shard.rank >= shard.size) {
    throw std::logic_error("load_weights: rank " + std::to_string(shard.rank) +
                           " outside a TP group of " + std::to_string(shard.size));
  }
}

// Reads one tensor slice and uploads it, one tensor at a time so host memory peaks at the
// largest single slice, never the whole model.
class Loader {
 public:
  Loader(WeightSource& source, Backend& backend, const Shard& shard, Weights& weights)
      : source_(source), backend_(backend), shard_(shard), weights_(weights) {}

  // The embedding table: rows gathered by embed. A tied table is also the lm_head, the
  // largest matrix of a small model (the llama-12m draft's 8 M of 11 M weights), so it is
  // stored as a matrix, laid out for the GEMM; embed reads either layout.
  Buffer table(const std::string& name, int64_t rows, int64_t cols, bool also_head) {
    return upload(name, {0, rows, 0, cols}, weights_.dtype, also_head);
  }
  // A whole [out, in] matrix (an untied lm_head).
  Buffer whole(const std::string& name, int64_t rows, int64_t cols) {
    return upload(name, {0, rows, 0, cols});
  }
  // Norm weights: tiny, read once per row, kept in fp32.
  Buffer vector(const std::string& name, int64_t length) {
    return upload(name, {0, 1, 0, length}, DType::F32, false);
  }
  // This rank's part of a bias vector: the entries of the rows it holds of its matrix.
  Buffer vector_part(const std::string& name, int64_t length) {
    const int64_t local = length / shard_.size;
    return upload(name, {0, 1, shard_.rank * local, local}, DType::F32, false);
  }
  // This rank's block of rows (heads or intermediate channels of an [out, in] weight).
  Buffer rows(const std::string& name, int64_t rows, int64_t cols) {
    const int64_t local = rows / shard_.size;
    return upload(name, {shard_.rank * local, local, 0, cols});
  }
  // This rank's block of columns (the input side of o_proj and down_proj).
  Buffer cols(const std::string& name, int64_t rows, int64_t cols) {
    const int64_t local = cols / shard_.size;
    return upload(name, {0, rows, shard_.rank * local, local});
  }

 private:
  // Matrices only ever enter matmul, so the backend may lay them out for its GEMM.
  Buffer upload(const std::string& name, const Slice& slice) {
    return upload(name, slice, weights_.dtype, true);
  }
  Buffer upload(const std::string& name, const Slice& slice, DType storage, bool matrix) {
    Buffer buffer;
    size_t count = 0;
    if (backend_.uploads_bf16(storage, matrix) &&
        source_.read_bf16_into(name, slice, bf16_values_)) {
      count = bf16_values_.size();
      buffer = backend_.upload_bf16(bf16_values_.data(), int(slice.row_count), int(slice.col_count),
                                    storage, matrix);
    } else {
      source_.read_into(name, slice, values_);
      count = values_.size();
      buffer = matrix ? backend_.upload_matrix(values_.data(), int(slice.row_count),
                                               int(slice.col_count), storage)
                      : backend_.upload_weight_as(values_.data(), count, storage);
    }
    weights_.bytes += count * dtype_size(backend_.weight_storage(storage));
    return buffer;
  }

  WeightSource& source_;
  Backend& backend_;
  Shard shard_;
  Weights& weights_;
  std::vector<float> values_;          // one tensor's fp32 values, reused (WeightSource::read_into)
  std::vector<uint16_t> bf16_values_;  // or its bf16 bits (WeightSource::read_bf16_into)
};

void release_buffer(Backend& backend, Buffer& buffer) {
  if (buffer.data) backend.release(buffer);
  buffer = {};
}

}  // namespace

Weights load_weights(WeightSource& source, Backend& backend, const Shard& shard, DType storage) {
  const ModelConfig& c = source.config();
  check_shard(c, shard);
  Weights w;
  w.dtype = backend.weight_storage(storage);
  try {
    Loader load(source, backend, shard, w);
    const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
    w.embed = load.table("model.embed_tokens.weight", c.vocab_size, hidden, c.tie_word_embeddings);
    for (int i = 0; i < c.num_hidden_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      LayerWeights& layer = w.layers.emplace_back();
      layer.attn_norm = load.vector(p + "input_layernorm.weight", hidden);
      layer.wq = load.rows(p + "self_attn.q_proj.weight", c.q_dim(), hidden);
      layer.wk = load.rows(p + "self_attn.k_proj.weight", c.kv_dim(), hidden);
      layer.wv = load.rows(p + "self_attn.v_proj.weight", c.kv_dim(), hidden);
      layer.wo = load.cols(p + "self_attn.o_proj.weight", hidden, c.q_dim());
      if (c.has_qkv_bias()) {
        layer.bq = load.vector_part(p + "self_attn.q_proj.bias", c.q_dim());
        layer.bk = load.vector_part(p + "self_attn.k_proj.bias", c.kv_dim());
        layer.bv = load.vector_part(p + "self_attn.v_proj.bias", c.kv_dim());
      }
      if (c.has_qk_norm()) {
        layer.q_norm = load.vector(p + "self_attn.q_norm.weight", c.head_dim);
        layer.k_norm = load.vector(p + "self_attn.k_norm.weight", c.head_dim);
      }
      layer.mlp_norm = load.vector(p + "post_attention_layernorm.weight", hidden);
      layer.w_gate = load.rows(p + "mlp.gate_proj.weight", inter, hidden);
      layer.w_up = load.rows(p + "mlp.up_proj.weight", inter, hidden);
      layer.w_down = load.cols(p + "mlp.down_proj.weight", hidden, inter);
    }
    w.final_norm = load.vector("model.norm.weight", hidden);
    w.lm_head =
        c.tie_word_embeddings ? w.embed : load.whole("lm_head.weight", c.vocab_size, hidden);
  } catch (...) {
    release_weights(w, backend);  // a failed read must not leak what was already uploaded
    throw;
  }
  return w;
}

void check_tensor_parallel(const ModelConfig& c, int tp) {
  if (tp < 1)
    throw InputError("a tensor-parallel group of " + std::to_string(tp) +
                     " ranks: must be at least 1");
  for (auto [count, what] : {std::pair{c.num_attention_heads, "num_attention_heads"},
                             {c.num_key_value_heads, "num_key_value_heads"},
                             {c.intermediate_size, "intermediate_size"}})
    if (count % tp != 0)
      throw InputError("a tensor-parallel group of " + std::to_string(tp) +
                       " ranks does not divide " + what + " (" + std::to_string(count) + ")");
}

DType resolve_weight_dtype(const std::string& value, const WeightSource& source) {
  if (value == "auto") return source.dtype();
  if (value == "f32") return DType::F32;
  if (value == "bf16") return DType::BF16;
  throw InputError("weight dtype '" + value + "': expected auto, f32 or bf16");
}

void release_weights(Weights& w, Backend& backend) {
  // A tied head shares the embedding's memory: forget it rather than free it twice.
  if (w.lm_head.data == w.embed.data) w.lm_head = {};
  release_buffer(backend, w.lm_head);
  release_buffer(backend, w.embed);
  release_buffer(backend, w.final_norm);
  for (LayerWeights& layer : w.layers) {
    for (Buffer* b : {&layer.attn_norm, &layer.wq, &layer.wk, &layer.wv, &layer.bq, &layer.bk,
                      &layer.bv, &layer.q_norm, &layer.k_norm, &layer.wo, &layer.mlp_norm,
                      &layer.w_gate, &layer.w_up, &layer.w_down}) {
      release_buffer(backend, *b);
    }
  }
  w.layers.clear();
  w.bytes = 0;
}

}  // namespace ssd
