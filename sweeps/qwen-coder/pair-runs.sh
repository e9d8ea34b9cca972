# Sourced by the pair's batch-1 scripts (batch1.sh, draft-sizes.sh), from the repository root:
# the checks every one makes before its first run and the launcher they share.
#   pair_runs_setup NAME   checks TARGET/DRAFT checkpoints (default models/qwen2.5-coder-1.5b,
#                          -0.5b), two cores and build/release/ssd-bench, naming NAME in each
#                          one-line error; sets target, draft, bin and common (the runs' flags:
#                          code2 prompts, MAX_NEW_TOKENS (128), EOS ignored, batch 1, --compute
#                          auto, one repetition); lets mpirun run as root.
#   on CORES RANKS ARGS... RANKS ranks of CORES cores each, every rank bound to its own.
pair_runs_setup() {
  local name="$1" m
  target="${TARGET:-models/qwen2.5-coder-1.5b}" draft="${DRAFT:-models/qwen2.5-coder-0.5b}"
  for m in "$target" "$draft"; do
    [ -f "$m/config.json" ] || { echo "$name: no checkpoint in $m (scripts/get-model.sh)" >&2
      exit 2; }
  done
  [ "$(nproc)" -ge 2 ] || { echo "$name: needs 2 cores, this machine has $(nproc)" >&2; exit 2; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  bin=./build/release/ssd-bench
  [ -x "$bin" ] || { echo "$name: no $bin (bash scripts/build.sh build/release" \
    "-DCMAKE_BUILD_TYPE=Release)" >&2; exit 2; }
  common=(--target "$target" --prompts sweeps/qwen-coder/code2.jsonl --ignore-eos --batch-size 1
    --max-new-tokens "${MAX_NEW_TOKENS:-128}" --compute auto --reps 1 --overwrite)
}

on() { mpirun --map-by "slot:PE=$1" --bind-to core -np "$2" "$bin" "${@:3}"; }
