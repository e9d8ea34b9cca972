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

// The random streams of a sequence: the target's token sampling, SD's acceptance tests, and
// (sampling_stream + 2, + 3) the draft's sampling and a spare. Streams depend only on the
// prompt index, so a sequence draws the same numbers whatever batch it is in.
uint64_t sampling_stream(int sequence);
uint64_t acceptance_stream(int sequence);

}  // namespace ssd
