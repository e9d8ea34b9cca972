#include "ssd/draft_endpoint.h"

#include "comm/clock.h"

namespace ssd {

void LocalDraft::start(const StartMessage& m) {
  drafter_.start(m);
  last_end_ = -1.0;
}

SpeculationMessage LocalDraft::exchange(const OutcomeMessage& m, ExchangeTiming& t) {
  t = ExchangeTiming{};
  t.draft_start_s = global_now();
  SpeculationMessage spec = drafter_.propose(m);
  t.draft_end_s = global_now();
  t.draft_s = t.draft_end_s - t.draft_start_s;
  // Collocated: the hardware drafts itself, so the target never waits on another rank; the
  // draft sits idle while the target verifies and samples.
  t.draft_idle_s = last_end_ < 0 ? 0.0 : t.draft_start_s - last_end_;
  last_end_ = t.draft_end_s;
  return spec;
}

void serve_draft_rank(PeerLink& link, const std::function<void(const StartMessage&)>& start,
                      const std::function<SpeculationMessage(const OutcomeMessage&)>& respond,
                      const std::function<void(double sent_at)>& between_rounds) {
  for (;;) {
    StartMessage group;
    link.receive(MessageTag::Start, group);
    if (group.group < 0) break;
    start(group);
    double idle_since = global_now();
    for (;;) {
      OutcomeMessage outcome;
      link.receive(MessageTag::Outcome, outcome);
      if (outcome.stop) break;
      const double begin = global_now();
      SpeculationMessage spec = respond(outcome);
      spec.draft_start_s = begin;
      spec.draft_end_s = global_now();
      spec.draft_idle_s = begin - idle_since;
      link.send(MessageTag::Speculation, spec);
      between_rounds(spec.draft_end_s);
      idle_since = global_now();
    }
  }
  link.finish_sends();
}

void serve_draft(PeerLink& link, Drafter& drafter) {
  serve_draft_rank(
      link, [&](const StartMessage& m) { drafter.start(m); },
      [&](const OutcomeMessage& o) { return drafter.propose(o); }, [](double) {});
}

}  // namespace ssd
