#include "harness/models.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "model/errors.h"

namespace ssd {
namespace {

template <typename F>
auto for_flag(const std::string& flag, F&& f) {
  try {
    return f();
  } catch (const InputError& e) {
    const std::string message = e.what();
    if (message.rfind("--", 0) == 0) throw;
    throw InputError(flag + ": " + message);
  }
}

}  // namespace

bool draft_is_separate(const RunConfig& c) {
  return c.draft_placement == "separate";
}

RankLayout resolve_rank_layout(RunConfig& c) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const bool speculative = c.mode != "ar";
  if (c.draft_ranks < 0) c.draft_ranks = std::max(0, world - c.target_tp);
  if (c.target_tp + c.draft_ranks != world)
    throw InputError("mpirun -np " + std::to_string(world) + " does not equal --target-tp " +
                     std::to_string(c.target_tp) + " + --draft-ranks " +
                     std::to_string(c.draft_ranks) + " (launch exactly " +
                     std::to_string(c.target_tp + c.draft_ranks) + " ranks)");
  if (!speculative) {
    if (!c.draft.empty()) throw InputError("--draft: only with --mode sd or ssd");
    if (c.draft_ranks > 0)
      throw InputError("--draft-ranks: --mode ar has no draft; launch --target-tp " +
                       std::to_string(c.target_tp) + " ranks");
    c.draft_placement = "none";
  } else {
    if (c.draft.empty()) throw InputError("--draft: required with --mode " + c.mode);
    if (c.draft_ranks > 1)
      throw InputError("--draft-ranks: at most 1 (the draft runs on one rank)");
    if (c.draft_placement == "auto") c.draft_placement = c.draft_ranks ? "separate" : "collocated";
    if (c.mode == "ssd" && c.draft_placement != "separate")
      throw InputError(
          "--mode ssd: the draft runs asynchronously on its own rank; launch "
          "--target-tp + 1 ranks (--draft-placement separate)");
    if (c.draft_placement == "separate" && c.draft_ranks != 1)
      throw InputError(
          "--draft-placement separate: needs one draft rank (launch --target-tp + 1 "
          "ranks)");
    if (c.draft_placement == "collocated" && c.draft_ranks != 0)
      throw InputError(
          "--draft-placement collocated: the draft runs on target rank 0; launch "
          "--target-tp ranks and no draft rank");
  }
  if (c.draft_temperature < 0) c.draft_temperature = c.temperature;
  return make_rank_layout(c.target_tp, c.draft_ranks);
}

namespace {

// "auto" -> -1, else a number >= 0 (and <= max when given).
double auto_or_number(const std::string& flag, const std::string& value, double max) {
  if (value == "auto") return -1.0;
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v >= 0) || v > max)
    throw InputError(flag + ": expected auto or a number in [0, " + std::to_string(max) +
                     "], got '" + value + "'");
  return v;
}

}  // namespace

OutcomeModel outcome_model(const RunConfig& c) {
  OutcomeModel m;
  if (c.outcomes == "real") return m;
  const std::string prefix = "synthetic:";
  const std::string expected =
      "--outcomes: expected real or synthetic:alpha=A,r=R[,alpha_b=AB,r_b=RB] with A, AB in "
      "[0, 1] and R, RB > 0, got '" +
      c.outcomes + "'";
  if (c.outcomes.rfind(prefix, 0) != 0) throw InputError(expected);
  if (c.mode == "ar") throw InputError("--outcomes: synthetic outcomes need --mode sd or ssd");
  m.synthetic = true;
  bool have_alpha = false, have_r = false, have_alpha_b = false, have_r_b = false;
  std::string rest = c.outcomes.substr(prefix.size());
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string item = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw InputError(expected);
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0') throw InputError(expected);
    const bool probability = v >= 0 && v <= 1, exponent = v > 0 && std::isfinite(v);
    if (key == "alpha" && probability && !have_alpha) {
      m.alpha = v;
      have_alpha = true;
    } else if (key == "r" && exponent && !have_r) {
      m.r = v;
      have_r = true;
    } else if (key == "alpha_b" && probability && !have_alpha_b) {
      m.alpha_backup = v;
      have_alpha_b = true;
    } else if (key == "r_b" && exponent && !have_r_b) {
      m.r_backup = v;
      have_r_b = true;
    } else {
      throw InputError(expected);
    }
  }
  if (!have_alpha || !have_r) throw InputError(expected);
  // After a backup round (k = 0 nearly always) the bonus is the target's own next token, not a
  // residual: the draft's top candidate is it about as often as a draft token is accepted,
  // so by default P(rank <= 1) = 1 - 2^-RB = A.
  if (!have_r_b) m.r_backup = std::clamp(-std::log2(1.0 - std::min(m.alpha, 0.999999)), 0.01, 64.0);
  // A uniformly random token matches the target's choice with probability ~1/vocab: the
  // random backup's acceptance is 0 unless the user says otherwise. An n-gram backup's depends
  // on how repetitive the text is, which nothing here can know.
  const bool backup_can_draft = c.mode == "ssd" && c.fallback != "primary";
  if (backup_can_draft && c.backup == "ngram" && !have_alpha_b)
    throw InputError(
        "--outcomes: with --backup ngram, synthetic outcomes need alpha_b=AB (the n-gram "
        "backup's acceptance rate), e.g. synthetic:alpha=0.8,r=0.5,alpha_b=0.3");
  return m;
}

SaguaroSettings saguaro_settings(const RunConfig& c) {
  SaguaroSettings s;
  s.lookahead = c.lookahead;
  s.draft_temperature = c.draft_temperature;
  s.seed = c.seed;
  s.fanout = parse_fanout(c.fanout);
  try {
    s.backup_fanout = parse_fanout(c.fanout_backup.empty() ? c.fanout : c.fanout_backup);
  } catch (const InputError& e) {
    if (c.fanout_backup.empty()) throw;
    std::string message = e.what();
    if (message.rfind("--fanout", 0) == 0) message = "--fanout-backup" + message.substr(8);
    throw InputError(message);
  }
  for (const FanoutSpec* f : {&s.fanout, &s.backup_fanout})
    if (f->kind == FanoutSpec::Kind::List && int(f->list.size()) != c.lookahead + 1)
      throw InputError(std::string(f == &s.fanout ? "--fanout" : "--fanout-backup") +
                       ": list needs K+1 = " + std::to_string(c.lookahead + 1) +
                       " entries for --lookahead " + std::to_string(c.lookahead));
  s.alpha = auto_or_number("--fanout-alpha", c.fanout_alpha, 1.0);
  s.r = auto_or_number("--fanout-r", c.fanout_r, 100.0);
  const double budget = auto_or_number("--budget", c.budget, 4096.0);
  if (budget >= 0 && (budget != std::floor(budget) || budget < 1))
    throw InputError("--budget: expected auto or a whole number >= 1");
  s.budget = budget < 0 ? 0 : int(budget);
  s.saguaro_c = c.saguaro_c;
  // Definition 14 reshapes the distribution a sampling draft draws from; a greedy draft takes
  // the argmax and never looks at it, so a C < 1 would be silently ignored.
  if (c.saguaro_c < 1.0 && c.draft_temperature == 0.0)
    throw InputError("--saguaro-c " + std::to_string(c.saguaro_c).substr(0, 6) +
                     ": SAGUARO sampling needs a sampling draft, but the draft is greedy "
                     "(--draft-temperature, which defaults to --temperature, is 0); use "
                     "--saguaro-c 1 or a draft temperature > 0");
  s.fallback = c.fallback;
  s.backup = c.backup;
  return s;
}

bool holds_draft(const RunConfig& c, const RankLayout& l) {
  if (c.mode == "ar") return false;
  return draft_is_separate(c) ? l.role == Role::Draft : l.is_run_leader();
}

std::unique_ptr<WeightSource> open_target(const RunConfig& c) {
  return for_flag("--target", [&] { return open_weight_source(c.target, c.weight_seed); });
}

std::unique_ptr<WeightSource> open_draft(const RunConfig& c, const ModelConfig& target) {
  std::unique_ptr<WeightSource> draft = for_flag("--draft", [&] {
    const std::string prefix = "perturb:";
    if (c.draft.rfind(prefix, 0) == 0) {
      const std::string value = c.draft.substr(prefix.size());
      char* end = nullptr;
      const double sigma = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(sigma >= 0))
        throw InputError(c.draft + ": SIGMA must be a number >= 0");
      return perturb_weight_source(open_weight_source(c.target, c.weight_seed), sigma,
                                   c.weight_seed + 1);
    }
    return open_weight_source(c.draft, c.weight_seed);
  });
  if (draft->config().vocab_size != target.vocab_size)
    throw InputError("--draft: vocabulary size " + std::to_string(draft->config().vocab_size) +
                     " differs from the target's " + std::to_string(target.vocab_size));
  return draft;
}

}  // namespace ssd
