// Model loading, the KV cache and the ForwardBatch builders.
#include "model/model.h"

#include <stdexcept>

namespace ssd {

Model load_model(WeightSource& source, Backend& backend, const Shard& shard, AllReduce* all_reduce,
                 DType weight_storage) {
  Model m;
  m.config = source.config();
  m.shard = shard;
  m.backend = &backend;
  m.all_reduce = shard.size > 1 ? all_reduce : nullptr;
  if (shard.size > 1 && !all_reduce)
    throw std::invalid_argument("load_model: a sharded model needs an all-reduce");
  m.weights = load_weights(source, backend, shard, weight_storage);
  const std::vector<float> inv_freq = rope_inv_freq(m.config);
  m.inv_freq = backend.upload_weight(inv_freq.data(), inv_freq.size());
  return m;
}

void release_model(Model& m) {
  if (!m.backend) return;
  release_weights(m.weights, *m.backend);
  m.backend->release(m.inv_freq);
  m.backend = nullptr;
}

KVCache create_kv_cache(const Model& m, int sequences, int capacity) {
  if (sequences < 1 || capacity < 1)
    throw std::invalid_argument("create_kv_cache: need at least one sequence and one slot");
  KVCache cache;
  cache.layout = KVLayout{sequences, capacity, m.local_kv_heads(), m.config.head_dim};
  for (int l = 0; l < m.config.num_hidden_layers; ++l) {
    cache.k.push_back(m.backend->alloc(cache.layout.elements()));
    cache.v.push_back(m.backend->alloc(cache.layout.elements()));
  }
  cache.length.assign(sequences, 0);
  return cache;
}

void release_kv_cache(KVCache& cache, Backend& backend) {
  for (Buffer& b : cache.k) backend.release(b);
  for (Buffer& b : cache.v) backend.release(b);
  cache.k.clear();
  cache.v.clear();
}

void release_activations(Activations& a, Backend& be) {
  for (Buffer* b : {&a.x, &a.xb, &a.q, &a.k, &a.v, &a.attn, &a.hb, &a.hb2, &a.logit_in, &a.logits})
    be.release(*b);
  a.capacity_rows = a.capacity_logit_rows = 0;
}

void ForwardBatch::add_causal(int s, int length, const std::vector<int32_t>& new_tokens,
                              Logits logits) {
  const int n = int(new_tokens.size());
  for (int i = 0; i < n; ++i) {
    const bool want = logits == Logits::All || (logits == Logits::Last && i == n - 1);
    add_token(s, new_tokens[i], length + i, length + i, length + i + 1, {}, want);
  }
}

void ForwardBatch::add_token(int s, int32_t token, int pos, int slot_index, int prefix_len,
                             const std::vector<int32_t>& extra, bool want_logits) {
  if (want_logits) logit_rows.push_back(int32_t(tokens.size()));
  tokens.push_back(token);
  seq.push_back(s);
  position.push_back(pos);
  slot.push_back(slot_index);
  prefix.push_back(prefix_len);
  extra_slots.insert(extra_slots.end(), extra.begin(), extra.end());
  extra_begin.push_back(int32_t(extra_slots.size()));
}

}  // namespace ssd
