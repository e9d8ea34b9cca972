// Token sampling: greedy argmax and seeded temperature sampling with a counter-based random
// stream, so a sequence's draws do not depend on which other sequences share its batch.
#pragma once

#include <cstdint>
#include <vector>

namespace ssd {

// A uniform double in [0, 1) that is a pure function of (seed, stream, counter).
double uniform01(uint64_t seed, uint64_t stream, uint64_t counter);

// Index of the largest logit; ties go to the lowest index.
int32_t argmax(const float* logits, int vocab);

// probs = softmax(logits / temperature) in float (kernels/exp_weights.h), normalised in double;
// NaN logits weigh 0, and a row without a finite logit gives the uniform distribution.
void softmax(const float* logits, int vocab, double temperature, std::vector<float>& probs);

// Inverse-CDF draw from a probability vector given u in [0, 1).
int32_t sample_from(const std::vector<float>& probs, double u);

// Greedy when temperature == 0, else a draw from softmax(logits / temperature).
int32_t sample_token(const float* logits, int vocab, double temperature, double u);

// The random streams of a sequence, one function per purpose. They depend only on the prompt
// index, so a sequence draws the same numbers whatever batch or draft rank it is in; their
// numbers are part of every sampled output, so they never change.
uint64_t sampling_stream(int sequence);        // the target's token sampling
uint64_t acceptance_stream(int sequence);      // the target's acceptance tests
uint64_t draft_sampling_stream(int sequence);  // the draft's sampled tokens
// Two features share the fourth stream and are told apart by their seed: the random backup
// speculator draws with the run's seed, the resolution of synthetic bonus ranks with the seed
// xor kResolveSeed (ssd/synthetic_outcome.h).
uint64_t backup_stream(int sequence);
uint64_t resolve_stream(int sequence);

}  // namespace ssd
