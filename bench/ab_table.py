"""Table of an interleaved A/B made by bench/ab.sh: per row, CPU ms median and range of A and B, B/A."""
import glob
import json
import statistics as st
import sys


def main(d):
    if not glob.glob(f"{d}/A.*.json") or not glob.glob(f"{d}/B.*.json"):
        raise ValueError(f"no A.*.json and B.*.json runs of bench/ab.sh in {d}")
    rows = {}
    for w in "AB":
        for f in sorted(glob.glob(f"{d}/{w}.*.json")):
            with open(f) as fh:
                benchmarks = json.load(fh)["benchmarks"]
            for b in benchmarks:
                r = rows.setdefault(b["name"], {}).setdefault(w, {"cpu": [], "of_bound": []})
                r["cpu"].append(b["cpu_time"] / 1000.0 if b.get("time_unit") == "us" else b["cpu_time"])
                if "of_bound" in b:
                    r["of_bound"].append(b["of_bound"])
    print("| row (CPU ms) | A median | A range | B median | B range | B/A | of_bound A / B |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, v in rows.items():
        if "A" not in v or "B" not in v:
            continue
        a, b = v["A"]["cpu"], v["B"]["cpu"]
        ob = ""
        if v["A"]["of_bound"] and v["B"]["of_bound"]:
            ob = f"{st.median(v['A']['of_bound']):.2f} / {st.median(v['B']['of_bound']):.2f}"
        print(f"| {name} | {st.median(a):.3f} | {min(a):.3f}-{max(a):.3f} | {st.median(b):.3f} | "
              f"{min(b):.3f}-{max(b):.3f} | {st.median(b) / st.median(a):.3f} | {ob} |")
    print()
    with open(f"{d}/load.txt") as fh:
        print(fh.read())


if __name__ == "__main__":
    from table_cli import run

    run(main, "ab_table", "folder of an A/B made by bench/ab.sh")
