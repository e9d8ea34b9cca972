// The draft's half of synthetic outcomes: turning the rank the target drew into a token.
#pragma once

#include <cstdint>
#include <vector>

#include "ssd/verification.h"

namespace ssd {

// Seed modifier of the draws that resolve synthetic bonus ranks: a stream of their own, apart
// from the random backup speculator's (which shares the sequence's spare stream index).
inline constexpr uint64_t kResolveSeed = 0x7265736f6c7665ULL;

// The rank-th (1-based) token of `candidates` once `excluded` (s_{k+1}, or -1) is skipped;
// past the end of the list, a uniformly drawn token that is in neither the list nor excluded
// (its true rank is beyond what was examined, so it must not be a cached candidate).
int32_t resolve_ranked_bonus(const std::vector<int32_t>& candidates, int32_t excluded, int rank,
                             int vocab, UniformStream& uniforms);

}  // namespace ssd
