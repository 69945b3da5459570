#!/usr/bin/env python3
"""terngrad-bench: executes every notebook of a folder top to bottom with nbclient (ctest -L notebooks),
after checking that the committed files carry no outputs. Set TG_NOTEBOOK_SIZE=small for CI sizes.
Run: PYTHONPATH=build/<preset>/python/package build/venv/bin/python python/run_notebooks.py notebooks
     python/run_notebooks.py --strip notebooks     (removes outputs in place, for committing)"""
import argparse
import pathlib
import sys
import time


def has_outputs(nb):
    return [i for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)]


def strip(nb):
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs = []
            c.execution_count = None
    return nb


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=pathlib.Path)
    ap.add_argument("--strip", action="store_true", help="strip outputs in place instead of executing")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    args = ap.parse_args()
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError as e:
        print(f"run_notebooks: error: {e} (install nbclient, nbformat, ipykernel into build/venv: "
              "bash scripts/setup.sh)", file=sys.stderr)
        return 2
    paths = sorted(args.folder.glob("*.ipynb"))
    if not paths:
        print(f"run_notebooks: error: no notebooks in {args.folder}", file=sys.stderr)
        return 2
    failed = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        if args.strip:
            nbformat.write(strip(nb), path)
            print(f"stripped {path}")
            continue
        dirty = has_outputs(nb)
        if dirty:
            failed.append(path.name)
            print(f"FAIL {path.name}: committed with outputs in code cells {dirty} "
                  f"(run python/run_notebooks.py --strip {args.folder})")
            continue
        start = time.monotonic()
        client = NotebookClient(nb, timeout=args.timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})
        try:
            client.execute()
        except Exception as e:  # CellExecutionError carries the cell source and the traceback
            failed.append(path.name)
            print(f"FAIL {path.name}:\n{e}")
            continue
        print(f"ok   {path.name} ({time.monotonic() - start:.1f} s)")
    if failed:
        print(f"run_notebooks: {len(failed)} of {len(paths)} notebooks failed: {', '.join(failed)}")
        return 1
    print(f"run_notebooks: {len(paths)} notebooks executed top to bottom")
    return 0


if __name__ == "__main__":
    sys.exit(main())
