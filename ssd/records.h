// What a decoding run measures: per-step records and per-repetition totals. The harness turns
// them into console rows and HDF5 datasets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/messages.h"

namespace ssd {

// One batch row in one decode step (or the prefill, step = -1).
struct StepRecord {
  int rep = 0;
  int step = 0;            // decode step within the batch group; -1 for the prefill
  int row = 0;             // row within the batch
  int sequence = 0;        // prompt index
  int tokens = 0;          // tokens this row emitted in this step
  double start_s = 0.0;    // step start, seconds since the run started
  double step_s = 0.0;     // wall time of the whole step (forward, sampling, bookkeeping)
  double forward_s = 0.0;  // of which the forward pass
};

// One sequence in one speculation round (SD; later SSD). Times are seconds; timestamps are on
// the global clock, relative to the run's clock zero.
struct RoundRecord {
  int rep = 0;
  int group = 0;     // batch group
  int round = 0;     // round within the group
  int row = 0;       // batch row
  int sequence = 0;  // prompt index
  int drafted = 0;   // K
  int accepted = 0;  // k accepted by verification
  int32_t bonus = 0;
  int tokens = 0;  // tokens emitted (k + 1, less when EOS or the token limit cut it short)
  // Where this round's speculation came from, as its code in /rounds/source; SD's plain drafts
  // count as primary.
  int source = int(SpeculationSource::Primary);
  // SSD, known once the next speculation arrives: whether this round's outcome (k, bonus) was
  // in the cache built during this round's verification (-1: not looked up, e.g. the
  // sequence ended or SD), the bonus's rank in the draft's list at position k (0: beyond the
  // examined list), that cache's fan-out F_0..F_K, its total branches over all sequences, its
  // total fan-out per sequence (B, /rounds/budget), and how long the build took.
  int outcome_hit = -1;
  int bonus_rank = 0;
  std::vector<int32_t> fanout;
  int fanout_total = 0, branches = 0;
  double cache_build_s = 0.0;
  double fallback_s = 0.0;            // producing this round's speculation after a miss
  double start_s = 0.0, end_s = 0.0;  // the round on the target leader
  double draft_start_s = 0.0, draft_end_s = 0.0;
  double draft_s = 0.0;        // drafting K tokens
  double verify_s = 0.0;       // the target's K+1-token forward pass
  double accept_s = 0.0;       // the verification rule and sampling
  double comm_s = 0.0;         // moving the outcome and the speculation between ranks
  double target_idle_s = 0.0;  // the target waiting for the speculation
  double draft_idle_s = 0.0;   // the draft waiting for the outcome
  int64_t message_bytes = 0;   // outcome + speculation bytes
  int draft_rank = -1;         // the draft rank that served this sequence (-1: collocated)
};

// One draft rank in one speculation round (separate drafts): what it answered and how long it
// built, drafted and waited. Times are seconds on the global clock.
struct DraftRankRecord {
  int rep = 0, group = 0, round = 0;
  int draft_rank = 0;
  int sequences = 0;  // rows it answered for
  double draft_start_s = 0.0, draft_end_s = 0.0;
  double idle_s = 0.0;                 // waiting for the outcome before answering it
  double cache_build_s = 0.0;          // SSD: the cache build that preceded this round
  double fallback_s = 0.0;             // SSD: its fallback drafting in this round
  int branches = 0, fanout_total = 0;  // fanout_total: B per sequence, /draft_ranks/budget
  int64_t message_bytes = 0;
  int forward_passes = 0;  // its draft model's passes since its previous answer (DraftTelemetry)
};

struct RepTotals {
  int rep = 0;
  double prefill_s = 0.0;
  int64_t prefill_tokens = 0;  // prompt tokens processed
  double decode_s = 0.0;       // wall time of decode steps only
  int64_t decode_tokens = 0;   // tokens emitted by decode steps (not the prefill's first token)
  int64_t decode_steps = 0;    // forward steps (AR) or rounds (SD, SSD)
  // Decode tokens per sequence, summed over batch groups: a row's tokens count 1/rows each.
  double per_sequence_decode_tokens = 0.0;
  int64_t generated_tokens = 0;  // everything emitted, first tokens included
  // Speculative modes: sequence-rounds, draft tokens proposed and accepted, time drafting
  // and verifying (per round, not per sequence).
  int64_t rounds = 0, drafted = 0, accepted = 0;
  // The draft's own speculations only (every source but a backup): their sequence-rounds, the
  // tokens accepted of them, and those that stopped at a rejection (k < K); the per-token
  // acceptance's estimate (measured_acceptance, ssd/lookahead.h). A backup's random tokens are
  // (almost) never accepted, and at larger batches Theorem 17 sends many misses to it: counted,
  // they would read as a low acceptance and pull -k auto's K down.
  int64_t draft_rounds = 0, draft_accepted = 0, draft_rejections = 0;
  double draft_s = 0.0, verify_s = 0.0;
  // SSD with draft ranks of its own: the cache builds that ran beside the verifications (per
  // round, the slowest rank's), and their branch rows (all ranks', summed over the builds). With
  // verify_s, what refine_lookahead takes the run's own step costs from.
  double cache_build_s = 0.0, branch_rows = 0.0;
  int64_t cache_builds = 0;
  // The decode's forward passes (prefills excluded) of the target (its leader's: a pass reads
  // the whole model over the TP group) and of the draft (summed over draft ranks, each reading
  // its own copy; a draft rank's build beside a group's last verification, which no round
  // answers, is not counted). Times each model's weight bytes: the decode's weight traffic.
  int64_t target_passes = 0, draft_passes = 0;
  double decode_tokens_per_s() const { return decode_s > 0 ? decode_tokens / decode_s : 0.0; }
  double prefill_tokens_per_s() const { return prefill_s > 0 ? prefill_tokens / prefill_s : 0.0; }
  // Inter-token latency of one sequence: decode wall time per token of one sequence.
  double ms_per_token() const {
    return per_sequence_decode_tokens > 0 ? 1e3 * decode_s / per_sequence_decode_tokens : 0.0;
  }
};

struct RunRecords {
  std::vector<StepRecord> steps;
  std::vector<RoundRecord> rounds;
  std::vector<DraftRankRecord> draft_ranks;
  std::vector<RepTotals> reps;
  // Tokens generated per sequence by the first recorded repetition, without the prompt.
  std::vector<std::vector<int32_t>> generated;
  // Seconds from the run's clock zero to the end of the last recorded repetition: every
  // record's timestamp lies in [0, clock_span_s].
  double clock_span_s = 0.0;
};

}  // namespace ssd
