#!/usr/bin/env bash
# terngrad-bench: regenerates reports/convex (curves, summaries, plots, check log, README.md) with `terngrad converge`
# and `python -m terngrad.report convex`. Run from the repository root:
#   bash scripts/reproduce-convex.sh [build/<dir>/apps/terngrad]
# The ten runs' times are in reports/convex/README.md (the `seconds` of each summary.json).
# Kept in git: */summary.json, commands.txt, the figures and README.md; curves.csv and run.log are regenerated here.
# Python: $PYTHON (default build/venv/bin/python) with the built package build/<dir>/python/package.
set -euo pipefail
TG=${1:-build/default/apps/terngrad}
OUT=reports/convex
PY=${PYTHON:-build/venv/bin/python}
PKG=${TG_PACKAGE:-$(cd "$(dirname "$TG")/.." && pwd)/python/package}
mkdir -p "$OUT"
run() { echo "+ $*" >&2; "$@"; }
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
} > $OUT/run.log 2>&1 || { cat $OUT/run.log; exit 1; }
grep -E '^(#|\+ )' $OUT/run.log > $OUT/commands.txt
PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}" $PY -m terngrad.report convex $OUT
echo "wrote $OUT (log: $OUT/run.log)"
