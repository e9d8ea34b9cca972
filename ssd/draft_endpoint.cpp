#include "ssd/draft_endpoint.h"

#include <algorithm>

#include "comm/clock.h"

namespace ssd {

void LocalDraft::start(const StartMessage& m) {
  drafter_.start(m);
  last_end_ = -1.0;
  passes_mark_ = drafter_.forward_passes();  // the prefill is the group's, not a round's
}

SpeculationMessage LocalDraft::exchange(const OutcomeMessage& m, ExchangeTiming& t) {
  t = ExchangeTiming{};
  DraftTelemetry& d = t.draft;
  d.draft_start_s = global_now();
  SpeculationMessage spec = drafter_.propose(m);
  d.draft_end_s = global_now();
  d.forward_passes = int32_t(drafter_.forward_passes() - passes_mark_);
  passes_mark_ = drafter_.forward_passes();
  t.draft_s = d.draft_end_s - d.draft_start_s;
  // Collocated: the hardware drafts itself, so the target never waits on another rank; the
  // draft sits idle while the target verifies and samples.
  d.idle_s = last_end_ < 0 ? 0.0 : d.draft_start_s - last_end_;
  last_end_ = d.draft_end_s;
  return spec;
}

void ExchangeTiming::merge_ranks(double round_trip_s) {
  // The merge speaks for the whole batch: the last rank to finish sets the draft's times,
  // branches add up, and the total fan-out is the largest any rank used (/draft_ranks and
  // /rounds/draft_rank keep each rank's own). Idle time is the mean over the ranks.
  for (const DraftRankTiming& rank : ranks) {
    const DraftTelemetry& r = rank.telemetry;
    if (&rank == &ranks.front() || r.draft_start_s < draft.draft_start_s)
      draft.draft_start_s = r.draft_start_s;
    draft.draft_end_s = std::max(draft.draft_end_s, r.draft_end_s);
    draft.cache_build_s = std::max(draft.cache_build_s, r.cache_build_s);
    draft.fallback_s = std::max(draft.fallback_s, r.fallback_s);
    draft.branches += r.branches;
    draft.fanout_total = std::max(draft.fanout_total, r.fanout_total);
    draft.forward_passes += r.forward_passes;  // each rank reads its own copy of the weights
    draft.idle_s += r.idle_s;
    draft_s = std::max(draft_s, r.draft_end_s - r.draft_start_s);
    bytes += rank.bytes;
  }
  if (!ranks.empty()) draft.idle_s /= double(ranks.size());
  target_idle_s = round_trip_s;
  // The round trip minus the slowest rank's drafting: messages in flight (the clocks agree to
  // within the start-up offset estimate).
  comm_s = std::max(0.0, round_trip_s - draft_s);
}

void serve_draft_rank(
    PeerLink& link, const std::function<void(const StartMessage&)>& start,
    const std::function<SpeculationMessage(const OutcomeMessage&, DraftTelemetry&)>& respond,
    const std::function<void(double sent_at)>& between_rounds,
    const std::function<int64_t()>& forward_passes) {
  for (;;) {
    StartMessage group;
    link.receive(MessageTag::Start, group);
    if (group.group < 0) break;
    start(group);
    int64_t passes_mark = forward_passes();
    link.send(MessageTag::Ready, ReadyMessage{group.group});
    double idle_since = global_now();
    for (;;) {
      OutcomeMessage outcome;
      link.receive(MessageTag::Outcome, outcome);
      if (outcome.stop) break;
      const double begin = global_now();
      TimedSpeculation reply;
      reply.speculation = respond(outcome, reply.telemetry);
      reply.telemetry.draft_start_s = begin;
      reply.telemetry.draft_end_s = global_now();
      reply.telemetry.idle_s = begin - idle_since;
      reply.telemetry.forward_passes = int32_t(forward_passes() - passes_mark);
      passes_mark = forward_passes();
      link.send(MessageTag::Speculation, reply);
      between_rounds(reply.telemetry.draft_end_s);
      idle_since = global_now();
    }
  }
  link.finish_sends();
}

void serve_draft(PeerLink& link, Drafter& drafter) {
  serve_draft_rank(
      link, [&](const StartMessage& m) { drafter.start(m); },
      [&](const OutcomeMessage& o, DraftTelemetry&) { return drafter.propose(o); }, [](double) {},
      [&] { return drafter.forward_passes(); });
}

}  // namespace ssd
