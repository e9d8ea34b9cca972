// `ssd-bench characterize`: measures the launched machine as a run with the same flags would use
// it (rank layout, backend, models): memory bandwidth and GEMM throughput at each model's shapes
// per rank, the target TP all-reduce, the draft<->target link, forward-pass times and the
// verification window with the largest fan-out budget that fits it. Rank 0 prints the tables and
// writes them to HDF5 (docs/hdf5-schema.md, "Characterize files").
#pragma once

#include "harness/cli.h"

namespace ssd {

// Collective over MPI_COMM_WORLD. Returns the exit code: 0, or 1 when a measurement came out
// non-positive or non-finite (the check line). Bad input throws ssd::AgreedError on every rank.
int run_characterize(const Cli& cli);

}  // namespace ssd
