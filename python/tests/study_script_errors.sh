#!/usr/bin/env bash
# terngrad-bench: the study scripts (scripts/train-seeds.sh, scripts/rank-splits.sh) refuse bad arguments
# and environment with exit status 2, one line on stderr naming the problem, nothing on stdout, and no
# runs folder created (the first cases stop before the first run, so the "binary" is /bin/true); a full and a
# smoke study never mix their runs; KEEP_DIGESTED=1 keeps the runs a digest holds; smoke mode's default
# folders are under build/smoke/, not reports/; scripts/reproduce-train.sh and scripts/reproduce-convex.sh refuse a
# bad group or binary and leave the kept report as it was when a run fails.
#   bash python/tests/study_script_errors.sh <repo root>
set -uo pipefail
root=${1:?usage: study_script_errors.sh <repo root>}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 cases=0

# expect <script> <stderr substring> <env assignments...> -- <arguments...>
expect() {
  local script=$1 want=$2; shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  local out="$tmp/runs-$cases"
  cases=$((cases + 1))
  env OUT="$out" REPORT_OUT="$tmp/report" "${envs[@]}" bash "$root/scripts/$script.sh" "$@" > "$tmp/stdout" 2> "$tmp/stderr"
  local rc=$? lines
  lines=$(wc -l < "$tmp/stderr")
  if [[ $rc != 2 || $lines != 1 || -s $tmp/stdout || -e $out ]] || ! grep -qF -- "$want" "$tmp/stderr"; then
    echo "FAIL: $script ${envs[*]} $*: exit $rc, $lines stderr lines, stdout $(wc -c < "$tmp/stdout") bytes, runs folder $([[ -e $out ]] && echo created || echo absent); want '$want'; stderr:" >&2
    cat "$tmp/stderr" >&2
    fails=$((fails + 1))
  fi
}

for s in train-seeds rank-splits; do
  expect $s "usage: bash scripts/$s.sh" --
  expect $s "usage: bash scripts/$s.sh" -- /bin/true smoke extra
  expect $s "$s: $tmp/no-such-terngrad is not an executable terngrad binary" -- "$tmp/no-such-terngrad"
  expect $s "$s: mode must be full or smoke, not 'fast'" -- /bin/true fast
  expect $s "$s: unknown arm 'bogus'" ARMS="float bogus" -- /bin/true smoke
done
expect train-seeds "train-seeds: unknown net 'resnet'" NETS="lenet resnet" -- /bin/true smoke
expect train-seeds "train-seeds: SEEDS must be integers >= 0, not 'x'" SEEDS="1 x" -- /bin/true smoke
expect train-seeds "train-seeds: WORKERS must be integers >= 1, not '0'" WORKERS="2 0" -- /bin/true full
expect train-seeds "train-seeds: SEEDS is empty" SEEDS=" " -- /bin/true smoke
expect train-seeds "train-seeds: SIM_THREADS must be integers >= 1, not '0'" SIM_THREADS=0 -- /bin/true smoke
# a worker count that does not divide a net's total batch: refused before any run (was: every LeNet run failed)
expect train-seeds "train-seeds: WORKERS=3 does not divide lenet's total batch of 64 images in full mode" WORKERS="2 3" -- /bin/true full
expect train-seeds "train-seeds: WORKERS=3 does not divide lenet's total batch of 64 images in smoke mode" WORKERS=3 -- /bin/true smoke
expect rank-splits "rank-splits: STEPS must be integers >= 2, not '1'" STEPS=1 -- /bin/true smoke
expect rank-splits "rank-splits: RANKS must be integers >= 1, not 'two'" RANKS="two" -- /bin/true smoke

expect train-seeds "train-seeds: KEEP_DIGESTED must be 0 or 1, not 'yes'" KEEP_DIGESTED=yes -- /bin/true full
expect train-seeds "train-seeds: KEEP_DIGESTED=1 is for full studies" KEEP_DIGESTED=1 -- /bin/true smoke

# Modes never mix: a finished run of the other mode in OUT stops the study before any run (an empty .complete is
# a full run from before the mode was recorded). Here OUT exists beforehand, so expect() is not used.
# mixed <.complete content> <mode of the study> <stderr substring>
mixed() {
  local out="$tmp/mixed-$cases"
  cases=$((cases + 1))
  mkdir -p "$out/lenet-float-w2-s1"
  printf '%s' "$1" > "$out/lenet-float-w2-s1/.complete"
  env OUT="$out" REPORT_OUT="$tmp/report" NETS=lenet SEEDS=1 ARMS=float WORKERS=2 \
    bash "$root/scripts/train-seeds.sh" /bin/true "$2" > "$tmp/stdout" 2> "$tmp/stderr"
  local rc=$?
  if [[ $rc != 2 || $(wc -l < "$tmp/stderr") != 1 || -s $tmp/stdout || -e $out/schedule.log ]] || ! grep -qF -- "$3" "$tmp/stderr"; then
    echo "FAIL: a '$1' run in OUT, $2 study: exit $rc; want exit 2 and '$3'; stderr:" >&2
    cat "$tmp/stderr" >&2
    fails=$((fails + 1))
  fi
}
mixed "full" smoke "lenet-float-w2-s1 is a finished full run, and this is a smoke study: use another OUT"
mixed "" smoke "lenet-float-w2-s1 is a finished full run, and this is a smoke study"
mixed "smoke" full "lenet-float-w2-s1 is a finished smoke run, and this is a full study"

# The cases below run to the end. The "binary" records that it was started and fails; the "Python" (the
# report) is /bin/true.
fake="$tmp/fake-terngrad"
printf '#!/bin/sh\ntouch "%s/started"\nexit 1\n' "$tmp" > "$fake"
chmod +x "$fake"

# KEEP_DIGESTED=1: a run with a digest in REPORT_OUT/seeds-digest is kept, the binary never started
cases=$((cases + 1))
mkdir -p "$tmp/digested/report/seeds-digest"
echo '{}' > "$tmp/digested/report/seeds-digest/lenet-float-w2-s1.json"
env OUT="$tmp/digested/runs" REPORT_OUT="$tmp/digested/report" PYTHON=/bin/true KEEP_DIGESTED=1 NETS=lenet SEEDS=1 \
  ARMS=float WORKERS=2 bash "$root/scripts/train-seeds.sh" "$fake" full > "$tmp/stdout" 2> "$tmp/stderr"
rc=$?
if [[ $rc != 0 || -e $tmp/started ]] || ! grep -qx "kept lenet-float-w2-s1" "$tmp/stdout"; then
  echo "FAIL: KEEP_DIGESTED=1 with the run's digest: exit $rc, binary $([[ -e $tmp/started ]] && echo started || echo not started); stdout:" >&2
  cat "$tmp/stdout" "$tmp/stderr" >&2
  fails=$((fails + 1))
fi
# ... and without KEEP_DIGESTED the same run is made again (the binary starts; it fails here: exit 1)
cases=$((cases + 1))
env OUT="$tmp/digested/runs" REPORT_OUT="$tmp/digested/report" PYTHON=/bin/true NETS=lenet SEEDS=1 \
  ARMS=float WORKERS=2 bash "$root/scripts/train-seeds.sh" "$fake" full > "$tmp/stdout" 2> "$tmp/stderr"
rc=$?
if [[ $rc != 1 || ! -e $tmp/started ]]; then
  echo "FAIL: without KEEP_DIGESTED the digested run was not made again: exit $rc" >&2
  fails=$((fails + 1))
fi
rm -f "$tmp/started"

# A run that fails before writing anything leaves no empty run folder: this "binary" makes its --out, then fails.
cases=$((cases + 1))
mkout="$tmp/mkout-terngrad"
# shellcheck disable=SC2016  # the fake binary's own $1 and $2
printf '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --out ] && mkdir -p "$2"; shift; done\nexit 1\n' > "$mkout"
chmod +x "$mkout"
env OUT="$tmp/emptyrun/runs" REPORT_OUT="$tmp/emptyrun/report" PYTHON=/bin/true NETS=lenet SEEDS=1 ARMS=float WORKERS=2 \
  bash "$root/scripts/train-seeds.sh" "$mkout" full > "$tmp/stdout" 2> "$tmp/stderr"
rc=$?
if [[ $rc != 1 || -e $tmp/emptyrun/runs/lenet-float-w2-s1 ]]; then
  echo "FAIL: a failed run: exit $rc (want 1), run folder $([[ -e $tmp/emptyrun/runs/lenet-float-w2-s1 ]] && echo left behind || echo removed)" >&2
  fails=$((fails + 1))
fi

# smoke mode's default folders are under build/smoke/ of the checkout the script is in, never reports/
for s in train-seeds rank-splits; do
  cases=$((cases + 1))
  copy="$tmp/checkout-$s"
  mkdir -p "$copy/scripts"
  cp "$root/scripts/$s.sh" "$root/scripts/study-common.sh" "$copy/scripts/"
  env -u OUT -u REPORT_OUT PYTHON=/bin/true SEEDS=1 ARMS=float bash "$copy/scripts/$s.sh" "$fake" smoke > "$tmp/stdout" 2> "$tmp/stderr"
  case $s in train-seeds) runs=train/seeds ;; *) runs=train/ranks ;; esac
  if [[ ! -f $copy/build/smoke/$runs/schedule.log || -e $copy/reports ]] || ! grep -qF "smoke report in $copy/build/smoke/train" "$tmp/stdout"; then
    echo "FAIL: $s smoke without OUT: schedule.log $([[ -f $copy/build/smoke/$runs/schedule.log ]] && echo in || echo not in) build/smoke/$runs, reports/ $([[ -e $copy/reports ]] && echo created || echo absent); stdout:" >&2
    cat "$tmp/stdout" >&2
    fails=$((fails + 1))
  fi
done

# The reproduce scripts: a bad group or binary is refused before anything runs; a failed run leaves the kept
# report as it was. Each runs in a copy of the checkout's layout, so the real reports are never touched.
# reproduce_case <script> <group or ""> <binary> <want exit> <stderr substring>
reproduce_case() {
  local script=$1 group=$2 bin=$3 want_rc=$4 want=$5 copy="$tmp/reproduce-$cases"
  cases=$((cases + 1))
  mkdir -p "$copy/scripts" "$copy/reports/convex" "$copy/reports/train"
  cp "$root/scripts/$script.sh" "$copy/scripts/"
  echo kept > "$copy/reports/convex/commands.txt"
  echo kept > "$copy/reports/train/README.md"
  (cd "$copy" && env PYTHON=/bin/false bash "scripts/$script.sh" "$bin" ${group:+"$group"} > "$tmp/stdout" 2> "$tmp/stderr")
  local rc=$?
  if [[ $rc != "$want_rc" || $(cat "$copy/reports/convex/commands.txt" "$copy/reports/train/README.md") != "kept"$'\n'"kept" ]] \
     || [[ -n $(find "$copy/reports/convex" -mindepth 1 -not -name commands.txt) ]] || ! grep -qF -- "$want" "$tmp/stderr"; then
    echo "FAIL: $script $bin $group: exit $rc (want $want_rc), kept files $(cat "$copy/reports/convex/commands.txt" "$copy/reports/train/README.md" | tr '\n' ' '); want '$want'; stderr:" >&2
    cat "$tmp/stderr" >&2
    fails=$((fails + 1))
  fi
}
reproduce_case reproduce-train bogus "$fake" 2 "reproduce-train: unknown group 'bogus' (one of: lenet lenet3k"
reproduce_case reproduce-train lenet "$tmp/no-such-terngrad" 2 "reproduce-train: $tmp/no-such-terngrad is not an executable terngrad binary"
reproduce_case reproduce-train lenet "$fake" 1 "reproduce-train: 4 runs failed"
reproduce_case reproduce-convex "" "$tmp/no-such-terngrad" 2 "reproduce-convex: $tmp/no-such-terngrad is not an executable terngrad binary"
reproduce_case reproduce-convex "" "$fake" 1 "reproduce-convex: a run failed (log above); reports/convex left as it was"

# scripts/fuzz.sh checks its seconds and target names before building anything (was: `fuzz.sh abc` fuzzed with
# -max_total_time=abc, no limit). Run from a copy of the script, so that a check that let one through builds nothing.
mkdir -p "$tmp/fuzzcopy/scripts"
cp "$root/scripts/fuzz.sh" "$tmp/fuzzcopy/scripts/"
fuzz_case() {  # <stderr substring> <arguments...>
  local want=$1; shift
  cases=$((cases + 1))
  bash "$tmp/fuzzcopy/scripts/fuzz.sh" "$@" > "$tmp/stdout" 2> "$tmp/stderr"
  local rc=$?
  if [[ $rc != 2 || $(wc -l < "$tmp/stderr") != 1 || -s $tmp/stdout || -e $tmp/fuzzcopy/build ]] || ! grep -qF -- "$want" "$tmp/stderr"; then
    echo "FAIL: fuzz.sh $*: exit $rc; want exit 2, one line '$want', nothing built; stderr:" >&2
    cat "$tmp/stderr" >&2
    fails=$((fails + 1))
  fi
}
fuzz_case "fuzz.sh: seconds per target must be a whole number >= 1, not 'abc'" abc
fuzz_case "fuzz.sh: seconds per target must be a whole number >= 1, not '0'" 0
fuzz_case "fuzz.sh: seconds per target must be a whole number >= 1, not '99999999999'" 99999999999
fuzz_case "fuzz.sh: unknown target 'fuzz_bogus' (known: fuzz_decode" 5 fuzz_decode fuzz_bogus

echo "$((cases - fails)) of $cases cases as expected"
[[ $fails == 0 ]]
