#!/usr/bin/env bash
# terngrad-bench: the study scripts (scripts/train-seeds.sh, scripts/rank-splits.sh) refuse bad arguments
# and environment with exit status 2, one line on stderr naming the problem, nothing on stdout, and no
# runs folder created. Every case stops before the first run, so the "binary" is /bin/true.
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
expect rank-splits "rank-splits: STEPS must be integers >= 2, not '1'" STEPS=1 -- /bin/true smoke
expect rank-splits "rank-splits: RANKS must be integers >= 1, not 'two'" RANKS="two" -- /bin/true smoke

echo "$((cases - fails)) of $cases cases refused as expected"
[[ $fails == 0 ]]
