#!/usr/bin/env bash
# terngrad-bench: regenerates reports/convex (curves, summaries, plots, check log, README.md) with `terngrad converge`
# and `python -m terngrad.report convex`. Run from the repository root:
#   bash scripts/reproduce-convex.sh [build/<dir>/apps/terngrad]
# The ten runs' times are in reports/convex/README.md (the `seconds` of each summary.json).
# Kept in git: */summary.json, commands.txt, the figures and README.md; curves.csv and run.log are regenerated here.
# Python: $PYTHON (default build/venv/bin/python) with the built package build/<dir>/python/package.
# The runs are written to a staging folder and moved into reports/convex only when every one has finished: a
# failed or interrupted run leaves the kept files as they were (its log is printed).
# The option values ($TG, $OUT, ...) are split into words on purpose.
# shellcheck disable=SC2086
set -euo pipefail
if [[ $# -gt 1 ]]; then echo "usage: bash scripts/reproduce-convex.sh [path to terngrad]" >&2; exit 2; fi
TG=${1:-build/default/apps/terngrad}
[[ -x $TG && -f $TG ]] || { echo "reproduce-convex: $TG is not an executable terngrad binary (build it first)" >&2; exit 2; }
KEPT=reports/convex
PY=${PYTHON:-build/venv/bin/python}
PKG=${TG_PACKAGE:-$(cd "$(dirname "$TG")/.." && pwd)/python/package}
mkdir -p "$KEPT"
OUT=$(mktemp -d "$KEPT/.stage-XXXXXX")  # the runs go here first
trap 'rm -rf "$OUT"' EXIT
FAILED=""
run() {  # after a failure the remaining runs are skipped
  [[ -z $FAILED ]] || return 0
  echo "+ $*" >&2
  "$@" || { FAILED="exit $?: $*"; echo "reproduce-convex: failed ($FAILED)" >&2; }
}
{
  echo "# commands run by scripts/reproduce-convex.sh on $(date -u +%Y-%m-%dT%H:%MZ)"
  run $TG converge --no-progress --out $OUT/decay --problem lsq --dim 20 --steps 4000 --seeds 40 --every 20 \
    --methods float,tern,qsgd,sign
  run $TG converge --no-progress --out $OUT/ball --problem lsq --dim 10 --schedule const --gamma 0.05 \
    --start-at-optimum --steps 2000 --seeds 30 --every 20 --methods float,tern,tern-mutant-2s
  run $TG converge --no-progress --out $OUT/layerwise --problem multiscale --dim 8 --blocks 2 --scale-ratio 100 \
    --schedule const --gamma 0.05 --start-at-optimum --steps 2000 --seeds 30 --every 20 \
    --methods float,tern,tern-global,tern-unshared
  run $TG converge --no-progress --out $OUT/clip --problem lsq --dim 20 --spike 3 --batch 1 --schedule const --gamma 0.02 \
    --start-at-optimum --steps 4000 --seeds 20 --every 40 --methods float,tern,tern-clip,sign
  run $TG converge --no-progress --out $OUT/logistic --problem logistic --dim 20 --data-size 1000 --steps 4000 --seeds 20 \
    --every 20 --gamma0 30 --t0 10 --methods float,tern,tern-clip,qsgd,sign
  run $TG converge --no-progress --out $OUT/stall --problem lsq --dim 20 --spike 3 --batch 1 --steps 20000 --seeds 20 \
    --every 100 --methods float,tern,tern-clip
  for tail in gauss:0:1 heavy:3:1 sparse:0:0.1; do
    IFS=: read -r name dof density <<< "$tail"
    run $TG converge --no-progress --out $OUT/a3-$name --problem lsq --dim 50 --data-size 2000 --tail-dof $dof \
      --density $density --batch 1 --steps 10000 --seeds 40 --every 100 --gamma0 1 --t0 200 --methods float,tern \
      --assumption3 --no-prediction --alpha 1e-3
  done
  run $TG converge --no-progress --out $OUT/checks --steps 10 --seeds 1 --methods float --checks
} > "$OUT/run.log" 2>&1
if [[ -n $FAILED ]]; then
  cat "$OUT/run.log"
  echo "reproduce-convex: a run failed (log above); $KEPT left as it was" >&2
  exit 1
fi
# every run finished: the command list (the log with its staging folder named as the kept one), then the runs
sed -n -E "s#$OUT#$KEPT#g; /^(#|\+ )/p" "$OUT/run.log" > "$OUT/commands.txt"
for d in "$OUT"/*/; do
  d=${d%/}
  rm -rf "${KEPT:?}/$(basename "$d")"
  mv "$d" "$KEPT/"
done
sed "s#$OUT#$KEPT#g" "$OUT/run.log" > "$KEPT/run.log"
mv "$OUT/commands.txt" "$KEPT/commands.txt"
PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}" $PY -m terngrad.report convex $KEPT
echo "wrote $KEPT (log: $KEPT/run.log)"
