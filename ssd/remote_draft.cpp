// RemoteDraft: the target leader's side of D >= 1 draft ranks (ssd/draft_endpoint.h). Each
// exchange splits the outcome by row, sends every rank its part at once (non-blocking), then
// collects the speculations and merges them back into batch rows. The round waits for the
// slowest rank: that is the draft's critical path.
#include <algorithm>

#include "comm/clock.h"
#include "ssd/draft_endpoint.h"

namespace ssd {

void RemoteDraft::start(const StartMessage& m) {
  rows_ = int(m.prompts.size());
  in_group_.assign(size_t(ranks()), false);
  std::vector<StartMessage> parts(links_.size());
  for (int d = 0; d < ranks(); ++d) {
    StartMessage& part = parts[size_t(d)];
    part = m;
    part.sequence_ids.clear();
    part.prompts.clear();
    for (int r = d; r < rows_; r += ranks()) {
      part.sequence_ids.push_back(m.sequence_ids[size_t(r)]);
      part.prompts.push_back(m.prompts[size_t(r)]);
    }
    in_group_[size_t(d)] = !part.prompts.empty();
    if (in_group_[size_t(d)]) links_[size_t(d)]->send(MessageTag::Start, part);
  }
}

void RemoteDraft::wait_ready() {
  for (int d = 0; d < ranks(); ++d) {
    if (!in_group_[size_t(d)]) continue;
    ReadyMessage ready;
    links_[size_t(d)]->receive(MessageTag::Ready, ready);
  }
}

std::vector<int> RemoteDraft::send_outcome(const OutcomeMessage& m) {
  const int D = ranks();
  std::vector<OutcomeMessage> parts(links_.size());
  for (OutcomeMessage& part : parts) {
    part = m;
    part.sequences.clear();
  }
  for (SequenceOutcome o : m.sequences) {  // global row r -> rank r % D, local row r / D
    const int d = o.row % D;
    o.row /= D;
    parts[size_t(d)].sequences.push_back(o);
  }
  std::vector<int> serving;
  for (int d = 0; d < D; ++d) {
    if (parts[size_t(d)].sequences.empty()) continue;  // its sequences have all finished
    links_[size_t(d)]->send(MessageTag::Outcome, parts[size_t(d)]);
    serving.push_back(d);
  }
  return serving;
}

SpeculationMessage RemoteDraft::exchange(const OutcomeMessage& m, ExchangeTiming& t) {
  t = ExchangeTiming{};
  const int D = ranks();
  const double begin = global_now();
  const std::vector<int> serving = send_outcome(m);
  SpeculationMessage merged;
  merged.round = m.round;
  t.row_draft_rank.assign(size_t(rows_), -1);
  for (int d : serving) {
    PeerLink& link = *links_[size_t(d)];
    const int64_t sent = link.last_sent_bytes();
    TimedSpeculation reply;
    link.receive(MessageTag::Speculation, reply);
    SpeculationMessage& spec = reply.speculation;
    t.ranks.push_back(
        {d, int(spec.sequences.size()), reply.telemetry, sent + link.last_received_bytes()});
    merged.vocab = spec.vocab;
    for (SequenceSpeculation& sp : spec.sequences) {
      sp.row = sp.row * D + d;
      t.row_draft_rank[size_t(sp.row)] = d;
      merged.sequences.push_back(std::move(sp));
    }
  }
  t.merge_ranks(global_now() - begin);
  // Rows in batch order, as one rank sends them: the target verifies in this order.
  std::sort(
      merged.sequences.begin(), merged.sequences.end(),
      [](const SequenceSpeculation& a, const SequenceSpeculation& b) { return a.row < b.row; });
  return merged;
}

void RemoteDraft::finish_group(const OutcomeMessage& stop) {
  for (int d = 0; d < ranks(); ++d)
    if (in_group_[size_t(d)]) links_[size_t(d)]->send(MessageTag::Outcome, stop);
}

void RemoteDraft::shutdown() {
  StartMessage end;
  end.group = -1;
  for (PeerLink* link : links_) {
    link->send(MessageTag::Start, end);
    link->finish_sends();
  }
}

}  // namespace ssd
