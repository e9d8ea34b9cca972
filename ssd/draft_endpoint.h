// How the target leader reaches its draft: in-process (collocated: the draft shares the
// target's hardware, as in ordinary SD) or over MPI to a draft rank (separate hardware).
// The SD loop sees only this interface.
#pragma once

#include <functional>

#include "comm/messages.h"
#include "comm/peer_link.h"
#include "ssd/drafter.h"

namespace ssd {

struct ExchangeTiming {
  double draft_start_s = 0.0, draft_end_s = 0.0;  // global clock
  double draft_s = 0.0;
  double comm_s = 0.0;
  double target_idle_s = 0.0;
  double draft_idle_s = 0.0;
  int64_t bytes = 0;
};

class DraftEndpoint {
 public:
  virtual ~DraftEndpoint() = default;
  virtual void start(const StartMessage& m) = 0;
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
};

class RemoteDraft final : public DraftEndpoint {
 public:
  explicit RemoteDraft(PeerLink& link) : link_(link) {}
  void start(const StartMessage& m) override;
  SpeculationMessage exchange(const OutcomeMessage& m, ExchangeTiming& timing) override;
  void finish_group(const OutcomeMessage& stop) override;
  void shutdown() override;

 private:
  PeerLink& link_;
};

// The draft rank's loop, for any drafter: serves batch groups until the target leader shuts
// it down. `start` opens a group, `respond` answers an outcome with a speculation, and
// `between_rounds` (given when the speculation was sent) uses the wait for the next outcome
// (SSD builds its cache there; SD just waits). Idle time is the wait after between_rounds.
void serve_draft_rank(PeerLink& link, const std::function<void(const StartMessage&)>& start,
                      const std::function<SpeculationMessage(const OutcomeMessage&)>& respond,
                      const std::function<void(double sent_at)>& between_rounds);
void serve_draft(PeerLink& link, Drafter& drafter);

}  // namespace ssd
