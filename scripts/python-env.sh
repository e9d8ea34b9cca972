#!/usr/bin/env bash
# The project's Python environment for the model tools: a venv at .venv made from Debian's
# /usr/bin/python3 with its system site packages (numpy, h5py, matplotlib from install-deps),
# plus the PyPI packages the GGUF converter and the tokenizer need. Idempotent and quiet; prints
# the venv's python on the last line. Usage: scripts/python-env.sh [PACKAGE ...] (extra packages).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
packages=("gguf>=0.10" "tokenizers>=0.15" "jinja2>=3" "$@")

if [ ! -x "$venv/bin/python" ]; then
  bash "$root/scripts/install-deps.sh" >&2  # python3-venv and the system site packages
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
missing=()
for spec in "${packages[@]}"; do
  name="${spec%%[<>=]*}"
  "$venv/bin/python" -m pip show -q "$name" >/dev/null 2>&1 || missing+=("$spec")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check "${missing[@]}" >&2; then
    echo "python-env: could not install ${missing[*]} from the package registry (PyPI): is it" \
      "reachable from this machine (proxy, PIP_INDEX_URL)?" >&2
    exit 1
  fi
fi
echo "$venv/bin/python"
