// The decode core: one repetition of a decoding algorithm over all prompts, batch_size at a
// time. Every batch group is a SequenceBatch, prefilled the same way (so greedy SD and SSD
// reproduce AR from the first token on); then AR, the case without a draft, emits one token
// per step, and SD/SSD run speculation rounds against a draft endpoint. Records and totals go
// to the Recorder.
#pragma once

#include "ssd/draft_endpoint.h"
#include "ssd/model_group.h"
#include "ssd/recorder.h"
#include "ssd/sequence_batch.h"
#include "ssd/synthetic_outcome.h"

namespace ssd {

struct DecodeSettings {
  SequenceLimits limits;
  int batch_size = 1;
  int lookahead = 4;      // K (SD, SSD)
  OutcomeModel outcomes;  // real verification unless synthetic (SD, SSD)
};

// The KV-cache slots a sequence needs: one rule for every cache, so that the target's, the
// drafters' and the memory preflight's sizes cannot drift apart. Its committed tokens (prompt
// and every new token) and, while it speculates K tokens ahead (K = 0: AR), K + 2 more: a
// verification writes the newest token and K drafts past the committed length, and after a
// full accept the draft feeds its last token as well. (SSD's draft drafts the next speculation
// on top of the one being verified, so its committed part reaches K further:
// ssd/saguaro_drafter.cpp.)
constexpr int64_t sequence_kv_capacity(int64_t committed, int lookahead) {
  return committed + (lookahead > 0 ? lookahead + 2 : 0);
}

// `draft` null: autoregressive decoding. Fills `generated` (one list per prompt) and returns
// the repetition's totals.
RepTotals decode_repetition(ModelGroup& target, DraftEndpoint* draft, const TokenLists& prompts,
                            const DecodeSettings& settings, Recorder& recorder,
                            TokenLists& generated);

// One batch group after its prefill: AR steps until every row is done.
void decode_group_autoregressive(ModelGroup& target, SequenceBatch& batch, Recorder& recorder);

// What the draft is told when a batch group opens: its prompts and the decoding settings.
StartMessage start_message(const SequenceBatch& batch, int group, const DecodeSettings& settings);

// One batch group after its prefill (the draft's too: DraftEndpoint::start and wait_ready):
// speculation rounds (paper §2.1) until every row is done. Each round the draft proposes K
// tokens per sequence, the target verifies all K+1 positions in one forward pass and keeps the
// accepted prefix plus a bonus token. Lossless: the output distribution is the target's, and
// greedy output equals AR's token for token.
void decode_group_speculative(ModelGroup& target, DraftEndpoint& draft, SequenceBatch& batch,
                              const DecodeSettings& settings, Recorder& recorder);

}  // namespace ssd
