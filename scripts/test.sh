#!/usr/bin/env bash
# terngrad-bench: the test command (README, .ci/run): set-up, build, every ctest test except those
# labelled "long", the codec, property and battery tests under AddressSanitizer + UndefinedBehaviorSanitizer
# (less the battery's long statistical cases, verify/tests/sanitizer_skip.txt), with each stage's time,
# a short fuzz run of every libFuzzer target, valgrind memcheck and ThreadSanitizer on the codec.
#   bash scripts/test.sh                 (FUZZ_SECONDS=30 per target by default)
#   bash scripts/test.sh --long          also the tests labelled "long" (battery calibration over 400
#                                        seeds, the NumPy example's whole battery, exhaustive reliability,
#                                        training fault injection), after the default set
set -euo pipefail
cd "$(dirname "$0")/.."
long=0
for arg in "$@"; do
  case "$arg" in
    --long) long=1 ;;
    *) echo "usage: bash scripts/test.sh [--long] (unknown argument '$arg')" >&2; exit 2 ;;
  esac
done
# each stage's time, so that a CI run near its limit shows where the time went
stage() { echo "test: [$(( SECONDS / 60 )) min $(( SECONDS % 60 )) s] $*"; }
bash scripts/setup.sh
# ccache keys on paths relative to the checkout, so a fresh clone reuses earlier compilations
export CCACHE_BASEDIR="$PWD"
export RC_PARAMS=${RC_PARAMS:-"seed=20171204 max_success=200"}
echo "test: rapidcheck RC_PARAMS=\"$RC_PARAMS\""
stage "setup done"
bash scripts/build.sh default
stage "default build done"
ctest --preset default -j2 -LE long
stage "default tests done"
if [ "$long" = 1 ]; then
  echo "test: the tests labelled long"
  ctest --preset default -j2 -L long
fi
echo "test: codec, property and battery tests under ASan + UBSan (verify/tests/sanitizer_skip.txt left out)"
bash scripts/build.sh asan
stage "asan build done"
ctest --preset asan -j2
stage "asan tests done"
echo "test: fuzzing ${FUZZ_SECONDS:-30} s per target"
bash scripts/fuzz.sh "${FUZZ_SECONDS:-30}"
stage "fuzzing done"
echo "test: valgrind memcheck and ThreadSanitizer"
MEMCHECK_BUILD=build/default bash scripts/memcheck.sh valgrind
bash scripts/memcheck.sh tsan
stage "all stages passed"
