// Model, KVCache and the forward pass: one transformer (Llama or Qwen3) on one backend, this
// rank's tensor-parallel shard of it.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "model/config.h"
#include "model/weights.h"

namespace ssd {

struct Model {
  ModelConfig config;
  Shard shard;
  Backend* backend = nullptr;
  AllReduce* all_reduce = nullptr;  // null when shard.size == 1
  Weights weights;
  Buffer inv_freq;  // RoPE inverse frequencies, llama3 scaling applied
  // Per-rank head counts.
  int local_heads() const { return config.num_attention_heads / shard.size; }
  int local_kv_heads() const { return config.num_key_value_heads / shard.size; }
  int local_intermediate() const { return config.intermediate_size / shard.size; }
};

Model load_model(WeightSource& source, Backend& backend, const Shard& shard = {},
                 AllReduce* all_reduce = nullptr, DType weight_storage = DType::F32);
void release_model(Model& model);

// Preallocated K/V for `sequences` sequences of `capacity` slots each, per layer. Slots
// [0, length[s]) of sequence s hold its committed tokens; slots past that are free for
// speculative or branch tokens. Rolling back rejected tokens is just lowering length[s].
struct KVCache {
  KVLayout layout;
  std::vector<Buffer> k, v;  // one per layer
  std::vector<int> length;   // committed tokens per sequence
};

KVCache create_kv_cache(const Model& model, int sequences, int capacity);
void release_kv_cache(KVCache& cache, Backend& backend);

// The new tokens of one forward call. Row r is token tokens[r] of cache sequence seq[r], at
// RoPE position position[r], writing its K/V into slot[r]; it attends to slots [0, prefix[r])
// of its sequence plus extra_slots[extra_begin[r] .. extra_begin[r+1]). logit_rows lists the
// rows whose logits the caller wants, in the order they are returned.
struct ForwardBatch {
  std::vector<int32_t> tokens, seq, position, slot, prefix;
  std::vector<int32_t> extra_begin{0};
  std::vector<int32_t> extra_slots;
  std::vector<int32_t> logit_rows;

  int rows() const { return int(tokens.size()); }
  // Appends `new_tokens` to sequence `s` causally after its `length` committed tokens: token i
  // sits at position and slot length + i and sees everything before it. With want_logits
  // "last" only the final token's logits are returned (prefill), with "all" every token's
  // (verification).
  enum class Logits { None, Last, All };
  void add_causal(int s, int length, const std::vector<int32_t>& new_tokens, Logits logits);
  // Adds one token with an explicit position, slot and visible set (branch decoding).
  void add_token(int s, int32_t token, int position, int slot, int prefix,
                 const std::vector<int32_t>& extra, bool want_logits);
};

// Scratch activations, grown on demand and reused across calls.
struct Activations {
  int capacity_rows = 0;
  int capacity_logit_rows = 0;
  Buffer x, xb, q, k, v, attn, hb, hb2, logit_in, logits;
};
void release_activations(Activations& acts, Backend& backend);

// Runs the transformer over the batch's new tokens, writing their K/V into the cache, and
// copies the logits of batch.logit_rows to `logits` ([logit_rows][vocab], fp32). Does not
// change cache.length: committing tokens is the caller's decision.
void forward(const Model& model, KVCache& cache, const ForwardBatch& batch, Activations& acts,
             std::vector<float>& logits);

}  // namespace ssd
