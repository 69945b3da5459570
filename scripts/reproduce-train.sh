#!/usr/bin/env bash
# terngrad-bench: the training runs behind reports/train/README.md (LeNet and CifarNet on Fashion-MNIST,
# synthetic-data profiles of AlexNet / GoogLeNet / VGG-A), then the report itself. Run from the repository root:
#   bash scripts/reproduce-train.sh build/<dir>/apps/terngrad [lenet|lenet3k|cifarnet|codecs|overhead|profile|all]
# Each run writes reports/train/runs/<name>/{run.json,evals.csv,steps.csv,layers.csv} and <name>.log (not kept
# in git); the runs of a group run at the same time (one LibTorch thread each). Then
# `python -m terngrad.report train` renders reports/train/README.md and its figures from every run there.
# The wall time of each run is in the README's "Reproduce" table (lenet: about 35 minutes, side by side with cifarnet).
# Python: $PYTHON (default build/venv/bin/python) with the built package build/<dir>/python/package.
# The report is rendered once every run of the group(s) asked for has finished; it needs the runs of every
# group but codecs (`all`, then lenet3k): with some missing, the script names them and leaves README.md as
# it was, so a group run on a fresh clone never writes a shorter README.md over the committed one.
# The option lists ($L, $C, $O) are split into words on purpose.
# shellcheck disable=SC2086
set -euo pipefail
GROUPS_KNOWN="lenet lenet3k cifarnet codecs overhead profile all"
if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: bash scripts/reproduce-train.sh <path to terngrad> [${GROUPS_KNOWN// /|}]" >&2
  exit 2
fi
TG=$1
WHAT=${2:-all}
[[ -x $TG && -f $TG ]] || { echo "reproduce-train: $TG is not an executable terngrad binary" >&2; exit 2; }
[[ " $GROUPS_KNOWN " == *" $WHAT "* ]] || { echo "reproduce-train: unknown group '$WHAT' (one of: $GROUPS_KNOWN)" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/reports/train/runs
PY=${PYTHON:-$ROOT/build/venv/bin/python}
PKG=${TG_PACKAGE:-$(cd "$(dirname "$TG")/.." && pwd)/python/package}
mkdir -p "$OUT"
FAILED=$(mktemp)  # the runs that failed (runs of a group go to the background, so not a variable)
trap 'rm -f "$FAILED"' EXIT

run() {  # name, then train options
  local name=$1; shift
  if "$TG" train "$@" --out "$OUT/$name" > "$OUT/$name.log" 2>&1; then
    echo "done $name"
  else
    echo "FAILED $name (see $OUT/$name.log)" >&2
    echo "$name" >> "$FAILED"
  fi
}

if [[ $WHAT == lenet || $WHAT == all ]]; then
  # LeNet (Caffe solver: momentum 0.9, lr 0.01 inv policy, weight decay 5e-4), total batch 64,
  # 1000 steps (64000 images, 1.07 epochs of the 60000), test accuracy on all 10000 test images.
  L="--model lenet --data fashion-mnist --batch 64 --steps 1000 --eval-every 200 --seed 1"
  run lenet-float-2w    $L --codec float    --workers 2 &
  run lenet-terngrad-2w $L --codec terngrad --workers 2 &
  run lenet-float-8w    $L --codec float    --workers 8 &
  run lenet-terngrad-8w $L --codec terngrad --workers 8 &
fi

if [[ $WHAT == lenet3k ]]; then
  # The same LeNet settings for 3000 steps, evaluation every 500 (not part of `all`).
  L="--model lenet --data fashion-mnist --batch 64 --steps 3000 --eval-every 500 --seed 1"
  run lenet3k-float-2w    $L --codec float    --workers 2 &
  run lenet3k-terngrad-2w $L --codec terngrad --workers 2 &
  run lenet3k-float-8w    $L --codec float    --workers 8 &
  run lenet3k-terngrad-8w $L --codec terngrad --workers 8 &
fi

if [[ $WHAT == cifarnet || $WHAT == all ]]; then
  # CifarNet on Fashion-MNIST padded to 32x32 and cropped to 24x24 (no CIFAR-10 on this machine),
  # Adam lr 2e-4, weight decay 0.004 in the loss on local3/local4 (the paper's settings and the authors'
  # code), 2 workers x 64 images (the paper's batch per worker), 150 steps, test accuracy on the first
  # 2000 test images.
  C="--model cifarnet --data fashion-mnist --optimizer adam --lr 0.0002 --lr-policy fixed --weight-decay 0.004 \
     --weight-decay-in loss --batch 128 --workers 2 --steps 150 --eval-every 50 --test-limit 2000 --seed 1"
  run cifarnet-float           $C --codec float &
  run cifarnet-terngrad-noclip $C --codec terngrad --clip none &
  run cifarnet-terngrad-clip   $C --codec terngrad --clip saturate --c 2.5 &
fi
wait

if [[ $WHAT == codecs ]]; then
  # The comparison codecs on the LeNet settings above, 2 workers, 1000 steps (not part of `all`):
  # QSGD with 4 levels (4 bits per element) and EF-SignSGD (1 bit per element), next to float and TernGrad.
  L="--model lenet --data fashion-mnist --batch 64 --steps 1000 --eval-every 200 --seed 1 --workers 2"
  run lenet-qsgd4-2w     $L --codec qsgd --qsgd-levels 4 &
  run lenet-signsgdef-2w $L --codec signsgd-ef &
fi
wait

if [[ $WHAT == overhead || $WHAT == all ]]; then
  # Codec overhead: the same 200 LeNet steps with float and with TernGrad, one after the other (not
  # alongside other runs), 2 workers, 1000 test images.
  O="--model lenet --batch 64 --workers 2 --steps 200 --eval-every 0 --test-limit 1000 --seed 2"
  run overhead-float    $O --codec float
  run overhead-terngrad $O --codec terngrad
fi

if [[ $WHAT == profile || $WHAT == all ]]; then
  # Per-layer gradient sizes and step time on synthetic ImageNet-shaped batches (2 workers x 2 images).
  for m in alexnet googlenet vgga; do
    run "profile-$m" --model "$m" --data synthetic --batch 4 --workers 2 --steps 2 --eval-every 0 --test-limit 4 \
        --codec terngrad --float-below 9217
  done
  # LeNet payload sizes with base3 packing (5 steps are enough: sizes do not depend on the values).
  run lenet-terngrad-base3-bytes --model lenet --batch 64 --workers 2 --steps 5 --eval-every 0 --test-limit 100 \
      --codec terngrad --packing base3
fi

wait
if [[ -s $FAILED ]]; then
  echo "reproduce-train: $(wc -l < "$FAILED") runs failed ($(tr '\n' ' ' < "$FAILED")); reports/train/README.md left as it was" >&2
  exit 1
fi
export PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}"
# the runs README.md shows that are not here yet: then the runs of this group are kept and README.md left as it was
missing=$("$PY" -c 'import pathlib, sys; from terngrad.report.train import missing_runs
print(" ".join(dict.fromkeys(m.split("/")[0] for m in missing_runs(pathlib.Path(sys.argv[1])))))' "$OUT")
if [[ -n $missing ]]; then
  echo "reproduce-train: the runs of '$WHAT' are in $OUT; reports/train/README.md was not rendered: it also needs" \
       "runs of the groups $missing (run them, or render what there is: python -m terngrad.report train --partial --out DIR)"
  exit 0
fi
"$PY" -m terngrad.report train --runs "$OUT" --out "$ROOT/reports/train"
