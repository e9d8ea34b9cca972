// One clock across ranks: MPI_Wtime plus an offset estimated at start-up against world rank 0,
// so records from different ranks (and hosts) can be drawn on one timeline.
#pragma once

#include <mpi.h>

namespace ssd {

// Collective over `comm`. Each rank ping-pongs with rank 0 several times and keeps the offset
// of the round trip with the smallest latency (Cristian's algorithm). Returns this rank's
// offset: global time = MPI_Wtime() + offset (0 on rank 0).
double estimate_clock_offset(MPI_Comm comm, int round_trips = 16);

// MPI_Wtime() + the offset set by set_clock_offset (0 until then).
double global_now();
void set_clock_offset(double offset);

// Monotonic seconds on this process's own clock, for durations that never meet another rank's
// (progress lines, load times).
double now_seconds();

}  // namespace ssd
