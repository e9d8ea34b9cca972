#include "ssd/saguaro_sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

namespace ssd {
namespace {

// NaN compares false with everything, which would make the order inconsistent; rank it last.
inline float key(float v) {
  return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v;
}

// The cache's order: larger logit first, equal logits by lower id.
inline bool ahead(float va, int32_t a, float vb, int32_t b) {
  return va > vb || (va == vb && a < b);
}

// Below this many candidates a sorted buffer with insertion beats a heap or partial sort: the
// scan rejects almost every token with one comparison against the current n-th best.
constexpr int kBufferLimit = 128;

}  // namespace

std::vector<int32_t> top_tokens(const float* logits, int vocab, int n, int32_t exclude) {
  const bool excluding = exclude >= 0 && exclude < vocab;
  n = std::min(n, vocab - (excluding ? 1 : 0));
  if (n <= 0) return {};
  if (n <= kBufferLimit) {
    std::vector<std::pair<float, int32_t>> best;  // sorted by `ahead`
    best.reserve(n + 1);
    for (int32_t i = 0; i < vocab; ++i) {
      if (i == exclude) continue;
      const float v = key(logits[i]);
      // Tokens arrive in increasing id, so a tie with the current n-th best loses.
      if (int(best.size()) == n && !(v > best.back().first)) continue;
      auto at = std::upper_bound(best.begin(), best.end(), v,
                                 [](float x, const std::pair<float, int32_t>& e) {
                                   return x > e.first;  // equal keys keep the earlier id first
                                 });
      best.insert(at, {v, i});
      if (int(best.size()) > n) best.pop_back();
    }
    std::vector<int32_t> ids(best.size());
    for (size_t j = 0; j < best.size(); ++j) ids[j] = best[j].second;
    return ids;
  }
  std::vector<int32_t> ids;
  ids.reserve(vocab);
  for (int32_t i = 0; i < vocab; ++i)
    if (i != exclude) ids.push_back(i);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return ahead(key(logits[a]), a, key(logits[b]), b);
  });
  ids.resize(n);
  return ids;
}

int token_rank(const float* logits, int vocab, int32_t token, int32_t exclude, int limit) {
  if (token < 0 || token >= vocab || token == exclude || limit <= 0) return 0;
  const float v = key(logits[token]);
  int ahead_of_token = 0;
  for (int32_t i = 0; i < vocab; ++i)
    if (i != exclude && ahead(key(logits[i]), i, v, token)) ++ahead_of_token;
  return ahead_of_token < limit ? ahead_of_token + 1 : 0;
}

void saguaro_distribution(const float* logits, int vocab, double temperature, int top_f, double c,
                          std::vector<float>& probs) {
  if (!(temperature > 0.0))
    throw std::invalid_argument("saguaro_distribution: temperature must be > 0 (0 is greedy)");
  if (!(c >= 0.0 && c <= 1.0))
    throw std::invalid_argument("saguaro_distribution: C must be in [0, 1] (Definition 14)");
  probs.resize(vocab);
  // Work with log-weights z/T + log C so that C = 0 removes the top-F tokens exactly and the
  // maximum is taken over the tokens that keep mass (the rest may be far below the top ones).
  // Called per drafted token with vocabularies of ~150k, so the scratch is reused.
  thread_local std::vector<double> w;
  w.resize(vocab);
  for (int i = 0; i < vocab; ++i) w[i] = double(key(logits[i])) / temperature;
  const double minus_inf = -std::numeric_limits<double>::infinity();
  if (top_f > 0 && top_f < vocab && c != 1.0) {
    const double log_c = c > 0.0 ? std::log(c) : minus_inf;
    for (int32_t t : top_tokens(logits, vocab, top_f, -1)) w[t] += log_c;
  }
  double top = *std::max_element(w.begin(), w.end());
  if (top == minus_inf) {
    // No token keeps any mass (C = 0 and every other logit is -inf, or all are -inf): the
    // distribution is undefined, so fall back to the unmodified one, or uniform.
    for (int i = 0; i < vocab; ++i) w[i] = double(key(logits[i])) / temperature;
    top = *std::max_element(w.begin(), w.end());
    if (top == minus_inf) std::fill(w.begin(), w.end(), top = 0.0);
  }
  double total = 0.0;
  for (int i = 0; i < vocab; ++i) {
    w[i] = std::exp(w[i] - top);
    total += w[i];
  }
  for (int i = 0; i < vocab; ++i) probs[i] = float(w[i] / total);
}

}  // namespace ssd
