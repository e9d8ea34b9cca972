// Communication: the target TP group's all-reduce (the AllReduce the forward pass uses: MPI on
// cpu, NCCL on cuda) and the draft<->target link (PeerLink with the decoding loop's messages),
// each over message sizes from 4 bytes up in steps of x4, as nccl-tests sweeps them.
#include <mpi.h>

#include <algorithm>
#include <cmath>

#include "characterize/parts.h"
#include "comm/messages.h"
#include "comm/peer_link.h"

namespace ssd {
namespace {

constexpr int kMinIterations = 2, kMaxIterations = 1000, kWarmup = 2;
// Each size gets a quarter of --min-time: a sweep has ~13 sizes.
constexpr double kSizeShare = 0.25;

std::vector<int64_t> sweep_sizes(int64_t max_bytes) {
  std::vector<int64_t> sizes;
  for (int64_t b = 4; b <= max_bytes; b *= 4) sizes.push_back(b);
  return sizes;
}

int iterations_for(double one_s, double min_time) {
  return int(std::clamp(std::ceil(kSizeShare * min_time / std::max(one_s, 1e-9)),
                        double(kMinIterations), double(kMaxIterations)));
}

// Encoded sizes (comm/messages.cpp): an OutcomeMessage is 21 bytes plus 24 per sequence; a
// SpeculationMessage 64 bytes plus, per sequence, 41 bytes and 4 per probability.
constexpr int64_t kOutcomeHeader = 21, kOutcomeSequence = 24;
constexpr int64_t kSpeculationHeader = 64, kSpeculationSequence = 41;

OutcomeMessage outcome_of_size(int64_t bytes) {
  OutcomeMessage m;
  m.round = int32_t(bytes);  // asks the draft for a reply of the same size
  m.sequences.resize(size_t(std::max<int64_t>(0, (bytes - kOutcomeHeader) / kOutcomeSequence)));
  return m;
}

void size_speculation(SpeculationMessage& m, int64_t bytes) {
  const int64_t probs = (bytes - kSpeculationHeader - kSpeculationSequence) / 4;
  m.sequences.clear();
  if (probs < 0) return;
  m.sequences.resize(1);
  m.sequences[0].probs.assign(size_t(probs), 0.5f);
}

}  // namespace

std::vector<CommResult> measure_all_reduce(Backend& backend, AllReduce& all_reduce, MPI_Comm group,
                                           int64_t max_bytes, double min_time) {
  int n = 1;
  MPI_Comm_size(group, &n);
  const int elem = int(backend.element_bytes());
  const size_t max_count = size_t(std::max<int64_t>(1, max_bytes / elem));
  Buffer buffer = backend.alloc(max_count);  // zeros stay zeros under repeated sums
  std::vector<CommResult> rows;
  for (int64_t requested : sweep_sizes(max_bytes)) {
    const size_t count = size_t(std::max<int64_t>(1, requested / elem));
    auto timed = [&](int iterations) {
      MPI_Barrier(group);
      const double start = MPI_Wtime();
      for (int i = 0; i < iterations; ++i) all_reduce.sum(buffer, count);
      backend.synchronize();
      double elapsed = MPI_Wtime() - start, slowest = 0.0;
      // A collective takes as long as its slowest rank; every rank agrees on that number, so
      // every rank also agrees on the next iteration count.
      MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, group);
      return slowest;
    };
    timed(kWarmup);
    CommResult r;
    r.iterations = iterations_for(timed(1), min_time);
    r.bytes = int64_t(count) * elem;
    r.seconds = timed(r.iterations) / r.iterations;
    r.algbw_gbps = double(r.bytes) / r.seconds / 1e9;
    // nccl-tests' bus bandwidth: what each link carries in a ring all-reduce, comparable
    // across group sizes. (MpiAllReduce and NcclAllReduce gather and add in rank order for
    // determinism, which moves more bytes; the convention still applies to what they deliver.)
    r.busbw_gbps = r.algbw_gbps * 2.0 * (n - 1) / n;
    rows.push_back(r);
  }
  backend.release(buffer);
  return rows;
}

std::vector<CommResult> measure_peer_link(bool target_side, int peer, int64_t max_bytes,
                                          double min_time) {
  PeerLink link(MPI_COMM_WORLD, peer);
  std::vector<CommResult> rows;
  if (!target_side) {
    // The draft answers every outcome with a speculation of the asked size until told to stop.
    SpeculationMessage reply;
    int64_t reply_size = -1;
    for (;;) {
      OutcomeMessage o;
      link.receive(MessageTag::Outcome, o);
      if (o.stop) break;
      if (o.round != reply_size) size_speculation(reply, reply_size = o.round);
      link.send(MessageTag::Speculation, reply);
    }
    link.finish_sends();
    return rows;
  }
  SpeculationMessage reply;
  for (int64_t bytes : sweep_sizes(max_bytes)) {
    const OutcomeMessage out = outcome_of_size(bytes);
    auto round_trips = [&](int iterations) {
      const double start = MPI_Wtime();
      for (int i = 0; i < iterations; ++i) {
        link.send(MessageTag::Outcome, out);
        link.receive(MessageTag::Speculation, reply);
      }
      return MPI_Wtime() - start;
    };
    round_trips(kWarmup);
    CommResult r;
    r.bytes = bytes;
    r.iterations = iterations_for(round_trips(1), min_time);
    r.seconds = round_trips(r.iterations) / r.iterations / 2.0;
    r.wire_bytes = (link.last_sent_bytes() + link.last_received_bytes()) / 2;
    r.algbw_gbps = r.busbw_gbps = double(r.wire_bytes) / r.seconds / 1e9;
    rows.push_back(r);
  }
  OutcomeMessage stop;
  stop.stop = true;
  link.send(MessageTag::Outcome, stop);
  link.finish_sends();
  return rows;
}

}  // namespace ssd
