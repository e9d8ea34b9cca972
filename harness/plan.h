// The run's plan: every flag parsed and checked once, into types, before anything loads. The
// set-up, the decode loops and the printers read the plan, never a flag's text; only this
// layer (and the CLI) names flags in errors: lower layers throw value errors, which
// with_flag() prefixes with the flag they came from.
#pragma once

#include <string>

#include "comm/rank_layout.h"
#include "harness/cli.h"
#include "kernels/errors.h"
#include "ssd/decode.h"
#include "ssd/saguaro_drafter.h"

namespace ssd {

struct RunPlan {
  RunConfig flags;          // as given, with what was left to auto resolved (ranks, placement,
                            // draft temperature, threads): what the header and the file show
  DecodeSettings decode;    // the target leader's decoding
  SaguaroSettings saguaro;  // SSD's draft rank

  Mode mode() const { return flags.mode; }
  bool speculative() const { return flags.mode != Mode::AR; }
  bool separate_draft() const { return flags.draft_placement == DraftPlacement::Separate; }
  bool synthetic() const { return decode.outcomes.synthetic; }
  // Whether the generated tokens must be identical across repetitions: sampled SSD and
  // synthetic outcomes depend on the adaptive cache, which carries over between repetitions.
  bool tokens_reproducible() const;
};

// Checks the flags against each other and against the launched world; throws InputError naming
// the flag. Every rank reaches the same verdict. Collective over MPI_COMM_WORLD (the default
// thread count is the node's cores over its ranks).
RunPlan make_run_plan(const RunConfig& flags);

// K decided after the plan (-k auto, harness/calibrate.h): the decoding and the draft rank's
// settings take it, and the header and /config say how it was chosen.
void set_lookahead(RunPlan& plan, int lookahead, const std::string& choice);

// --draft-ranks resolved (-1: the launched ranks beyond --target-tp) and checked against the
// launched world; the error names both flags. A run's plan and characterize both use it.
int resolve_draft_ranks(int target_tp, int draft_ranks);

// Runs f(); an InputError whose message names no flag gets `flag` in front.
template <typename F>
auto with_flag(const std::string& flag, F&& f) {
  try {
    return f();
  } catch (const InputError& e) {
    const std::string message = e.what();
    if (message.rfind("--", 0) == 0) throw;
    throw InputError(flag + ": " + message);
  }
}

}  // namespace ssd
