#!/usr/bin/env python3
"""terngrad-bench: turns Google Benchmark JSON from tg_bench into the Markdown table of codec
throughput and its ratio to memcpy measured in the same run.
  build/default/bench/tg_bench --benchmark_out=bench.json --benchmark_out_format=json
  python3 scripts/bench-table.py bench.json > reports/codec-throughput.md
"""
import json
import sys


def main(path):
    with open(path) as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        parts = [p for p in b["name"].split("/") if p != "real_time"]
        size = int(parts[-1])
        key = "/".join(parts[:-1]).replace("BM_", "")
        rows.setdefault(size, {})[key] = b["bytes_per_second"] / 1e9
    ctx = data["context"]
    print("# Codec throughput (CPU)\n")
    print(f"Measured {ctx['date']} on {ctx['num_cpus']} CPUs at {ctx['mhz_per_cpu']} MHz "
          f"(load average {ctx.get('load_avg', '?')}), `{ctx['executable']}`.")
    print("GB/s of float32 input (encode: scalar pass + ternarize + 2bit pack + header/CRC32C) or "
          "float32 output (decode: validate + unpack + scale). Ratio = codec GB/s / memcpy GB/s of "
          "the same bytes in the same run.\n")
    cols = ["Encode/reference", "Encode/optimized_1thread", "Encode/optimized_allthreads",
            "Decode/reference", "Decode/optimized_1thread", "Decode/optimized_allthreads"]
    print("| elements | memcpy GB/s | " + " | ".join(c.replace("_", " ") for c in cols) + " |")
    print("|---:|---:|" + "---:|" * len(cols))
    for size in sorted(rows):
        r = rows[size]
        mem = r.get("Memcpy")
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append("" if v is None or mem is None else f"{v:.2f} ({v / mem:.0%})")
        print(f"| 2^{size.bit_length() - 1} | {mem:.2f} | " + " | ".join(cells) + " |")
    big = rows.get(1 << 24, {})
    if big:
        e1, er = big.get("Encode/optimized_1thread"), big.get("Encode/reference")
        d1, dr = big.get("Decode/optimized_1thread"), big.get("Decode/reference")
        print(f"\nAt 2^24 elements: optimized 1-thread encode is {e1 / er:.1f}x the reference and "
              f"{e1 / big['Memcpy']:.0%} of memcpy; decode is {d1 / dr:.1f}x the reference and "
              f"{d1 / big['Memcpy']:.0%} of memcpy.")


if __name__ == "__main__":
    main(sys.argv[1])
