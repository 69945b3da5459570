"""terngrad-bench: `python -m terngrad.report {index,train,convex,seeds,ranks} [options]`; `<report> --help` lists the options."""
import importlib
import sys

REPORTS = {
    "index": "reports/index.md (+ index.html, figures/) from every JSON/CSV under --reports (`terngrad report`)",
    "train": "reports/train/README.md and figures from the runs of scripts/reproduce-train.sh",
    "convex": "reports/convex/README.md and figures from the summaries of scripts/reproduce-convex.sh",
    "seeds": "reports/train/seeds.md and figures from the multi-seed runs of scripts/train-seeds.sh",
    "ranks": "reports/train/ranks.md and ranks.png from the multi-process runs of scripts/rank-splits.sh",
}

USAGE = "usage: python -m terngrad.report {" + ",".join(REPORTS) + "} [options]\n\n" + "\n".join(
    f"  {name:<7} {what}" for name, what in REPORTS.items()) + "\n\n`python -m terngrad.report <report> --help` lists its options."


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if not argv or argv[0] not in REPORTS:
        print(USAGE, file=sys.stderr)
        print(f"\nterngrad.report: error: name a report ({', '.join(REPORTS)})"
              + (f", not {argv[0]!r}" if argv else ""), file=sys.stderr)
        return 2
    return importlib.import_module(f"terngrad.report.{argv[0]}").main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
