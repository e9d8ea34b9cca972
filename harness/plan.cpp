#include "harness/plan.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "harness/run_info.h"
#include "ssd/fanout.h"
#include "ssd/lookahead.h"

namespace ssd {
namespace {

// The rank flags against the mode and the launched world; resolves --draft-ranks,
// --draft-placement and --draft-temperature.
void resolve_ranks(RunConfig& c) {
  const bool speculative = c.mode != Mode::AR;
  c.draft_ranks = resolve_draft_ranks(c.target_tp, c.draft_ranks);
  if (!speculative) {
    if (!c.draft.empty()) throw InputError("--draft: only with --mode sd or ssd");
    if (c.draft_ranks > 0)
      throw InputError("--draft-ranks: --mode ar has no draft; launch --target-tp " +
                       std::to_string(c.target_tp) + " ranks");
    c.draft_placement = DraftPlacement::None;
  } else {
    if (c.draft.empty())
      throw InputError(std::string("--draft: required with --mode ") + mode_name(c.mode));
    if (c.draft_placement == DraftPlacement::Auto)
      c.draft_placement = c.draft_ranks ? DraftPlacement::Separate : DraftPlacement::Collocated;
    if (c.mode == Mode::SSD && c.draft_placement != DraftPlacement::Separate)
      throw InputError(
          "--mode ssd: the draft runs asynchronously on its own rank; launch "
          "--target-tp + 1 ranks (--draft-placement separate)");
    if (c.draft_placement == DraftPlacement::Separate && c.draft_ranks < 1)
      throw InputError(
          "--draft-placement separate: needs at least one draft rank (launch --target-tp + "
          "--draft-ranks ranks)");
    if (c.draft_placement == DraftPlacement::Collocated && c.draft_ranks != 0)
      throw InputError(
          "--draft-placement collocated: the draft runs on target rank 0; launch "
          "--target-tp ranks and no draft rank");
  }
  if (c.draft_temperature < 0) c.draft_temperature = c.temperature;
}

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

// Synthetic outcomes are drawn from --outcomes' A and R alone. A temperature or a SAGUARO C
// changes what a real verification accepts and which bonus tokens come, but not these draws, so
// the run would measure T = 0, C = 1 outcomes under another label: refused.
void refuse_flags_synthetic_outcomes_ignore(const RunConfig& c) {
  const auto ignored = [](const std::string& flag, double value, const std::string& instead) {
    std::ostringstream shown;
    shown << value;
    return InputError(flag + " " + shown.str() +
                      ": synthetic outcomes are drawn from --outcomes' alpha and r, which it "
                      "would not change; give the alpha and r measured " +
                      instead + ", or use --outcomes real");
  };
  if (c.mode == Mode::SSD && c.saguaro_c < 1.0)
    throw ignored("--saguaro-c", c.saguaro_c, "at that C with --saguaro-c 1");
  if (c.temperature > 0)
    throw ignored("--temperature", c.temperature, "at that temperature with --temperature 0");
  if (c.draft_temperature > 0)
    throw ignored("--draft-temperature", c.draft_temperature,
                  "at that draft temperature without the flag");
}

// The key=value items after "synthetic:", each key at most once; `expected` is the error for
// anything else. The backup's values stay unset when not given.
struct OutcomeItems {
  std::optional<double> alpha, r, r_all, alpha_backup, r_backup;
};

OutcomeItems parse_outcome_items(std::string rest, const std::string& expected) {
  OutcomeItems items;
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
    std::optional<double>* slot = key == "alpha"     ? &items.alpha
                                  : key == "r"       ? &items.r
                                  : key == "r_all"   ? &items.r_all
                                  : key == "alpha_b" ? &items.alpha_backup
                                  : key == "r_b"     ? &items.r_backup
                                                     : nullptr;
    const bool valid = key == "alpha" || key == "alpha_b" ? probability : exponent;
    if (!slot || slot->has_value() || !valid) throw InputError(expected);
    *slot = v;
  }
  if (!items.alpha || !items.r) throw InputError(expected);
  return items;
}

// --outcomes, validated; synthetic outcomes only with --mode sd or ssd.
OutcomeModel outcome_model(const RunConfig& c) {
  OutcomeModel m;
  if (c.outcomes == "real") return m;
  const std::string prefix = "synthetic:";
  const std::string expected =
      "--outcomes: expected real or synthetic:alpha=A,r=R[,r_all=RA,alpha_b=AB,r_b=RB] with A, "
      "AB in [0, 1] and R, RA, RB > 0, got '" +
      c.outcomes + "'";
  if (c.outcomes.rfind(prefix, 0) != 0) throw InputError(expected);
  if (c.mode == Mode::AR) throw InputError("--outcomes: synthetic outcomes need --mode sd or ssd");
  m.synthetic = true;
  refuse_flags_synthetic_outcomes_ignore(c);
  const OutcomeItems items = parse_outcome_items(c.outcomes.substr(prefix.size()), expected);
  m.alpha = *items.alpha;
  m.r = *items.r;
  m.r_all = items.r_all.value_or(m.r);  // one law for every position unless told otherwise
  if (items.alpha_backup) m.alpha_backup = *items.alpha_backup;
  // After a backup round (k = 0 nearly always) the bonus is the target's own next token, not a
  // residual: the draft's top candidate is it about as often as a draft token is accepted,
  // so by default P(rank <= 1) = 1 - 2^-RB = A.
  m.r_backup = items.r_backup
                   ? *items.r_backup
                   : std::clamp(-std::log2(1.0 - std::min(m.alpha, 0.999999)), 0.01, 64.0);
  // A uniformly random token matches the target's choice with probability ~1/vocab: the
  // random backup's acceptance is 0 unless the user says otherwise. An n-gram backup's depends
  // on how repetitive the text is, which nothing here can know.
  const bool backup_can_draft = c.mode == Mode::SSD && c.fallback != FallbackMode::Primary;
  if (backup_can_draft && c.backup == BackupKind::Ngram && !items.alpha_backup)
    throw InputError(
        "--outcomes: with --backup ngram, synthetic outcomes need alpha_b=AB (the n-gram "
        "backup's acceptance rate), e.g. synthetic:alpha=0.8,r=0.5,alpha_b=0.3");
  return m;
}

// The SSD flags, validated.
SaguaroSettings saguaro_settings(const RunConfig& c, int lookahead) {
  SaguaroSettings s;
  s.draft_temperature = c.draft_temperature;
  s.seed = c.seed;
  s.fanout = with_flag("--fanout", [&] { return parse_fanout(c.fanout); });
  s.backup_fanout = c.fanout_backup.empty() ? s.fanout : with_flag("--fanout-backup", [&] {
    return parse_fanout(c.fanout_backup);
  });
  for (const FanoutSpec* f : {&s.fanout, &s.backup_fanout})
    if (f->kind == FanoutSpec::Kind::List && int(f->list.size()) != lookahead + 1)
      throw InputError(std::string(f == &s.fanout ? "--fanout" : "--fanout-backup") +
                       ": list needs K+1 = " + std::to_string(lookahead + 1) +
                       " entries for --lookahead " + std::to_string(lookahead));
  s.alpha = auto_or_number("--fanout-alpha", c.fanout_alpha, 1.0);
  s.r = auto_or_number("--fanout-r", c.fanout_r, 100.0);
  const double budget = auto_or_number("--budget", c.budget, 4096.0);
  if (budget >= 0 && (budget != std::floor(budget) || budget < 1))
    throw InputError("--budget: expected auto or a whole number >= 1");
  s.budget_setting = budget < 0 ? 0 : int(budget);
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

}  // namespace

int resolve_draft_ranks(int target_tp, int draft_ranks) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (draft_ranks < 0) draft_ranks = std::max(0, world - target_tp);
  if (target_tp + draft_ranks != world)
    throw InputError("mpirun -np " + std::to_string(world) + " does not equal --target-tp " +
                     std::to_string(target_tp) + " + --draft-ranks " + std::to_string(draft_ranks) +
                     " (launch exactly " + std::to_string(target_tp + draft_ranks) + " ranks)");
  return draft_ranks;
}

namespace {

// -k: a number, or auto (SSD's default): K is chosen once the models have loaded
// (harness/calibrate.h), among 1..kMaxAutoLookahead, and until then the plan's checks (memory,
// context length) reserve room for the largest. A --fanout list fixes K (its entries are K + 1).
void plan_lookahead(const RunConfig& c, RunPlan& plan) {
  const std::string& flag = c.lookahead;
  plan.decode.lookahead = 4;
  plan.lookahead_choice = "given";
  if (!flag.empty() && flag != "auto") plan.decode.lookahead = std::stoi(flag);  // CLI-checked
  plan.lookahead_auto =
      c.mode != Mode::AR && (flag == "auto" || (flag.empty() && c.mode == Mode::SSD));
  if (!plan.lookahead_auto) return;
  if (c.mode == Mode::SSD) {
    const FanoutSpec f = with_flag("--fanout", [&] { return parse_fanout(c.fanout); });
    if (f.kind == FanoutSpec::Kind::List) {
      plan.lookahead_auto = false;
      plan.decode.lookahead = int(f.list.size()) - 1;
      plan.lookahead_choice = "the --fanout list's length";
      if (plan.decode.lookahead < 1) throw InputError("--fanout: a list needs K + 1 >= 2 entries");
      return;
    }
  }
  plan.decode.lookahead = kMaxAutoLookahead;
  plan.lookahead_choice = "auto";
}

}  // namespace

RunPlan make_run_plan(const RunConfig& flags) {
  RunConfig c = flags;
  resolve_ranks(c);
  if (c.threads == 0) c.threads = default_threads_per_rank();
  RunPlan plan;
  plan.mode = c.mode;
  plan.placement = c.draft_placement;
  plan.launch = launch_spec(c, plan.separate_draft());
  plan.prompts = {c.prompts_file, c.num_prompts ? c.num_prompts : c.batch_size, c.prompt_len,
                  c.seed};
  plan.warmup = c.warmup;
  plan.reps = c.reps;
  plan.output = {c.out, c.overwrite, c.output_format, c.show_tokens, c.progress};
  plan.draft_temperature = c.draft_temperature;
  plan_lookahead(c, plan);
  plan.decode.limits = {c.max_new_tokens, c.ignore_eos, c.temperature, c.seed};
  plan.decode.batch_size = c.batch_size;
  plan.decode.outcomes = outcome_model(c);
  if (c.mode == Mode::SSD) plan.saguaro = saguaro_settings(c, plan.decode.lookahead);
  plan.settings = describe_flags(c, plan);
  return plan;
}

RunSetup given_setup(const RunPlan& plan, std::string backend, int num_prompts) {
  return {std::move(backend), num_prompts, plan.decode, plan.lookahead_choice, "none",
          LookaheadCosts{},   ""};
}

Settings run_settings(const RunPlan& plan, const RunSetup& setup) {
  Settings settings;
  for (auto [name, value] : plan.settings) {
    if (name == "backend") value = setup.backend;
    if (name == "num_prompts") value = std::to_string(setup.num_prompts);
    settings.emplace_back(name, value);
    if (name == "draft_placement") {  // K as run, and how it came about, after the layout
      settings.emplace_back("lookahead", std::to_string(setup.decode.lookahead));
      settings.emplace_back("lookahead_choice", setup.lookahead_choice);
      settings.emplace_back("lookahead_costs", setup.lookahead_costs);
    }
  }
  return settings;
}

int64_t RunPlan::kv_capacity(int64_t committed) const {
  return sequence_kv_capacity(committed, speculative() ? decode.lookahead : 0);
}

int64_t RunPlan::step_rows(int64_t sequences) const {
  return sequences * (speculative() ? decode.lookahead + 1 : 1);
}

int64_t RunPlan::positions_needed(int64_t committed) const {
  return committed + (!speculative() ? 0 : lookahead_auto ? 2 : decode.lookahead + 1);
}

bool RunPlan::tokens_reproducible() const {
  return !synthetic() && (mode != Mode::SSD || decode.limits.temperature == 0.0);
}

const std::string& RunPlan::setting(const std::string& name) const {
  static const std::string none;
  for (const auto& [key, value] : settings)
    if (key == name) return value;
  return none;
}

}  // namespace ssd
