// The primary drafter's step loop and the pieces both drafters share (SD's Drafter and SSD's
// SaguaroDrafter, which drafts just in time with it on a cache miss and in the first round).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ssd/model_group.h"
#include "ssd/verification.h"

namespace ssd {

// A sequence about to be drafted: its cache row, committed tokens, and how many of them are
// already in the draft's cache.
struct DraftInput {
  int row = 0;
  const std::vector<int32_t>* committed = nullptr;
  int cached = 0;
};

// Chooses row i's token at `step` from the draft's logits there (greedy, sampled, SAGUARO),
// keeping whatever else the caller needs (probabilities, candidate lists).
using PickToken = std::function<int32_t(size_t i, int step, const float* logits)>;

// K batched forward steps over `rows`: step 0 feeds every committed token not yet cached (the
// bonus; after a full accept the last draft token too; the whole prompt in the first round),
// step j the token picked at step j-1. Returns the K tokens of each row. The draft's cache then
// holds every committed token and the first K-1 drafts of each row.
std::vector<std::vector<int32_t>> draft_k_tokens(ModelGroup& draft,
                                                 const std::vector<DraftInput>& rows, int K,
                                                 const PickToken& pick, std::vector<float>& logits);

// A greedy draft's distribution is one-hot on its token; a sampling target needs that row to
// verify against (paper §2.1), appended to `probs`.
void append_one_hot(std::vector<float>& probs, int vocab, int32_t token);

// Synthetic outcomes: the bonus the target drew as a rank, named from the draft's candidate
// list at position k (s_{k+1} = `excluded` skipped), with the sequence's own resolving stream
// (`draws` is its counter).
int32_t resolve_synthetic_bonus(uint64_t seed, int sequence, uint64_t& draws,
                                const std::vector<int32_t>& candidates, int32_t excluded, int rank,
                                int vocab);

}  // namespace ssd
