#!/usr/bin/env bash
# Installs everything ssd-bench needs to build, test and analyse, from Debian's
# packages only. Idempotent and quiet: a second run installs nothing.
# Python: we use Debian's /usr/bin/python3 with python3-numpy/h5py/matplotlib,
# because the `python3` first on PATH may be a pyenv interpreter without them.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  openmpi-bin libopenmpi-dev
  libhdf5-dev hdf5-tools
  libcli11-dev nlohmann-json3-dev
  libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-h5py python3-matplotlib
  python3-venv  # the venv of scripts/python-env.sh (real models and text tools)
  clang libomp-dev  # the libFuzzer targets of scripts/fuzz.sh
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
