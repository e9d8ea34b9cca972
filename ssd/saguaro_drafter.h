// SaguaroDrafter: the draft rank of speculative speculative decoding (paper §3-4, Algorithm 1).
// After sending speculation s^T it builds the speculation cache for round T+1 while the target
// verifies: for every sequence and every k in 0..K it guesses the F_k likeliest bonus tokens
// (Theorem 12's fan-out) and drafts K tokens after each in one batched forward per step, every
// branch attending to the committed prefix, s_1..s_k and its own path (Figure 8). When the
// outcome (k, t) arrives, a hit returns the cached speculation at once; a miss falls back to
// the primary (just-in-time drafting) or a backup speculator (Theorem 17). The primary is SD's
// Drafter; this class adds the cache, the backup and the choice between them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "comm/messages.h"
#include "comm/peer_link.h"
#include "ssd/backup_speculator.h"
#include "ssd/budget.h"
#include "ssd/drafter.h"
#include "ssd/fallback.h"
#include "ssd/fanout.h"
#include "ssd/fanout_estimator.h"
#include "ssd/model_group.h"
#include "ssd/speculation_meter.h"
#include "ssd/step_cost.h"

namespace ssd {

// What SAGUARO sampling down-weighted and what the cache then prepared for, per speculation
// (tests: Definition 14's set and the cached set must be the same tokens). Filled only when
// SaguaroSettings::trace is set: it costs a top-F selection per sampled token.
struct SaguaroTrace {
  struct Sampled {
    int64_t spec = 0;                   // which speculation (a just-in-time draft or a branch)
    int k = 0;                          // the token drafted at position k + 1, i.e. s_{k+1}
    std::vector<int32_t> downweighted;  // top-F_k of the draft's logits there
    int32_t token = 0;                  // s_{k+1}
  };
  struct Cached {
    int64_t spec = 0;
    int k = 0;
    std::vector<int32_t> roots;  // the bonus tokens prepared for k accepted
  };
  std::vector<Sampled> sampled;
  std::vector<Cached> cached;
};

struct SaguaroSettings {
  double draft_temperature = 0.0;  // 0 = greedy drafting
  uint64_t seed = 0;
  FanoutSpec fanout;         // primary shape (after a primary-drafted round)
  FanoutSpec backup_fanout;  // shape after a backup-drafted round
  double alpha = -1.0;       // acceptance for geometric fan-out; < 0 = estimate
  double r = -1.0;           // power-law exponent; < 0 = estimate
  // The --budget setting: a fixed total fan-out per sequence, or 0 = auto (ssd/budget.h picks
  // one each round, up to kMaxAutoBudget). Not the number itself (a cache's fanout_total,
  // B = sum F_k) nor the verification window's limit (window_fanout_limit, ssd/fanout.h).
  int budget_setting = 0;
  double saguaro_c = 1.0;  // Definition 14's C
  FallbackMode fallback = FallbackMode::Auto;
  BackupKind backup = BackupKind::Random;
  SaguaroTrace* trace = nullptr;  // tests only
};

class SaguaroDrafter {
 public:
  SaguaroDrafter(ModelGroup& draft, const SaguaroSettings& settings);

  void start(const StartMessage& m);
  // Answers an outcome: cache hits at once, misses through the fallback. Reports the cache
  // this outcome was looked up in and the fallback's time in `telemetry` (its other fields
  // are left alone).
  SpeculationMessage respond(const OutcomeMessage& outcome, DraftTelemetry& telemetry);
  // Builds the cache for the next round; polls `link` between steps only to time the
  // verification window (the outcome is received by the caller afterwards).
  void build_cache(PeerLink& link, double speculation_sent_at);
  // What it has measured of its own speculations (Theorem 17's and --budget auto's inputs).
  const SpeculationMeter& meter() const { return meter_; }
  int64_t forward_passes() const { return draft_.forward_passes(); }

 private:
  using Sequence = Drafter::Sequence;
  struct Branch {
    int k = 0;
    int32_t root = 0;                         // the guessed bonus token t
    int64_t id = 0;                           // as a speculation, if it is hit
    int base_slot = 0;                        // scratch slots of t, b_1 .. b_{K-1}
    std::vector<int32_t> tokens;              // b_1..b_K
    std::vector<float> probs;                 // K rows, when the target samples
    std::vector<std::vector<int32_t>> lists;  // top candidates of each b_i's distribution
  };
  // What SSD keeps per sequence beside the primary's Sequence (committed tokens, the
  // speculation being verified, its candidate lists, the random draws).
  struct Row {
    SpeculationSource source = SpeculationSource::Initial;
    int64_t spec_id = 0;
    // F_0..F_K of the spec being verified: chosen once, before its tokens were sampled, so
    // that SAGUARO sampling down-weights exactly the tokens its cache will prepare for.
    std::vector<int32_t> fanout;
    std::vector<int32_t> branch_fanout;  // the same for the branches being built
    // Bonus tokens the cache actually prepared at each k (Definition 10's fan-out): the
    // shape's F_k, less one where s_{k+1} was among SAGUARO's down-weighted F_k, less any
    // that did not fit the scratch slots.
    std::vector<int32_t> prepared;
    std::map<std::pair<int, int32_t>, int> cache;  // (k, t) -> branch
    std::vector<Branch> branches;
    bool active = true;
  };

  // respond(), per outcome: commits k accepted and the bonus (measuring its rank and the
  // speculator's acceptance); returns the bonus.
  int32_t commit_outcome(Row& row, const SequenceOutcome& o, SequenceSpeculation& out);
  // A hit: the cached branch becomes the speculation, its K/V moved behind the accepted prefix.
  void take_branch(Row& row, int r, int committed_before, Branch& branch, SequenceSpeculation& out);
  // Cache misses: the whole batch waits for them, so Theorem 17 picks the speculator at the
  // batch's size (batch_live_).
  // Returns the seconds it took.
  double fall_back(const std::vector<int>& misses, const std::vector<int>& slots,
                   SpeculationMessage& spec);
  // Drafts K tokens just in time for `rows` (primary fallback and the first round).
  void draft_primary(const std::vector<int>& rows, SpeculationMessage& spec,
                     const std::vector<int>& slots);
  void draft_backup(const std::vector<int>& rows, SpeculationMessage& spec,
                    const std::vector<int>& slots);
  // The primary's token at one position, drawn from Definition 14's sigma_{F,C}.
  int32_t sample(Sequence& seq, const float* logits, int fanout_here, std::vector<float>* probs_out,
                 int64_t spec, int k);
  // The fan-out shape for a speculation drafted by `source` (the backup's shape after a backup
  // round, the primary's otherwise) at the current total fan-out and (a, r) estimates.
  std::vector<int32_t> shape_for(SpeculationSource source) const;
  // True when Definition 14 down-weights anything: a sampling draft with C < 1.
  bool saguaro_downweights() const { return s_.draft_temperature > 0 && s_.saguaro_c < 1.0; }
  // The total fan-out per sequence in force: the fixed --budget, else auto's latest choice.
  int current_fanout_total() const;
  // --budget auto: the total fan-out of highest predicted rate (ssd/budget.h) for `rows`
  // sequences, from this run's measurements so far; once per round, before the cache is built.
  // rows: this rank's sequences (their branches are its build); batch: the whole batch's
  // live sequences, whose misses stall the round together (OutcomeMessage::batch_live).
  void choose_auto_budget(int rows, int batch);
  // The cache build's parts (saguaro_cache.cpp): the glue step, the branches to prepare, and
  // their K batched draft steps.
  void glue(const std::vector<int>& rows);
  struct BranchRef {
    int row, branch;
  };
  std::vector<BranchRef> prepare_branches(const std::vector<int>& rows);
  void draft_branches(const std::vector<BranchRef>& refs, const std::function<void()>& poll);

  ModelGroup& draft_;
  SaguaroSettings s_;
  int vocab_ = 0;
  int list_limit_ = 64;  // candidates examined per position (ranks beyond count as 0)
  // SD's drafter: the committed sequences, just-in-time drafting and the random draws.
  Drafter primary_;
  std::vector<Row> rows_;
  int64_t next_spec_id_ = 1;
  int scratch_begin_ = 0;  // first scratch slot offset past len + K
  int capacity_ = 0;
  // The estimators: (a, r) per speculator (Theorem 12's inputs), Theorem 17's measurements,
  // and the branch-step cost for --budget auto.
  FanoutEstimator primary_stats_, backup_stats_;
  SpeculationMeter meter_;
  StepCostCurve step_cost_;
  FallbackPolicy policy_;
  double glue_s_ = 0.0;
  int auto_fanout_total_ = -1;  // --budget auto's choice; < 0 until the first start
  int zero_budget_rounds_ = 0;  // rounds in a row that --budget auto chose 0 (probe_zero_budget)
  int learned_lookahead_ = -1;  // the K that meter_, the estimators and the budget learned at
  // The last cache build, reported with the next speculation.
  double last_build_s_ = 0.0;
  int last_branches_ = 0, last_fanout_total_ = 0;
  int batch_live_ = 1;  // last outcome's batch_live (this rank's live rows if it was 0)
  // The verification window in progress: when the speculation went out, when the outcome was
  // first seen waiting (-1: not yet).
  double window_started_at_ = -1.0, arrival_seen_at_ = -1.0;
  std::vector<float> logits_, probs_;
};

// The draft rank's loop for --mode ssd: answer each outcome, then build the next cache.
void serve_saguaro(PeerLink& link, SaguaroDrafter& drafter);

}  // namespace ssd
