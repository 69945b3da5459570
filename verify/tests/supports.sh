#!/usr/bin/env bash
# terngrad-bench: codec capabilities (--supports). A codec without clipping or a shared scalar, and one
# that always clips (with and without a shared scalar), each pass the quick battery when they say what
# they implement, and fail when they do not; the streams, collision and independence checks run for each.
# Run by ctest (verify_supports):
#   bash verify/tests/supports.sh build/default/apps/terngrad build/default/verify/tg_verify_fake_codec
set -u
terngrad=$1 fake=$2
fails=0
check() {  # mode, capabilities, and whether some check is left out (skipped) for what it lacks
  local out rc rows
  out=$("$terngrad" verify --profile quick --no-progress --impl "exec:$fake --mode $1" --supports "$2" 2>&1); rc=$?
  if [ $rc != 0 ]; then echo "FAIL: --mode $1 --supports $2: exit $rc"; echo "$out" | tail -20; fails=$((fails + 1)); fi
  rows=('^independence ' '^streams ' '^collision ' '^unbiased-pooled +all families' '^unbiased-drift +all families')
  if [ "$3" = skips ]; then rows+=('skipped'); else rows+=('^aggregate\.variance ' '^layerwise\.variance '); fi
  for row in "${rows[@]}"; do
    echo "$out" | grep -qE "$row" || { echo "FAIL: --mode $1: no row matching '$row'"; fails=$((fails + 1)); }
  done
  out=$("$terngrad" verify --profile quick --no-progress --impl "exec:$fake --mode $1" --skip cross 2>&1); rc=$?
  if [ $rc != 1 ]; then echo "FAIL: --mode $1 without --supports: exit $rc (expected 1: it does not do everything)"; fails=$((fails + 1)); fi
}
check plain none,spec-stream skips
check clip-only clip,spec-stream skips
check clip-shared clip,shared-scalar,spec-stream all
out=$("$terngrad" verify --profile quick --supports shared-scalar 2>&1); rc=$?
if [ $rc != 2 ]; then echo "FAIL: --supports without a clipping mode: exit $rc (expected 2)"; fails=$((fails + 1)); fi
echo "supports: $([ $fails = 0 ] && echo PASS || echo "$fails failures")"
exit $((fails > 0))
