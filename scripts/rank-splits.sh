#!/usr/bin/env bash
# terngrad-bench: measured per-rank time splits of multi-process training (`terngrad launch`, c10d/Gloo
# over loopback): for each codec arm and rank count, one LeNet run on Fashion-MNIST, then
# `python -m terngrad.report ranks` renders reports/train/ranks.md and its figure from every rank's
# ranks.csv (compute / encode / wait / wire / decode / optimizer per step).
#   bash scripts/rank-splits.sh build/default/apps/terngrad [full|smoke]
# full: 5 arms on 2 and on 4 ranks, 300 steps each (about 5 minutes on 2 cores); smoke: 2 arms on 2 ranks,
# 12 steps (CI), runs and report under build/smoke/. Runs go to $OUT (default reports/train/ranks, not in
# git), one at a time; each run's
# start and the load average then are logged in $OUT/schedule.log, which the report quotes.
# On a 2-core machine 4 ranks share 2 cores: the splits show that contention (compute and wait grow).
# Environment (optional): ARMS="float terngrad ...", RANKS="2 4", STEPS=N, OUT=DIR, REPORT_OUT=DIR,
# PYTHON (default build/venv/bin/python), TG_PACKAGE (the built Python package).
set -euo pipefail
# shellcheck source=scripts/study-common.sh
source "$(dirname "$0")/study-common.sh"
study_init rank-splits train/ranks "$@"

declare -A ARM=(
  [float]="--codec float --float-exchange allreduce"
  [float-allgather]="--codec float --float-exchange allgather"
  [terngrad]="--codec terngrad --clip saturate --c 2.5"
  [qsgd]="--codec qsgd --qsgd-levels 4"
  [signsgd-ef]="--codec signsgd-ef"
)
if [[ $MODE == full ]]; then
  ARMS=${ARMS:-float float-allgather terngrad qsgd signsgd-ef}; RANKS=${RANKS:-2 4}; STEPS=${STEPS:-300}
else
  ARMS=${ARMS:-float terngrad}; RANKS=${RANKS:-2}; STEPS=${STEPS:-12}
fi
for a in $ARMS; do [[ -n ${ARM[$a]:-} ]] || { echo "rank-splits: unknown arm '$a' (known: ${!ARM[*]})" >&2; exit 2; }; done
study_ints STEPS "$STEPS" 2
study_ints RANKS "$RANKS" 1

study_plan $(( $(wc -w <<< "$RANKS") * $(wc -w <<< "$ARMS") ))
failed=0
for n in $RANKS; do
  for arm in $ARMS; do
    name="lenet-$arm-n$n"
    rm -rf "${OUT:?}/$name"
    # shellcheck disable=SC2086
    study_run "$name" "$TG" launch --nproc "$n" -- --model lenet --batch 64 --steps "$STEPS" --eval-every 0 \
      --test-limit 1000 ${ARM[$arm]} --data fashion-mnist --seed 1 --no-progress --out "$OUT/$name" || failed=1
  done
done

study_report ranks
exit $failed
