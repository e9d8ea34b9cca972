// The command line: flags grouped by topic, CLI11 config files, validation of every value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ssd/backup_speculator.h"
#include "ssd/fallback.h"

namespace ssd {

// --mode: autoregressive, speculative (SD), speculative speculative (SSD, SAGUARO).
enum class Mode { AR, SD, SSD };
const char* mode_name(Mode mode);  // "ar", "sd", "ssd"
// --output-format: aligned text rows, or machine-readable CSV or JSON lines.
enum class OutputFormat { Text, Csv, Jsonl };
const char* output_format_name(OutputFormat format);  // "text", "csv", "jsonl"
// --draft-placement: where the draft runs; Auto is resolved by the run plan (Separate when a
// draft rank was launched), None for AR.
enum class DraftPlacement { Auto, Collocated, Separate, None };
const char* placement_name(DraftPlacement placement);

// The models, their rank layout and the hardware they run on: what a run and `ssd-bench
// characterize` take alike, through the same flags (harness/cli.cpp), so that characterize
// measures the machine exactly as a run with those flags uses it. Both configs hold it as their
// base, so code reading either names these settings alike (c.target, c.threads) and
// launch_spec (harness/launch.h) takes either.
struct SetupConfig {
  // Models
  std::string target = "synthetic:llama-124m";
  // A model spec or perturb:SIGMA; empty: none (a run: SD and SSD only; characterize: the
  // target alone)
  std::string draft;
  uint64_t weight_seed = 0;
  // Ranks
  int target_tp = 1;
  int draft_ranks = -1;  // -1: world size - target_tp
  // Hardware
  std::string backend = "auto";
  std::string devices;  // GPU per node-local rank, e.g. "0,1,2,3"; empty = the local rank
  int threads = 0;      // 0 = the node's cores / its ranks
  std::string gemm = "invariant";
  std::string weight_dtype = "auto";  // auto (the checkpoint's) | f32 | bf16
  // f32 | bf16 | auto (--compute): f32 by default, so that runs and committed figures keep the
  // exact fp32 products unless bf16 is asked for.
  std::string compute = "f32";
};

// Settings of a benchmark run (the default command).
struct RunConfig : SetupConfig {
  // Ranks
  DraftPlacement draft_placement = DraftPlacement::Auto;
  // Decoding
  Mode mode = Mode::AR;
  int batch_size = 1;
  int max_new_tokens = 128;
  double temperature = 0.0;
  double draft_temperature = -1.0;  // < 0: same as temperature
  // -k as given: K, or auto (K chosen from step costs measured before decoding, harness/
  // calibrate.h); "" = the mode's default (auto for SSD, 4 for SD).
  std::string lookahead;
  uint64_t seed = 0;
  bool ignore_eos = false;
  // SSD / SAGUARO
  std::string fanout = "geometric";
  std::string fanout_backup;  // empty: same as fanout
  std::string fanout_alpha = "auto";
  std::string fanout_r = "auto";
  std::string budget = "auto";
  double saguaro_c = 1.0;
  FallbackMode fallback = FallbackMode::Auto;
  BackupKind backup = BackupKind::Random;
  std::string outcomes = "real";  // real | synthetic:alpha=A,r=R
  // Prompts
  std::string prompts_file;  // JSONL, {"ids": [...]} per line; empty = random prompts
  int num_prompts = 0;       // random prompts; 0 = one batch
  int prompt_len = 32;
  // Repetitions
  int warmup = 1;
  int reps = 3;
  // Output
  std::string out;  // HDF5 file; empty = none
  bool overwrite = false;
  OutputFormat output_format = OutputFormat::Text;
  bool show_tokens = false;
  double progress = 10.0;  // seconds between progress lines; 0 = none
};

struct CheckpointConfig {
  std::string preset;
  std::string out;
  uint64_t seed = 0;
  std::string dtype = "f32";
  int shards = 1;
  bool overwrite = false;
};

// Settings of `ssd-bench characterize`: the run's models, rank layout and hardware (the base),
// the decoding shape to characterize (K, batch, context) and how long to measure.
struct CharacterizeConfig : SetupConfig {
  // The decoding shape
  int lookahead = 4;             // K: verification is K+1 rows per sequence
  int batch_size = 1;            // sequences per step
  int context = 128;             // committed tokens per sequence during the timed steps
  std::vector<int> branch_rows;  // draft branch-step rows; empty = b(K+1) x 1, 2, 4, 8
  int rows = 128;                // rows of the prefill-shaped target GEMM
  // Measurement
  double min_time = 0.2;                       // seconds per measurement (at least)
  int64_t memory_bytes = int64_t(1) << 30;     // bandwidth buffers, in all
  int64_t comm_max_bytes = int64_t(64) << 20;  // largest all-reduce / point-to-point message
  bool forward = true;                         // load the models and time forward passes
  // Output
  std::string out;
  bool overwrite = false;
};

enum class Command { Run, MakeCheckpoint, Characterize };

struct Cli {
  Command command = Command::Run;
  RunConfig run;
  CheckpointConfig checkpoint;
  CharacterizeConfig characterize;
  std::vector<std::string> argv;
};

// Thrown instead of exiting so main decides how every rank leaves: code 0 for --help (the
// text is the help), 2 for bad input (the text is one line naming the flag).
struct CliExit {
  int code;
  std::string text;
};

Cli parse_cli(int argc, const char* const* argv);

}  // namespace ssd
