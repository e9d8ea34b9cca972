// How far apart the cores of a node's ranks are: the one-way latency of a cache line passed
// back and forth between the node's first rank and each other rank, through MPI shared memory.
// Cores that share a last-level cache pass a line in tens of ns; across dies (AMD's CCDs, each
// with its own link to memory) or sockets, in hundreds. characterize takes it before each of the
// node read passes, because the two tell the same thing: on the 2-core Zen 5 KVM guest
// (2026-12-03) the vCPUs moved between one die and two within seconds, and a hand-written probe
// saw the node read 33-42 GB/s with both cores reading while they were ~50 ns apart, 50-68 GB/s
// while they were ~220 ns apart. SSD's target and draft ranks stream their weights together, so
// which of the two they meet decides whether SSD's second core buys its bandwidth.
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

#include "characterize/parts.h"

namespace ssd {
namespace {

constexpr size_t kLine = 64;
// Round trips timed together (the clock's ~20 ns read spread over 32 one-way passes), and
// the most groups a partner takes; the fastest group is the figure, free of the interrupts and
// preemptions that land in others.
constexpr int kTripsPerGroup = 16, kMaxGroups = 128;
// Each partner's measurement stops here, whatever the groups: with more ranks than cores a
// partner's reply waits for the scheduler, and no pass should turn into seconds.
constexpr auto kPartnerDeadline = std::chrono::milliseconds(20);

// Waiting for the other core: the x86 pause hint, and the core given up now and then, so that
// two spinning ranks on one core (an oversubscribed test) still take turns.
inline void relax(uint32_t& spins) {
  if (++spins % 4096 == 0) {
    sched_yield();
  } else {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

// The flag word `value` is stored in: a line of its own in the node's shared window.
std::atomic_ref<int64_t> flag_at(char* line) {
  return std::atomic_ref<int64_t>(*reinterpret_cast<int64_t*>(line));
}

// The first rank's side: round trips with the partner until kMaxGroups or the deadline, then
// -1 to let it go. The best group's mean one-way time, in ns.
double lead_round_trips(std::atomic_ref<int64_t> flag) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + kPartnerDeadline;
  double best = std::numeric_limits<double>::infinity();
  int64_t value = 0;
  for (int g = 0; g < kMaxGroups && (g == 0 || clock::now() < deadline); ++g) {
    const auto t0 = clock::now();
    for (int i = 0; i < kTripsPerGroup; ++i) {
      flag.store(++value, std::memory_order_release);
      uint32_t spins = 0;
      while (flag.load(std::memory_order_acquire) != value + 1) relax(spins);
      ++value;
    }
    const double ns = std::chrono::duration<double, std::nano>(clock::now() - t0).count();
    best = std::min(best, ns / (2.0 * kTripsPerGroup));
  }
  flag.store(-1, std::memory_order_release);
  return best;
}

// The partner's side: answer every odd value with the next one until the -1.
void answer_round_trips(std::atomic_ref<int64_t> flag) {
  int64_t seen = 0;
  for (;;) {
    int64_t value;
    uint32_t spins = 0;
    while ((value = flag.load(std::memory_order_acquire)) == seen) relax(spins);
    if (value < 0) return;
    seen = value + 1;
    flag.store(seen, std::memory_order_release);
  }
}

}  // namespace

NodeLatencyProbe::NodeLatencyProbe(MPI_Comm node) : node_(node) {
  MPI_Comm_rank(node_, &rank_);
  MPI_Comm_size(node_, &ranks_);
  // One line per rank, on the first rank's memory, plus a line to align the first to.
  const MPI_Aint bytes = rank_ == 0 ? MPI_Aint((ranks_ + 1) * kLine) : 0;
  char* mine = nullptr;
  MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, node_, &mine, &window_);
  MPI_Aint size = 0;
  int unit = 1;
  char* base = nullptr;
  MPI_Win_shared_query(window_, 0, &size, &unit, &base);
  lines_ = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(base) + kLine - 1) / kLine * kLine);
  // A passive epoch for the probe's life: MPI_Win_sync orders the flags' resets before each
  // measurement's barrier, as MPI's shared-memory model asks.
  MPI_Win_lock_all(MPI_MODE_NOCHECK, window_);
}

NodeLatencyProbe::~NodeLatencyProbe() {
  MPI_Win_unlock_all(window_);
  MPI_Win_free(&window_);
}

double NodeLatencyProbe::farthest_ns() {
  double farthest = 0.0;
  for (int partner = 1; partner < ranks_; ++partner) {
    char* line = lines_ + size_t(partner) * kLine;
    if (rank_ == 0) flag_at(line).store(0, std::memory_order_relaxed);
    MPI_Win_sync(window_);
    MPI_Barrier(node_);
    if (rank_ == 0) farthest = std::max(farthest, lead_round_trips(flag_at(line)));
    if (rank_ == partner) answer_round_trips(flag_at(line));
  }
  MPI_Bcast(&farthest, 1, MPI_DOUBLE, 0, node_);
  return farthest;
}

}  // namespace ssd
