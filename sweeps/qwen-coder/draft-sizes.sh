#!/usr/bin/env bash
# SSD against SD at equal hardware with drafts of four sizes (docs/pair-measurements.md, "At
# equal hardware"): the pair's 1.5B target, and as the draft the pair's 0.5B (d = 0.32 of the
# target's weight bytes) or one of three Qwen2-shaped synthetic drafts with the pair's vocabulary
# (sweeps/qwen-coder/draft-sizes/*.json: d = 0.20, 0.10, 0.05). Outcomes are drawn at alpha 0.9
# (--outcomes synthetic:alpha=0.9,r=3), so that every draft accepts alike while every forward
# pass stays real. Per pass: AR on one rank of two threads, then per draft SD on one rank of two
# threads at two K and SSD with its defaults on 1 + 1 cores. Afterwards `ssd-analyze traffic`
# splits every SSD/SD into bytes x rate and gives the ceiling 1 - d/2 beside it.
#
#   sweeps/qwen-coder/draft-sizes.sh OUT_DIR [PASSES]    (default 2)
#
# Writes OUT_DIR/runs/pP-{ar2,DRAFT-sd2-kK,DRAFT-ssd}.h5, traffic.txt, summary.txt. About 7
# minutes a pass on a 2-core Intel guest with AMX. Needs two cores and the checkpoints
# (scripts/get-model.sh qwen2.5-coder-1.5b, -0.5b; TARGET= and DRAFT= move them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
[ $# -ge 1 ] || { echo "draft-sizes.sh: usage: draft-sizes.sh OUT_DIR [PASSES]" >&2; exit 2; }
out="$1" passes="${2:-2}"
[[ "$passes" =~ ^[1-9][0-9]*$ ]] || { echo "draft-sizes.sh: PASSES: a whole number >= 1" >&2
  exit 2; }
source sweeps/qwen-coder/pair-runs.sh
pair_runs_setup draft-sizes.sh
mkdir -p "$out/runs"
drawn=(--outcomes synthetic:alpha=0.9,r=3)
sizes=sweeps/qwen-coder/draft-sizes
# name, draft spec, SD's two K (the round model's best SD K at alpha 0.9 and one beside it).
drafts=("d0.32 $draft 4 5" "d0.20 synthetic:$sizes/d0.20-896x12.json 6 8"
  "d0.10 synthetic:$sizes/d0.10-896x1.json 8 10" "d0.05 synthetic:$sizes/d0.05-448x2.json 10 13")
report() { grep -E "^# Avg decode throughput" | sed "s|^|   $1: |"; }

for ((p = 1; p <= passes; ++p)); do
  echo "== pass $p"
  on 2 1 "${common[@]}" --threads 2 --warmup 0 --out "$out/runs/p$p-ar2.h5" | report ar2
  for entry in "${drafts[@]}"; do
    read -r name spec k1 k2 <<< "$entry"
    for k in "$k1" "$k2"; do
      on 2 1 "${common[@]}" "${drawn[@]}" --threads 2 --warmup 0 --mode sd --draft "$spec" \
        -k "$k" --out "$out/runs/p$p-$name-sd2-k$k.h5" | report "$name sd2 K $k"
    done
    on 1 2 "${common[@]}" "${drawn[@]}" --mode ssd --draft "$spec" \
      --out "$out/runs/p$p-$name-ssd.h5" | report "$name ssd"
  done
done
analysis/ssd-analyze summary "$out"/runs/*.h5 > "$out/summary.txt"
analysis/ssd-analyze traffic "$out"/runs/*.h5 > "$out/traffic.txt"
echo "== $out/traffic.txt: SSD/SD, bytes x rate, and the ceiling at one read rate"
