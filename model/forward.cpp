// forward(): the transformer, read top to bottom. Llama, Qwen2 and Qwen3 differ only in Qwen2's
// q/k/v biases and Qwen3's per-head RMSNorm of q and k before RoPE.
#include <algorithm>
#include <stdexcept>

#include "model/model.h"

namespace ssd {
namespace {

void ensure(Backend& be, Buffer& b, size_t count) {
  if (b.count >= count) return;
  be.release(b);
  b = be.alloc(count);
}

void grow_activations(const Model& m, Activations& a, int rows, int logit_rows) {
  Backend& be = *m.backend;
  const ModelConfig& c = m.config;
  if (rows > a.capacity_rows) {
    const size_t n = size_t(rows);
    ensure(be, a.x, n * c.hidden_size);
    ensure(be, a.xb, n * c.hidden_size);
    ensure(be, a.q, n * m.local_heads() * c.head_dim);
    ensure(be, a.k, n * m.local_kv_heads() * c.head_dim);
    ensure(be, a.v, n * m.local_kv_heads() * c.head_dim);
    ensure(be, a.attn, n * m.local_heads() * c.head_dim);
    ensure(be, a.hb, n * m.local_intermediate());
    ensure(be, a.hb2, n * m.local_intermediate());
    a.capacity_rows = rows;
  }
  if (logit_rows > a.capacity_logit_rows) {
    ensure(be, a.logit_in, size_t(logit_rows) * c.hidden_size);
    ensure(be, a.logits, size_t(logit_rows) * c.vocab_size);
    a.capacity_logit_rows = logit_rows;
  }
}

void check_batch(const Model& m, const KVCache& cache, const ForwardBatch& b) {
  const size_t n = b.tokens.size();
  if (b.seq.size() != n || b.position.size() != n || b.slot.size() != n || b.prefix.size() != n ||
      b.extra_begin.size() != n + 1)
    throw std::invalid_argument("forward: ForwardBatch arrays disagree in length");
  for (size_t r = 0; r < n; ++r) {
    if (b.tokens[r] < 0 || b.tokens[r] >= m.config.vocab_size)
      throw std::out_of_range("forward: token id " + std::to_string(b.tokens[r]) +
                              " outside the vocabulary");
    if (b.seq[r] < 0 || b.seq[r] >= cache.layout.sequences || b.slot[r] < 0 ||
        b.slot[r] >= cache.layout.capacity || b.prefix[r] < 0 ||
        b.prefix[r] > cache.layout.capacity)
      throw std::out_of_range("forward: row " + std::to_string(r) + " outside the KV cache");
  }
  if (b.extra_begin[0] != 0 || size_t(b.extra_begin[n]) != b.extra_slots.size())
    throw std::invalid_argument("forward: extra_begin does not span extra_slots");
  for (size_t r = 0; r < n; ++r) {
    if (b.extra_begin[r + 1] < b.extra_begin[r])
      throw std::invalid_argument("forward: extra_begin must not decrease");
    if (b.prefix[r] == 0 && b.extra_begin[r + 1] == b.extra_begin[r])
      throw std::invalid_argument("forward: row " + std::to_string(r) + " sees no slot");
  }
  for (int32_t s : b.extra_slots)
    if (s < 0 || s >= cache.layout.capacity)
      throw std::out_of_range("forward: extra slot " + std::to_string(s) + " outside the KV cache");
  for (int32_t r : b.logit_rows)
    if (r < 0 || size_t(r) >= n) throw std::out_of_range("forward: bad logit row");
}

}  // namespace

void forward(const Model& m, KVCache& cache, const ForwardBatch& batch, Activations& a,
             std::vector<float>& logits) {
  check_batch(m, cache, batch);
  Backend& be = *m.backend;
  const ModelConfig& c = m.config;
  const int rows = batch.rows();
  const int dim = c.hidden_size, hd = c.head_dim;
  const int heads = m.local_heads(), kv_heads = m.local_kv_heads();
  const int q_dim = heads * hd, kv_dim = kv_heads * hd, ffn = m.local_intermediate();
  const int n_logits = int(batch.logit_rows.size());
  grow_activations(m, a, rows, n_logits);
  const AttentionMask mask{rows,
                           batch.seq.data(),
                           batch.slot.data(),
                           batch.prefix.data(),
                           batch.extra_begin.data(),
                           batch.extra_slots.data()};
  const float eps = float(c.rms_norm_eps);
  logits.resize(size_t(n_logits) * c.vocab_size);

  // Everything from the embedding to the logits is one fixed sequence of backend ops for a given
  // shape, which the backend may record and replay (Backend::run_recorded). An all-reduce is
  // another library's call between the ops, so a tensor-parallel model runs them one by one.
  const auto ops = [&] {
    be.embed(a.x, m.weights.embed, batch.tokens.data(), rows, dim);

    for (int l = 0; l < c.num_hidden_layers; ++l) {
      const LayerWeights& w = m.weights.layers[l];

      // Attention block.
      be.rmsnorm(a.xb, a.x, w.attn_norm, rows, dim, eps);
      be.matmul(a.q, a.xb, w.wq, rows, dim, q_dim);
      be.matmul(a.k, a.xb, w.wk, rows, dim, kv_dim);
      be.matmul(a.v, a.xb, w.wv, rows, dim, kv_dim);
      if (c.has_qkv_bias()) {
        be.add_bias(a.q, w.bq, rows, q_dim);
        be.add_bias(a.k, w.bk, rows, kv_dim);
        be.add_bias(a.v, w.bv, rows, kv_dim);
      }
      if (c.has_qk_norm()) {
        be.rmsnorm(a.q, a.q, w.q_norm, rows * heads, hd, eps);
        be.rmsnorm(a.k, a.k, w.k_norm, rows * kv_heads, hd, eps);
      }
      be.rope(a.q, batch.position.data(), rows, heads, hd, m.inv_freq);
      be.rope(a.k, batch.position.data(), rows, kv_heads, hd, m.inv_freq);
      be.kv_store(cache.k[l], cache.v[l], cache.layout, a.k, a.v, mask);
      be.attention(a.attn, a.q, cache.k[l], cache.v[l], cache.layout, heads, mask);
      be.matmul(a.xb, a.attn, w.wo, rows, q_dim, dim);
      if (m.all_reduce) m.all_reduce->sum(a.xb, size_t(rows) * dim);
      be.add(a.x, a.xb, size_t(rows) * dim);

      // Feed-forward block (SwiGLU).
      be.rmsnorm(a.xb, a.x, w.mlp_norm, rows, dim, eps);
      be.matmul(a.hb, a.xb, w.w_gate, rows, dim, ffn);
      be.matmul(a.hb2, a.xb, w.w_up, rows, dim, ffn);
      be.swiglu(a.hb, a.hb, a.hb2, size_t(rows) * ffn);
      be.matmul(a.xb, a.hb, w.w_down, rows, ffn, dim);
      if (m.all_reduce) m.all_reduce->sum(a.xb, size_t(rows) * dim);
      be.add(a.x, a.xb, size_t(rows) * dim);
    }

    // Final norm and LM head, only for the rows whose logits are wanted.
    if (n_logits == 0) return;
    for (int i = 0; i < n_logits; ++i)
      be.copy(a.logit_in, size_t(i) * dim, a.x, size_t(batch.logit_rows[i]) * dim, dim);
    be.rmsnorm(a.logit_in, a.logit_in, m.weights.final_norm, n_logits, dim, eps);
    be.matmul(a.logits, a.logit_in, m.weights.lm_head, n_logits, dim, c.vocab_size);
  };
  if (m.all_reduce)
    ops();
  else
    be.run_recorded(ops);
  if (n_logits > 0) be.to_host(logits.data(), a.logits, 0, logits.size());
}

}  // namespace ssd
