// `ssd-bench characterize`: this machine's memory read bandwidth and GEMM throughput at a
// model's shapes, and the AR decode bound they imply (weight bytes per token / bandwidth).
#pragma once

#include "harness/cli.h"

namespace ssd {

int run_characterize(const CharacterizeConfig& config);

}  // namespace ssd
