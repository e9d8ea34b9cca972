// Synthetic outcomes (--outcomes synthetic:...): the target's half draws a verification's
// outcome instead of judging the draft against the target's logits; the draft's half turns
// the rank the target drew into a token.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/messages.h"
#include "ssd/verification.h"

namespace ssd {

// --outcomes synthetic:alpha=A,r=R[,r_all=RA,alpha_b=AB,r_b=RB] (the CMU proposal's synthetic
// acceptance): every forward pass stays real, only the verification outcome is drawn, per the
// source of the speculation being verified. A speculation drafted by the primary (first round,
// cache hit, just-in-time fallback) has each token accepted with probability A until the first
// rejection, and its bonus token is the draft's rank-j candidate at position k with
// P(rank > F) = (F+1)^(-R) (the paper's power law, Definition 11, shifted so that an empty
// cache always misses; see ssd/fanout.h). With every one of the K tokens accepted the bonus is
// drawn with RA instead (default R): Theorem 18's second curve, the bonus then being the
// target's own next token rather than a residual's, which the draft ranks far better (the
// Qwen pair's fitted r: 2.94 after all K against 2.80 after a rejection at T = 0, 1.53-2.17
// against 0.70-1.44 at T = 1). A backup speculation (SSD's fallback) uses AB and RB
// instead: a uniformly random token is accepted with probability about 1/vocab, so AB = 0 for
// --backup random unless given; an n-gram backup's acceptance depends on the text and must be
// given. After a backup round the bonus is the target's own next token rather than a residual,
// which the draft's top candidate matches about as often as it would be accepted, so RB
// defaults to log2(1 / (1 - A)): P(rank <= 1) = A.
struct OutcomeModel {
  bool synthetic = false;
  double alpha = 0.8;
  double r = 1.0;
  double r_all = 1.0;  // the primary's bonus after all K accepted (parse: R unless given)
  double alpha_backup = 0.0;
  double r_backup = 1.0;
};

// The target's half: k accepted of K, and the bonus as a rank (returned in `rank`; the
// verdict's bonus is -1 until the draft names the token). The backup's law applies only to the
// backup's own speculations: a cache hit or a just-in-time draft was drafted by the primary,
// whatever came before.
Verdict draw_synthetic_verdict(const OutcomeModel& model, SpeculationSource source, int K,
                               UniformStream& uniforms, int& rank);

// Seed modifier of the draws that resolve synthetic bonus ranks: a stream of their own, apart
// from the random backup speculator's (which shares the sequence's spare stream index).
inline constexpr uint64_t kResolveSeed = 0x7265736f6c7665ULL;

// The rank-th (1-based) token of `candidates` once `excluded` (s_{k+1}, or -1) is skipped;
// past the end of the list, a uniformly drawn token that is in neither the list nor excluded
// (its true rank is beyond what was examined, so it must not be a cached candidate).
int32_t resolve_ranked_bonus(const std::vector<int32_t>& candidates, int32_t excluded, int rank,
                             int vocab, UniformStream& uniforms);

}  // namespace ssd
