// Resolving the run's rank layout and opening its models from the command-line specs.
#pragma once

#include <memory>

#include "comm/rank_layout.h"
#include "harness/cli.h"
#include "model/weights.h"
#include "ssd/saguaro_drafter.h"
#include "ssd/speculative.h"

namespace ssd {

// Checks the mode/rank/draft flags against each other and the launched world, then splits
// the world. Every rank reaches the same verdict, so errors are thrown on all of them.
RankLayout resolve_rank_layout(RunConfig& config);
// True when this rank holds the draft model (a draft rank, or target rank 0 when collocated).
bool holds_draft(const RunConfig& config, const RankLayout& layout);
bool draft_is_separate(const RunConfig& config);

// --target and --draft; errors name the flag. perturb:SIGMA wraps the target's source.
std::unique_ptr<WeightSource> open_target(const RunConfig& config);
std::unique_ptr<WeightSource> open_draft(const RunConfig& config, const ModelConfig& target);

// --outcomes, validated; synthetic outcomes only with --mode sd or ssd.
OutcomeModel outcome_model(const RunConfig& config);

// The SSD flags, validated (errors name the flag).
SaguaroSettings saguaro_settings(const RunConfig& config);

}  // namespace ssd
