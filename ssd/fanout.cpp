#include "ssd/fanout.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "kernels/errors.h"

namespace ssd {
namespace {

constexpr const char* kFanoutForms = "uniform:F, list:F0,...,FK or geometric[:B]";

[[noreturn]] void fanout_error(const std::string& text, const std::string& why) {
  throw InputError("fan-out '" + text + "': " + why + " (expected " + kFanoutForms + ")");
}

// A whole decimal integer: no sign, no spaces, no trailing characters.
bool parse_int(const std::string& s, int& out) {
  if (s.empty() || s[0] == '+' || s[0] == '-') return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

void check_inputs(int K, double budget, const FanoutLaw& law) {
  if (K < 0) throw std::invalid_argument("geometric fan-out: lookahead K must be >= 0");
  if (!(budget >= 0) || !std::isfinite(budget))
    throw std::invalid_argument("geometric fan-out: budget must be finite and >= 0");
  if (std::isnan(law.acceptance) || std::isnan(law.r) || std::isnan(law.r_all))
    throw std::invalid_argument("geometric fan-out: acceptance and r must not be NaN");
}

}  // namespace

FanoutSpec parse_fanout(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const bool has_arg = colon != std::string::npos;
  const std::string arg = has_arg ? text.substr(colon + 1) : std::string();
  FanoutSpec spec;
  if (kind == "uniform") {
    spec.kind = FanoutSpec::Kind::Uniform;
    if (!has_arg || !parse_int(arg, spec.uniform) || spec.uniform < 1)
      fanout_error(text, "uniform needs a positive integer F, e.g. uniform:4");
  } else if (kind == "list") {
    spec.kind = FanoutSpec::Kind::List;
    if (!has_arg || arg.empty()) fanout_error(text, "list needs K+1 comma-separated counts");
    size_t start = 0;
    while (true) {
      const size_t comma = arg.find(',', start);
      const std::string item = arg.substr(start, comma - start);
      int value = 0;
      if (!parse_int(item, value))
        fanout_error(text, "list entry '" + item + "' is not a non-negative integer");
      spec.list.push_back(value);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else if (kind == "geometric") {
    spec.kind = FanoutSpec::Kind::Geometric;
    spec.fanout_total = 0;  // bare "geometric": B comes from --budget
    if (has_arg && (!parse_int(arg, spec.fanout_total) || spec.fanout_total < 1))
      fanout_error(text, "geometric:B needs a positive budget B (omit it to use the run's budget)");
  } else {
    fanout_error(text, "unknown shape '" + kind + "'");
  }
  return spec;
}

FanoutObjective::FanoutObjective(int K, const FanoutLaw& law) : weight_(K + 1), r_(K + 1) {
  // A.2's weights: the probability that exactly k of K drafts are accepted.
  const double a = std::clamp(law.acceptance, 0.0, 1.0);
  double reach = 1.0;  // a^k
  for (int k = 0; k <= K; ++k, reach *= a) {
    weight_[k] = k < K ? reach * (1.0 - a) : reach;
    r_[k] = std::max(k < K ? law.r : law.r_all, 1e-3);
  }
}

double FanoutObjective::hit(int k, int fanout) const {
  return weight_[k] * (1.0 - std::pow(fanout + 1.0, -r_[k]));
}

double FanoutObjective::gain(int k, int fanout) const {
  return weight_[k] * (std::pow(fanout + 1.0, -r_[k]) - std::pow(fanout + 2.0, -r_[k]));
}

int FanoutObjective::best_position(const std::vector<int>& shape) const {
  int best = 0;
  double best_gain = gain(0, shape[0]);
  for (int k = 1; k <= lookahead(); ++k) {
    const double g = gain(k, shape[k]);
    if (g > best_gain) best = k, best_gain = g;
  }
  return best;
}

std::vector<int> geometric_fanout(int K, int fanout_total, const FanoutLaw& law) {
  check_inputs(K, fanout_total, law);
  const FanoutObjective objective(K, law);
  std::vector<int> shape(K + 1, 0);
  for (int unit = 0; unit < fanout_total; ++unit) ++shape[objective.best_position(shape)];
  return shape;
}

std::vector<int> resolve_fanout(const FanoutSpec& spec, int K, int fanout_total,
                                const FanoutLaw& law) {
  switch (spec.kind) {
    case FanoutSpec::Kind::Uniform:
      return std::vector<int>(K + 1, spec.uniform);
    case FanoutSpec::Kind::List:
      if (int(spec.list.size()) != K + 1)
        throw InputError("fan-out list has " + std::to_string(spec.list.size()) +
                         " entries but lookahead K = " + std::to_string(K) +
                         " needs K+1 = " + std::to_string(K + 1) + " (F_0..F_K)");
      return spec.list;
    case FanoutSpec::Kind::Geometric:
      return geometric_fanout(K, spec.fanout_total > 0 ? spec.fanout_total : fanout_total, law);
  }
  throw std::logic_error("resolve_fanout: unknown kind");
}

double expected_hit_rate(const std::vector<int>& shape, const FanoutLaw& law) {
  const int K = int(shape.size()) - 1;
  const FanoutObjective objective(K, law);
  double total = 0.0;
  for (int k = 0; k <= K; ++k) total += objective.hit(k, shape[k]);
  return total;
}

int window_fanout_limit(double window_s, double glue_s, double step_a, double step_b, int K,
                        int rows, int max_fanout_total) {
  if (K <= 0 || rows <= 0 || window_s <= 0) return 0;
  const double per_step = (0.9 * window_s - glue_s) / K;
  if (per_step <= step_a) return 0;
  const double branches =
      step_b > 0 ? (per_step - step_a) / step_b : double(max_fanout_total) * rows;
  const double limit = std::floor(branches / rows);
  return int(std::clamp(limit, 0.0, double(max_fanout_total)));
}

}  // namespace ssd
