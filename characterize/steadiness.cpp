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

// How far above the same passes timed beside the other model's the SSD rounds' verification and
// cache build may take before they are flagged. 16 characterize files of 2026-11-25..29
// (llama-124m + llama-12m on Zen 4 and Zen 5, the Qwen pair on Zen 4): the verification 0.91-1.08x
// the target's verification beside, the build 0.75-1.10x the draft's glue and K branch steps
// beside; and 1.52x and 1.31x in the one whose rounds a slow state of the 2-core Zen 4 host took
// (the pair's, bdcc43e: verification 199.6 against 131.3 ms, build 238.6 against 181.6), which
// put every SSD run that file predicted 8-35% slow.
constexpr double kRoundTolerance = 0.20;

const ForwardResult* find_beside(const std::vector<ForwardResult>& forwards, const char* model,
                                 const char* kind, int rows, int sequences) {
  for (const ForwardResult& f : forwards)
    if (f.concurrent && f.model == model && f.kind == kind && f.rows == rows &&
        f.sequences == sequences)
      return &f;
  return nullptr;
}

// The SSD rounds (model "ssd") against the passes they are made of, timed beside.
void flag_slow_rounds(const std::vector<ForwardResult>& forwards,
                      std::vector<std::string>& flagged) {
  auto check = [&](const ForwardResult& round, double beside_s, const char* what) {
    if (!(round.seconds > (1.0 + kRoundTolerance) * beside_s)) return;
    char line[200];
    std::snprintf(line, sizeof line, "ssd beside %s %d rows %.3f ms > %.2f x %s beside %.3f ms",
                  round.kind.c_str(), round.rows, round.seconds * 1e3, 1.0 + kRoundTolerance, what,
                  beside_s * 1e3);
    flagged.push_back(line);
  };
  for (const ForwardResult& round : forwards) {
    if (round.model != "ssd") continue;
    if (round.kind == "verify") {
      const ForwardResult* verify =
          find_beside(forwards, "target", "verify", round.rows, round.sequences);
      if (verify) check(round, verify->seconds, "target verify");
    } else if (round.kind == "build") {
      // The glue step over K + 1 tokens per sequence, then K branch steps of the build's rows.
      const ForwardResult* glue = nullptr;
      for (const ForwardResult& f : forwards)
        if (f.concurrent && f.model == "draft" && f.kind == "glue" &&
            f.sequences == round.sequences)
          glue = &f;
      const ForwardResult* branch =
          find_beside(forwards, "draft", "branch", round.rows, round.sequences);
      if (glue && branch && glue->sequences > 0) {
        const int K = glue->rows / glue->sequences - 1;
        check(round, glue->seconds + K * branch->seconds, "draft glue + K branch");
      }
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
