#!/bin/bash
# Interleaved A/B of two tg_bench binaries: R rounds, A first in odd rounds and B first in even ones,
# one repetition per binary per round, the load average noted before each; then the table of medians
# and ranges (bench/ab_table.py). CPU time: compare 1-thread rows.
#   bash bench/ab.sh OLD/tg_bench NEW/tg_bench [rounds=5] [out=ab-out]   (env F = benchmark filter)
set -euo pipefail
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
  echo "usage: bench/ab.sh A_BINARY B_BINARY [rounds] [out_dir] (both binaries must be executable)" >&2
  exit 2
fi
A=$1 B=$2 R=${3:-5} out=${4:-ab-out}
F=${F:-'BM_Roofline_Read/t1/16777216$|BM_Memcpy/16777216$|BM_Encode/(optimized|twopass|singlepass)_1thread/16777216$'}
mkdir -p "$out"
: > "$out/load.txt"
for r in $(seq 1 "$R"); do
  order="A B"; [ $((r % 2)) = 0 ] && order="B A"
  for w in $order; do
    bin=$A; [ "$w" = B ] && bin=$B
    echo "round $r $w $(cat /proc/loadavg)" >> "$out/load.txt"
    "$bin" --benchmark_filter="$F" --benchmark_min_time=0.3 --benchmark_out="$out/$w.$r.json" \
      --benchmark_out_format=json > /dev/null
  done
done
echo "end $(cat /proc/loadavg)" >> "$out/load.txt"
python3 "$(dirname "$0")/ab_table.py" "$out"
