#include "ssd/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/exp_weights.h"

namespace ssd {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Four streams per sequence, in this order.
enum StreamPurpose : uint64_t { kTargetSampling, kAcceptance, kDraftSampling, kSpare, kPurposes };

uint64_t stream_of(int sequence, StreamPurpose purpose) {
  return kPurposes * uint64_t(sequence) + purpose;
}

}  // namespace

double uniform01(uint64_t seed, uint64_t stream, uint64_t counter) {
  const uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ counter);
  return double(h >> 11) * 0x1.0p-53;
}

int32_t argmax(const float* logits, int vocab) {
  // The first index of the largest value, kept per lane over 16 interleaved lanes in one pass
  // (GCC's vector extension: a scalar running maximum is a dependency chain through every
  // logit, ~20 us at a 32k vocabulary), then across the lanes. A value wins only by being
  // larger, so NaN never does, and a NaN at index 0 wins outright, as in a scalar scan that
  // starts from it.
  constexpr int kLanes = 16;
  using Values = float __attribute__((vector_size(kLanes * sizeof(float))));
  using Indices = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));
  if (vocab <= 0 || std::isnan(logits[0])) return 0;
  Values best, v;
  Indices at, index;
  for (int l = 0; l < kLanes; ++l) best[l] = logits[0], at[l] = 0, index[l] = l;
  int i = 0;
  for (; i + kLanes <= vocab; i += kLanes, index += kLanes) {
    std::memcpy(&v, logits + i, sizeof v);
    const Indices larger = v > best;
    best = larger ? v : best;
    at = larger ? index : at;
  }
  int32_t found = 0;
  float value = logits[0];
  for (int l = 0; l < kLanes; ++l)
    if (best[l] > value || (best[l] == value && at[l] < found)) value = best[l], found = at[l];
  for (; i < vocab; ++i)
    if (logits[i] > value) value = logits[i], found = i;
  return found;
}

void softmax(const float* logits, int vocab, double temperature, std::vector<float>& probs) {
  probs.resize(vocab);
  // Not logits[argmax]: argmax never moves past a NaN at index 0.
  const float max_logit = max_ignoring_nan(logits, vocab);
  if (!(max_logit > -std::numeric_limits<float>::infinity())) {  // every logit -inf or NaN
    std::fill(probs.begin(), probs.end(), 1.0f / float(vocab));
    return;
  }
  const double total =
      exp_weights(logits, vocab, max_logit, float(1.0 / temperature), probs.data());
  if (!(total > 0.0)) {  // a +inf logit: all the mass on the first
    std::fill(probs.begin(), probs.end(), 0.0f);
    probs[size_t(argmax(logits, vocab))] = 1.0f;
    return;
  }
  const float scale = float(1.0 / total);
  for (float& p : probs) p *= scale;
}

int32_t sample_from(const std::vector<float>& probs, double u) {
  const double total = sum_in_double(probs.data(), int(probs.size()));
  const double target = u * total;
  double cumulative = 0.0;
  int32_t last_nonzero = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0f) continue;
    cumulative += probs[i];
    last_nonzero = int32_t(i);
    if (target < cumulative) return int32_t(i);
  }
  return last_nonzero;  // u * total landed on the rounding edge
}

int32_t sample_token(const float* logits, int vocab, double temperature, double u) {
  if (temperature == 0.0) return argmax(logits, vocab);
  thread_local std::vector<float> probs;
  softmax(logits, vocab, temperature, probs);
  return sample_from(probs, u);
}

uint64_t sampling_stream(int sequence) {
  return stream_of(sequence, kTargetSampling);
}
uint64_t acceptance_stream(int sequence) {
  return stream_of(sequence, kAcceptance);
}
uint64_t draft_sampling_stream(int sequence) {
  return stream_of(sequence, kDraftSampling);
}
uint64_t backup_stream(int sequence) {
  return stream_of(sequence, kSpare);
}
uint64_t resolve_stream(int sequence) {
  return stream_of(sequence, kSpare);
}

}  // namespace ssd
