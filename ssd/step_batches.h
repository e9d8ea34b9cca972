// The forward batches that characterize and -k auto's calibration (harness/calibrate.h) time,
// built as the decoding loops build theirs: a prefill, a causal step of m tokens per sequence (AR
// step, verification, glue, the cost curve) and SSD's branch-masked branch step.
#pragma once

#include <cstdint>

#include "ssd/model_group.h"

namespace ssd {

// Deterministic token ids spread over the vocabulary.
int32_t token_at(int64_t i, int vocab);

// A fresh cache whose `sequences` sequences hold `context` committed tokens each.
void prefill(ModelGroup& g, int sequences, int context, int capacity);

// `per_sequence` new tokens after each sequence's context, every one's logits wanted when
// all_logits (verification, glue), else the last (a decode step).
ForwardBatch causal_step(int sequences, int context, int per_sequence, int vocab, bool all_logits);

// The first of SSD's K branch steps over `rows` branches (SaguaroDrafter::build_cache): branch
// j of sequence s guesses the bonus token after k = j mod (K+1) accepted draft tokens, sits at
// position context + k in its own scratch slot, and sees the committed prefix, the speculation's
// first k slots and its own slot (paper Figure 8).
ForwardBatch branch_step(int sequences, int context, int K, int rows, int scratch, int vocab);

}  // namespace ssd
