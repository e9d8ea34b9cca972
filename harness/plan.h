// The run's plan: every flag parsed and checked once, into types, before anything loads, and
// never changed afterwards. The set-up, the decode loops and the printers read the plan, never a
// flag's text; only this layer (and the CLI) names flags in errors: lower layers throw value
// errors, which with_flag() prefixes with the flag they came from.
//
// What the launch settles later (the backend auto chose, how many prompts a file held, the K
// that -k auto measured) is a RunSetup beside the plan, not a patch to it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/cli.h"
#include "harness/launch.h"
#include "kernels/errors.h"
#include "ssd/decode.h"
#include "ssd/lookahead.h"
#include "ssd/saguaro_drafter.h"

namespace ssd {

using Settings = std::vector<std::pair<std::string, std::string>>;  // name = value, in order

// The prompts: a JSONL file's, else `count` random ones of `length` tokens.
struct PromptPlan {
  std::string file;  // empty: random prompts
  int count = 1;     // random prompts only
  int length = 32;   // random prompts only
  uint64_t seed = 0;
};

// What is shown and written, and where.
struct OutputPlan {
  std::string path;  // the HDF5 file; empty: none
  bool overwrite = false;
  OutputFormat format = OutputFormat::Text;
  bool show_tokens = false;
  double progress_s = 10.0;  // seconds between progress lines; 0: none
};

struct RunPlan {
  Mode mode = Mode::AR;
  DraftPlacement placement = DraftPlacement::None;  // resolved: never Auto
  LaunchSpec launch;  // models, ranks (resolved) and hardware (threads resolved)
  PromptPlan prompts;
  int warmup = 1, reps = 3;
  OutputPlan output;
  DecodeSettings decode;           // the target leader's decoding; K as given, or -k auto's largest
  bool lookahead_auto = false;     // K is chosen after the models load (harness/calibrate.h)
  std::string lookahead_choice;    // how K came about when not measured: "given", a --fanout list
  double draft_temperature = 0.0;  // resolved: --temperature when not given
  SaguaroSettings saguaro;         // SSD's draft rank
  Settings settings;  // every setting by name, as the header prints and /config stores them

  bool speculative() const { return mode != Mode::AR; }
  bool separate_draft() const { return placement == DraftPlacement::Separate; }
  bool synthetic() const { return decode.outcomes.synthetic; }
  // Whether the generated tokens must be identical across repetitions: sampled SSD and
  // synthetic outcomes depend on the adaptive cache, which carries over between repetitions.
  bool tokens_reproducible() const;
  // The settings' value for `name` ("" when there is none).
  const std::string& setting(const std::string& name) const;
  // What the checks before loading assume of a sequence with `committed` tokens (prompt and new
  // ones), while -k auto's K is not settled: the KV slots (ssd/decode.h's rule) and rows of a
  // step at its largest K; the positions a round reaches at K = 1, since -k auto weighs only
  // the K that fit (harness/run.cpp's auto_lookahead_limit).
  int64_t kv_capacity(int64_t committed) const;
  int64_t step_rows(int64_t sequences) const;
  int64_t positions_needed(int64_t committed) const;
};

// What the launch settled after the plan was made. -k auto's K is settled twice: by the
// calibration before decoding (settle_setup), and again after the warm-up at the acceptance
// it measured (refine_lookahead); the header follows the second.
struct RunSetup {
  std::string backend;           // this run's backend ("cpu", "cuda"): what --backend auto chose
  int num_prompts = 0;           // random prompts, or the --prompts file's lines
  DecodeSettings decode;         // the decoding as run: the plan's, K being -k auto's choice
  std::string lookahead_choice;  // how K came about
  std::string lookahead_costs = "none";  // -k auto: the step costs it was chosen from
  LookaheadCosts lookahead_measured;     // -k auto: the same costs, for refine_lookahead
  std::string lookahead_warning;         // -k auto: AR predicted faster than every K (else empty)
};

// Checks the flags against each other and against the launched world; throws InputError naming
// the flag. Every rank reaches the same verdict. Collective over MPI_COMM_WORLD (the default
// thread count is the node's cores over its ranks).
RunPlan make_run_plan(const RunConfig& flags);

// The set-up of a run whose K is the plan's (no -k auto).
RunSetup given_setup(const RunPlan& plan, std::string backend, int num_prompts);

// The flags by name as the plan resolved them (make_run_plan keeps them as plan.settings; the
// backend and num_prompts are the flags' until run_settings puts in the setup's).
Settings describe_flags(const RunConfig& flags, const RunPlan& plan);

// The plan's settings with what the setup settled (backend, num_prompts, K and how it was
// chosen): the console header and the file's /config.
Settings run_settings(const RunPlan& plan, const RunSetup& setup);

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
