// -k auto's calibration: the forward passes whose costs decide K (ssd/lookahead.h), timed on
// this launch's ranks with the loaded models, after loading and before decoding.
//
// The target's verification of b x (K + 1) rows for K = 1..kFirstAutoLookahead, twice that range
// while the best K is the range's last, up to kMaxAutoLookahead (fewer where the model's
// positions run out), and the draft's
// step of one token per sequence and its branch steps over b, 2b, 4b, 8b and 16b rows. Where the
// draft has ranks of its own (SSD's layout), both sides measure at the same time, because in
// the run they also overlap: the cache build beside the verification, two streams of weights
// through one memory system. The draft keeps stepping until the target is done, so that every
// target sample has the draft beside it. A collocated draft is timed after the target.
#pragma once

#include <optional>
#include <string>

#include "harness/launch.h"
#include "harness/plan.h"
#include "ssd/lookahead.h"

namespace ssd {

// Collective over MPI_COMM_WORLD: every rank returns the same costs, for K = 1..max_k
// (<= kMaxAutoLookahead). `context`: committed tokens per sequence in the timed steps.
LookaheadCosts measure_lookahead_costs(const RunPlan& plan, Launch& launch, int context, int max_k);

// The costs in milliseconds, one line: "verify b(K+1) rows: 1: 95.1, 2: ...; draft step ...".
std::string describe_costs(const LookaheadCosts& costs);

// -k auto's K, how it was chosen (the predictions) and what from (the costs, as text for the
// header and /config, and as measured, which the run's setup keeps for refine_lookahead).
struct AutoLookahead {
  int lookahead = 0;
  std::string choice, costs;
  LookaheadCosts measured;
  std::string warning;  // speculation_loses_to_ar's line, or empty
};

// -k auto, whole: measures, chooses K with the plan's acceptance prior (--fanout-alpha, the
// synthetic outcomes' alpha, else 0.8), over wider ranges while the best K is the range's last
// (next_auto_lookahead_range; max_k: the launch's largest K). Every rank returns the same
// choice.
AutoLookahead choose_lookahead(const RunPlan& plan, Launch& launch, int context, int max_k);

// -k auto from the run's own first rounds: K chosen again at the acceptance the warm-up's
// rounds measured (measured_acceptance), where the prior was only a guess (no --fanout-alpha,
// real outcomes), and from the calibration's costs scaled to the verification and cache-build
// times of those rounds (the calibration times each side beside the other running flat out).
// The Qwen pair's code prompts accept ~0.9 per token against the prior's 0.8, which moves the
// best K. None when the prior stands or the warm-up had too few rounds (or K was not -k
// auto's). The target leader alone calls it: K reaches the draft ranks in each group's start
// message.
std::optional<RunSetup> refine_lookahead(const RunPlan& plan, const RunSetup& setup,
                                         const RepTotals& warm_up);

}  // namespace ssd
