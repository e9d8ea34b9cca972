#include "ssd/verification.h"

#include <algorithm>

#include "ssd/sampling.h"

namespace ssd {

double UniformStream::next() {
  return uniform01(seed, stream, counter++);
}

Verdict verify_greedy(const float* target_logits, const int32_t* draft, int K, int vocab) {
  Verdict v;
  for (int i = 0; i < K; ++i) {
    const int32_t best = argmax(target_logits + size_t(i) * vocab, vocab);
    if (draft[i] != best) {
      v.bonus = best;
      return v;
    }
    ++v.accepted;
  }
  v.bonus = argmax(target_logits + size_t(K) * vocab, vocab);
  return v;
}

namespace {

Verdict verify(const float* p, const float* q, const int32_t* draft, int K, int vocab,
               UniformStream& uniforms, bool residual) {
  Verdict v;
  std::vector<float> row(vocab);
  for (int i = 0; i < K; ++i) {
    const float* pi = p + size_t(i) * vocab;
    const float* qi = q + size_t(i) * vocab;
    const int32_t x = draft[i];
    const double u = uniforms.next();
    // Accept iff u < p/q, i.e. u * q < p (no division, and q(x) > 0 since x was drawn from q).
    if (u * double(qi[x]) < double(pi[x])) {
      ++v.accepted;
      continue;
    }
    double total = 0.0;
    for (int t = 0; t < vocab; ++t) {
      row[t] = residual ? std::max(pi[t] - qi[t], 0.0f) : pi[t];
      total += row[t];
    }
    // p == q makes rejection impossible, so an all-zero residual cannot be reached; guard
    // against rounding anyway by falling back to p.
    if (total <= 0.0) std::copy(pi, pi + vocab, row.begin());
    v.bonus = sample_from(row, uniforms.next());
    return v;
  }
  const float* last = p + size_t(K) * vocab;
  v.bonus = sample_from(std::vector<float>(last, last + vocab), uniforms.next());
  return v;
}

}  // namespace

Verdict verify_sampled(const float* p, const float* q, const int32_t* draft, int K, int vocab,
                       UniformStream& uniforms) {
  return verify(p, q, draft, K, vocab, uniforms, true);
}

Verdict verify_biased_for_tests(const float* p, const float* q, const int32_t* draft, int K,
                                int vocab, UniformStream& uniforms) {
  return verify(p, q, draft, K, vocab, uniforms, false);
}

}  // namespace ssd
