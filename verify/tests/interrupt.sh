#!/usr/bin/env bash
# terngrad-bench: `terngrad verify --impl exec:CMD` stopped by SIGTERM while the program runs: it dies of
# that signal (status 143), says so on stderr, leaves no temporary folder and writes no report. Then the
# built-in implementation (no external program) stopped by SIGINT and by SIGTERM with reports of an earlier
# run at --json and --junit: it dies of the signal, says so, and those reports are removed.
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
set -m  # background jobs in a script ignore SIGINT otherwise (and the program keeps a signal it started ignoring)
for sig in INT TERM; do
  echo '{"earlier": "run"}' >"$tmp/old.json"  # reports, as an earlier run wrote them (other files stay)
  printf '<?xml version="1.0"?>\n<testsuites name="terngrad verify">\n</testsuites>\n' >"$tmp/old.xml"
  "$terngrad" verify --profile ci --no-progress --json "$tmp/old.json" --junit "$tmp/old.xml" \
    >"$tmp/stdout" 2>"$tmp/stderr" &
  pid=$!
  sleep 1.5  # the ci run takes tens of seconds
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  want=$((128 + $(kill -l "$sig")))
  [ "$rc" = "$want" ] || { echo "built-in, SIG$sig: exit status $rc, expected $want"; fail=1; }
  [ ! -e "$tmp/old.json" ] && [ ! -e "$tmp/old.xml" ] || { echo "built-in, SIG$sig: an earlier report was left"; fail=1; }
  grep -q "interrupted; no report written" "$tmp/stderr" && grep -q "removed $tmp/old.json, a report of an earlier run" "$tmp/stderr" ||
    { echo "built-in, SIG$sig: stderr was: $(cat "$tmp/stderr")"; fail=1; }
done
[ "$fail" = 0 ] && echo "verify_interrupt: ok (exit 143, no temporary folder left, no report written; the built-in run stopped by SIGINT and SIGTERM removed the earlier reports)"
exit "$fail"
