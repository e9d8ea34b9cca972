#!/usr/bin/env bash
# Regenerates results/ on this machine, in one command:
#
#   scripts/make-results.sh [SWEEP...]   # default: the seven CPU figure sweeps below
#   scripts/make-results.sh --analysis-only   # the tables, figures and predict.txt again from
#                                             # the runs and characterize file already in results/
#                                             # (after a change to analysis/)
#   scripts/make-results.sh --set qwen2.5-coder[-amx|-zen5] [--analysis-only] [SWEEP...]
#                                             # a named set of its own (below)
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
#   results/traffic.txt                   the weight bytes each run read per token and the rate
#                                         it read them at; SSD/SD split into the two (ssd-analyze
#                                         traffic; runs written before ssd-bench counted forward
#                                         passes, 2026-12-03, get one line saying so)
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
# --set qwen2.5-coder: Figures 3-7 from the real pair, Qwen2.5-Coder-1.5B-Instruct verifying
# Qwen2.5-Coder-0.5B-Instruct on coding tasks (sweeps/qwen-coder/*.toml), into
# results/qwen2.5-coder/: SWEEP/runs, figures/, summary.txt, validate.txt, machine.txt and
# numbers.txt (per temperature: alpha, acceptance length, p_hit, budget, T_p, fitted r),
# characterize.{h5,txt} of the pair (each rank on a core of its own, as the sweeps' SSD runs)
# and predict.txt (`predict --validate` of every run of the set against it); its README.md is
# written by hand from them and left alone. Fetches the two checkpoints (scripts/get-model.sh)
# when missing and checks the committed prompt ids (sweeps/qwen-coder/prompts.sh).
# ~45 minutes on a quiet 2-core Zen 4 machine (2026-11-29: characterize ~3, fig3 ~4,
# fig4 ~5, fig5 ~3, fig6-fallback ~7, fig7-batch ~19, budget-auto ~4), most of it loading the
# pair (~25 s for the target alone, ~50 s for both at once), once per run.
# --set qwen2.5-coder-amx: the same sweeps into results/qwen2.5-coder-amx/, for a host whose
# --compute auto is amx (AMX tiles); ~70 minutes on the 2-core Intel guest (2026-12-02:
# characterize ~6, fig3 ~7, fig4 ~8, fig5 ~4, fig6-fallback ~10, fig7-batch ~23, budget-auto ~5).
# --set qwen2.5-coder-zen5: the sweeps of Figures 3-7 (not budget-auto) into
# results/qwen2.5-coder-zen5/, on a 2-core Zen 5 guest (2026-12-02: characterize ~4,
# fig6-fallback ~5, fig7-batch ~11; Figures 3-5's times in the set's README).
#
# Exit status: nonzero when a run fails, a sweep's figure is not drawn, or validate finds an
# SD/SSD run without an AR baseline (or an unreadable file). Checks outside validate's
# tolerance are results, not failures: they are marked in validate.txt.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
analysis_only=0
set_name=""
while [ $# -gt 0 ]; do
  case "$1" in
    --analysis-only) analysis_only=1; shift ;;
    --set)
      [ $# -gt 1 ] ||
        { echo "make-results.sh: --set needs a name (qwen2.5-coder, qwen2.5-coder-amx," \
            "qwen2.5-coder-zen5)" >&2; exit 2; }
      set_name="$2"; shift 2 ;;
    --set=*) set_name="${1#--set=}"; shift ;;
    *) break ;;
  esac
done
# out: where the set's files go; sweep_dir: its sweep files; char_models and char_layout: the
# models its characterize file times and how mpirun places the two ranks; paper_forecasts:
# whether predict.txt also holds the model's forecasts for the paper's GPU layouts (once, with
# the synthetic set); lead: the sweep whose runs draw the timeline and roofline (the first
# sweep named when it is not among them).
out=results sweep_dir=sweeps models=() paper_forecasts=1 lead=fig7-speedup
char_models=(--target synthetic:llama-124m --draft synthetic:llama-12m)
char_layout=(--oversubscribe)
defaults=(fig7-speedup fig7-pareto fig3-fanout fig4-temperature fig5-saguaro-c fig6-fallback
  fig6-draft-ranks)
case "$set_name" in
  "") ;;
  qwen2.5-coder | qwen2.5-coder-amx | qwen2.5-coder-zen5)
    # Figure 7's runs lead: an SD run for the roofline's draft step, SSD at b = 1 for the
    # timeline (fig3-fanout's SSD alternates an empty cache with the backup by design).
    out=results/$set_name sweep_dir=sweeps/qwen-coder paper_forecasts=0 lead=fig7-batch
    models=(qwen2.5-coder-1.5b qwen2.5-coder-0.5b)
    char_models=(--target models/qwen2.5-coder-1.5b --draft models/qwen2.5-coder-0.5b)
    char_layout=(--map-by slot:PE=1 --bind-to core)
    defaults=(fig3-fanout fig4-temperature fig5-saguaro-c fig6-fallback fig7-batch budget-auto)
    # -amx: the same sweeps on a host with AMX tiles, where --compute auto takes them (C2):
    # multi-row steps cost little more than one row, the GPU's regime, which the Zen hosts'
    # vdpbf16ps (qwen2.5-coder) is not. A set of its own. -zen5: Figures 3-7 (not budget-auto)
    # on a Zen 5 host, whose full-width vdpbf16ps runs multi-row steps at twice Zen 4's rate.
    [ "$set_name" != qwen2.5-coder-zen5 ] || defaults=(fig3-fanout fig4-temperature
      fig5-saguaro-c fig6-fallback fig7-batch)
    ;;
  *) echo "make-results.sh: --set: unknown set '$set_name'" \
       "(known: qwen2.5-coder, qwen2.5-coder-amx, qwen2.5-coder-zen5)" >&2; exit 2 ;;
esac
if [ "$analysis_only" -eq 0 ]; then
  bash scripts/install-deps.sh
  bash scripts/build.sh build/release -DCMAKE_BUILD_TYPE=Release
  for m in "${models[@]}"; do bash scripts/get-model.sh "$m" > /dev/null; done
  [ -z "$set_name" ] || bash "$sweep_dir/prompts.sh"   # the committed prompt ids, checked
fi
sweeps=("$@")
partial=$(( ${#sweeps[@]} > 0 ))
if [ ${#sweeps[@]} -eq 0 ]; then
  sweeps=("${defaults[@]}")
  rm -rf "$out/figures"   # a full regeneration leaves no stale figures behind
fi
for name in "${sweeps[@]}"; do
  [ -f "$sweep_dir/$name.toml" ] ||
    { echo "make-results.sh: no $sweep_dir/$name.toml" >&2; exit 2; }
  if [ "$analysis_only" -eq 1 ] && ! compgen -G "$out/$name/runs/*.h5" > /dev/null; then
    echo "make-results.sh: --analysis-only: no runs in $out/$name" >&2
    exit 2
  fi
done
if [ "$analysis_only" -eq 1 ] && [ ! -f "$out/characterize.h5" ]; then
  echo "make-results.sh: --analysis-only: no $out/characterize.h5" >&2
  exit 2
fi
mkdir -p "$out/figures"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT

if [ "$analysis_only" -eq 0 ]; then
  echo "== ssd-bench characterize"
  # The SSD layout of the set's sweeps: target on rank 0, draft on rank 1, so the file also
  # holds the draft<->target link, the draft's step times and the verification window.
  root_flag=()
  [ "$(id -u)" -eq 0 ] && root_flag=(--allow-run-as-root)
  mpirun "${root_flag[@]}" "${char_layout[@]}" -np 2 ./build/release/ssd-bench characterize \
    --threads 1 --compute auto "${char_models[@]}" --out "$out/characterize.h5" \
    --overwrite | tee "$out/characterize.txt"
fi
if [ "$analysis_only" -eq 0 ]; then
  for name in "${sweeps[@]}"; do
    echo "== sweep $name"
    rm -rf "${out:?}/$name"
    sweeps/run "$sweep_dir/$name.toml" --out "$out/$name"
    rm -rf "$out/$name/logs"
  done
fi

# draw NAMES FILES...: the figures of `ssd-analyze figures` named in NAMES (comma-separated),
# into $out/figures. Only those: a figure the sweep is not made for cannot stop it.
draw() {
  /usr/bin/python3 - "$out/figures" "$@" <<'PY'
import sys
sys.path.insert(0, "analysis")
from ssd_analysis import figures as F, figures_detail as D, figures_fallback as FB, \
    figures_scale as S, io
out, names, files = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
runs, errors = io.load_runs(files)
makers = dict(F.FIGURES, timeline=lambda rs, d: D.fig_timeline(rs, d, None),
              roofline=D.fig_roofline, fig6_fallback=FB.fig_fallback,
              fig6_draft_ranks=S.fig_draft_ranks)
failed = bool(errors)
for e in errors:
    print(f"make-results.sh: {e}", file=sys.stderr)
for name in names:
    if name not in makers:
        print(f"   (no figure named {name})")
        continue
    try:
        fig = makers[name](runs, out)
        print("   " + " ".join(F.save(fig, out, name)))
    except Exception as e:   # F.Skip (inputs missing) or a plotting error
        print(f"make-results.sh: {name} not drawn: {type(e).__name__}: {e}", file=sys.stderr)
        failed = True
sys.exit(1 if failed else 0)
PY
}

status=0
lead_named=0
for name in "${sweeps[@]}"; do [ "$name" != "$lead" ] || lead_named=1; done
: > "$out/summary.txt"
: > "$out/validate.txt"
: > "$out/traffic.txt"
for i in "${!sweeps[@]}"; do
  name="${sweeps[$i]}"
  files=("$out/$name"/runs/*.h5)
  echo "== ssd-analyze: $name"
  { echo "### $name ($sweep_dir/$name.toml)"; analysis/ssd-analyze summary "${files[@]}"
    echo; } >> "$out/summary.txt"
  v=0
  { echo "### $name ($sweep_dir/$name.toml)"; analysis/ssd-analyze validate "${files[@]}"; } \
    > "$tmp" || v=$?
  { cat "$tmp"; echo "### $name: validate exit status $v"; echo; } >> "$out/validate.txt"
  echo "   validate (exit $v): $(tail -n 1 "$tmp")"
  # Exit 2 with its one line where the runs predate the pass counts: a note, not a failure.
  { echo "### $name ($sweep_dir/$name.toml)"
    analysis/ssd-analyze traffic "${files[@]}" --characterize "$out/characterize.h5" 2>&1 || true
    echo; } >> "$out/traffic.txt"
  if [ "$v" -ge 2 ]; then
    echo "make-results.sh: validate $name: exit $v (an SD/SSD run without an AR baseline, or" \
      "an unreadable file); see $out/validate.txt" >&2
    status=1
  fi
  # The sweep's own figure (sweep fig3-fanout -> fig3_fanout), from its runs alone; timeline
  # and roofline from the lead sweep's runs and the characterization.
  want="${name//-/_}"
  [ "$name" != fig7-batch ] || want="fig7_speedup,fig7_pareto"   # the pair's Figure 7: one sweep
  if [ "$name" = "$lead" ] || { [ "$i" -eq 0 ] && [ "$lead_named" -eq 0 ]; }; then
    want+=",timeline,roofline"
  fi
  draw "$want" "${files[@]}" "$out/characterize.h5" || status=1
done

# The first-principles model (ssd-analyze predict) against every run above, and (synthetic
# set) its forecast for the paper's layout with 1 to 4 draft GPUs; the pair's set also gets the
# numbers its README quotes (sweeps/qwen-coder/figure_inputs.py).
if [ -f "$sweep_dir/figure_inputs.py" ]; then
  echo "== numbers"
  /usr/bin/python3 "$sweep_dir/figure_inputs.py" "$out" > "$out/numbers.txt" || status=1
  cat "$out/numbers.txt"
fi
echo "== ssd-analyze predict"
{
  echo "### predict --validate: every run above against the characterize file's step costs"
  analysis/ssd-analyze predict --validate "$out"/*/runs/*.h5 --characterize "$out/characterize.h5"
  if [ "$paper_forecasts" -eq 1 ]; then
    echo
    echo "### predict: Llama-3.1-70B TP4 + Llama-3.2-1B on h100-sxm, 1-4 draft GPUs"
    analysis/ssd-analyze predict --draft-ranks 1,2,3,4 -b 1,16
    echo
    echo "### predict: Qwen3-32B TP4 + Qwen3-0.6B on h100-sxm (the paper's second setting)"
    analysis/ssd-analyze predict --target qwen3-32b --draft qwen3-0.6b -b 1,16
    echo
    echo "### predict --gpu-steps: the h100-sxm roofline against ssd-bench's own H100 steps"
    analysis/ssd-analyze predict --gpu-steps
  fi
} > "$out/predict.txt" || status=1
tail -n 2 "$out/predict.txt"

if [ "$analysis_only" -eq 0 ] && [ "$partial" -eq 1 ] && [ -f "$out/machine.txt" ]; then
  # Only the named sweeps ran: the other sweeps' commit and date stay, these are added.
  grep -v '^analysis:' "$out/machine.txt" > "$tmp" || true
  { cat "$tmp"; echo "runs of ${sweeps[*]}: commit $(git rev-parse --short HEAD), date $(date -u +%F)"
    echo "analysis: commit $(git rev-parse --short HEAD), date: $(date -u +%F)"; } > "$out/machine.txt"
elif [ "$analysis_only" -eq 0 ]; then
  {
    echo "machine: $(lscpu | sed -n 's/^Model name:[ \t]*//p'), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
    echo "commit: $(git rev-parse --short HEAD), date: $(date -u +%F)"
  } > "$out/machine.txt"
else  # the runs' machine and commit stay; the analysis is this commit's
  grep -v '^analysis:' "$out/machine.txt" > "$tmp" || true
  { cat "$tmp"; echo "analysis: commit $(git rev-parse --short HEAD), date: $(date -u +%F)"; } \
    > "$out/machine.txt"
fi
echo "== $out/ written in $((SECONDS / 60))m$((SECONDS % 60))s:" \
  "summary.txt, validate.txt, traffic.txt, figures/, one folder of runs per sweep" \
  "$([ "$status" -eq 0 ] || echo '(WITH ERRORS, see above)')"
exit "$status"
