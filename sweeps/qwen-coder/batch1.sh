#!/usr/bin/env bash
# C3's batch-1 comparison of the real pair, side by side in both layouts, with forecasts:
#
#   sweeps/qwen-coder/batch1.sh OUT_DIR [PASSES_T0 [PASSES_T1]]   (default 2 and 2)
#
# Each pass runs five modes in turn, so that a shared host's drift lands on all of them alike:
# AR and SD (K = 4) on one core, SSD with its defaults on 1 + 1 cores (target and draft a core
# each: the paper's layout), SD and AR on one rank of two threads (equal hardware against SSD's
# two cores). Code2 prompts, 128 new tokens, EOS ignored, batch 1, --compute auto; AR and SD
# without a warm-up run, SSD with its default one (so that -k auto takes the measured
# acceptance); every rank bound to cores of its own. Greedy passes first, then T = 1. After
# them, a characterize file of the pair per layout (2 ranks of 1 thread; 1 rank of 2 threads)
# and `ssd-analyze predict --validate` of every run against the file of its layout, plus
# summary and traffic (SSD/SD split into bytes a token x read rate).
# Writes OUT_DIR/runs/pP-tT-{ar1,sd1,ssd,sd2,ar2}.h5, characterize{,-2threads}.{h5,txt},
# summary.txt, predict.txt, traffic.txt. About 5.5 minutes a pass and 5-8 for the two
# characterize files on a 2-core Intel guest with AMX (results/qwen2.5-coder-amx/batch1).
# Needs two cores and the checkpoints (scripts/get-model.sh qwen2.5-coder-1.5b, -0.5b); the
# model directories can be moved with TARGET= and DRAFT=, the tokens with MAX_NEW_TOKENS=.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
[ $# -ge 1 ] || { echo "batch1.sh: usage: batch1.sh OUT_DIR [PASSES_T0 [PASSES_T1]]" >&2; exit 2; }
out="$1" passes_t0="${2:-2}" passes_t1="${3:-2}"
if ! [[ "$passes_t0" =~ ^[0-9]+$ && "$passes_t1" =~ ^[0-9]+$ ]] ||
  ((passes_t0 + passes_t1 == 0)); then
  echo "batch1.sh: PASSES_T0 and PASSES_T1: whole numbers, at least one pass in all" >&2
  exit 2
fi
source sweeps/qwen-coder/pair-runs.sh
pair_runs_setup batch1.sh
mkdir -p "$out/runs"
# The last lines of a run's console: its throughput and the weights it read.
report() { grep -E "^# (Avg decode throughput|Weight traffic)" | sed "s|^|   $1: |"; }

pass() {  # pass P T
  local p="$1" t="$2" f="$out/runs/p$1-t$2"
  echo "== pass $p, T = $t"
  on 1 1 "${common[@]}" --temperature "$t" --warmup 0 --out "$f-ar1.h5" | report ar1
  on 1 1 "${common[@]}" --temperature "$t" --warmup 0 --mode sd --draft "$draft" -k 4 \
    --out "$f-sd1.h5" | report sd1
  on 1 2 "${common[@]}" --temperature "$t" --mode ssd --draft "$draft" --out "$f-ssd.h5" |
    report ssd
  on 2 1 "${common[@]}" --temperature "$t" --warmup 0 --threads 2 --mode sd --draft "$draft" \
    -k 4 --out "$f-sd2.h5" | report sd2
  on 2 1 "${common[@]}" --temperature "$t" --warmup 0 --threads 2 --out "$f-ar2.h5" |
    report ar2
}
for ((p = 1; p <= passes_t0; ++p)); do pass "$p" 0; done
for ((p = 1; p <= passes_t1; ++p)); do pass "$p" 1; done

echo "== characterize: 2 ranks of 1 thread, then 1 rank of 2 threads"
pair=(characterize --compute auto --target "$target" --draft "$draft" --overwrite)
on 1 2 "${pair[@]}" --threads 1 --out "$out/characterize.h5" > "$out/characterize.txt"
on 2 1 "${pair[@]}" --threads 2 --out "$out/characterize-2threads.h5" \
  > "$out/characterize-2threads.txt"

analyze=analysis/ssd-analyze
"$analyze" summary "$out"/runs/*.h5 > "$out/summary.txt"
"$analyze" traffic "$out"/runs/*.h5 > "$out/traffic.txt"
{
  echo "### one thread per rank (AR and SD on one core, SSD on 1 + 1), against characterize.h5" \
    "(2 ranks, 1 thread each)"
  "$analyze" predict --validate "$out"/runs/*-ar1.h5 "$out"/runs/*-sd1.h5 "$out"/runs/*-ssd.h5 \
    --characterize "$out/characterize.h5"
  echo
  echo "### two threads (AR and SD on one rank of 2 threads), against characterize-2threads.h5" \
    "(1 rank, 2 threads)"
  "$analyze" predict --validate "$out"/runs/*-ar2.h5 "$out"/runs/*-sd2.h5 \
    --characterize "$out/characterize-2threads.h5"
} > "$out/predict.txt"
grep -E "^# .*within" "$out/predict.txt"
# The first SSD/SD splits (sed reads to the end: head could stop grep with SIGPIPE under pipefail).
grep -E "equal hardware|cores against" "$out/traffic.txt" | sed -n 1,4p
echo "== $out: runs/, characterize*.{h5,txt}, summary.txt, predict.txt, traffic.txt"
