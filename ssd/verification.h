// The lossless verification rule of speculative decoding (Leviathan et al. 2023; paper §2.1):
// accept draft token x at position i with probability min(1, p_i(x) / q_i(x)); at the first
// rejection sample the bonus token from norm(max(p_i - q_i, 0)); if all K are accepted,
// sample it from p_{K+1}. Greedy (temperature 0): accept iff x = argmax p_i; bonus = argmax.
#pragma once

#include <cstdint>
#include <vector>

namespace ssd {

// A counter-based stream of uniforms: (seed, stream) name it, counter advances.
struct UniformStream {
  uint64_t seed = 0;
  uint64_t stream = 0;
  uint64_t counter = 0;
  double next();
};

struct Verdict {
  int accepted = 0;   // k, 0..K
  int32_t bonus = 0;  // the token sampled after the accepted prefix
};

// target_logits: K+1 rows of `vocab` logits for positions 1..K+1.
Verdict verify_greedy(const float* target_logits, const int32_t* draft, int K, int vocab);

// p: K+1 rows of target probabilities, q: K rows of the draft probabilities the draft tokens
// were sampled from.
Verdict verify_sampled(const float* p, const float* q, const int32_t* draft, int K, int vocab,
                       UniformStream& uniforms);

// A deliberately wrong rule (accepts with probability min(1, p/q) but samples the bonus from p
// instead of the residual): the negative control of the statistical tests.
Verdict verify_biased_for_tests(const float* p, const float* q, const int32_t* draft, int K,
                                int vocab, UniformStream& uniforms);

}  // namespace ssd
