// The benchmark run: load models, make prompts, warm up, run the recorded repetitions, report
// on the console and write the HDF5 file.
#pragma once

#include "harness/cli.h"

namespace ssd {

// Returns the process exit code. Throws InputError for bad input.
int run_benchmark(const Cli& cli);

}  // namespace ssd
