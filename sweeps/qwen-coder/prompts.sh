#!/usr/bin/env bash
# Tokenizes sweeps/prompts/code.jsonl for the Qwen2.5-Coder pair (one tokenizer for target and
# draft) and writes the subsets the sweeps here read, from the repository root:
#   sweeps/qwen-coder/code6.jsonl   fig3-fanout: tasks 1, 6 (write), 15, 20 (fix), 27, 35 (explain)
#   sweeps/qwen-coder/code3.jsonl   fig4-temperature, fig5-saguaro-c: tasks 1, 15, 27
#   sweeps/qwen-coder/code8.jsonl   every-mode: tasks 1, 6, 10, 15, 20, 27, 31, 35 (batch up to 8)
#   sweeps/qwen-coder/code2.jsonl   speed-baseline, and batch 1 and 2 of fig6-fallback and
#                                   fig7-batch: tasks 1, 15
#   sweeps/qwen-coder/code4.jsonl   batch 4 of fig6-fallback and fig7-batch: tasks 1, 6, 15, 27
#   sweeps/qwen-coder/code16.jsonl  batch 16 of fig6-fallback and fig7-batch: code8's tasks and
#                                   3, 8, 13 (write), 18, 22 (fix), 29, 33, 37 (explain)
# Subsets, not all 38 tasks: ssd-bench decodes every prompt of its file, and on 2 CPU cores a
# 1.5B target decodes ~5 tok/s, so a sweep of ~10 minutes affords a few hundred tokens per run.
# One task of each kind (write, fix, explain) in each subset, Python first.
# The files are committed; this script (run by scripts/make-results.sh --set qwen2.5-coder)
# says how they were made and fails when the tokenizer no longer gives the committed ids.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
model=models/qwen2.5-coder-1.5b
[ -f "$model/tokenizer.json" ] || { echo "prompts.sh: no $model (bash scripts/get-model.sh" \
  "qwen2.5-coder-1.5b)" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
analysis/ssd-prompts --tokenizer "$model" sweeps/prompts/code.jsonl -o "$tmp/all.jsonl" >&2
sed -n '1p;6p;15p;20p;27p;35p' "$tmp/all.jsonl" > "$tmp/code6.jsonl"
sed -n '1p;15p;27p' "$tmp/all.jsonl" > "$tmp/code3.jsonl"
sed -n '1p;6p;10p;15p;20p;27p;31p;35p' "$tmp/all.jsonl" > "$tmp/code8.jsonl"
sed -n '1p;15p' "$tmp/all.jsonl" > "$tmp/code2.jsonl"
sed -n '1p;6p;15p;27p' "$tmp/all.jsonl" > "$tmp/code4.jsonl"
sed -n '1p;3p;6p;8p;10p;13p;15p;18p;20p;22p;27p;29p;31p;33p;35p;37p' "$tmp/all.jsonl" \
  > "$tmp/code16.jsonl"
status=0
for name in code6 code3 code8 code2 code4 code16; do
  out="sweeps/qwen-coder/$name.jsonl"
  if [ ! -f "$out" ]; then
    cp "$tmp/$name.jsonl" "$out"
    echo "prompts.sh: wrote $out" >&2
  elif ! cmp -s "$tmp/$name.jsonl" "$out"; then
    echo "prompts.sh: $out differs from what $model's tokenizer gives now; delete it and" \
      "run this again to rewrite it" >&2
    status=1
  fi
done
exit "$status"
