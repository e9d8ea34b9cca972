// Numeric checks for CLI11 options, worded like the rest of ssd-bench's errors.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace ssd {

// CLI11's PositiveNumber and NonNegativeNumber name their upper bound, DBL_MAX, in full (a
// 300-digit number). These read like every other error: "--lookahead: must be >= 1 (got 0)".
inline std::string bound_text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

inline CLI::Validator number_check(const std::string& description,
                                   bool (*ok)(double, double, double), const std::string& rule,
                                   double lo, double hi = 0.0) {
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (value.empty() || end == value.c_str() || *end != '\0')
          return "expected a number (got " + value + ")";
        return ok(v, lo, hi) ? std::string() : rule + " (got " + value + ")";
      },
      description);
}

// The help's type column keeps CLI11's words where they fit: INT:POSITIVE, FLOAT:NONNEGATIVE.
inline CLI::Validator at_least(double lo) {  // integers: at_least(1) for "positive"
  const std::string name = lo == 1 ? "POSITIVE" : lo == 0 ? "NONNEGATIVE" : ">= " + bound_text(lo);
  return number_check(
      name, [](double v, double a, double) { return v >= a; }, "must be >= " + bound_text(lo), lo);
}

// A flag that takes one of a few names into an enum: checked as a name (so the error reads
// "--mode: xx not in {ar,sd,ssd}"), then mapped, so nothing downstream compares strings.
template <typename E>
CLI::Option* add_choice(CLI::App& app, const std::string& flag, E& value,
                        const std::vector<std::pair<std::string, E>>& choices,
                        const std::string& help) {
  std::string names, current;
  for (const auto& [name, choice] : choices) {
    names += (names.empty() ? "" : ",") + name;
    if (choice == value) current = name;
  }
  // One validator that checks the name and rewrites it to the enum's number, which CLI11 then
  // converts (a separate IsMember check would see the rewritten value).
  CLI::Validator to_enum(
      [choices, names](std::string& input) -> std::string {
        for (const auto& [name, choice] : choices)
          if (input == name) {
            input = std::to_string(static_cast<int>(choice));
            return {};
          }
        return input + " not in {" + names + "}";
      },
      "{" + names + "}");
  return app.add_option(flag, value, help)->transform(to_enum)->default_str(current);
}

inline CLI::Validator above(double lo) {
  return number_check(
      lo == 0 ? "POSITIVE" : "> " + bound_text(lo),
      [](double v, double a, double) { return v > a; }, "must be > " + bound_text(lo), lo);
}

inline CLI::Validator within(double lo, double hi) {
  return number_check(
      "in [" + bound_text(lo) + ", " + bound_text(hi) + "]",
      [](double v, double a, double b) { return v >= a && v <= b; },
      "must be in [" + bound_text(lo) + ", " + bound_text(hi) + "]", lo, hi);
}

}  // namespace ssd
