# shellcheck shell=bash
# terngrad-bench: what scripts/train-seeds.sh and scripts/rank-splits.sh share (sourced, not run):
# their arguments (<path to terngrad> [full|smoke]), the environment they read (OUT, PYTHON, TG_PACKAGE),
# the schedule log of each run's start (with the load average) and end, and the report at the end.
#   study_init <script name> <default runs folder under reports/> "$@"   sets TG MODE ROOT OUT PY PKG (and, in
#                                     smoke mode, OUT and REPORT_OUT default under build/smoke/)
#   study_ints <name> <value> <least>  checks a list of integers (SEEDS, WORKERS, RANKS) before any run
#   study_plan <count>                the number of runs the study will make (for the progress lines)
#   study_run <name> <command...>     runs one job: output to $OUT/<name>.log, logged in $OUT/schedule.log;
#                                     returns the command's status. Prints "[i/N] <name>: running" with the
#                                     median time of the study's runs so far and the time that leaves
#   study_report <report name> [default out folder]   renders `python -m terngrad.report <name>`
study_init() {
  local script=$1 runs=$2
  shift 2
  STUDY=$script
  if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: bash scripts/$script.sh <path to terngrad> [full|smoke]" >&2
    exit 2
  fi
  TG=$1
  MODE=${2:-full}
  ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  [[ -x $TG ]] || { echo "$script: $TG is not an executable terngrad binary" >&2; exit 2; }
  case $MODE in full|smoke) ;; *) echo "$script: mode must be full or smoke, not '$MODE'" >&2; exit 2 ;; esac
  # smoke runs and their report go under build/smoke/ (not in git), so that a smoke study never mixes its runs
  # with a full one's or writes over the committed report and digests
  if [[ $MODE == smoke ]]; then
    OUT=${OUT:-$ROOT/build/smoke/$runs}
    REPORT_OUT=${REPORT_OUT:-$ROOT/build/smoke/$(dirname "$runs")}
  fi
  OUT=${OUT:-$ROOT/reports/$runs}
  PY=${PYTHON:-$ROOT/build/venv/bin/python}
  PKG=${TG_PACKAGE:-$(cd "$(dirname "$TG")/.." && pwd)/python/package}
}

# study_ints <variable name> <value> <least>: every word of the value an integer >= least, else one line, exit 2.
study_ints() {
  local w
  [[ -n ${2// /} ]] || { echo "$STUDY: $1 is empty" >&2; exit 2; }
  for w in $2; do
    [[ $w =~ ^[0-9]+$ && $w -ge $3 ]] || { echo "$STUDY: $1 must be integers >= $3, not '$w'" >&2; exit 2; }
  done
}

STUDY_TOTAL=0
STUDY_STARTED=0
STUDY_TIMES=()
study_plan() { STUDY_TOTAL=$1; }

# The progress line before run i: its number, and once a run has finished, the median of the finished
# runs' wall times and that times the runs left (this one included).
study_progress() {
  local name=$1 line
  STUDY_STARTED=$((STUDY_STARTED + 1))
  line="[$STUDY_STARTED/$STUDY_TOTAL] $name: running"
  [[ $STUDY_TOTAL -gt 0 ]] || line="$name: running"
  if [[ ${#STUDY_TIMES[@]} -gt 0 ]]; then
    local med left
    med=$(printf '%s\n' "${STUDY_TIMES[@]}" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2)}')
    left=$(( (STUDY_TOTAL - STUDY_STARTED + 1) * med ))
    line+=" (runs so far: median $((med / 60)) min $((med % 60)) s"
    [[ $STUDY_TOTAL -gt 0 ]] && line+="; about $((left / 60)) min $((left % 60)) s left with this one"
    line+=")"
  fi
  echo "$line"
}

study_run() {
  local name=$1 t0=$SECONDS
  shift
  study_progress "$name"
  mkdir -p "$OUT"  # here, not in study_init: a bad option leaves nothing behind
  # the machine, so that a study run over several machines says which times come from where
  # and the source commit the binary was built from (`terngrad --version`), so that times say which code made them
  local cpu src
  cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -1)
  src=$("$TG" --version 2>/dev/null | sed -n 's/.*(source \(.*\))$/\1/p' | tr ' ' '_')
  echo "$(date -u +%FT%TZ) start $name load $(cut -d' ' -f1-3 /proc/loadavg) binary $TG source ${src:-unknown} cpu ${cpu:-unknown} x $(nproc)" >> "$OUT/schedule.log"
  if "$@" > "$OUT/$name.log" 2>&1; then
    # the 1-, 5- and 15-minute load averages at the end: what else ran during the run
    echo "$(date -u +%FT%TZ) done $name load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/schedule.log"; echo "done $name"
    STUDY_TIMES+=($((SECONDS - t0)))
  else
    echo "$(date -u +%FT%TZ) FAILED $name" >> "$OUT/schedule.log"; echo "FAILED $name (see $OUT/$name.log)" >&2
    return 1
  fi
}

study_report() {
  PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m terngrad.report "$1" --runs "$OUT" --out "${REPORT_OUT:-$ROOT/reports/train}"
  [[ $MODE == full ]] || echo "$STUDY: smoke report in ${REPORT_OUT:-$ROOT/reports/train} (the committed reports are untouched)"
}
