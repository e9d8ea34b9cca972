#!/usr/bin/env bash
# Regenerates results/: the CPU-sized figure sweeps on this machine, their figures, the
# characterization, and results/summary.txt / validate.txt. Takes ~15 minutes on 2 cores.
# Usage: scripts/make-results.sh [sweep names...]   (default: all fig*.toml sweeps)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
bash scripts/build.sh build/release -DCMAKE_BUILD_TYPE=Release
mkdir -p results
sweeps=("$@")
if [ ${#sweeps[@]} -eq 0 ]; then
  sweeps=(fig7-speedup fig7-pareto fig3-fanout fig4-temperature fig5-saguaro-c fig6-fallback)
fi
./build/release/ssd-bench characterize --threads 1 --out results/characterize.h5 --overwrite \
  | tee results/characterize.txt
for name in "${sweeps[@]}"; do
  rm -rf "results/$name"
  sweeps/run "sweeps/$name.toml" --out "results/$name"
  rm -rf "results/$name/logs"
done
files=(results/fig*/runs/*.h5)
analysis/ssd-analyze summary "${files[@]}" | tee results/summary.txt
analysis/ssd-analyze validate "${files[@]}" | tee results/validate.txt || true
analysis/ssd-analyze figures "${files[@]}" results/characterize.h5 --out results/figures
{
  echo "machine: $(lscpu | sed -n 's/^Model name:[ \t]*//p'), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "commit: $(git rev-parse --short HEAD), date: $(date -u +%F)"
} > results/machine.txt
