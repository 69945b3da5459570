#!/usr/bin/env bash
# terngrad-bench: `terngrad verify --impl exec:CMD` stopped by SIGTERM while the program runs: it dies of
# that signal (status 143), says so on stderr, leaves no temporary folder and writes no report.
# Run by ctest (verify_interrupt): interrupt.sh TERNGRAD FAKE_CODEC
set -u
terngrad=$1
fake=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/t"
TMPDIR=$tmp/t "$terngrad" verify --profile quick --no-progress --impl "exec:$fake --mode sleep" \
  --json "$tmp/out.json" >"$tmp/stdout" 2>"$tmp/stderr" &
pid=$!
for _ in $(seq 200); do  # until the battery's folder exists and the program has started
  [ -n "$(ls -A "$tmp/t")" ] && break
  sleep 0.05
done
sleep 0.3
kill -TERM "$pid"
wait "$pid"
rc=$?
fail=0
[ "$rc" = 143 ] || { echo "exit status $rc, expected 143 (SIGTERM)"; fail=1; }
[ -z "$(ls -A "$tmp/t")" ] || { echo "left behind in TMPDIR: $(ls -A "$tmp/t")"; fail=1; }
[ ! -e "$tmp/out.json" ] || { echo "a report was written"; fail=1; }
grep -q "interrupted by signal 15" "$tmp/stderr" || { echo "stderr was: $(cat "$tmp/stderr")"; fail=1; }
[ "$fail" = 0 ] && echo "verify_interrupt: ok (exit 143, no temporary folder left, no report written)"
exit "$fail"
