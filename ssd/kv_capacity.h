// How many KV-cache slots a sequence needs: one rule for every cache, so that the target's, the
// drafters' and the memory preflight's sizes cannot drift apart.
#pragma once

#include <cstdint>

namespace ssd {

// The KV-cache slots a sequence needs: its committed tokens (prompt and every new token) and,
// while it speculates K tokens ahead (K = 0: AR), K + 2 more: a verification writes the newest
// token and K drafts past the committed length, and after a full accept the draft feeds its
// last token as well. Every KV cache is sized by it: the target's, the drafters' and the
// preflight memory check's. (SSD's draft drafts the next speculation on top of the one being
// verified, so its committed part reaches K further: ssd/saguaro_drafter.cpp.)
constexpr int64_t sequence_kv_capacity(int64_t committed, int lookahead) {
  return committed + (lookahead > 0 ? lookahead + 2 : 0);
}

}  // namespace ssd
