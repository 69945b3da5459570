#!/usr/bin/env bash
# terngrad-bench: builds the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined; codec
# instrumented too) and runs each for N seconds (default 60); fails on any crash, leak, timeout,
# allocation over the limit or property violation, naming the input that caused it.
#   bash scripts/fuzz.sh [seconds-per-target] [target ...]     (targets: fuzz_decode fuzz_decode_resealed
#                                                               fuzz_encode fuzz_npy fuzz_store; default all built)
#   FUZZ_ARGS="..." (extra libFuzzer flags); the build is the main project's `fuzz` preset (build/fuzz)
# A crashing input is saved under build/fuzz/artifacts/<target>/; copy it into
# fuzz/regressions/<corpus>/ so that tg_reliability_tests replays it forever (fuzz/README in reports/reliability.md).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
build=build/fuzz
known="fuzz_decode fuzz_decode_resealed fuzz_encode fuzz_npy fuzz_store"

corpus_of() {
  case "$1" in
    fuzz_decode | fuzz_decode_resealed) echo decode ;;
    fuzz_encode) echo encode ;;
    fuzz_npy) echo npy ;;
    fuzz_store) echo store ;;
    *) echo "fuzz.sh: unknown target $1" >&2; exit 2 ;;
  esac
}

# The arguments, before anything is built: libFuzzer reads -max_total_time=abc as 0, which means "no limit".
if ! [[ $secs =~ ^[0-9]{1,9}$ ]] || [ "$((10#$secs))" -lt 1 ]; then
  echo "fuzz.sh: seconds per target must be a whole number >= 1, not '$secs' (usage: bash scripts/fuzz.sh [seconds] [target ...])" >&2
  exit 2
fi
secs=$((10#$secs))
for t in "$@"; do
  case " $known " in
    *" $t "*) ;;
    *) echo "fuzz.sh: unknown target '$t' (known: $known)" >&2; exit 2 ;;
  esac
done

[ -f "$build/CMakeCache.txt" ] || cmake --preset fuzz >/dev/null
cmake --build "$build" --target tg_fuzz_targets -j2

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for t in $known; do
    [ -x "$build/fuzz/$t" ] && targets+=("$t")
  done
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-"detect_leaks=1:abort_on_error=1:symbolize=1"}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-"print_stacktrace=1:halt_on_error=1"}
mkdir -p "$build/logs"
failed=0
printf '%-22s %8s %12s %8s %6s %12s %s\n' target seconds executions exec/s cov corpus result
for t in "${targets[@]}"; do
  seeds=fuzz/corpus/$(corpus_of "$t")
  work=$build/corpus/$t
  artifacts=$build/artifacts/$t
  mkdir -p "$work" "$artifacts"
  log=$build/logs/$t.log
  set +e
  # -malloc_limit_mb: a single allocation above 256 MiB is reported as a crash (allocation storm);
  # inputs up to 4 KiB, 10 s per input at most. FUZZ_ARGS is a list of extra options, split into words.
  # shellcheck disable=SC2086
  "$build/fuzz/$t" "$work" "$seeds" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=256 -artifact_prefix="$artifacts/" -print_final_stats=1 ${FUZZ_ARGS:-} >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  done_line=$(grep 'DONE' "$log" | tail -n 1 || true)
  cov=$(echo "$done_line" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*' || echo -)
  corp=$(echo "$done_line" | grep -o 'corp: [0-9]*/[0-9]*[KMG]*b' | cut -d' ' -f2 || echo -)
  if [ $rc -eq 0 ]; then
    result=ok
  else
    result="FAILED (exit $rc)"
    failed=1
  fi
  printf '%-22s %8s %12s %8s %6s %12s %s\n' "$t" "$secs" "${execs:-0}" "${rate:-0}" "${cov:--}" "${corp:--}" "$result"
  if [ $rc -ne 0 ]; then
    echo "---- $t: last lines of $log" >&2
    tail -n 40 "$log" >&2
    echo "---- crashing inputs in $artifacts/: copy them into fuzz/regressions/$(corpus_of "$t")/" >&2
    ls -l "$artifacts" >&2
  fi
done
exit $failed
