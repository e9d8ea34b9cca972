#include "harness/cli.h"

#include <CLI/CLI.hpp>

#include "harness/cli_checks.h"

namespace ssd {

namespace {

// The shared flags' help where a run and characterize put it differently (characterize's refers
// to the run's, or narrows what it accepts).
struct SetupHelp {
  const char *target, *draft, *draft_ranks, *backend, *devices, *gemm;
};

const SetupHelp kRunHelp{
    .target =
        "Target model: a checkpoint directory, synthetic:PRESET or "
        "synthetic:path/config.json",
    .draft =
        "Draft model (SD, SSD): a model spec as for --target, or perturb:SIGMA = the "
        "target with seeded relative noise of scale SIGMA (a calibration draft)",
    .draft_ranks =
        "Draft ranks (D >= 0; default: launched ranks - T): with D > 1 the batch's "
        "sequences are split across them (row r on draft rank r % D); mpirun -np must "
        "be T + D",
    .backend =
        "Compute backend: cpu, cuda, or auto (cuda when built with it and a GPU is "
        "visible)",
    .devices = "CUDA: GPU index per node-local rank, comma separated (default: the local rank)",
    .gemm =
        "CPU GEMM: invariant (batch-invariant, bit-exact across batch shapes) or "
        "openblas (faster prefill, not batch-invariant); CUDA: invariant (own kernel "
        "for decode steps, cuBLAS for prefills past 64 rows), invariant-tc (the same on "
        "tensor cores: faster at every row count on an H200, bf16 products summed by the "
        "MMA unit) or cublas",
};

const SetupHelp kCharacterizeHelp{
    .target = "Target model (as for a run)",
    .draft = "Draft model (as for a run); without it only the target is characterized",
    .draft_ranks =
        "Draft ranks (D, 0 or 1; default: launched ranks - T); 0 with --draft: the "
        "draft is measured on target rank 0 (collocated)",
    .backend = "Compute backend: cpu, cuda, or auto",
    .devices = "CUDA: GPU index per node-local rank, comma separated",
    .gemm = "GEMM kernel, as for a run (invariant, invariant-tc, openblas, cublas)",
};

// The Models, Ranks and Hardware flags are a run's and characterize's alike (same names,
// defaults, checks and groups), so one command line characterizes exactly the layout a run
// would use. One function per group rather than one for all three: CLI11 lists groups in the
// order of their first flag, and a run's help shows its decoding flags between Models and Ranks.
void add_model_flags(CLI::App& app, SetupConfig& c, const SetupHelp& help) {
  const std::string models = "Models";
  app.add_option("--target", c.target, help.target)->group(models)->capture_default_str();
  app.add_option("--draft", c.draft, help.draft)->group(models);
  app.add_option("--weight-seed", c.weight_seed, "Seed of synthetic weights")
      ->group(models)
      ->capture_default_str();
}

void add_rank_flags(CLI::App& app, SetupConfig& c, const SetupHelp& help) {
  const std::string ranks = "Ranks";
  app.add_option("--target-tp", c.target_tp, "Target tensor-parallel ranks (T)")
      ->group(ranks)
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("--draft-ranks", c.draft_ranks, help.draft_ranks)
      ->group(ranks)
      ->check(at_least(0));
}

void add_hardware_flags(CLI::App& app, SetupConfig& c, const SetupHelp& help) {
  const std::string hardware = "Hardware";
  app.add_option("--backend", c.backend, help.backend)
      ->group(hardware)
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--devices", c.devices, help.devices)->group(hardware);
  app.add_option("-t,--threads", c.threads,
                 "CPU threads per rank (default: the node's cores / its ranks)")
      ->group(hardware)
      ->check(at_least(1));
  app.add_option("--gemm", c.gemm, help.gemm)
      ->group(hardware)
      ->check(CLI::IsMember({"invariant", "invariant-tc", "openblas", "cublas"}))
      ->capture_default_str();
  app.add_option("--weight-dtype", c.weight_dtype,
                 "How weights are kept: auto (the checkpoint's dtype; synthetic models follow "
                 "their config's torch_dtype, bf16 for the presets), f32 or bf16 (bf16 rounds an "
                 "fp32 checkpoint to nearest even). The CPU widens bf16 to fp32 in registers: "
                 "exact, half the bytes per token; CUDA keeps every weight in bf16")
      ->group(hardware)
      ->check(CLI::IsMember({"auto", "f32", "bf16"}))
      ->capture_default_str();
  // f32 stays the default: it is the exact path every committed figure and test was made with.
  app.add_option("--compute", c.compute,
                 "What the GEMMs multiply bf16 weights in: f32 (each weight widened to fp32 and "
                 "multiplied with fp32 activations: exact products), bf16 (activations rounded "
                 "to bf16, nearest even, and bf16 x bf16 products summed in fp32, as a GPU's "
                 "tensor cores do; the CPU's AVX512_BF16 vdpbf16ps with --gemm invariant and bf16 "
                 "weights; CUDA: --gemm invariant-tc), amx (the same rounding and products on the "
                 "CPU's AMX tiles, TDPBF16PS, summed in another order than bf16's; CPU only) or "
                 "auto (amx, else bf16, where the weights are bf16 and the CPU has the "
                 "instructions; CUDA: what --gemm runs)")
      ->group(hardware)
      ->check(CLI::IsMember({"f32", "bf16", "amx", "auto"}))
      ->capture_default_str();
}

void add_decoding_flags(CLI::App& app, RunConfig& c) {
  const std::string decoding = "Decoding", prompts = "Prompts", reps = "Repetitions";
  add_choice(app, "--mode", c.mode, {{"ar", Mode::AR}, {"sd", Mode::SD}, {"ssd", Mode::SSD}},
             "Decoding algorithm")
      ->group(decoding);
  app.add_option("-b,--batch-size", c.batch_size, "Sequences decoded together")
      ->group(decoding)
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("-n,--max-new-tokens", c.max_new_tokens, "Tokens to generate per sequence")
      ->group(decoding)
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("--temperature", c.temperature, "Sampling temperature; 0 = greedy")
      ->group(decoding)
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("-k,--lookahead", c.lookahead,
                 "Draft tokens per speculation round (K), or auto: the K of highest predicted "
                 "rate from step costs measured on this launch before decoding, chosen again "
                 "after the warm-up at the acceptance and step times its rounds measured, with "
                 "one more warm-up run where that changes K (default: auto for ssd, 4 for sd)")
      ->group(decoding)
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "auto") return "";
            char* end = nullptr;
            const long k = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end != '\0') return "expected auto or a whole number (got " + v + ")";
            return k >= 1 ? "" : "must be >= 1 (got " + v + ")";
          },
          "auto|INT:POSITIVE"));
  app.add_option("--draft-temperature", c.draft_temperature,
                 "Draft sampling temperature (default: --temperature)")
      ->group(decoding)
      ->check(at_least(0));
  app.add_option("--seed", c.seed, "Seed of sampling and random prompts")
      ->group(decoding)
      ->capture_default_str();
  app.add_flag("--ignore-eos", c.ignore_eos, "Keep generating past end-of-sequence tokens")
      ->group(decoding);

  app.add_option("--prompts", c.prompts_file, "Prompt file, JSONL with {\"ids\": [...]} per line")
      ->group(prompts)
      ->check(CLI::ExistingFile);
  app.add_option("--num-prompts", c.num_prompts, "Random prompts to generate (default: batch size)")
      ->group(prompts)
      ->check(at_least(1));
  app.add_option("--prompt-len", c.prompt_len, "Tokens per random prompt, BOS included")
      ->group(prompts)
      ->check(at_least(1))
      ->capture_default_str();

  app.add_option("--warmup", c.warmup, "Unrecorded runs before the recorded ones")
      ->group(reps)
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("-r,--reps", c.reps, "Recorded repetitions (mean +- stddev over these)")
      ->group(reps)
      ->check(at_least(1))
      ->capture_default_str();
}

void add_ssd_flags(CLI::App& app, RunConfig& c) {
  const std::string decoding = "Decoding";
  const std::string ssd = "SSD / SAGUARO";
  app.add_option("--fanout", c.fanout,
                 "Fan-out after a primary-speculated round: uniform:F, list:F0,...,FK or "
                 "geometric[:B] (Theorems 12 and 18)")
      ->group(ssd)
      ->capture_default_str();
  app.add_option("--fanout-backup", c.fanout_backup,
                 "Fan-out after a backup-speculated round (default: as --fanout)")
      ->group(ssd);
  app.add_option("--fanout-alpha", c.fanout_alpha,
                 "Acceptance a_p for geometric fan-out, or auto (measured, with a prior of 0.7 "
                 "worth 4 trials)")
      ->group(ssd)
      ->capture_default_str();
  app.add_option("--fanout-r", c.fanout_r,
                 "Power-law exponent r for geometric fan-out at every position (Theorem 12), or "
                 "auto (fitted to bonus ranks: one r after a rejection, one after all K "
                 "accepted, Theorem 18)")
      ->group(ssd)
      ->capture_default_str();
  app.add_option("--budget", c.budget,
                 "Total fan-out per sequence (the cache's branches), or auto: the budget of "
                 "highest predicted rate by Corollary 16 from the run's measured step costs, "
                 "0-128")
      ->group(ssd)
      ->capture_default_str();
  app.add_option("--saguaro-c", c.saguaro_c,
                 "Saguaro sampling constant C in [0, 1] (Definition 14); 1 = plain sampling")
      ->group(ssd)
      ->check(within(0, 1))
      ->capture_default_str();
  add_choice(app, "--fallback", c.fallback,
             {{"primary", FallbackMode::Primary},
              {"backup", FallbackMode::Backup},
              {"auto", FallbackMode::Auto}},
             "On a cache miss: primary (just-in-time drafting), backup, or auto (Theorem 17)")
      ->group(ssd);
  add_choice(app, "--backup", c.backup,
             {{"random", BackupKind::Random}, {"ngram", BackupKind::Ngram}},
             "Backup speculator: random tokens or ngram prompt lookup")
      ->group(ssd);
  app.add_option("--outcomes", c.outcomes,
                 "real, or synthetic:alpha=A,r=R[,r_all=RA,alpha_b=AB,r_b=RB]: forward passes "
                 "stay real, verification outcomes are drawn per speculation source (acceptance "
                 "A per token, bonus rank law P(rank > F) = (F+1)^-R, with RA (default R) after "
                 "all K accepted; after a backup round AB and "
                 "RB: a random token is accepted with probability ~1/vocab, so AB defaults to 0 "
                 "for --backup random and must be given for ngram; RB defaults to "
                 "log2(1/(1-A)), so that the draft's top guess is the bonus with probability A; "
                 "greedy and --saguaro-c 1 only, since the draws follow neither)")
      ->group(decoding)
      ->capture_default_str();
}

// Ranks, a run's own: characterize places the draft by whether a draft rank was launched.
void add_draft_placement_flag(CLI::App& app, RunConfig& c) {
  add_choice(app, "--draft-placement", c.draft_placement,
             {{"auto", DraftPlacement::Auto},
              {"separate", DraftPlacement::Separate},
              {"collocated", DraftPlacement::Collocated}},
             "separate: the draft on its own rank (hardware); collocated: on target rank 0 "
             "(ordinary SD); auto: separate when there is a draft rank")
      ->group("Ranks");
}

void add_output_flags(CLI::App& app, RunConfig& c) {
  const std::string output = "Output";
  app.add_option("-o,--out", c.out, "HDF5 result file")->group(output);
  app.add_flag("--overwrite", c.overwrite, "Replace an existing result file")->group(output);
  add_choice(
      app, "--output-format", c.output_format,
      {{"text", OutputFormat::Text}, {"csv", OutputFormat::Csv}, {"jsonl", OutputFormat::Jsonl}},
      "Console format: text (aligned rows), csv or jsonl (machine-readable rows)")
      ->group(output);
  app.add_option("--progress", c.progress,
                 "Seconds between '# progress' lines (tokens, elapsed, ETA); 0 = none")
      ->group(output)
      ->check(at_least(0))
      ->capture_default_str();
  app.add_flag("--show-tokens", c.show_tokens,
               "Print every sequence's generated token ids after the results")
      ->group(output);
}

void add_run_flags(CLI::App& app, RunConfig& c) {
  add_model_flags(app, c, kRunHelp);
  add_decoding_flags(app, c);
  add_ssd_flags(app, c);
  add_rank_flags(app, c, kRunHelp);
  add_draft_placement_flag(app, c);
  add_hardware_flags(app, c, kRunHelp);
  add_output_flags(app, c);
}

void add_characterize_flags(CLI::App& app, CharacterizeConfig& c) {
  add_model_flags(app, c, kCharacterizeHelp);
  add_rank_flags(app, c, kCharacterizeHelp);
  add_hardware_flags(app, c, kCharacterizeHelp);
  const std::string shape = "Decoding shape", measure = "Measurement", output = "Output";
  app.add_option("-k,--lookahead", c.lookahead, "K: verification is K+1 rows per sequence")
      ->group(shape)
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("-b,--batch-size", c.batch_size, "Sequences per forward pass")
      ->group(shape)
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("--context", c.context, "Committed tokens per sequence in the timed steps")
      ->group(shape)
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("--branch-rows", c.branch_rows,
                 "Rows of the timed draft branch steps, comma separated (default: b(K+1) times "
                 "1, 2, 4 and 8)")
      ->group(shape)
      ->delimiter(',')
      ->check(at_least(1));
  app.add_option("--rows", c.rows, "Rows of the prefill-shaped target GEMM")
      ->group(shape)
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("--min-time", c.min_time, "Seconds each measurement runs for, at least")
      ->group(measure)
      ->check(above(0))
      ->capture_default_str();
  app.add_option("--memory-bytes", c.memory_bytes,
                 "Bytes of the bandwidth buffers (well above the last-level cache)")
      ->group(measure)
      ->check(CLI::Range(int64_t(1) << 20, int64_t(1) << 40))
      ->capture_default_str();
  app.add_option("--comm-max-bytes", c.comm_max_bytes,
                 "Largest all-reduce and point-to-point message (sizes from 4 bytes, x4)")
      ->group(measure)
      ->check(CLI::Range(int64_t(4), int64_t(1) << 30))
      ->capture_default_str();
  app.add_flag("!--no-forward", c.forward,
               "Do not load the models or time forward passes (GEMM shapes come from the "
               "configs, so models too large for this machine can still be characterized)")
      ->group(measure);
  app.add_option("-o,--out", c.out, "HDF5 file for the measurements")->group(output);
  app.add_flag("--overwrite", c.overwrite, "Replace an existing result file")->group(output);
}

// CLI11's messages already name the flag; we only make them one line.
std::string one_line(std::string message) {
  for (char& ch : message)
    if (ch == '\n') ch = ' ';
  while (!message.empty() && message.back() == ' ') message.pop_back();
  return message;
}

}  // namespace

Cli parse_cli(int argc, const char* const* argv) {
  Cli cli;
  for (int i = 0; i < argc; ++i) cli.argv.emplace_back(argv[i]);

  CLI::App app{
      "ssd-bench: a benchmark harness for autoregressive, speculative and speculative "
      "speculative decoding.\nLaunch with mpirun -np N ssd-bench [flags]; see README.md.",
      "ssd-bench"};
  app.set_config("--config", "", "Read flags from a CLI11 config file (TOML or INI)");
  app.get_config_ptr()->group("Output");
  add_run_flags(app, cli.run);

  CheckpointConfig& ck = cli.checkpoint;
  CLI::App* make = app.add_subcommand(
      "make-checkpoint", "Write a synthetic model as an HF checkpoint (config.json + safetensors)");
  make->add_option("--preset", ck.preset, "Preset name or path to a config.json")->required();
  make->add_option("--out", ck.out, "Output directory")->required();
  make->add_option("--seed", ck.seed, "Weight seed")->capture_default_str();
  make->add_option("--dtype", ck.dtype, "Stored dtype")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  make->add_option("--shards", ck.shards, "Split the weights over this many safetensors files")
      ->check(at_least(1))
      ->capture_default_str();
  make->add_flag("--overwrite", ck.overwrite, "Replace an existing checkpoint");

  CLI::App* characterize = app.add_subcommand(
      "characterize",
      "Measure this launch's machine as a run would use it: memory bandwidth, GEMM throughput at "
      "the models' shapes, the target all-reduce, the draft<->target link, forward-pass times "
      "and the verification window (how many draft branch steps fit in one verification)");
  add_characterize_flags(*characterize, cli.characterize);
  app.require_subcommand(0, 1);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    throw CliExit{0, app.help()};
  } catch (const CLI::CallForAllHelp&) {
    throw CliExit{0, app.help("", CLI::AppFormatMode::All)};
  } catch (const CLI::ParseError& e) {
    throw CliExit{2, one_line(e.what())};
  }

  if (make->parsed()) {
    cli.command = Command::MakeCheckpoint;
  } else if (characterize->parsed()) {
    cli.command = Command::Characterize;
  } else {
    cli.command = Command::Run;
    if (cli.run.num_prompts != 0 && !cli.run.prompts_file.empty())
      throw CliExit{2, "--num-prompts: not allowed together with --prompts FILE"};
  }
  return cli;
}

}  // namespace ssd
