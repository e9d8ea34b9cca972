#!/usr/bin/env bash
# Configures and builds ssd-bench. Usage: scripts/build.sh BUILD_DIR [extra cmake args...]
# Quiet unless something fails (then the log is printed).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$1"
shift
jobs="$(nproc 2>/dev/null || echo 2)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! { cmake -S "$root" -B "$build_dir" "$@" && cmake --build "$build_dir" -j "$jobs"; } >"$log" 2>&1; then
  cat "$log"
  echo "build.sh: build in $build_dir failed" >&2
  exit 1
fi
