"""terngrad-bench: what the renderers of terngrad.report share: reading the tools' JSON/CSV,
Markdown tables, matplotlib set up for files (Agg), saving figures, moving averages, the runs/out
command line."""
import argparse
import csv
import json
import math
import pathlib
import sys


class InputError(Exception):
    """A file a renderer must read is unreadable or malformed (exit code 2)."""


def num(x):
    """float of a CSV/JSON cell; None for empty, null, or non-finite text."""
    if x is None or x == "":
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def read_csv(path):
    """Rows of a CSV file with a header, as dicts of strings."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, csv.Error, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read CSV: {e}")
    return rows


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}")
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: invalid JSON ({e.msg} at line {e.lineno}, column {e.colno}); "
                         "fix or remove the file")


def md_table(head, rows):
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    out = ["| " + " | ".join(esc(h) for h in head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def pyplot():
    """matplotlib.pyplot drawing to files only (the Agg backend), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def shown_path(path):
    """path as a report quotes it: relative to the working directory (the repository root, where the scripts
    run the renderers) when it lies under it, so that a committed report names no machine's folders."""
    p = pathlib.Path(path).resolve()
    try:
        return str(p.relative_to(pathlib.Path.cwd().resolve()))
    except ValueError:
        return str(path)


def write_output(path, data):
    """Every file the renderers write goes through the project's one writer (tg::write_output):
    temp + fsync + rename for a file, the target of a symlink, in place for a device or FIFO."""
    from .._core import write_output as _write_output
    _write_output(str(path), data.encode("utf-8") if isinstance(data, str) else bytes(data))


def save_figure(fig, path, dpi=110, **kwargs):
    """Writes a figure as PNG and frees it."""
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, **kwargs)
    pyplot().close(fig)
    write_output(path, buf.getvalue())


def moving_average(values, w):
    """Means of the windows values[k:k + w]: len(values) - w + 1 of them (none when w > len(values))."""
    return [sum(values[k:k + w]) / w for k in range(len(values) - w + 1)]


def read_train_run(folder):
    """One `terngrad train --out` folder: run.json, with its evals.csv and steps.csv rows under "_evals"
    and "_steps" and the folder's name under "_name"; None when the folder has no run.json."""
    run = read_json(folder / "run.json") if (folder / "run.json").is_file() else None
    if run is None:
        return None
    run["_evals"] = read_csv(folder / "evals.csv")
    run["_steps"] = read_csv(folder / "steps.csv")
    run["_name"] = folder.name
    return run


def runs_report_main(argv, name, what, runs, out, made_by, render, errors=(InputError, KeyError, ValueError),
                     kept_in=None, missing=None):
    """The command line of a renderer that reads a folder of runs: `python -m terngrad.report <name>
    [--runs DIR] [--out DIR]`. render(runs_dir, out_dir) returns the path it wrote; a missing runs
    folder or a malformed run is one line on stderr and exit 2. kept_in(out_dir), where given, names a folder
    of what the renderer keeps of earlier runs: if it exists, a missing runs folder is no error.
    missing(runs_dir), where given, names the runs the full report needs that the folder lacks: then the
    report is written only when none is missing, or with --partial (the sections without runs left out), so
    that rendering after one group of runs never writes a shorter report over the full one."""
    ap = argparse.ArgumentParser(prog=f"python -m terngrad.report {name}",
                                 description=f"Render {what} from the runs of {made_by}.")
    ap.add_argument("--runs", type=pathlib.Path, default=runs, help=f"folder of the runs (default: {runs})")
    ap.add_argument("--out", type=pathlib.Path, default=out, help=f"folder for the report and PNGs (default: {out})")
    if missing is not None:
        ap.add_argument("--partial", action="store_true",
                        help="render with runs missing, leaving their sections out (default: refuse, naming them)")
    args = ap.parse_args(argv)
    if not args.runs.is_dir() and not (kept_in and kept_in(args.out).is_dir()):
        print(f"terngrad.report {name}: error: runs folder {args.runs} does not exist ({made_by} writes it)",
              file=sys.stderr)
        return 2
    lacking = missing(args.runs) if missing is not None and not args.partial else []
    if lacking:
        shown = ", ".join(lacking[:6]) + (f" and {len(lacking) - 6} more" if len(lacking) > 6 else "")
        print(f"terngrad.report {name}: error: {args.runs} lacks {len(lacking)} of the runs {what} shows ({shown}): "
              f"run them ({made_by}), or pass --partial to render without their sections; nothing written",
              file=sys.stderr)
        return 2
    try:
        path = render(args.runs, args.out)
    except errors as e:
        print(f"terngrad.report {name}: error: runs under {args.runs} are incomplete or malformed: {e}",
              file=sys.stderr)
        return 2
    print("wrote", path)
    return 0
