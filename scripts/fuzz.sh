#!/usr/bin/env bash
# Fuzzes ssd-bench's input loaders and its draft<->target message decoding with libFuzzer
# (clang, -fsanitize=fuzzer,address,undefined): the safetensors header, the shard index,
# config.json, the prompts JSONL, the CLI config file and the three message types. Every target
# first replays its regression inputs (tests/fuzz/regressions/TARGET/, inputs that once crashed
# it), then fuzzes for SECONDS from a seed corpus the targets write themselves. Fails on any
# crash, sanitizer report, leak or input slower than 10 s; the input that did it is copied to
# build/fuzz/findings/TARGET/ (add it to the regressions once fixed). Targets run side by side,
# as many at once as there are cores (each is one process on one core), so the whole takes
# about SECONDS x 6 / cores.
# Usage: scripts/fuzz.sh [SECONDS]   (default 60 per target)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
case "$seconds" in '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number (got $seconds)" >&2; exit 2 ;; esac
command -v clang++ > /dev/null || { echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs clang)" >&2; exit 2; }
build="$root/build/fuzz"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! { CC=clang CXX=clang++ cmake -S "$root/tests/fuzz" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
  cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)"; } > "$log" 2>&1; then
  cat "$log"
  echo "fuzz.sh: building the fuzz targets failed" >&2
  exit 1
fi

# Seed corpora: written by the targets themselves (checkpoints, preset configs, messages), plus
# the text inputs below.
corpus="$build/corpus"
rm -rf "$corpus" "$build/findings"
for t in safetensors shard_index config prompts cli_config messages; do mkdir -p "$corpus/$t"; done
for t in safetensors config messages; do SSD_FUZZ_WRITE_SEEDS="$corpus/$t" "$build/fuzz_$t"; done
printf '{"weight_map": {"a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}}\n' \
  > "$corpus/shard_index/index.json"
printf '{"ids": [1, 2, 3]}\n{"ids": [7], "text": "hi"}\n' > "$corpus/prompts/ids.jsonl"
printf '{"text": "needs ssd-prompts"}\n' > "$corpus/prompts/text.jsonl"
printf 'mode = "ssd"\ndraft = "perturb:0.1"\nlookahead = 3\nfanout = "list:2,1,1,1"\nbatch-size = 2\n' \
  > "$corpus/cli_config/run.toml"
printf '[characterize]\ntarget = "synthetic:tiny-llama"\nmin-time = 0.1\n' > "$corpus/cli_config/sub.toml"

export TMPDIR="$build/tmp"
mkdir -p "$TMPDIR"
# Leak checking stays on: a loader that leaks on a bad input fails here.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# One target: its regressions, then SECONDS of fuzzing. Its report goes to logs/TARGET.out and
# its verdict to logs/TARGET.rc, so that targets can run side by side, one per core.
fuzz_target() {
  local t="$1" out="$build/logs/$1.out" tlog="$build/logs/$1.log"
  local regressions="$root/tests/fuzz/regressions/$t" findings="$build/findings/$t"
  if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then
    if ! "$build/fuzz_$t" "$regressions"/* > "$tlog" 2>&1; then
      { tail -n 40 "$tlog"; echo "fuzz.sh: fuzz_$t fails on a regression input in tests/fuzz/regressions/$t"; } > "$out"
      echo 1 > "$build/logs/$t.rc"
      return
    fi
  fi
  mkdir -p "$findings"
  if "$build/fuzz_$t" "$corpus/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -artifact_prefix="$findings/" -print_final_stats=1 > "$tlog" 2>&1; then
    local runs
    runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$tlog" | grep -o '[0-9]*$' || echo '?')"
    echo "fuzz_$t: $runs inputs in ${seconds} s, no crash" > "$out"
    echo 0 > "$build/logs/$t.rc"
  else
    { tail -n 40 "$tlog"; echo "fuzz.sh: fuzz_$t found a failure; its input is in $findings"; } > "$out"
    echo 1 > "$build/logs/$t.rc"
  fi
}

targets=(safetensors shard_index config prompts cli_config messages)
rm -rf "$build/logs"
mkdir -p "$build/logs"
parallel="$(nproc 2>/dev/null || echo 2)"
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  fuzz_target "$t" &
done
wait
failed=0
for t in "${targets[@]}"; do
  cat "$build/logs/$t.out" 2> /dev/null || echo "fuzz.sh: fuzz_$t left no report"
  if [ "$(cat "$build/logs/$t.rc" 2> /dev/null)" != 0 ]; then failed=1; fi
done
exit "$failed"
