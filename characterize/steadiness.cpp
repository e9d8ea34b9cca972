// Whether the forward passes were timed on a steady host. A pass of more rows reads the same
// weights and does more work than one of fewer, so it never costs clearly less; where it did,
// something else had the core or the memory while one of the two was timed, and every figure
// taken from the file (the verification window, predictions) inherits that. And SSD's rounds
// (rounds.cpp) verify beside the draft's cache build what the verification timed beside the
// draft's own passes verified, with as much of the draft's traffic beside it, so the two agree
// unless the host changed between them.
#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "characterize/parts.h"

namespace ssd {
namespace {

// How far below a pass of fewer rows a pass of more may time before it is flagged. 17
// characterize runs on a Zen 4 and a Zen 5 host (2026-11-26): on the flat, memory-bound stretch
// of the curve (1-5 rows) passes dipped by up to 4.6% as noise; in the 6 runs with a disturbed
// phase they dipped by 6.9-40%.
constexpr double kTolerance = 0.05;

// How far above the verification timed beside the draft's passes the SSD rounds' verification may
// take before it is flagged. 15 characterize files of 2026-11-25..29 (llama-124m + llama-12m on Zen
// 4 and Zen 5, the Qwen pair on Zen 4): 0.91-1.08x, and 1.52x in the one whose rounds a slow state
// of the 2-core Zen 4 host took (the pair's, bdcc43e: 199.6 against 131.3 ms), which put every
// SSD run that file predicted 12-35% slow.
constexpr double kRoundTolerance = 0.20;

// The SSD rounds' verification against the verification timed beside on the same rank.
void flag_slow_rounds(const std::vector<ForwardResult>& forwards,
                      std::vector<std::string>& flagged) {
  for (const ForwardResult& round : forwards) {
    if (round.model != "ssd" || round.kind != "verify") continue;
    for (const ForwardResult& pass : forwards) {
      if (pass.model != "target" || pass.kind != "verify" || !pass.concurrent ||
          pass.rank != round.rank || pass.rows != round.rows || pass.sequences != round.sequences)
        continue;
      if (round.seconds > (1.0 + kRoundTolerance) * pass.seconds) {
        char line[160];
        std::snprintf(line, sizeof line,
                      "ssd beside verify %d rows %.3f ms > %.2f x target beside verify %.3f ms",
                      round.rows, round.seconds * 1e3, 1.0 + kRoundTolerance, pass.seconds * 1e3);
        flagged.push_back(line);
      }
      break;
    }
  }
}

}  // namespace

std::vector<std::string> unsteady_passes(const std::vector<ForwardResult>& forwards) {
  // One curve per rank, model, timing, sequence count and context; branch steps (a different
  // mask) are a curve of their own.
  using Curve = std::tuple<int, std::string, bool, int, int, bool>;
  std::map<Curve, std::vector<const ForwardResult*>> curves;
  for (const ForwardResult& f : forwards) {
    const bool causal = f.kind == "ar" || f.kind == "verify" || f.kind == "draft" ||
                        f.kind == "glue" || f.kind == "rows";
    if ((f.model != "target" && f.model != "draft") || (!causal && f.kind != "branch")) continue;
    curves[{f.rank, f.model, f.concurrent, f.sequences, f.context, causal}].push_back(&f);
  }
  std::vector<std::string> flagged;
  for (auto& [curve, passes] : curves) {
    std::stable_sort(
        passes.begin(), passes.end(),
        [](const ForwardResult* a, const ForwardResult* b) { return a->rows < b->rows; });
    const ForwardResult* slowest = nullptr;  // of the passes with fewer rows so far
    for (const ForwardResult* f : passes) {
      if (slowest && slowest->rows < f->rows &&
          f->seconds < (1.0 - kTolerance) * slowest->seconds) {
        char line[160];
        std::snprintf(line, sizeof line, "%s %s %s %d rows %.3f ms < %s %d rows %.3f ms",
                      f->model.c_str(), f->concurrent ? "beside" : "alone", f->kind.c_str(),
                      f->rows, f->seconds * 1e3, slowest->kind.c_str(), slowest->rows,
                      slowest->seconds * 1e3);
        flagged.push_back(line);
      }
      if (!slowest || f->seconds > slowest->seconds) slowest = f;
    }
  }
  flag_slow_rounds(forwards, flagged);
  return flagged;
}

}  // namespace ssd
