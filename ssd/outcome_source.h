// OutcomeSource: how the target leader reaches a speculation round's verdicts, the one seam
// between the lossless loop (ssd/speculative.cpp) and synthetic outcomes.
//
// Real verification judges the draft's tokens against the target's logits (paper §2.1): that
// is SD, and nothing else is needed. Synthetic outcomes (--outcomes synthetic:..., a research
// mode, ssd/synthetic_outcome.h) draw the verdict instead, and its bonus is a rank that only
// the draft can turn into a token: the sequence holds a placeholder (-1) until the draft names
// the token with its next speculation, and a sequence that finished on such a bonus still owes
// the draft one more outcome. Those consequences stay behind the hooks below, which real
// verification leaves empty.
#pragma once

#include <memory>
#include <vector>

#include "comm/messages.h"
#include "ssd/decode.h"
#include "ssd/recorder.h"
#include "ssd/sequence_batch.h"
#include "ssd/verification.h"

namespace ssd {

class OutcomeSource {
 public:
  virtual ~OutcomeSource() = default;

  // The verdict on one sequence's K drafts; `logits` are the target's K+1 rows for them.
  virtual Verdict judge(const float* logits, const SequenceSpeculation& sp,
                        UniformStream& uniforms) = 0;

  // Synthetic outcomes only.
  // The verdict's bonus went to `index` of the row's generated tokens (-1: the sequence ended
  // before it).
  virtual void bonus_emitted(int /*row*/, int /*index*/) {}
  // The row's outcome for the draft: the bonus's rank, and whether a finished row is still
  // owed one (its bonus awaits a token).
  virtual void describe(int /*row*/, SequenceOutcome& /*outcome*/) const {}
  virtual bool awaits_token(int /*row*/) const { return false; }
  // The draft's speculation for the row names the token of its awaited bonus.
  virtual void take(const SequenceSpeculation& /*sp*/, SequenceBatch& /*batch*/,
                    Recorder& /*recorder*/) {}
};

// Real verification, or the synthetic draws when s.outcomes.synthetic.
std::unique_ptr<OutcomeSource> make_outcome_source(const DecodeSettings& s, int rows, int vocab);

}  // namespace ssd
