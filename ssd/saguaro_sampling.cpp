#include "ssd/saguaro_sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "kernels/exp_weights.h"

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

// A lower bound on the want-th best logit: split the logits into groups of kChunk, each into
// kLanes interleaved blocks (block l of a group: its elements l, l + kLanes, ...), and take the
// want-th largest block maximum; want blocks each hold a value that large. Interleaved blocks
// make the maxima one vector max per kLanes logits, with no reduction across lanes. -inf when
// there are fewer than want full blocks (a small vocabulary: every logit is a candidate).
float nth_best_lower_bound(const float* logits, int vocab, int want) {
  constexpr int kLanes = 16, kChunk = 64 * kLanes;
  const int groups = vocab / kChunk;
  if (want > groups * kLanes) return -std::numeric_limits<float>::infinity();
  // GCC's vector extension: the compiler left the lanes' maxima as 16 scalar maxes.
  using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));
  std::vector<float> maxima(size_t(groups) * kLanes);
  for (int g = 0; g < groups; ++g) {
    const float* x = logits + size_t(g) * kChunk;
    Lanes lane, v;
    for (int l = 0; l < kLanes; ++l) lane[l] = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < kChunk; i += kLanes) {
      std::memcpy(&v, x + i, sizeof v);
      lane = v > lane ? v : lane;  // NaN never wins
    }
    std::memcpy(maxima.data() + size_t(g) * kLanes, &lane, sizeof lane);
  }
  std::nth_element(maxima.begin(), maxima.begin() + (want - 1), maxima.end(), std::greater<>());
  return maxima[size_t(want - 1)];
}

}  // namespace

std::vector<int32_t> top_tokens(const float* logits, int vocab, int n, int32_t exclude) {
  const bool excluding = exclude >= 0 && exclude < vocab;
  n = std::min(n, vocab - (excluding ? 1 : 0));
  if (n <= 0) return {};
  // Every token at or above a lower bound on the n-th best is a candidate, and the list is the
  // first n of them in the cache's order: two vectorised passes over the row, whatever order
  // its values come in. A running top-n heap with a vectorised threshold test took 2.4x as
  // long on rows that come from the last-level cache, as the build's do
  // (bench/bench_token_selection). One more than n when excluding: the excluded token may be
  // among the n + 1 best.
  const float threshold = nth_best_lower_bound(logits, vocab, n + (excluding ? 1 : 0));
  using Entry = std::pair<float, int32_t>;
  std::vector<Entry> candidates;
  if (threshold == -std::numeric_limits<float>::infinity()) {
    for (int32_t j = 0; j < vocab; ++j)
      if (j != exclude) candidates.emplace_back(key(logits[j]), j);
  } else {  // then NaN and -inf are below n finite values and cannot be in the list
    constexpr int32_t kBlock = 32;
    auto collect = [&](int32_t from, int32_t to) {
      for (int32_t j = from; j < to; ++j)
        if (logits[j] >= threshold && j != exclude) candidates.emplace_back(logits[j], j);
    };
    int32_t i = 0;
    for (; i + kBlock <= vocab; i += kBlock) {
      int any = 0;
      for (int32_t j = i; j < i + kBlock; ++j) any |= logits[j] >= threshold;
      if (any) collect(i, i + kBlock);
    }
    collect(i, vocab);
  }
  const size_t keep = std::min(candidates.size(), size_t(n));
  std::partial_sort(
      candidates.begin(), candidates.begin() + ptrdiff_t(keep), candidates.end(),
      [](const Entry& a, const Entry& b) { return ahead(a.first, a.second, b.first, b.second); });
  std::vector<int32_t> ids(keep);
  for (size_t j = 0; j < keep; ++j) ids[j] = candidates[j].second;
  return ids;
}

void saguaro_distribution(const float* logits, int vocab, double temperature, int top_f, double c,
                          std::vector<float>& probs) {
  if (!(temperature > 0.0))
    throw std::invalid_argument("saguaro_distribution: temperature must be > 0 (0 is greedy)");
  if (!(c >= 0.0 && c <= 1.0))
    throw std::invalid_argument("saguaro_distribution: C must be in [0, 1] (Definition 14)");
  probs.resize(vocab);
  const double inv_t = 1.0 / temperature;
  const double minus_inf = -std::numeric_limits<double>::infinity();
  // Weights exp(z/T - shift), times C on the top-F. The shift is the largest log-weight that
  // keeps mass, so nothing overflows and, at C = 0, the remaining tokens do not underflow just
  // because the removed ones were far above them. Called per drafted token with vocabularies
  // of ~150k, so it makes one selection pass and one exp pass and allocates nothing else.
  bool modify = top_f > 0 && top_f < vocab && c != 1.0;
  const double log_c = c > 0.0 ? std::log(c) : minus_inf;
  std::vector<int32_t> top;
  double shift = minus_inf;
  if (modify) {
    top = top_tokens(logits, vocab, top_f + 1, -1);  // the top-F and the best token after them
    const double rest_max = double(key(logits[top.back()])) * inv_t;
    top.pop_back();
    const double top_max = double(key(logits[top[0]])) * inv_t + log_c;
    shift = std::max(rest_max, top_max);
    // No token keeps any mass (C = 0 and every other logit is -inf): the distribution is
    // undefined, so fall back to the unmodified one.
    if (shift == minus_inf) modify = false;
  }
  if (!modify) {
    shift = double(max_ignoring_nan(logits, vocab)) * inv_t;
    if (shift == minus_inf) {  // every logit is -inf (or NaN): uniform
      std::fill(probs.begin(), probs.end(), 1.0f / float(vocab));
      return;
    }
    top.clear();
  }
  std::sort(top.begin(), top.end());
  top.push_back(vocab);  // sentinel: the last run of plain tokens ends at the vocabulary's end
  // The plain tokens' weights 16 at a time between the top-F (exp_weights: exp((z - shift T) / T),
  // the same exponent), the top-F's one by one with log C added, the total in double.
  double total = 0.0;
  int begin = 0;
  for (int32_t t : top) {
    total += exp_weights(logits + begin, t - begin, float(shift * temperature), float(inv_t),
                         probs.data() + begin);
    if (t == vocab) break;
    const float e =
        c > 0.0 ? std::exp(float(double(key(logits[t])) * inv_t + log_c - shift)) : 0.0f;
    probs[t] = e;
    total += e;
    begin = t + 1;
  }
  const float scale = float(1.0 / total);
  for (float& p : probs) p *= scale;
}

}  // namespace ssd
