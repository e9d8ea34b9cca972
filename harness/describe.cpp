// A run's settings by name: the enums' names (the flags' values) and describe_flags(), the list
// the console header prints and the HDF5 file stores under /config.
#include <sstream>

#include "harness/plan.h"

namespace ssd {

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::SD:
      return "sd";
    case Mode::SSD:
      return "ssd";
    case Mode::AR:
      break;
  }
  return "ar";
}

const char* output_format_name(OutputFormat format) {
  switch (format) {
    case OutputFormat::Csv:
      return "csv";
    case OutputFormat::Jsonl:
      return "jsonl";
    case OutputFormat::Text:
      break;
  }
  return "text";
}

const char* placement_name(DraftPlacement placement) {
  switch (placement) {
    case DraftPlacement::Collocated:
      return "collocated";
    case DraftPlacement::Separate:
      return "separate";
    case DraftPlacement::None:
      return "none";
    case DraftPlacement::Auto:
      break;
  }
  return "auto";
}

Settings describe_flags(const RunConfig& c, const RunPlan& plan) {
  auto str = [](auto v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  return {
      {"mode", mode_name(c.mode)},
      {"target", c.target},
      {"draft", c.draft.empty() ? "none" : c.draft},
      {"weight_seed", str(c.weight_seed)},
      {"target_tp", str(c.target_tp)},
      {"draft_ranks", str(plan.launch.draft_ranks)},
      {"draft_placement", placement_name(plan.placement)},
      {"lookahead", str(plan.decode.lookahead)},
      {"lookahead_choice", plan.lookahead_choice},
      {"lookahead_costs", "none"},
      {"draft_temperature", str(plan.draft_temperature)},
      {"fanout", c.fanout},
      {"fanout_backup", c.fanout_backup.empty() ? c.fanout : c.fanout_backup},
      {"fanout_alpha", c.fanout_alpha},
      {"fanout_r", c.fanout_r},
      {"budget", c.budget},
      {"saguaro_c", str(c.saguaro_c)},
      {"fallback", fallback_mode_name(c.fallback)},
      {"backup", backup_kind_name(c.backup)},
      {"outcomes", c.outcomes},
      {"batch_size", str(c.batch_size)},
      {"max_new_tokens", str(c.max_new_tokens)},
      {"temperature", str(c.temperature)},
      {"seed", str(c.seed)},
      {"ignore_eos", c.ignore_eos ? "true" : "false"},
      {"prompts", c.prompts_file.empty() ? "random" : c.prompts_file},
      {"num_prompts", str(c.prompts_file.empty() ? plan.prompts.count : 0)},
      {"prompt_len", str(c.prompt_len)},
      {"warmup", str(c.warmup)},
      {"reps", str(c.reps)},
      {"backend", c.backend},
      {"threads", str(plan.launch.threads)},
      {"gemm", c.gemm},
      {"weight_dtype", c.weight_dtype},
      {"compute", c.compute},
      {"devices", c.devices.empty() ? "local rank" : c.devices},
      {"out", c.out.empty() ? "none" : c.out},
  };
}

}  // namespace ssd
