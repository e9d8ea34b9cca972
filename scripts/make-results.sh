#!/usr/bin/env bash
# Regenerates results/ on this machine, in one command:
#
#   scripts/make-results.sh [SWEEP...]   # default: the six CPU figure sweeps below
#   scripts/make-results.sh --analysis-only   # the tables, figures and predict.txt again from
#                                             # the runs and characterize file already in results/
#                                             # (after a change to analysis/)
#
# Installs dependencies, builds Release (build/release), runs `ssd-bench characterize` and
# each sweep (sweeps/SWEEP.toml), then `ssd-analyze` on each sweep's runs:
#   results/SWEEP/runs/*.h5, index.json   every run of the sweep (small HDF5 files)
#   results/characterize.{h5,txt}         memory bandwidth, GEMM throughput, draft<->target link,
#                                         AR decode bound, verification window
#   results/summary.txt                   one row per run, per sweep
#   results/validate.txt                  predicted vs measured speedup over AR (Theorem 7,
#                                         Corollaries 16 and 9, Eq. (1)); every SD/SSD run
#                                         against the AR run of its own sweep
#   results/figures/*.png, *.pdf          each sweep's figure (fig7_speedup, fig7_pareto,
#                                         fig3_fanout, ...), plus timeline and roofline from
#                                         the first sweep and the characterization
#   results/machine.txt                   CPU, cores, memory, commit, date
# Each sweep is analysed on its own: figures and validate never mix runs of different sweeps.
# With SWEEP names only those sweeps are re-run, and the tables and figures cover only them.
#
# Time on a quiet 2-core machine: the seven sweeps are 51 short runs, ~3 minutes; characterize
# ~30 s; the analysis under a minute (alone, with --analysis-only: ~10 s). About 4 minutes once
# dependencies are installed and build/release is built; the Release build from scratch adds
# ~2 minutes.
#
# Exit status: nonzero when a run fails, a sweep's figure is not drawn, or validate finds an
# SD/SSD run without an AR baseline (or an unreadable file). Checks outside validate's
# tolerance are results, not failures: they are marked in validate.txt.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
analysis_only=0
if [ "${1:-}" = "--analysis-only" ]; then
  analysis_only=1
  shift
fi
if [ "$analysis_only" -eq 0 ]; then
  bash scripts/install-deps.sh
  bash scripts/build.sh build/release -DCMAKE_BUILD_TYPE=Release
fi
sweeps=("$@")
if [ ${#sweeps[@]} -eq 0 ]; then
  sweeps=(fig7-speedup fig7-pareto fig3-fanout fig4-temperature fig5-saguaro-c fig6-fallback
    fig6-draft-ranks)
  rm -rf results/figures   # a full regeneration leaves no stale figures behind
fi
for name in "${sweeps[@]}"; do
  [ -f "sweeps/$name.toml" ] || { echo "make-results.sh: no sweeps/$name.toml" >&2; exit 2; }
  if [ "$analysis_only" -eq 1 ] && ! compgen -G "results/$name/runs/*.h5" > /dev/null; then
    echo "make-results.sh: --analysis-only: no runs in results/$name" >&2
    exit 2
  fi
done
if [ "$analysis_only" -eq 1 ] && [ ! -f results/characterize.h5 ]; then
  echo "make-results.sh: --analysis-only: no results/characterize.h5" >&2
  exit 2
fi
mkdir -p results/figures
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT

if [ "$analysis_only" -eq 0 ]; then
  echo "== ssd-bench characterize"
  # The SSD layout of the llama-124m sweeps: target on rank 0, llama-12m draft on rank 1, so the
  # file also holds the draft<->target link, the draft's step times and the verification window.
  root_flag=()
  [ "$(id -u)" -eq 0 ] && root_flag=(--allow-run-as-root)
  mpirun "${root_flag[@]}" --oversubscribe -np 2 ./build/release/ssd-bench characterize --threads 1 \
    --target synthetic:llama-124m --draft synthetic:llama-12m --out results/characterize.h5 \
    --overwrite | tee results/characterize.txt

  for name in "${sweeps[@]}"; do
    echo "== sweep $name"
    rm -rf "results/$name"
    sweeps/run "sweeps/$name.toml" --out "results/$name"
    rm -rf "results/$name/logs"
  done
fi

# draw NAMES FILES...: the figures of `ssd-analyze figures` named in NAMES (comma-separated),
# into results/figures. Only those: a figure the sweep is not made for cannot stop it.
draw() {
  /usr/bin/python3 - "$@" <<'PY'
import sys
sys.path.insert(0, "analysis")
from ssd_analysis import figures as F, figures_detail as D, figures_scale as S, io
names, files = sys.argv[1].split(","), sys.argv[2:]
runs, errors = io.load_runs(files)
makers = dict(F.FIGURES, timeline=lambda rs, d: D.fig_timeline(rs, d, None),
              roofline=D.fig_roofline, fig6_draft_ranks=S.fig_draft_ranks)
failed = bool(errors)
for e in errors:
    print(f"make-results.sh: {e}", file=sys.stderr)
for name in names:
    if name not in makers:
        print(f"   (no figure named {name})")
        continue
    try:
        fig = makers[name](runs, "results/figures")
        print("   " + " ".join(F.save(fig, "results/figures", name)))
    except Exception as e:   # F.Skip (inputs missing) or a plotting error
        print(f"make-results.sh: {name} not drawn: {type(e).__name__}: {e}", file=sys.stderr)
        failed = True
sys.exit(1 if failed else 0)
PY
}

status=0
: > results/summary.txt
: > results/validate.txt
for i in "${!sweeps[@]}"; do
  name="${sweeps[$i]}"
  files=("results/$name"/runs/*.h5)
  echo "== ssd-analyze: $name"
  { echo "### $name (sweeps/$name.toml)"; analysis/ssd-analyze summary "${files[@]}"; echo; } \
    >> results/summary.txt
  v=0
  { echo "### $name (sweeps/$name.toml)"; analysis/ssd-analyze validate "${files[@]}"; } \
    > "$tmp" || v=$?
  { cat "$tmp"; echo "### $name: validate exit status $v"; echo; } >> results/validate.txt
  echo "   validate (exit $v): $(tail -n 1 "$tmp")"
  if [ "$v" -ge 2 ]; then
    echo "make-results.sh: validate $name: exit $v (an SD/SSD run without an AR baseline, or" \
      "an unreadable file); see results/validate.txt" >&2
    status=1
  fi
  # The sweep's own figure (sweep fig3-fanout -> fig3_fanout), from its runs alone; timeline
  # and roofline from the first sweep (fig7-speedup by default) and the characterization.
  want="${name//-/_}"
  if [ "$i" -eq 0 ]; then want+=",timeline,roofline"; fi
  draw "$want" "${files[@]}" results/characterize.h5 || status=1
done

# The first-principles model (ssd-analyze predict) against every run above, and its forecast
# for the paper's layout with 1 to 4 draft GPUs.
echo "== ssd-analyze predict"
{
  echo "### predict --validate: every run above against the characterize file's step costs"
  analysis/ssd-analyze predict --validate results/*/runs/*.h5 --characterize results/characterize.h5
  echo
  echo "### predict: Llama-3.1-70B TP4 + Llama-3.2-1B on h100-sxm, 1-4 draft GPUs"
  analysis/ssd-analyze predict --draft-ranks 1,2,3,4 -b 1,16 --max-budget 256
} > results/predict.txt || status=1
tail -n 1 results/predict.txt

if [ "$analysis_only" -eq 0 ]; then
  {
    echo "machine: $(lscpu | sed -n 's/^Model name:[ \t]*//p'), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
    echo "commit: $(git rev-parse --short HEAD), date: $(date -u +%F)"
  } > results/machine.txt
else  # the runs' machine and commit stay; the analysis is this commit's
  grep -v '^analysis:' results/machine.txt > "$tmp" || true
  { cat "$tmp"; echo "analysis: commit $(git rev-parse --short HEAD), date: $(date -u +%F)"; } \
    > results/machine.txt
fi
echo "== results/ written in $((SECONDS / 60))m$((SECONDS % 60))s:" \
  "summary.txt, validate.txt, figures/, one folder of runs per sweep" \
  "$([ "$status" -eq 0 ] || echo '(WITH ERRORS, see above)')"
exit "$status"
