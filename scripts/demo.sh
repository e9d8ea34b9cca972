#!/usr/bin/env bash
# The main job: installs dependencies, builds Release, and runs the default benchmark
# (autoregressive decoding of the embedded synthetic llama-124m) into out/demo-ar.h5.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
bash scripts/build.sh build/release -DCMAKE_BUILD_TYPE=Release
mkdir -p out
./build/release/ssd-bench characterize --threads 1
./build/release/ssd-bench --threads 1 --out out/demo-ar.h5 --overwrite "$@"
