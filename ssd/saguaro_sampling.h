// SAGUARO sampling (paper §4.2, Definition 14) and the top-candidate selection that the
// speculation cache's bonus-token guesses (Definition 10) are drawn from. Both order tokens the
// same way (descending logit, ties to the lower id) so that the F tokens the draft downweights
// are exactly the F tokens the cache prepares for.
#pragma once

#include <cstdint>
#include <vector>

namespace ssd {

// Definition 14: sigma_{F,C}(z) = softmax(z / temperature) with the probabilities of the
// top-F tokens (by z) multiplied by C, renormalised. C = 1 is plain temperature sampling;
// temperature 0 is greedy (the caller handles it; this function requires temperature > 0 and
// C in [0, 1], else std::invalid_argument). Writes probs (size vocab). F = 0, C = 1 or F >= vocab
// leaves the distribution unchanged (scaling every token by C is no change at all).
void saguaro_distribution(const float* logits, int vocab, double temperature, int top_f, double c,
                          std::vector<float>& probs);

// The top-n token ids of logits in descending order (ties: lower id first), optionally
// excluding one token (exclude = -1 for none). Used to pick the F_k bonus-token candidates
// (excluding s_{k+1}, which can never be the bonus after its own rejection). NaN logits rank
// below every number. Two O(V) passes (block maxima, then the blocks that reach the n-th
// largest of them) and a sort of the few values they keep, in any order of the logits.
std::vector<int32_t> top_tokens(const float* logits, int vocab, int n, int32_t exclude);

}  // namespace ssd
