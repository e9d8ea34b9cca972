// The verification window (the CMU proposal's "verification window characterization"): how
// many draft branch steps fit in one target verification, and hence the largest speculation
// cache SSD can build while the target verifies.
#include <algorithm>
#include <cmath>

#include "characterize/parts.h"
#include "ssd/fanout.h"

namespace ssd {
namespace {

const ForwardResult* find(const std::vector<ForwardResult>& all, const std::string& model,
                          const std::string& kind) {
  for (const ForwardResult& f : all)
    if (f.model == model && f.kind == kind) return &f;
  return nullptr;
}

}  // namespace

VerificationWindow verification_window(const std::vector<ForwardResult>& forwards, int K,
                                       int batch) {
  VerificationWindow w;
  const ForwardResult* verify = find(forwards, "target", "verify");
  const ForwardResult* glue = find(forwards, "draft", "glue");
  const ForwardResult* draft = find(forwards, "draft", "draft");
  std::vector<const ForwardResult*> branches;
  for (const ForwardResult& f : forwards)
    if (f.model == "draft" && f.kind == "branch") branches.push_back(&f);
  if (!verify || !glue || !draft || branches.empty()) return w;
  std::sort(branches.begin(), branches.end(),
            [](const ForwardResult* a, const ForwardResult* b) { return a->rows < b->rows; });
  w.present = true;
  w.verify_s = verify->seconds;
  w.glue_s = glue->seconds;
  w.draft_s = draft->seconds;
  w.t_sd = K * w.draft_s / w.verify_s;
  w.base_rows = branches.front()->rows;
  w.branch_s = branches.front()->seconds;
  w.window_steps = int(std::floor(w.verify_s / w.branch_s));

  // seconds = a + b * rows, least squares; one point (or equal rows) gives a = 0, b = t / rows,
  // the drafter's own fallback.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const ForwardResult* f : branches) {
    sx += f->rows, sy += f->seconds, sxx += double(f->rows) * f->rows, sxy += f->rows * f->seconds;
  }
  const double n = double(branches.size());
  const double var = sxx / n - (sx / n) * (sx / n);
  if (var > 1e-9) {
    w.step_b_s = std::max(0.0, (sxy / n - (sx / n) * (sy / n)) / var);
    w.step_a_s = std::max(0.0, sy / n - w.step_b_s * sx / n);
  } else {
    w.step_b_s = sy / sx;
    w.step_a_s = 0.0;
  }
  // The most fan-out that hides entirely behind one verification; no cache-capacity cap here.
  // (--budget auto weighs this against the hit rate it buys and may build for longer.)
  w.fanout_budget =
      window_fanout_budget(w.verify_s, w.glue_s, w.step_a_s, w.step_b_s, K, batch, 1 << 20);
  w.budget_rows = w.fanout_budget * batch;
  return w;
}

}  // namespace ssd
