#!/usr/bin/env bash
# The main job: installs dependencies, builds Release, characterizes this machine, runs the
# default benchmark (AR on the embedded synthetic llama-124m), then AR vs SD vs SSD at batch 1
# (sweeps/fig7-speedup.toml), validates the paper's speedup formulas on those runs and draws
# the figures. Extra arguments go to the default ssd-bench run.
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
