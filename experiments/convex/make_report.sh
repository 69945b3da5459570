#!/usr/bin/env bash
# terngrad-bench: regenerates reports/convex (curves, summaries, plots, check log) with `terngrad converge`.
# Run from the repository root: bash experiments/convex/make_report.sh [path/to/terngrad]   (about 2 minutes)
set -euo pipefail
TG=${1:-build/default/apps/terngrad}
OUT=reports/convex
PY=${PYTHON:-build/venv/bin/python}
mkdir -p "$OUT"
run() { echo "+ $*" >&2; "$@"; }
{
  echo "# commands run by experiments/convex/make_report.sh on $(date -u +%Y-%m-%dT%H:%MZ)"
  run $TG converge --quiet --out $OUT/decay --problem lsq --dim 20 --steps 4000 --seeds 40 --every 20 \
    --methods float,tern,qsgd,sign
  run $TG converge --quiet --out $OUT/ball --problem lsq --dim 10 --schedule const --gamma 0.05 \
    --start-at-optimum --steps 2000 --seeds 30 --every 20 --methods float,tern,tern-mutant-2s
  run $TG converge --quiet --out $OUT/layerwise --problem multiscale --dim 8 --blocks 2 --scale-ratio 100 \
    --schedule const --gamma 0.05 --start-at-optimum --steps 2000 --seeds 30 --every 20 \
    --methods float,tern,tern-global,tern-unshared
  run $TG converge --quiet --out $OUT/clip --problem lsq --dim 20 --spike 3 --batch 1 --schedule const --gamma 0.02 \
    --start-at-optimum --steps 4000 --seeds 20 --every 40 --methods float,tern,tern-clip,sign
  run $TG converge --quiet --out $OUT/logistic --problem logistic --dim 20 --samples 1000 --steps 4000 --seeds 20 \
    --every 20 --gamma0 30 --t0 10 --methods float,tern,tern-clip,qsgd,sign
  run $TG converge --quiet --out $OUT/checks --steps 10 --seeds 1 --methods float --checks
} > $OUT/run.log 2>&1 || { cat $OUT/run.log; exit 1; }
$PY experiments/convex/plot.py $OUT
echo "wrote $OUT (log: $OUT/run.log)"
