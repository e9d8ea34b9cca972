#include "ssd/sampling.h"

#include <cmath>

namespace ssd {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

double uniform01(uint64_t seed, uint64_t stream, uint64_t counter) {
  const uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ counter);
  return double(h >> 11) * 0x1.0p-53;
}

int32_t argmax(const float* logits, int vocab) {
  int32_t best = 0;
  for (int i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

void softmax(const float* logits, int vocab, double temperature, std::vector<float>& probs) {
  probs.resize(vocab);
  const float max_logit = logits[argmax(logits, vocab)];
  double total = 0.0;
  thread_local std::vector<double> e;  // reused: this runs for every sampled token
  e.resize(vocab);
  for (int i = 0; i < vocab; ++i) {
    e[i] = std::exp((double(logits[i]) - max_logit) / temperature);
    total += e[i];
  }
  for (int i = 0; i < vocab; ++i) probs[i] = float(e[i] / total);
}

int32_t sample_from(const std::vector<float>& probs, double u) {
  double total = 0.0;
  for (float p : probs) total += p;
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

// Four streams per sequence: token sampling, acceptance tests, draft sampling, spare.
uint64_t sampling_stream(int sequence) {
  return 4 * uint64_t(sequence);
}
uint64_t acceptance_stream(int sequence) {
  return 4 * uint64_t(sequence) + 1;
}

}  // namespace ssd
