#!/usr/bin/env bash
# terngrad-bench: the test command (README, .ci/run): set-up, build, every ctest test, then the codec
# and property tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
#   bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# ccache keys on paths relative to the checkout, so a fresh clone reuses earlier compilations
export CCACHE_BASEDIR="$PWD"
export RC_PARAMS=${RC_PARAMS:-"seed=20171204 max_success=200"}
echo "test: rapidcheck RC_PARAMS=\"$RC_PARAMS\""
bash scripts/build.sh default
ctest --preset default -j2 -LE long
bash scripts/build.sh asan
ctest --preset asan -j2
