// What one branch step of the SSD cache build costs over n rows, as measured at the sizes the
// run has stepped, for --budget auto (ssd/budget.h) and -k auto (ssd/lookahead.h).
//
// Why not a line a + b n: the cost is not linear in n, least of all where SSD runs. A step of
// few rows streams the draft's weights at its memory's pace; more rows add little until the
// bf16 dot products turn compute-bound. On the Qwen pair (0.5B draft, one core) a calibration
// measured 40, 48-57, 58, 61-62 and 97-100 ms at 1, 2, 4, 8 and 16 rows. Beside the target's
// verification on the same memory system it is flatter still: builds of 1-2 branches per step
// took 220-290 ms and builds of 8 took 265-280, and the target's verifications beside the
// 1-2-row steps were the slower ones (196-239 ms against 170). The line through 1, 2 and 4
// rows (34.0 + 4.89 n ms) priced a budget of 8 at a 340 ms build, and a line fitted to a run's
// own steps, all of 1-2 rows, cannot tell what 8 cost: --budget auto kept budgets of 1-2 (p_hit
// 0.53-0.62, 10.8-12.0 tok/s) where a budget of 8 ran at p_hit 0.94, 13.0 tok/s.
//
// The curve keeps a moving average per measured size and interpolates between them,
// non-decreasing in n. Beyond the largest size it extends the last segment's slope (flat
// when only one size is known), so that --budget auto, growing at most geometrically, goes
// and measures the next size instead of guessing it; below the smallest, the first segment's.
// A size not stepped at in the last kForgetAfterSteps steps is forgotten: the host's bandwidth
// moves within seconds (one run's verifications went 222-285 ms, then 165-190), and sizes
// last measured in a slow spell kept that run's budget at 1 for the last 28 of its 58 rounds.
// Forgetting them, the curve is flat again beyond the sizes in use, and the budget grows to
// measure them anew.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ssd {

class StepCostCurve {
 public:
  // ~16 rounds at K = 3: a size the budget moved away from is measured again within seconds.
  static constexpr int kForgetAfterSteps = 48;

  // One step over `rows` rows took `seconds`: a moving average per size (the last ~16 steps of
  // each weigh most, so that a size measured in a slow spell of the host recovers).
  void observe(int rows, double seconds);
  // The predicted cost of a step over `rows` rows; 0 with nothing measured.
  double seconds(double rows) const;
  int samples() const { return samples_; }
  // The most rows of a step measured and not forgotten (0: none).
  int largest_rows() const { return sizes_.empty() ? 0 : sizes_.rbegin()->first; }
  // The measured sizes and their non-decreasing costs, smallest first.
  std::vector<std::pair<int, double>> points() const;
  // Every cost times `factor` (the calibration scaled to the run's own rounds).
  void scale(double factor);
  // "1: 35.0, 2: 39.1, 4: 51.5" (rows: milliseconds)
  std::string describe() const;

 private:
  struct Size {
    int samples = 0;
    double mean_s = 0.0;
    int last_step = 0;  // samples_ when this size was last stepped at
  };
  std::map<int, Size> sizes_;
  int samples_ = 0;
};

}  // namespace ssd
