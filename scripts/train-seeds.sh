#!/usr/bin/env bash
# terngrad-bench: the multi-seed training study behind reports/train/seeds.md: LeNet and CifarNet on
# Fashion-MNIST, every arm (codec setting) x worker count x seed, one run at a time so that every
# recorded time is the run's own; then `python -m terngrad.report seeds` renders the report.
#
#   bash scripts/train-seeds.sh build/<dir>/apps/terngrad [full|smoke]
#
#   full   LeNet 10000 steps (the paper's 10K iterations, total batch 64) and CifarNet 3 epochs
#          (batch 64 per worker, Adam 2e-4), 5 seeds, 6 arms, 2 and 4 workers (120 runs). Budget on the
#          project's 2-core machine, one run at a time, measured on the quiet machine with 2 workers:
#          a LeNet step (2 x 32 images) takes 67 ms of wall time with one simulation thread and 37 ms
#          with two (--sim-threads 2; the same bits), a CifarNet step (2 x 64 images) 0.50 and 0.29 s.
#          With two threads: LeNet 10000 steps + evaluations about 6-7 min, CifarNet 3 epochs (1407
#          steps at 2 workers, 704 at 4: the same images) about 7 min; so about 7 hours per net, 14 for
#          both (about 24 with one thread). NETS=lenet WORKERS=2 (30 runs, about 3.5 hours) is the
#          overnight subset. On the AMD EPYC VM (2 cores, two threads, quiet, source 3c925f2): LeNet with
#          4 workers took 394 s (float), 394-423 (TernGrad arms), 609 (QSGD) and 571 (EF-SignSGD) per run;
#          from source f9192ed on the evaluations use both threads and QSGD's and EF-SignSGD's codecs are
#          2-4x faster (experiments/train/README.md), with the same bits. CifarNet, same VM, quiet, source
#          2b7bb94: 424-429 s per run at 2 workers (TernGrad arms), 366 s at 4 (reports/train/seeds.md, the
#          time-split table), so the 60 CifarNet runs take about 6.5 hours.
#   smoke  the same pipeline in about a minute (LeNet 60 steps, 2 seeds, 1000 test images): what CI runs;
#          its runs and report go under build/smoke/, never over the committed report.
#
# Environment (optional): NETS="lenet cifarnet", SEEDS="1 2 3 4 5", ARMS="float terngrad ...",
# WORKERS="2 4" (each must divide every net's total batch: LeNet's is 64), SIM_THREADS=N (threads computing
# the workers' gradients, `terngrad train --sim-threads`; default: the machine's cores; the same bits for any
# N), OUT=reports/train/seeds, PYTHON=build/venv/bin/python, TG_PACKAGE=<built package>.
# smoke mode writes its runs and report under build/smoke/ unless OUT / REPORT_OUT say otherwise.
# A finished run (its folder holds .complete, written after terngrad exited 0, naming the mode) is kept, not
# run again: an interrupted study continues where it stopped, redoing only the run it was in. A run of the
# other mode in OUT is an error (the two never mix). KEEP_DIGESTED=1 (full mode) also keeps the runs that
# have a digest in $REPORT_OUT/seeds-digest (default reports/train/seeds-digest): a study continued on
# another machine or clone skips what is already in the report. The raw runs are not kept in
# git; the report keeps a small digest of each finished run in reports/train/seeds-digest/ (commit it), so a
# study spread over several machines or sessions adds up. schedule.log records each run's start, load average and
# exit status.
set -euo pipefail
# shellcheck source=scripts/study-common.sh
source "$(dirname "$0")/study-common.sh"
study_init train-seeds train/seeds "$@"

# The arms: codec settings compared at equal everything else. `terngrad` is the paper's method
# (shared per-layer scalar = max over workers, clipping at 2.5 sigma in the original code's saturate rule);
# terngrad-noclip and terngrad-noshare each drop one of the two.
# float goes by ring allreduce (the trainer's default), the others by allgather of their payloads; QSGD
# with s = 4 levels (4 bits per element + a norm per bucket of 512, the trainer's default; with one norm
# per tensor, --qsgd-bucket 0, LeNet diverged at step 794 of seed 3), EF-SignSGD (1 bit per element + a scale).
declare -A ARM=(
  [float]="--codec float"
  [terngrad]="--codec terngrad --clip saturate --c 2.5"
  [terngrad-noclip]="--codec terngrad --clip none"
  [terngrad-noshare]="--codec terngrad --clip saturate --c 2.5 --shared-scalar false"
  [qsgd]="--codec qsgd --qsgd-levels 4"
  [signsgd-ef]="--codec signsgd-ef"
)
if [[ $MODE == full ]]; then
  NETS=${NETS:-lenet cifarnet}; SEEDS=${SEEDS:-1 2 3 4 5}; WORKERS=${WORKERS:-2 4}
  ARMS=${ARMS:-float terngrad terngrad-noclip terngrad-noshare qsgd signsgd-ef}
else
  NETS=${NETS:-lenet}; SEEDS=${SEEDS:-1 2}; WORKERS=${WORKERS:-2}; ARMS=${ARMS:-float terngrad}
fi
for a in $ARMS; do [[ -n ${ARM[$a]:-} ]] || { echo "train-seeds: unknown arm '$a' (known: ${!ARM[*]})" >&2; exit 2; }; done
for net in $NETS; do [[ $net == lenet || $net == cifarnet ]] || { echo "train-seeds: unknown net '$net' (lenet, cifarnet)" >&2; exit 2; }; done
study_ints SEEDS "$SEEDS" 0
study_ints WORKERS "$WORKERS" 1
SIM_THREADS=${SIM_THREADS:-$(nproc)}
study_ints SIM_THREADS "$SIM_THREADS" 1

net_options() {  # net, workers
  local w=$2
  case $1:$MODE in
    lenet:full)     echo "--model lenet --batch 64 --steps 10000 --eval-every 1000" ;;
    lenet:smoke)    echo "--model lenet --batch 64 --steps 60 --eval-every 30 --test-limit 1000" ;;
    cifarnet:full)  echo "--model cifarnet --optimizer adam --lr 0.0002 --lr-policy fixed --weight-decay 0.004 --batch $((64 * w)) --epochs 3 --eval-every 200" ;;
    cifarnet:smoke) echo "--model cifarnet --optimizer adam --lr 0.0002 --lr-policy fixed --weight-decay 0.004 --batch $((8 * w)) --steps 10 --eval-every 5 --test-limit 200" ;;
    *) echo "train-seeds: unknown net '$1' (lenet, cifarnet)" >&2; return 2 ;;
  esac
}

# Every worker count splits every net's total batch evenly (`terngrad train` refuses a run otherwise, and
# every run of that net would fail), checked before any run.
for net in $NETS; do
  for w in $WORKERS; do
    batch=$(net_options "$net" "$w" | sed -n 's/.*--batch \([0-9]*\).*/\1/p')
    if [[ -z $batch || $((batch % w)) -ne 0 ]]; then
      echo "train-seeds: WORKERS=$w does not divide $net's total batch of ${batch:-?} images in $MODE mode (give worker counts that divide it)" >&2
      exit 2
    fi
  done
done

KEEP_DIGESTED=${KEEP_DIGESTED:-0}
[[ $KEEP_DIGESTED == 0 || $KEEP_DIGESTED == 1 ]] || { echo "train-seeds: KEEP_DIGESTED must be 0 or 1, not '$KEEP_DIGESTED'" >&2; exit 2; }
[[ $KEEP_DIGESTED == 0 || $MODE == full ]] || { echo "train-seeds: KEEP_DIGESTED=1 is for full studies (the digests are of full runs)" >&2; exit 2; }
DIGEST_DIR=${REPORT_OUT:-$ROOT/reports/train}/seeds-digest

# finished <run name>: 0 when the run is done (kept), 1 when it is to run; a finished run of the other mode
# (its .complete names it; an empty .complete is from before the mode was recorded, and those were full runs)
# stops the study.
finished() {
  local f=$OUT/$1/.complete mode
  if [[ -f $f ]]; then
    mode=$(head -c 16 "$f"); mode=${mode:-full}
    [[ $mode == "$MODE" ]] && return 0
    echo "train-seeds: $OUT/$1 is a finished $mode run, and this is a $MODE study: use another OUT" >&2
    exit 2
  fi
  [[ $KEEP_DIGESTED == 1 && -f $DIGEST_DIR/$1.json ]]
}

todo=0
for seed in $SEEDS; do for net in $NETS; do for w in $WORKERS; do for arm in $ARMS; do
  finished "$net-$arm-w$w-s$seed" || todo=$((todo + 1))
done; done; done; done
study_plan "$todo"

failed=0
# Seeds outermost: an interrupted study has whole seeds (every arm of a seed), the pairs the report compares.
for seed in $SEEDS; do
  for net in $NETS; do
    for w in $WORKERS; do
      for arm in $ARMS; do
        name="$net-$arm-w$w-s$seed"
        if finished "$name"; then echo "kept $name"; continue; fi
        opts=$(net_options "$net" "$w")
        # shellcheck disable=SC2086
        if study_run "$name" "$TG" train $opts ${ARM[$arm]} --data fashion-mnist --workers "$w" --seed "$seed" --sim-threads "$SIM_THREADS" \
             --no-progress --out "$OUT/$name"; then
          echo "$MODE" > "$OUT/$name/.complete"
        else
          rmdir "$OUT/$name" 2>/dev/null || true  # a run that failed before writing anything leaves no empty folder
          failed=1
        fi
      done
    done
  done
done

study_report seeds
exit $failed
