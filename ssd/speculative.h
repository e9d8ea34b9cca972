// Speculative decoding (SD, paper §2.1) on the target leader: each round the draft proposes K
// tokens per sequence, the target verifies all K+1 positions in one forward pass and keeps
// the accepted prefix plus a bonus token. Lossless: the output distribution is the target's,
// and greedy output equals AR's token for token.
#pragma once

#include "ssd/autoregressive.h"
#include "ssd/draft_endpoint.h"
#include "ssd/model_group.h"
#include "ssd/records.h"

namespace ssd {

// --outcomes synthetic:alpha=A,r=R[,alpha_b=AB,r_b=RB] (the CMU proposal's synthetic
// acceptance): every forward pass stays real, only the verification outcome is drawn, per the
// source of the speculation being verified. A speculation drafted by the primary (first round,
// cache hit, just-in-time fallback) has each token accepted with probability A until the first
// rejection, and its bonus token is the draft's rank-j candidate at position k with
// P(rank > F) = (F+1)^(-R) (the paper's power law, Definition 11, shifted so that an empty
// cache always misses; see ssd/fanout.h). A backup speculation (SSD's fallback) uses AB and RB
// instead: a uniformly random token is accepted with probability about 1/vocab, so AB = 0 for
// --backup random unless given; an n-gram backup's acceptance depends on the text and must be
// given. After a backup round the bonus is the target's own next token rather than a residual,
// which the draft's top candidate matches about as often as it would be accepted, so RB
// defaults to log2(1 / (1 - A)): P(rank <= 1) = A.
struct OutcomeModel {
  bool synthetic = false;
  double alpha = 0.8;
  double r = 1.0;
  double alpha_backup = 0.0;
  double r_backup = 1.0;
};

struct SpeculativeSettings {
  DecodeSettings decode;
  int lookahead = 4;  // K
  OutcomeModel outcomes;
};

// One repetition over all prompts, batch_size at a time. Appends step records (the prefill)
// and round records when `records` is given; returns the rep's totals.
RepTotals run_speculative(ModelGroup& target, DraftEndpoint& draft,
                          const std::vector<std::vector<int32_t>>& prompts,
                          const SpeculativeSettings& settings, int rep, double clock_zero,
                          RunRecords* records, std::vector<std::vector<int32_t>>& generated);

}  // namespace ssd
