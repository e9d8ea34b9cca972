#include "ssd/step_cost.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "ssd/lookahead.h"

namespace ssd {

void StepCostCurve::observe(int rows, double seconds) {
  if (rows < 1 || !(seconds >= 0.0)) return;
  Size& s = sizes_[rows];
  ++s.samples;
  s.mean_s += (seconds - s.mean_s) / double(std::min(s.samples, 16));
  s.last_step = ++samples_;
  for (auto it = sizes_.begin(); it != sizes_.end();)
    it = samples_ - it->second.last_step > kForgetAfterSteps ? sizes_.erase(it) : std::next(it);
}

std::vector<std::pair<int, double>> StepCostCurve::points() const {
  std::vector<double> costs;
  for (const auto& [rows, s] : sizes_) costs.push_back(s.mean_s);
  // A step of more rows does not cost less; a sample taken in a slow spell can make it look so.
  costs = nondecreasing_costs(costs);
  std::vector<std::pair<int, double>> out;
  size_t i = 0;
  for (const auto& entry : sizes_) out.push_back({entry.first, costs[i++]});
  return out;
}

double StepCostCurve::seconds(double rows) const {
  const std::vector<std::pair<int, double>> p = points();
  if (p.empty()) return 0.0;
  if (p.size() == 1) return p[0].second;
  const auto slope = [&](size_t i) {  // of the segment from p[i] to p[i + 1]
    return (p[i + 1].second - p[i].second) / double(p[i + 1].first - p[i].first);
  };
  if (rows <= p.front().first)
    return std::max(0.0, p.front().second - slope(0) * (p.front().first - rows));
  const size_t last = p.size() - 1;
  if (rows >= p[last].first) return p[last].second + slope(last - 1) * (rows - p[last].first);
  size_t i = 0;
  while (p[i + 1].first < rows) ++i;
  return p[i].second + slope(i) * (rows - p[i].first);
}

void StepCostCurve::scale(double factor) {
  for (auto& entry : sizes_) entry.second.mean_s *= factor;
}

std::string StepCostCurve::describe() const {
  std::string text;
  char item[48];
  for (const auto& [rows, s] : points()) {
    std::snprintf(item, sizeof item, "%s%d: %.1f", text.empty() ? "" : ", ", rows, s * 1e3);
    text += item;
  }
  return text.empty() ? "none" : text;
}

}  // namespace ssd
