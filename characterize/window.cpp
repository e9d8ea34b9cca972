// The verification window (the CMU proposal's "verification window characterization"): how
// many draft branch steps fit in one target verification, and hence the largest speculation
// cache SSD can build while the target verifies.
#include <algorithm>
#include <cmath>

#include "characterize/parts.h"
#include "ssd/fanout.h"

namespace ssd {

const ForwardResult* find_forward(const std::vector<ForwardResult>& forwards,
                                  const std::string& model, const std::string& kind,
                                  bool concurrent) {
  const ForwardResult* other = nullptr;
  for (const ForwardResult& f : forwards)
    if (f.model == model && f.kind == kind) {
      if (f.concurrent == concurrent) return &f;
      if (!other) other = &f;
    }
  return other;
}

VerificationWindow verification_window(const std::vector<ForwardResult>& forwards, int K,
                                       int batch) {
  VerificationWindow w;
  // The window is SSD's: the draft builds while the target verifies, so both are the passes
  // timed side by side where characterize timed them so (a separate draft rank).
  // The verification as SSD's round takes it (model "ssd", beside a cache build), where timed.
  const ForwardResult* verify = find_forward(forwards, "ssd", "verify", true);
  if (!verify) verify = find_forward(forwards, "target", "verify", true);
  const ForwardResult* glue = find_forward(forwards, "draft", "glue", true);
  const ForwardResult* draft = find_forward(forwards, "draft", "draft", true);
  bool any_concurrent = false;
  for (const ForwardResult& f : forwards)
    any_concurrent = any_concurrent || (f.model == "draft" && f.kind == "branch" && f.concurrent);
  std::vector<const ForwardResult*> branches;
  for (const ForwardResult& f : forwards)
    if (f.model == "draft" && f.kind == "branch" && f.concurrent == any_concurrent)
      branches.push_back(&f);
  if (!verify || !glue || !draft || branches.empty()) return w;
  std::sort(branches.begin(), branches.end(),
            [](const ForwardResult* a, const ForwardResult* b) { return a->rows < b->rows; });
  w.present = true;
  w.verify_s = verify->seconds;
  w.glue_s = glue->seconds;
  w.draft_s = draft->seconds;
  // T_SD is SD's ratio, whose draft and target take turns: the two as SD's round runs them
  // (model "sd"), else each timed alone.
  const ForwardResult* sd_draft = find_forward(forwards, "sd", "draft", false);
  const ForwardResult* sd_verify = find_forward(forwards, "sd", "verify", false);
  if (!sd_draft || !sd_verify) {
    sd_draft = find_forward(forwards, "draft", "draft", false);
    sd_verify = find_forward(forwards, "target", "verify", false);
  }
  w.sd_draft_s = sd_draft->seconds;
  w.sd_verify_s = sd_verify->seconds;
  w.t_sd = K * w.sd_draft_s / w.sd_verify_s;
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
  w.window_fanout_limit =
      window_fanout_limit(w.verify_s, w.glue_s, w.step_a_s, w.step_b_s, K, batch, 1 << 20);
  w.window_limit_rows = w.window_fanout_limit * batch;
  return w;
}

}  // namespace ssd
