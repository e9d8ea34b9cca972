// How the target leader reaches its draft: in-process (collocated: the draft shares the
// target's hardware, as in ordinary SD) or over MPI to a draft rank (separate hardware).
// The SD loop sees only this interface.
#pragma once

#include <functional>
#include <vector>

#include "comm/messages.h"
#include "comm/peer_link.h"
#include "ssd/drafter.h"

namespace ssd {

// One draft rank's part in one exchange (separate drafts; one entry per rank that served).
struct DraftRankTiming {
  int draft_rank = 0;
  int sequences = 0;         // batch rows it answered for
  DraftTelemetry telemetry;  // its own report
  int64_t bytes = 0;         // its outcome + speculation
};

// The draft's side of one round as the records see it, beside the speculation an exchange
// returns. Decoding never reads it.
struct ExchangeTiming {
  // The whole draft's telemetry: with several ranks, their merge (merge_ranks).
  DraftTelemetry draft;
  double draft_s = 0.0;
  double comm_s = 0.0;
  double target_idle_s = 0.0;
  int64_t bytes = 0;
  std::vector<DraftRankTiming> ranks;  // separate drafts: every draft rank that served
  std::vector<int> row_draft_rank;     // the draft rank that serves each batch row (-1: none)

  // Sets everything above `ranks` from the ranks' own reports and the target's `round_trip_s`
  // from sending the outcome to holding every speculation.
  void merge_ranks(double round_trip_s);
};

class DraftEndpoint {
 public:
  virtual ~DraftEndpoint() = default;
  // A batch group opens with the target's prefill, and the draft's prefill of the same prompts
  // belongs to it, not to the first round's decoding (where it cost SD and SSD 3-20% of the
  // Qwen pair's decode time at b = 1-16). start: in process, the draft prefills before it
  // returns; draft ranks begin theirs beside the target's. wait_ready: returns once every draft
  // rank has prefilled (in process: at once).
  virtual void start(const StartMessage& m) = 0;
  virtual void wait_ready() {}
  virtual SpeculationMessage exchange(const OutcomeMessage& m, ExchangeTiming& timing) = 0;
  virtual void finish_group(const OutcomeMessage& stop) = 0;
  virtual void shutdown() = 0;
};

class LocalDraft final : public DraftEndpoint {
 public:
  explicit LocalDraft(Drafter& drafter) : drafter_(drafter) {}
  void start(const StartMessage& m) override;
  SpeculationMessage exchange(const OutcomeMessage& m, ExchangeTiming& timing) override;
  void finish_group(const OutcomeMessage&) override {}
  void shutdown() override {}

 private:
  Drafter& drafter_;
  double last_end_ = -1.0;
  int64_t passes_mark_ = 0;  // the draft's forward passes at the last answer (or prefill)
};

// Draft ranks on their own hardware. With D ranks the batch's sequences are partitioned:
// row r is served by draft rank r % D as its local row r / D, so each rank drafts, builds its
// speculation cache and falls back for b/D sequences, and in SSD can spend its verification
// window on a D times larger fan-out per sequence. Each rank keeps its sequences for the
// whole batch group (their K/V caches live there). A rank with no sequences in a group (more
// ranks than rows) gets no start message and idles until the next group. The draft's
// randomness is keyed by sequence, not by rank, so any D gives the same tokens.
class RemoteDraft final : public DraftEndpoint {
 public:
  explicit RemoteDraft(std::vector<PeerLink*> links) : links_(std::move(links)) {}
  void start(const StartMessage& m) override;
  void wait_ready() override;
  SpeculationMessage exchange(const OutcomeMessage& m, ExchangeTiming& timing) override;
  void finish_group(const OutcomeMessage& stop) override;
  void shutdown() override;

 private:
  int ranks() const { return int(links_.size()); }
  // Sends each draft rank its rows of the outcome; returns the ranks that got any.
  std::vector<int> send_outcome(const OutcomeMessage& m);
  std::vector<PeerLink*> links_;
  std::vector<bool> in_group_;  // ranks given sequences in the current batch group
  int rows_ = 0;
};

// The draft rank's loop, for any drafter: serves batch groups until the target leader shuts
// it down. `start` opens a group (and prefills its prompts: the loop then tells the target it
// is ready), `respond` answers an outcome with a speculation (and may
// report its cache and fallback in the telemetry; the loop adds the times), and
// `between_rounds` (given when the speculation was sent) uses the wait for the next outcome
// (SSD builds its cache there; SD just waits). Idle time is the wait after between_rounds.
// `forward_passes` reads the draft model's pass count (ModelGroup::forward_passes): each answer
// reports the passes since the previous one, or since the group's prefill.
void serve_draft_rank(
    PeerLink& link, const std::function<void(const StartMessage&)>& start,
    const std::function<SpeculationMessage(const OutcomeMessage&, DraftTelemetry&)>& respond,
    const std::function<void(double sent_at)>& between_rounds,
    const std::function<int64_t()>& forward_passes);
void serve_draft(PeerLink& link, Drafter& drafter);

}  // namespace ssd
