// A run's flags by name, in the order the console header prints them and the HDF5 file stores
// them under /config, as the plan resolved them. What the launch settled (the backend, the
// prompts' count, K) joins them in run_settings (harness/plan.cpp).
#include <sstream>

#include "harness/plan.h"

namespace ssd {

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
      // run_settings (harness/plan.cpp) puts K's three entries after this one, by its name.
      {"draft_placement", placement_name(plan.placement)},
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
