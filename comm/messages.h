// Typed draft<->target messages (paper, Appendix B.1) and their byte encoding.
//
// Target -> draft, once per batch group: StartMessage (the prompts and sampling settings).
// Draft -> target, once per batch group: ReadyMessage, when the draft has prefilled the prompts
//   (during the target's own prefill, which waits for it: the draft's prefill is prefill, not
//   decoding).
// Target -> draft, once per round: OutcomeMessage, per sequence (sequence id, accepted count
//   k, bonus token, committed length) plus the temperature; `stop` ends the group.
// Draft -> target, once per round: SpeculationMessage, per sequence a cache-hit flag, K
//   tokens and the K draft probability rows verification needs; beside it, in the same
//   message, the draft's DraftTelemetry for the records.
//
// Probability rows are sent as full vocabulary rows of fp32 (K * vocab * 4 bytes per
// sequence: 640 KB for K=5 at a 32k vocabulary) when sampling, and not at all when greedy
// (verification then needs only the tokens). Full rows are exact for any draft distribution,
// Saguaro's reshaped one included; a sparse form would save bytes only when the draft's
// support is small, which plain temperature sampling never gives.
#pragma once

#include <cstdint>
#include <vector>

namespace ssd {

struct StartMessage {
  int32_t group = 0;  // batch group index
  int32_t max_new_tokens = 0;
  int32_t lookahead = 0;  // K
  double temperature = 0.0;
  uint64_t seed = 0;
  bool synthetic = false;             // outcomes are drawn (bonus tokens arrive as ranks)
  std::vector<int32_t> sequence_ids;  // global prompt index of each batch row
  std::vector<std::vector<int32_t>> prompts;
};

struct SequenceOutcome {
  int32_t row = 0;       // batch row
  int32_t accepted = 0;  // k: draft tokens accepted last round
  int32_t bonus = 0;     // the token the target sampled after them; -1: see bonus_rank
  int32_t length = 0;    // tokens committed (prompt + generated) including the bonus
  // Synthetic outcomes: the bonus is the draft's rank-th candidate at position k (1-based,
  // s_{k+1} excluded); the draft resolves it and returns the token with its next speculation.
  int32_t bonus_rank = 0;
  int32_t finishing = 0;  // 1: the sequence ended; resolve its bonus, draft nothing
};

struct OutcomeMessage {
  int32_t round = 0;
  double temperature = 0.0;
  // The target leader's busy time in the previous round (verification and acceptance, from
  // the speculation's arrival to this message): the window SSD's cache build hides in, as
  // the target measured it, free of the draft's polling granularity. 0 when unknown.
  double target_busy_s = 0.0;
  // Sequences of the whole batch still decoding, over every draft rank. With several draft
  // ranks each gets only its own sequences, but a miss on any rank stalls the round for all:
  // this is the b of Corollary 16 and Theorem 17 for the fallback and budget choices.
  int32_t batch_live = 0;
  bool stop = false;  // the batch group is finished; no speculation follows
  std::vector<SequenceOutcome> sequences;
};

// Where a speculation came from (SSD): the speculation cache, or a fallback after a miss.
enum class SpeculationSource : int32_t { Initial = 0, CacheHit = 1, Primary = 2, Backup = 3 };
// "initial,cache_hit,primary,backup": the codes' names in code order, written beside the
// /rounds/source column so analysis/ reads the codes from the file, not from a copy.
const char* speculation_source_names();

struct SequenceSpeculation {
  int32_t row = 0;
  bool cache_hit = false;
  SpeculationSource source = SpeculationSource::Primary;
  // 1-based rank of last round's bonus token in the draft's candidate list at position k
  // (excluding s_{k+1}); 0 when beyond the examined list (SSD; lets analysis compute the hit
  // rate for any fan-out offline, paper Figure 3).
  int32_t bonus_rank = 0;
  std::vector<int32_t> fanout;  // F_0..F_K of the cache this outcome was looked up in
  int32_t resolved_bonus = -1;  // synthetic outcomes: the token last round's rank stood for
  std::vector<int32_t> tokens;  // K draft tokens
  std::vector<float> probs;     // K * vocab draft probabilities, empty when greedy
};

struct SpeculationMessage {
  int32_t round = 0;
  int32_t vocab = 0;
  std::vector<SequenceSpeculation> sequences;
};

// What a draft rank measured while answering an outcome. It is for the records only: no
// decoding decision reads it, so it stays out of SpeculationMessage. It shares the speculation's
// MPI message all the same (TimedSpeculation), so that a round remains one send each way.
struct DraftTelemetry {
  // On the global clock: when the rank started and finished drafting, and how long it had
  // waited for the outcome before.
  double draft_start_s = 0.0, draft_end_s = 0.0, idle_s = 0.0;
  // SSD: the cache build that preceded this round (its time, branches and total fan-out per
  // sequence in force) and the fallback drafting in this round.
  double cache_build_s = 0.0, fallback_s = 0.0;
  int32_t branches = 0, fanout_total = 0;
  // The draft's forward passes since its previous answer (its group's prefill excluded): the
  // cache build beside the last verification and this answer's drafting. Each reads the draft's
  // weights once, which is what SSD's rank costs the node's memory beside the target's passes.
  int32_t forward_passes = 0;
};

// A speculation as a draft rank sends it. A bare SpeculationMessage is sent with a zeroed
// telemetry block, so every Speculation message has one layout (characterize sizes them).
struct TimedSpeculation {
  SpeculationMessage speculation;
  DraftTelemetry telemetry;
};

// A draft rank's answer to StartMessage: it has prefilled the group's prompts.
struct ReadyMessage {
  int32_t group = 0;  // the StartMessage's
};

enum class MessageTag : int { Start = 101, Outcome = 102, Speculation = 103, Ready = 104 };

std::vector<uint8_t> encode(const StartMessage& m);
std::vector<uint8_t> encode(const OutcomeMessage& m);
std::vector<uint8_t> encode(const SpeculationMessage& m);
std::vector<uint8_t> encode(const TimedSpeculation& m);
std::vector<uint8_t> encode(const ReadyMessage& m);
// Throw std::runtime_error on a malformed buffer.
void decode(const std::vector<uint8_t>& bytes, StartMessage& m);
void decode(const std::vector<uint8_t>& bytes, OutcomeMessage& m);
void decode(const std::vector<uint8_t>& bytes, SpeculationMessage& m);  // drops the telemetry
void decode(const std::vector<uint8_t>& bytes, TimedSpeculation& m);
void decode(const std::vector<uint8_t>& bytes, ReadyMessage& m);

}  // namespace ssd
