#include "harness/run.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "harness/prompts.h"
#include "harness/report.h"
#include "harness/result_writer.h"
#include "harness/run_info.h"
#include "harness/summary.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/errors.h"
#include "model/model.h"
#include "ssd/autoregressive.h"

namespace ssd {
namespace {

// Re-throws an input error about a flag's value with the flag's name in front.
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

void check_output_path(const RunConfig& c) {
  if (c.out.empty()) return;
  namespace fs = std::filesystem;
  if (fs::exists(c.out) && !c.overwrite)
    throw InputError("--out: " + c.out + " exists; pass --overwrite to replace it");
  const fs::path dir = fs::path(c.out).parent_path();
  if (!dir.empty() && !fs::is_directory(dir))
    throw InputError("--out: directory " + dir.string() + " does not exist");
}

}  // namespace

int run_benchmark(const Cli& cli) {
  RunConfig config = cli.run;
  // Fail on a bad output path before spending minutes on the run.
  check_output_path(config);

  std::unique_ptr<WeightSource> source =
      for_flag("--target", [&] { return open_weight_source(config.target, config.weight_seed); });
  const ModelConfig& mc = source->config();

  Prompts prompts = config.prompts_file.empty()
                        ? random_prompts(mc, config.num_prompts, config.prompt_len, config.seed)
                        : load_prompts(config.prompts_file, mc.vocab_size);
  config.num_prompts = int(prompts.size());
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  if (mc.max_position_embeddings > 0 &&
      int64_t(longest) + config.max_new_tokens > mc.max_position_embeddings)
    throw InputError("--max-new-tokens: prompt (" + std::to_string(longest) + ") + " +
                     std::to_string(config.max_new_tokens) +
                     " new tokens exceed the model's max_position_embeddings (" +
                     std::to_string(mc.max_position_embeddings) + ")");

  CpuBackend backend(config.threads,
                     config.gemm == "openblas" ? GemmKind::OpenBLAS : GemmKind::Invariant);
  RunInfo info = collect_run_info();
  info.ranks.push_back(
      {0, "target tp 0/1", info.host, int(getpid()), backend.device_name(), config.threads});

  const double load_start = now_seconds();
  Model model = load_model(*source, backend);
  const double load_s = now_seconds() - load_start;

  ModelSummary target{config.target, source->describe(), mc, model.weights.bytes, load_s};
  Report report(config.output_format, std::cout);
  report.header(info, config, target);

  DecodeSettings settings;
  settings.batch_size = config.batch_size;
  settings.max_new_tokens = config.max_new_tokens;
  settings.temperature = config.temperature;
  settings.seed = config.seed;
  settings.ignore_eos = config.ignore_eos;

  const double clock_zero = now_seconds();
  std::vector<std::vector<int32_t>> generated;
  for (int w = 0; w < config.warmup; ++w)
    run_autoregressive(model, prompts, settings, -1, clock_zero, nullptr, generated);

  RunRecords records;
  bool identical = true;
  for (int rep = 0; rep < config.reps; ++rep) {
    RepTotals totals =
        run_autoregressive(model, prompts, settings, rep, clock_zero, &records.steps, generated);
    records.reps.push_back(totals);
    if (rep == 0)
      records.generated = generated;
    else if (generated != records.generated)
      identical = false;
  }
  const RunSummary summary = summarize(records, identical);
  report.result_row(config, target, summary);
  if (config.show_tokens) report.tokens(records.generated);

  if (!config.out.empty())
    write_result_file(config.out, config.overwrite, cli.argv, info, config, target, prompts,
                      records, summary);
  report.final_lines(summary, config.out);
  release_model(model);
  return identical ? 0 : 1;
}

}  // namespace ssd
