"""terngrad-bench: renders one report (Markdown + HTML + PNG plots) from the JSON/CSV that `terngrad verify`,
`terngrad converge`, `terngrad train` and tg_bench wrote under a reports folder (searched recursively).
Run: terngrad report [--reports reports]   or   python -m terngrad.report index --reports reports
(with the built package on PYTHONPATH: build/<preset>/python/package).
Inputs are recognised by content, not by name; exit 0 rendered, 2 bad input (nothing is written then)."""
import argparse
import datetime
import html
import math
import os
import pathlib
import platform
import re
import shutil
import sys
import tempfile

from .common import InputError, write_output, md_table, moving_average, num, pyplot, read_csv, read_json, save_figure

FIGURES = "figures"  # sub-folder of the output's folder that holds the PNGs


# ---- discovery ------------------------------------------------------------------------------------

def find_convex_curves(obj):
    """Lists of per-method curve objects (dicts with 'method' and 'dist2_mean') anywhere in a JSON value."""
    if isinstance(obj, list):
        if obj and all(isinstance(x, dict) and "method" in x and "dist2_mean" in x for x in obj):
            return [obj]
        found = []
        for x in obj:
            found += find_convex_curves(x)
        return found
    if isinstance(obj, dict):
        found = []
        for v in obj.values():
            found += find_convex_curves(v)
        return found
    return []




def _expect(path, ok, problem):
    if not ok:
        raise InputError(f"{path}: {problem}")


NUMBER = (int, float)


def check_verify_json(path, data):
    """The parts of a `terngrad verify` JSON that section_verify reads, with the types it reads them as."""
    runs = data.get("runs")
    _expect(path, isinstance(runs, list), "a `terngrad verify` JSON without a 'runs' list")
    for i, run in enumerate(runs):
        _expect(path, isinstance(run, dict), f"runs[{i}] is {type(run).__name__}, not an object (one per run)")
        rows = run.get("rows", [])
        _expect(path, isinstance(rows, list), f"runs[{i}].rows is {type(rows).__name__}, not a list of rows")
        _expect(path, run.get("sizes") is None or isinstance(run["sizes"], dict), f"runs[{i}].sizes is not an object")
        for k, r in enumerate(rows):
            _expect(path, isinstance(r, dict), f"runs[{i}].rows[{k}] is {type(r).__name__}, not an object")
            for key in ("check", "family", "kind", "detail", "statistic", "threshold"):
                _expect(path, r.get(key) is None or isinstance(r[key], str), f"runs[{i}].rows[{k}].{key} is not text")
            _expect(path, r.get("alpha") is None or isinstance(r["alpha"], NUMBER),
                    f"runs[{i}].rows[{k}].alpha is not a number")


def check_bench_json(path, data):
    """A Google Benchmark JSON as section_bench reads it."""
    _expect(path, isinstance(data["context"], dict), "'context' is not an object (a Google Benchmark JSON)")
    _expect(path, isinstance(data["benchmarks"], list), "'benchmarks' is not a list (a Google Benchmark JSON)")
    for i, b in enumerate(data["benchmarks"]):
        _expect(path, isinstance(b, dict), f"benchmarks[{i}] is {type(b).__name__}, not an object")
        if "bytes_per_second" in b and b.get("run_type") != "aggregate":
            _expect(path, isinstance(b.get("name"), str), f"benchmarks[{i}].name is not text")
            _expect(path, isinstance(b["bytes_per_second"], NUMBER), f"benchmarks[{i}].bytes_per_second is not a number")


def check_train_json(path, data):
    """A `terngrad train` run.json as section_train reads it."""
    _expect(path, isinstance(data["config"], dict), "'config' is not an object (a `terngrad train` run.json)")
    _expect(path, isinstance(data["evals"], list), "'evals' is not a list (a `terngrad train` run.json)")
    for i, e in enumerate(data["evals"]):
        _expect(path, isinstance(e, dict), f"evals[{i}] is {type(e).__name__}, not an object")
    b = data.get("bytes_per_worker_step")
    _expect(path, b is None or isinstance(b, dict), "'bytes_per_worker_step' is not an object")
    for key in ("payload_all", "float32_all"):
        _expect(path, not b or b.get(key) is None or isinstance(b[key], NUMBER),
                f"bytes_per_worker_step.{key} is not a number")


def discover(root, skip):
    """Classifies every .json/.csv under root. Returns a dict of lists by kind."""
    found = {"verify": [], "bench": [], "convex": [], "train": [], "unrecognised": []}
    train_dirs = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix not in (".json", ".csv"):
            continue
        if any(part.startswith(".") for part in path.relative_to(root).parts) or path.resolve() in skip:
            continue
        rel = path.relative_to(root)
        if path.suffix == ".json":
            data = read_json(path)
            if isinstance(data, dict) and data.get("tool") == "terngrad verify":
                check_verify_json(path, data)
                found["verify"].append((rel, data))
            elif isinstance(data, dict) and "benchmarks" in data and "context" in data:
                check_bench_json(path, data)
                found["bench"].append((rel, data))
            elif isinstance(data, dict) and "config" in data and "evals" in data:
                check_train_json(path, data)
                train_dirs.setdefault(path.parent, {})["run"] = (rel, data)
            elif find_convex_curves(data):
                config = data.get("config") if isinstance(data, dict) and isinstance(data.get("config"), dict) else {}
                for curves in find_convex_curves(data):
                    found["convex"].append((rel, curves_from_json(curves, path), config))
            else:
                found["unrecognised"].append(rel)
        else:
            try:
                with open(path, newline="") as f:
                    header = f.readline().strip()
            except (OSError, UnicodeDecodeError) as e:
                raise InputError(f"{path}: cannot read: {e}")
            if header.startswith("method,t,dist2_mean"):
                found["convex"].append((rel, curves_from_csv(read_csv(path), path), {}))
            elif header.startswith("step,train_loss,test_loss,test_accuracy"):
                train_dirs.setdefault(path.parent, {})["evals"] = (rel, read_csv(path))
            elif header.startswith("step,loss,"):
                train_dirs.setdefault(path.parent, {})["steps"] = (rel, read_csv(path))
            elif header.startswith("step,layer,name,sparsity,scalar"):
                train_dirs.setdefault(path.parent, {})["layers"] = (rel, None)  # per-layer detail: not plotted
            else:
                found["unrecognised"].append(rel)
    for d, parts in sorted(train_dirs.items()):
        if "run" in parts or "evals" in parts:
            found["train"].append((d.relative_to(root), parts))
        else:
            found["unrecognised"] += [parts[k][0] for k in parts]
    # the same curves written as CSV and JSON side by side are shown once: the JSON (it adds seeds, slope, config)
    unique = {}
    for rel, curves, config in found["convex"]:
        key = (str(rel.parent), tuple(sorted(curves)))
        if key not in unique or rel.suffix == ".json":
            unique[key] = (rel, curves, config)
    found["convex"] = list(unique.values())
    return found


def curves_from_csv(rows, path):
    curves = {}
    for i, r in enumerate(rows):
        if r.get("method") in (None, "") or num(r.get("t")) is None:
            raise InputError(f"{path}: row {i + 2} has no method or step t")
        c = curves.setdefault(r["method"], {})
        for k, v in r.items():
            if k != "method":
                c.setdefault(k, []).append(num(v))
    return curves


# the per-step series of a curve that section_convex plots: lists when present
SERIES = ("t", "dist2_mean", "dist2_p10", "dist2_p90", "dist2_predicted", "var_measured", "var_identity")


def curves_from_json(items, path):
    curves = {}
    for item in items:
        c = {}
        for k, v in item.items():
            _expect(path, k not in SERIES or v is None or isinstance(v, list),
                    f"curves of method {item.get('method')!r}: '{k}' is {type(v).__name__}, not a list")
            if isinstance(v, list):
                c[k] = [num(x) for x in v]
            elif k != "method":
                c[k] = v
        if not c.get("t"):
            raise InputError(f"{path}: curves of method {item.get('method')!r} have no 't'")
        curves[str(item["method"])] = c
    return curves


# ---- Markdown helpers ---------------------------------------------------------------------------


class Figures:
    """Saves matplotlib figures into a staging folder; names are stable so diffs stay small. A figure that
    another renderer already drew for the same input (see `rendered_elsewhere`) is linked, not drawn again."""

    def __init__(self, stage, reports=None, out_dir=None):
        self.stage = stage
        self.reports = reports
        self.out_dir = out_dir
        self.names = []

    def save(self, fig, name):
        stem, k = name[:-len(".png")], 2
        while name in self.names:  # two inputs of the same kind and label get distinct files
            name, k = f"{stem}-{k}.png", k + 1
        save_figure(fig, self.stage / name, bbox_inches="tight")
        self.names.append(name)
        return f"![{name}]({FIGURES}/{name})"

    def rendered_elsewhere(self, rel):
        """The figure `python -m terngrad.report convex` drew for the `terngrad converge` folder of input rel
        (<folder>.png next to <folder>/summary.json), as a Markdown image relative to the output; None if none."""
        if self.reports is None or self.out_dir is None or rel.suffix != ".json" or rel.parent == pathlib.Path("."):
            return None
        png = self.reports / rel.parent.parent / (rel.parent.name + ".png")
        if not png.is_file():
            return None
        return f"![{png.name}]({pathlib.Path(os.path.relpath(png, self.out_dir)).as_posix()})"


# ---- sections ----------------------------------------------------------------------------------

VARIANCE_DETAIL = re.compile(r"= ([-+0-9.eE]+(?:e[-+]?\d+)?); observed mean ([-+0-9.eE]+)")


def section_verify(items, figs):
    import matplotlib.ticker
    plt = pyplot()
    out = ["## Statistical battery (`terngrad verify`)\n"]
    if not items:
        out.append("No `terngrad verify` JSON found. Produce one with "
                   "`terngrad verify --json reports/verify/verify.json`.\n")
        return out
    for rel, data in items:
        for run in data["runs"]:
            rows = run.get("rows", [])
            fails = [r for r in rows if not r.get("pass", True)]
            out.append(f"### {run.get('implementation', '?')}, profile {run.get('profile', '?')} "
                       f"(`{rel}`)\n")
            out.append(f"Verdict: **{'PASS' if run.get('pass') else 'FAIL'}** ({len(rows)} rows, {len(fails)} failed) "
                       f"in {num(run.get('seconds')) or 0:.1f} s; seed {run.get('seed')}. Error budget: "
                       f"alpha_total {run.get('alpha_total')} split over {run.get('decisions')} statistical "
                       f"decisions (Bonferroni, {num(run.get('alpha_each')) or 0:.3g} each); power stated at "
                       f"1 - beta with beta {run.get('beta')}. Sizes: "
                       + ", ".join(f"{k} {v}" for k, v in (run.get("sizes") or {}).items()) + ".\n")
            table = [(r.get("check", ""), r.get("family", ""), r.get("kind", ""), r.get("statistic", ""),
                      r.get("threshold", ""), r.get("p_value", ""), r.get("detectable", ""),
                      f"{r['alpha']:.3g}" if num(r.get("alpha")) else "",
                      "info" if r.get("kind") == "info" else ("pass" if r.get("pass", True) else "**FAIL**"))
                     for r in rows]
            out.append(md_table(["check", "family", "kind", "statistic", "threshold", "p-value",
                                 "detectable (power 1-beta)", "alpha", "verdict"], table))
            for r in fails:
                out.append(f"- FAIL {r.get('check')} [{r.get('family')}]: {r.get('detail', '')}")
            if fails:
                out.append("")
            # variance identity: empirical vs exact across families
            pts = []
            for r in rows:
                if r.get("check", "").split(".")[-1] != "variance" and r.get("check") != "variance":
                    continue
                m = VARIANCE_DETAIL.search(r.get("detail", ""))
                if m and num(m.group(1)) and num(m.group(2)) is not None:
                    ratio = re.match(r"ratio ([-+0-9.eE]+)", r.get("statistic", ""))
                    rel_err = num(ratio.group(1)) - 1 if ratio and num(ratio.group(1)) is not None else \
                        num(m.group(2)) / num(m.group(1)) - 1
                    label = f"{r.get('check')} [{r.get('family', '?')}]"
                    pts.append((label, num(m.group(1)), num(m.group(2)), r.get("threshold", ""), rel_err))
            if pts:
                fig, ax = plt.subplots(1, 2, figsize=(11, max(3.8, 0.22 * len(pts) + 1)))
                exact = [p[1] for p in pts]
                emp = [p[2] for p in pts]
                ax[0].loglog(exact, emp, "o")
                lo, hi = min(exact + emp), max(exact + emp)
                ax[0].loglog([lo, hi], [lo, hi], "k:", lw=1)
                ax[0].set_xlabel("identity  s||x||_1 - ||x||_2^2"); ax[0].set_ylabel("Monte-Carlo mean of ||g~ - x||^2")
                ax[0].set_title("variance identity: empirical vs exact")
                rel_err = [p[4] for p in pts]
                band = []
                for p in pts:
                    t = re.search(r"\+-\s*([0-9.eE+-]+)", p[3])
                    band.append(num(t.group(1)) if t else None)
                y = range(len(pts))
                ax[1].plot(rel_err, y, "o", label="observed / identity - 1")
                bx = [b for b in band if b is not None]
                if len(bx) == len(band):
                    ax[1].errorbar([0] * len(pts), y, xerr=band, fmt="none", ecolor="gray", capsize=3,
                                   label="acceptance threshold")
                ax[1].axvline(0, color="k", lw=0.8)
                ax[1].set_yticks(list(y), [p[0] for p in pts], fontsize=7)
                ax[1].xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(5))
                ax[1].set_xlabel("relative error (statistic: ratio - 1)"); ax[1].legend(fontsize=7)
                ax[1].set_title("relative error and its threshold")
                fig.tight_layout()
                slug = re.sub(r"[^a-z0-9]+", "-", f"{run.get('implementation', '')}-{run.get('profile', '')}".lower())
                out.append(figs.save(fig, f"verify-variance-{slug.strip('-')}.png") + "\n")
    return out


def section_convex(items, figs):
    import matplotlib.ticker
    plt = pyplot()
    out = ["## Convex convergence (`terngrad converge`)\n"]
    if not items:
        out.append("No convergence curves found (CSV with header `method,t,dist2_mean,...` or the JSON of "
                   "`terngrad converge`).\n")
        return out
    for idx, (rel, curves, config) in enumerate(items):
        out.append(f"### `{rel}`\n")
        if config:
            out.append("Settings: " + ", ".join(f"{k} {v}" for k, v in config.items() if not isinstance(v, (list, dict)))
                       + ".\n")
        plottable = sum(1 for c in curves.values() for a, b in zip(c.get("t") or [], c.get("dist2_mean") or [])
                        if a and b and a > 0 and b > 0)
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        rows = []
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for k, (method, c) in enumerate(curves.items()):
            color = colors[k % len(colors)]  # the same method has the same color in both panels
            t = c.get("t") or []
            mean = c.get("dist2_mean") or []
            pairs = [(a, b) for a, b in zip(t, mean) if a is not None and b is not None and a > 0 and b > 0]
            if pairs:
                line, = ax[0].loglog(*zip(*pairs), "o-" if len(pairs) < 5 else "-", ms=4, color=color, label=method)
                p10, p90 = c.get("dist2_p10") or [], c.get("dist2_p90") or []
                band = [(a, lo_, hi_) for a, lo_, hi_ in zip(t, p10, p90)
                        if a and lo_ and hi_ and a > 0 and lo_ > 0 and hi_ > 0]
                if band:
                    ax[0].fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band],
                                       color=line.get_color(), alpha=0.15)
                pred = [(a, b) for a, b in zip(t, c.get("dist2_predicted") or []) if a and b and a > 0 and b > 0]
                if pred:
                    ax[0].loglog(*zip(*pred), ":", color=line.get_color())
            vm, vi = c.get("var_measured") or [], c.get("var_identity") or []
            vpairs = [(a, m, i) for a, m, i in zip(t, vm, vi) if a and m and i and a > 0 and m > 0 and i > 0]
            if vpairs:
                w = min(9, len(vpairs))  # moving average over recorded steps: one step's variance is one draw
                smooth = lambda v: [sum(v[k:k + w]) / w for k in range(len(v) - w + 1)]
                tt = [p[0] for p in vpairs][w // 2: w // 2 + len(vpairs) - w + 1]
                line, = ax[1].semilogx(tt, smooth([p[1] for p in vpairs]), lw=1, color=color, label=f"{method} measured")
                ax[1].semilogx(tt, smooth([p[2] for p in vpairs]), "--", lw=1, color=line.get_color(),
                             label=f"{method} identity")
                var_ratio = sum(p[1] for p in vpairs) / sum(p[2] for p in vpairs)
            else:
                var_ratio = None
            final = mean[-1] if mean else None
            slope = c.get("slope_last_half")
            rows.append((method, c.get("seeds", ""), c.get("diverged", ""),
                         f"{final:.4g}" if final is not None else "",
                         f"{slope:.3f}" if isinstance(slope, (int, float)) else "",
                         f"{var_ratio:.4f}" if var_ratio is not None else ""))
        ax[0].set_xlabel("step t"); ax[0].set_ylabel("E||w_t - w*||^2")
        ax[0].set_title("convergence (mean, band p10-p90, dotted: predicted)", fontsize=10); ax[0].legend(fontsize=7)
        ax[1].set_xlabel("step t")
        ax[1].set_title("codec variance: measured (solid), identity (dashed)", fontsize=10)
        ax[1].set_ylabel("variance per step (9-point moving mean)")
        ax[1].set_yscale("linear")  # variances within a small factor of each other: plain numbers read best
        for a in ax:  # log axes spanning less than a decade get crowded minor labels
            a.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        if ax[1].get_legend_handles_labels()[0]:
            ax[1].legend(fontsize=6)
        else:
            ax[1].axis("off")
            ax[1].set_title("")
            ax[1].text(0.5, 0.5, "no codec variance recorded in this run", ha="center", va="center")
        fig.tight_layout()
        elsewhere = figs.rendered_elsewhere(rel)
        if plottable >= 3 and elsewhere:  # drawn once, by the convex renderer: link it
            plt.close(fig)
            out.append(elsewhere + "\n")
        elif plottable >= 3:
            out.append(figs.save(fig, f"convex-{idx}.png") + "\n")
        else:
            plt.close(fig)
            out.append("(too few recorded steps to plot)\n")
        out.append(md_table(["method", "seeds", "diverged", "final E||w-w*||^2", "slope (last half, log-log)",
                             "codec variance measured / identity (all recorded steps)"], rows))
    return out


def bench_rows(data):
    rows = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate" or "bytes_per_second" not in b:
            continue
        parts = [p for p in b["name"].split("/") if p not in ("real_time", "process_time")]
        try:
            size = int(parts[-1])
        except ValueError:
            continue
        key = "/".join(parts[:-1]).replace("BM_", "")
        rows.setdefault(size, {})[key] = b["bytes_per_second"] / 1e9
    return rows


def section_bench(items, figs):
    plt = pyplot()
    out = ["## Codec throughput (tg_bench)\n"]
    if not items:
        out.append("No Google Benchmark JSON found. Produce one with "
                   "`build/default/bench/tg_bench --benchmark_out=reports/bench/bench.json --benchmark_out_format=json`.\n")
        return out
    for idx, (rel, data) in enumerate(items):
        rows = bench_rows(data)
        ctx = data.get("context", {})
        out.append(f"### `{rel}`\n")
        out.append(f"Measured {ctx.get('date', '?')} on {ctx.get('num_cpus', '?')} CPUs at "
                   f"{ctx.get('mhz_per_cpu', '?')} MHz (load average {ctx.get('load_avg', '?')}), "
                   f"`{ctx.get('executable', '?')}`. GB/s of float32 in (encode) or out (decode); the ceiling is "
                   "memcpy of the same bytes in the same run. memcpy reads and writes 4 bytes per element; "
                   "decode reads 1/4 (2bit) and writes 4, encode reads 4 and writes 1/4, so a codec can pass "
                   "100% where memory traffic, not compute, sets the pace.\n")
        if not rows:
            out.append("(no throughput rows in this file)\n")
            continue
        keys = sorted({k for r in rows.values() for k in r if k != "Memcpy"})
        sizes = sorted(rows)
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        mem = [rows[s].get("Memcpy") for s in sizes]
        if any(m is not None for m in mem):
            ax[0].loglog([s for s, m in zip(sizes, mem) if m], [m for m in mem if m], "k--", label="memcpy (ceiling)")
        for k in keys:
            pts = [(s, rows[s][k]) for s in sizes if k in rows[s]]
            ax[0].loglog(*zip(*pts), "o-", ms=3, label=k)
            ratio = [(s, rows[s][k] / rows[s]["Memcpy"]) for s in sizes if k in rows[s] and rows[s].get("Memcpy")]
            if ratio:
                ax[1].semilogx(*zip(*ratio), "o-", ms=3, label=k)
        ax[0].set_xlabel("elements"); ax[0].set_ylabel("GB/s"); ax[0].set_title("throughput"); ax[0].legend(fontsize=6)
        ax[1].set_xlabel("elements"); ax[1].set_ylabel("fraction of memcpy GB/s"); ax[1].set_title("against the ceiling")
        ax[1].axhline(1, color="k", lw=0.8, ls="--")
        fig.tight_layout()
        out.append(figs.save(fig, f"bench-{idx}.png") + "\n")
        table = []
        for s in sizes:
            r = rows[s]
            m = r.get("Memcpy")
            cells = [f"{r[k]:.2f} ({r[k] / m:.0%})" if k in r and m else (f"{r[k]:.2f}" if k in r else "") for k in keys]
            table.append([f"2^{s.bit_length() - 1}" if s & (s - 1) == 0 else str(s), f"{m:.2f}" if m else ""] + cells)
        out.append(md_table(["elements", "memcpy GB/s"] + [k.replace("_", " ") for k in keys], table))
    return out


def train_config(parts):
    return parts["run"][1].get("config", {}) if "run" in parts else {}


def train_label(parts, rel):
    cfg = train_config(parts)
    if not cfg:
        return str(rel)
    codec = cfg.get("codec", "?")
    bits = [f"{codec}"]
    if codec not in ("float", "float32", "none"):
        bits += [f"{cfg.get('packing', '')}", f"clip {cfg.get('clip', '')}"]
    bits.append(f"{cfg.get('workers', '?')} workers")
    return ", ".join(str(b) for b in bits if b != "") + f" ({pathlib.Path(rel).name})"


def section_train(items, figs):
    plt = pyplot()
    out = ["## Training (`terngrad train`)\n"]
    if not items:
        out.append("No training runs found (a folder with run.json / evals.csv written by `terngrad train`).\n")
        return out
    def evals_of(parts):
        run = parts["run"][1] if "run" in parts else {}
        ev = [(num(e.get("step")), num(e.get("test_accuracy"))) for e in run.get("evals", [])]
        if not ev and "evals" in parts:
            ev = [(num(e.get("step")), num(e.get("test_accuracy"))) for e in parts["evals"][1]]
        return [(st, a) for st, a in ev if st is not None and a is not None]

    def losses_of(parts):
        pts = [(num(r.get("step")), num(r.get("loss"))) for r in parts["steps"][1]] if "steps" in parts else []
        return [(st, l) for st, l in pts if st is not None and l is not None]

    # curves only for runs long enough to draw one (short profiling runs are in the table only)
    plotted = [(rel, parts) for rel, parts in items if len(evals_of(parts)) >= 2 or len(losses_of(parts)) >= 20]
    models = sorted({str(train_config(parts).get("model", "?")) for _, parts in plotted})
    smoothing = {}
    if models:
        fig, axes = plt.subplots(len(models), 2, figsize=(11, 3.6 * len(models)), squeeze=False)
    for rel, parts in plotted:
        cfg = train_config(parts)
        ax = axes[models.index(str(cfg.get("model", "?")))]
        label = train_label(parts, rel)
        dashed = "--" if str(cfg.get("codec", "")).startswith("float") else "-"
        if evals_of(parts):
            ax[0].plot(*zip(*evals_of(parts)), dashed, marker="o", ms=3, label=label)
        loss = losses_of(parts)
        if loss:
            w = max(1, min(25, len(loss) // 20))  # moving average: per-step minibatch losses are noisy
            steps_, values = [p[0] for p in loss], [p[1] for p in loss]
            avg = moving_average(values, w)
            ax[1].plot(steps_[w - 1:], avg, dashed, lw=1, label=label)
            smoothing[str(cfg.get("model", "?"))] = max(w, smoothing.get(str(cfg.get("model", "?")), 1))
    table = []
    for rel, parts in items:
        cfg = train_config(parts)
        run = parts["run"][1] if "run" in parts else {}
        evals = evals_of(parts)
        b = run.get("bytes_per_worker_step", {})
        ratio = f"{b['float32_all'] / b['payload_all']:.1f}x" if b.get("payload_all") and b.get("float32_all") else ""
        # the last evaluation (a run still in progress has written some evals but no final accuracy yet)
        last = f"{evals[-1][1]:.4f} (step {evals[-1][0]:.0f})" if evals else "no evaluation yet"
        steps = f"{run.get('steps_done', '?')} of {cfg.get('steps', '?')}" if run else ""
        is_float = str(cfg.get("codec", "")).startswith("float")
        table.append((str(rel), cfg.get("model", ""), cfg.get("data", ""), cfg.get("codec", ""),
                      "" if is_float else cfg.get("packing", ""), "" if is_float else cfg.get("clip", ""),
                      cfg.get("workers", ""), steps, last, ratio))
    if models:
        for model, ax in zip(models, axes):
            ax[0].set_xlabel("step"); ax[0].set_ylabel("test accuracy")
            ax[0].set_title(f"{model}: test accuracy (float dashed)")
            w = smoothing.get(model, 1)
            ax[1].set_xlabel("step"); ax[1].set_ylabel("training loss")
            ax[1].set_title(f"{model}: training loss" + (f" ({w}-step moving average)" if w > 1 else ""))
            for a in ax:
                if a.get_legend_handles_labels()[0]:
                    a.legend(fontsize=6)
        fig.tight_layout()
        out.append(figs.save(fig, "train.png") + "\n")
    out.append(md_table(["run", "model", "data", "codec", "packing", "clip", "workers", "steps done",
                         "last test accuracy", "bytes float32 / payload"], table))
    return out


def section_live(figs, draws, seed=20171204):
    """Variance identity across families and payload sizes, computed now through the bindings."""
    try:
        import numpy as np
        import terngrad as tg
    except ImportError as e:
        return ["## Codec, live\n", f"Skipped: the `terngrad` Python module is not importable ({e}); "
                "build target tg_python and put build/<preset>/python/package on PYTHONPATH.\n"]
    plt = pyplot()
    rng = np.random.default_rng(seed)
    d = 4096
    fams = {"gaussian": rng.normal(0, 1, d), "laplace": rng.laplace(0, 1, d), "student-t(3)": rng.standard_t(3, d),
            "uniform": rng.uniform(-1, 1, d), "sparse 90%": rng.normal(0, 1, d) * (rng.uniform(size=d) < 0.1),
            "one spike": np.concatenate([[100.0], rng.normal(0, 1, d - 1)])}
    rows, pts = [], []
    for i, (name, g) in enumerate(fams.items()):
        g = g.astype(np.float32)
        for clip in ("none", "clip"):
            s, t = tg.ternarize_steps(g, draws, seed=seed, tensor=i, clip=clip)
            x = np.clip(g, -s, s).astype(np.float64)
            z = ((float(s) * t - x) ** 2).sum(axis=1)
            exact = tg.variance_for_scalar(x.astype(np.float32), float(s))
            a = np.abs(x)
            p = a / float(s) if s > 0 else a
            se = math.sqrt((p * (1 - p) * ((float(s) - a) ** 2 - a ** 2) ** 2).sum() / draws)
            zscore = (z.mean() - exact) / se if se > 0 else 0.0
            rows.append((name, clip, f"{exact:.6g}", f"{z.mean():.6g}", f"{zscore:+.2f}",
                         f"{np.mean(t != 0):.3f}", f"{tg.mask_entropy_bits(t[0]):.3f}"))
            pts.append((f"{name} ({clip})", exact, z.mean(), se))
    fig, ax = plt.subplots(figsize=(6.5, 4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (label, e, m, se) in enumerate(pts):  # color: family; marker: circle none, square clip
        ax.errorbar([e], [m / e], yerr=[3 * se / e], fmt="o" if k % 2 == 0 else "s", ms=4, capsize=2,
                    color=colors[(k // 2) % len(colors)], label=label)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xscale("log"); ax.set_xlabel("identity s||x||_1 - ||x||_2^2")
    ax.set_ylabel("Monte-Carlo mean / identity (±3 s.e.)")
    ax.set_title(f"variance identity, {draws} draws of d = {d}"); ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    out = ["## Codec, live (Python bindings at render time)\n",
           f"Computed by the renderer through the `terngrad` bindings (optimized codec, "
           f"AVX2 {'on' if tg.cpu_has_avx2() else 'off'}), seed {seed}: the Monte-Carlo mean of "
           "||g~ - x||^2 against the identity s||x||_1 - ||x||_2^2 (x = clamp(g) under clipping) with its "
           "z-score (exact Var Z), the fraction of nonzero trits and the entropy of one mask in bits per element.\n",
           md_table(["family", "clip", "identity", "Monte-Carlo mean", "z", "nonzero", "mask entropy"], rows),
           figs.save(fig, "live-variance.png") + "\n"]
    sizes = [(n, tg.body_bytes("2bit", n) + tg.HEADER_BYTES, tg.body_bytes("base3", n) + tg.HEADER_BYTES)
             for n in (100, 10_000, 1_000_000)]
    out.append(md_table(["elements", "2bit payload bytes (bits/element)", "base3 payload bytes (bits/element)",
                         "float32 bytes"],
                        [(n, f"{a} ({8 * a / n:.3f})", f"{b} ({8 * b / n:.3f})", 4 * n) for n, a, b in sizes]))
    return out


# ---- HTML ----------------------------------------------------------------------------------------

def md_to_html(text, title):
    """The small Markdown subset this renderer writes: headings, paragraphs, lists, tables, images, code."""
    def inline(s):
        s = html.escape(s, quote=False)
        s = re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", r'<img alt="\1" src="\2">', s)
        s = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r'<a href="\2">\1</a>', s)
        s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
        s = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", s)
        return s

    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append("<pre><code>" + html.escape("\n".join(lines[i + 1:j])) + "</code></pre>")
            i = j + 1
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{inline(line[level:].strip())}</h{level}>")
            i += 1
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(lines[i]); i += 1
            split = lambda r: [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", r.strip())[1:-1]]
            out.append("<table><thead><tr>" + "".join(f"<th>{inline(c)}</th>" for c in split(rows[0])) + "</tr></thead><tbody>")
            for r in rows[2:]:
                out.append("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in split(r)) + "</tr>")
            out.append("</tbody></table>")
        elif line.startswith("- "):
            out.append("<ul>")
            while i < len(lines) and lines[i].startswith("- "):
                out.append(f"<li>{inline(lines[i][2:])}</li>"); i += 1
            out.append("</ul>")
        elif line.strip():
            para = []
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "|", "- ", "```")):
                para.append(lines[i]); i += 1
            out.append("<p>" + inline(" ".join(para)) + "</p>")
        else:
            i += 1
    style = ("body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;font-size:0.85em}td,th{border:1px solid #ccc;padding:2px 6px}"
             "img{max-width:100%}code{background:#f4f4f4}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>\n" + "\n".join(out) + "\n</body></html>\n")


# ---- main ----------------------------------------------------------------------------------------

def check_output(out_md):
    """--out, before the inputs are read: not a folder, and its folder is one or can be made (nothing is created)."""
    if out_md.is_dir():
        raise InputError(f"--out {out_md} is a folder, not a file (give a .md file name)")
    folder = out_md.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--out {out_md}: cannot create folder {out_md.parent}: {folder} is not a folder")


def render(reports, out_md, title, html_too, live, argv, live_draws=2000, note=None):
    pyplot()  # matplotlib on the Agg backend before any section imports it
    if not reports.is_dir():
        raise InputError(f"--reports {reports} is not a folder" if reports.exists()
                         else f"reports folder {reports} does not exist")
    check_output(out_md)
    out_dir = out_md.parent
    skip = {out_md.resolve(), out_md.with_suffix(".html").resolve()}
    found = discover(reports, skip)
    out_dir.mkdir(parents=True, exist_ok=True)
    stage = pathlib.Path(tempfile.mkdtemp(prefix=".report-", dir=out_dir))
    try:
        figs = Figures(stage, reports, out_dir)
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        lines = [f"# {title}\n",
                 f"Rendered {now} on {platform.node() or 'this machine'} ({platform.machine()}, "
                 f"{os.cpu_count()} CPUs, Python {platform.python_version()}) by `{' '.join(argv)}` from the files "
                 f"under `{reports}`.\n"]
        if note is not None:
            try:
                if not note.is_file():
                    raise InputError(f"note file {note}: not a regular file")
                if note.stat().st_size > (1 << 20):
                    raise InputError(f"note file {note}: {note.stat().st_size} bytes, over the limit of 1 MiB")
                lines.append(note.read_text().rstrip() + "\n")
            except (OSError, UnicodeDecodeError) as e:
                raise InputError(f"note file {note}: {e}")
        inputs = [(str(item[0]), kind) for kind in ("verify", "bench", "convex") for item in found[kind]]
        inputs += [(str(rel) + "/", "train") for rel, _ in found["train"]]
        inputs += [(str(rel), "not recognised (ignored)") for rel in found["unrecognised"]]
        if inputs:
            lines.append(md_table(["input", "kind"], sorted(inputs)))
        lines += section_verify(found["verify"], figs)
        lines += section_convex(found["convex"], figs)
        lines += section_bench(found["bench"], figs)
        lines += section_train(found["train"], figs)
        if live:
            lines += section_live(figs, live_draws)
        text = "\n".join(lines).rstrip() + "\n"
        # every file is complete in the staging folder before anything replaces the old report
        (stage / out_md.name).write_text(text)
        if html_too:
            (stage / (out_md.stem + ".html")).write_text(md_to_html(text, title))
        fig_dir = out_dir / FIGURES
        if figs.names:  # a render with no plot makes no figures/ folder
            fig_dir.mkdir(exist_ok=True)
        for name in figs.names:
            write_output(fig_dir / name, (stage / name).read_bytes())
        for old in fig_dir.glob("*.png"):  # plots of an earlier render that this one no longer draws
            if old.name not in figs.names:
                old.unlink()
        if fig_dir.is_dir() and not figs.names and not any(fig_dir.iterdir()):
            fig_dir.rmdir()  # emptied: an earlier render's folder
        if html_too:
            write_output(out_md.with_suffix(".html"), (stage / (out_md.stem + ".html")).read_bytes())
        write_output(out_md, (stage / out_md.name).read_bytes())
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return found, figs.names


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m terngrad.report index",
                                 description="Render reports/index.md (+ html, PNG plots) from the tools' JSON/CSV.")
    ap.add_argument("--reports", type=pathlib.Path, default=pathlib.Path("reports"))
    ap.add_argument("--out", type=pathlib.Path, help="Markdown file to write (default: <reports>/index.md)")
    ap.add_argument("--title", default="terngrad-bench report")
    ap.add_argument("--no-html", action="store_true")
    ap.add_argument("--no-live", action="store_true", help="leave out the section computed through the bindings")
    ap.add_argument("--live-draws", type=int, default=2000, help="Monte-Carlo draws of the live section (100 to 200000)")
    ap.add_argument("--note", type=pathlib.Path,
                    help="Markdown file put under the title (e.g. the commands that produced the inputs)")
    args = ap.parse_args(argv)
    out_md = args.out or (args.reports / "index.md")
    if out_md.suffix != ".md":
        print(f"terngrad report: error: --out must name a .md file, got {out_md}", file=sys.stderr)
        return 2
    if not 100 <= args.live_draws <= 200000:
        print(f"terngrad report: error: --live-draws must be in [100, 200000], got {args.live_draws}", file=sys.stderr)
        return 2
    try:
        found, names = render(args.reports, out_md, args.title, not args.no_html, not args.no_live,
                              ["terngrad report"] + argv, args.live_draws, args.note)
    except InputError as e:
        print(f"terngrad report: error: {e}", file=sys.stderr)
        return 2
    counts = ", ".join(f"{len(found[k])} {k}" for k in ("verify", "convex", "bench", "train"))
    plots = f"with {len(names)} plots in {out_md.parent / FIGURES}" if names else "with no plots"
    print(f"wrote {out_md}{' and ' + str(out_md.with_suffix('.html')) if not args.no_html else ''} "
          f"{plots} (inputs: {counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
