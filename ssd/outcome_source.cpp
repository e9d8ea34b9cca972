#include "ssd/outcome_source.h"

#include <algorithm>

#include "ssd/sampling.h"
#include "ssd/synthetic_outcome.h"

namespace ssd {
namespace {

// The verification rule, greedy or sampled (paper §2.1): lossless.
class RealVerification final : public OutcomeSource {
 public:
  RealVerification(int K, int vocab, double temperature)
      : K_(K), vocab_(vocab), temperature_(temperature) {}

  Verdict judge(const float* logits, const SequenceSpeculation& sp,
                UniformStream& uniforms) override {
    if (temperature_ == 0.0) return verify_greedy(logits, sp.tokens.data(), K_, vocab_);
    target_probs_.resize(size_t(K_ + 1) * vocab_);
    for (int j = 0; j <= K_; ++j) {
      softmax(logits + size_t(j) * vocab_, vocab_, temperature_, probs_);
      std::copy(probs_.begin(), probs_.end(), target_probs_.begin() + size_t(j) * vocab_);
    }
    return verify_sampled(target_probs_.data(), sp.probs.data(), sp.tokens.data(), K_, vocab_,
                          uniforms);
  }

 private:
  int K_, vocab_;
  double temperature_;
  std::vector<float> target_probs_, probs_;  // reused across rounds
};

// Drawn verdicts (ssd/synthetic_outcome.h); every forward pass stays real.
class SyntheticOutcomes final : public OutcomeSource {
 public:
  SyntheticOutcomes(const OutcomeModel& model, int K, int rows)
      : model_(model), K_(K), rows_(size_t(rows)) {}

  Verdict judge(const float*, const SequenceSpeculation& sp, UniformStream& uniforms) override {
    return draw_synthetic_verdict(model_, sp.source, K_, uniforms, rows_[size_t(sp.row)].drawn);
  }
  void bonus_emitted(int row, int index) override {
    Pending& p = rows_[size_t(row)];
    if (index < 0) return;
    p.rank = p.drawn;
    p.index = index;
  }
  void describe(int row, SequenceOutcome& outcome) const override {
    const Pending& p = rows_[size_t(row)];
    outcome.bonus_rank = p.index >= 0 ? p.rank : 0;
  }
  bool awaits_token(int row) const override { return rows_[size_t(row)].index >= 0; }
  void take(const SequenceSpeculation& sp, SequenceBatch& batch, Recorder& recorder) override {
    Pending& p = rows_[size_t(sp.row)];
    if (p.index < 0) return;
    batch.replace(sp.row, p.index, sp.resolved_bonus);
    recorder.bonus_resolved(sp.row, sp.resolved_bonus);
    p.index = -1;
  }

 private:
  struct Pending {
    int drawn = 0;   // the rank of the latest verdict's bonus
    int rank = 0;    // the emitted bonus's rank, awaiting its token
    int index = -1;  // its place in the generated tokens; -1 when none awaits
  };
  OutcomeModel model_;
  int K_;
  std::vector<Pending> rows_;
};

}  // namespace

std::unique_ptr<OutcomeSource> make_outcome_source(const DecodeSettings& s, int rows, int vocab) {
  if (s.outcomes.synthetic)
    return std::make_unique<SyntheticOutcomes>(s.outcomes, s.lookahead, rows);
  return std::make_unique<RealVerification>(s.lookahead, vocab, s.limits.temperature);
}

}  // namespace ssd
