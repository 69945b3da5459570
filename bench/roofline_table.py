#!/usr/bin/env python3
"""terngrad-bench: medians of tg_bench's counters (x_memcpy, of_bound, ns_per_el) and times from a
JSON run with --benchmark_repetitions, as the Markdown tables of reports/codec-throughput.md.
  build/cpu/bench/tg_bench --benchmark_repetitions=5 --benchmark_out=bench.json --benchmark_out_format=json
  python3 bench/roofline_table.py bench.json
"""
import json
import statistics
import sys


def main(path):
    with open(path) as f:
        data = json.load(f)
    runs = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        runs.setdefault(b["run_name"], []).append(b)
    if not runs:
        raise ValueError("no benchmark rows")
    ctx = data["context"]
    print(f"Run {ctx['date']}, {ctx['num_cpus']} CPUs at {ctx['mhz_per_cpu']} MHz, load average "
          f"{[round(x, 2) for x in ctx.get('load_avg', [])]} as Google Benchmark records it (at the run's end), `{ctx['executable']}`; "
          f"medians of {max(len(v) for v in runs.values())} repetitions.\n")
    print("| row | label | real ms | CPU ms | x_memcpy | of_bound | ns/element |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, bs in runs.items():
        def med(key):
            vals = [b[key] for b in bs if key in b]
            return statistics.median(vals) if vals else None
        unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[bs[0].get("time_unit", "ns")]
        real, cpu = med("real_time"), med("cpu_time")
        xm, ob, ns = med("x_memcpy"), med("of_bound"), med("ns_per_el")
        fmt = lambda v, spec: "" if v is None else format(v, spec)
        print(f"| {name} | {bs[0].get('label', '')} | {fmt(real * unit, '.3f')} | {fmt(cpu * unit, '.3f')} | "
              f"{fmt(xm, '.2f')} | {fmt(ob, '.2f')} | {fmt(ns, '.3f')} |")


if __name__ == "__main__":
    from table_cli import run

    run(main, "roofline_table", "tg_bench JSON run (--benchmark_out)")
