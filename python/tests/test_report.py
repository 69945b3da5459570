"""terngrad-bench: tests of the report package terngrad.report (index, train, convex) on small inputs in the
formats that `terngrad verify --json`, `terngrad converge`, `terngrad train` and tg_bench write.
Run: ctest -L python, or PYTHONPATH=build/<preset>/python/package build/venv/bin/python -m pytest python/tests/test_report.py"""
import json
import math
import subprocess
import sys

import pytest

from terngrad.report import __main__ as cli
from terngrad.report import convex, train
from terngrad.report import index as report  # the index renderer: what `terngrad report` runs

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_inputs(root):
    (root / "verify").mkdir(parents=True)
    rows = [
        {"check": "structure", "family": "gaussian", "kind": "exact", "statistic": "0 violations", "threshold": "0",
         "p_value": "", "detectable": "any", "alpha": 0, "pass": True, "detail": "values in {-s,0,s}"},
        {"check": "variance", "family": "gaussian", "kind": "stat", "statistic": "ratio 1.00012",
         "threshold": "1 +- 0.004", "p_value": "p <= 1", "detectable": "rel. error >= 0.006", "alpha": 1e-8,
         "pass": True, "detail": "E||g~ - x||^2 = sum_l (s_l ||x_l||_1 - ||x_l||_2^2) = 4096.5; observed mean 4097"},
        {"check": "variance", "family": "student-t3", "kind": "stat", "statistic": "ratio 0.998",
         "threshold": "1 +- 0.01", "p_value": "p <= 0.9", "detectable": "rel. error >= 0.02", "alpha": 1e-8,
         "pass": False, "detail": "E||g~ - x||^2 = sum_l (s_l ||x_l||_1 - ||x_l||_2^2) = 1.5e+04; observed mean 14970"},
    ]
    verify = {"tool": "terngrad verify", "pass": False, "runs": [
        {"implementation": "optimized", "profile": "quick", "seed": 1, "alpha_total": 1e-6, "beta": 1e-3,
         "decisions": 100, "alpha_each": 1e-8, "sizes": {"d": 4096, "steps": 100}, "seconds": 1.5, "pass": False,
         "rows": rows}]}
    (root / "verify" / "verify.json").write_text(json.dumps(verify))
    (root / "bench").mkdir()
    bench = {"context": {"date": "2026-11-30", "num_cpus": 2, "mhz_per_cpu": 3000, "executable": "tg_bench"},
             "benchmarks": [
                 {"name": "BM_Memcpy/1024", "run_type": "iteration", "bytes_per_second": 20e9},
                 {"name": "BM_Memcpy/1048576", "run_type": "iteration", "bytes_per_second": 10e9},
                 {"name": "BM_Encode/optimized_1thread/1024", "run_type": "iteration", "bytes_per_second": 5e9},
                 {"name": "BM_Encode/optimized_1thread/1048576", "run_type": "iteration", "bytes_per_second": 4e9},
                 {"name": "BM_Decode/optimized_allthreads/1048576/real_time", "run_type": "iteration",
                  "bytes_per_second": 8e9}]}
    (root / "bench" / "bench.json").write_text(json.dumps(bench))
    (root / "converge").mkdir()
    header = ("method,t,dist2_mean,dist2_p10,dist2_p90,dist2_predicted,loss_gap,update_sq,assumption3,grad_sq,"
              "var_measured,var_identity\n")
    lines = [header]
    for m, scale in (("float", 1.0), ("terngrad", 2.0)):
        for t in (0, 1, 10, 100):
            d = scale / (t + 1)
            lines.append(f"{m},{t},{d},{d / 2},{2 * d},,{d},{d},{d},{d},{scale},{scale}\n")
    (root / "converge" / "curves.csv").write_text("".join(lines))
    for name, codec, acc in (("float", "float", 0.85), ("tern", "terngrad", 0.84)):
        run = root / "train" / name
        run.mkdir(parents=True)
        evals = [{"step": s, "train_loss": 1 / (s + 1), "test_loss": 1 / (s + 1), "test_accuracy": acc * s / 100}
                 for s in (0, 50, 100)]
        (run / "run.json").write_text(json.dumps({
            "config": {"model": "lenet", "codec": codec, "packing": "2bit", "clip": "clip", "workers": 2},
            "evals": evals, "steps_done": 100, "final_test_accuracy": acc,
            "bytes_per_worker_step": {"payload_all": 1000, "float32_all": 15000}}))
        (run / "steps.csv").write_text("step,loss,lr\n" + "".join(f"{s},{1 / (s + 1)},0.1\n" for s in range(100)))
    (root / "notes.json").write_text(json.dumps({"something": "else"}))


def test_renders_every_section_with_plots(tmp_path):
    write_inputs(tmp_path)
    assert report.main(["--reports", str(tmp_path), "--no-live"]) == 0
    md = (tmp_path / "index.md").read_text()
    for heading in ("## Statistical battery", "## Convex convergence", "## Codec throughput", "## Training"):
        assert heading in md
    assert "**FAIL**" in md and "student-t3" in md  # the failing row is shown as failing
    assert "verify-variance-optimized-quick.png" in md
    assert "notes.json | not recognised" in md
    assert "| float | " in md and "| terngrad | " in md
    assert "20%" in md or "40%" in md  # ratios to memcpy: 4/10 and 5/20 GB/s
    pngs = sorted((tmp_path / "figures").glob("*.png"))
    assert {p.name for p in pngs} == {"verify-variance-optimized-quick.png", "convex-0.png", "bench-0.png", "train.png"}
    for p in pngs:
        assert p.read_bytes()[:8] == PNG_MAGIC and p.stat().st_size > 5000
        assert f"figures/{p.name}" in md
    html = (tmp_path / "index.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and '<img alt="train.png" src="figures/train.png">' in html
    assert "<table>" in html and "</html>" in html
    # the renderer's own outputs (.md, .html, .png) are never taken as inputs of the next render
    found = report.discover(tmp_path, set())
    assert {k: len(v) for k, v in found.items()} == {"verify": 1, "bench": 1, "convex": 1, "train": 2,
                                                     "unrecognised": 1}


def test_two_inputs_of_one_kind_get_distinct_plots(tmp_path):
    write_inputs(tmp_path)
    (tmp_path / "verify2").mkdir()
    (tmp_path / "verify2" / "again.json").write_text((tmp_path / "verify" / "verify.json").read_text())
    assert report.main(["--reports", str(tmp_path), "--no-live", "--no-html"]) == 0
    md = (tmp_path / "index.md").read_text()
    for name in ("verify-variance-optimized-quick.png", "verify-variance-optimized-quick-2.png"):
        assert f"figures/{name}" in md and (tmp_path / "figures" / name).read_bytes()[:8] == PNG_MAGIC


def test_empty_folder_says_how_to_produce_each_input(tmp_path):
    assert report.main(["--reports", str(tmp_path), "--no-live", "--no-html"]) == 0
    md = (tmp_path / "index.md").read_text()
    assert "terngrad verify --json" in md and "--benchmark_out" in md
    assert not (tmp_path / "index.html").exists()
    assert not (tmp_path / "figures").exists()  # no plot, no folder for plots (was: an empty figures/)


def test_malformed_input_is_an_error_and_nothing_is_written(tmp_path, capsys):
    write_inputs(tmp_path)
    (tmp_path / "index.md").write_text("previous report\n")
    (tmp_path / "verify" / "broken.json").write_text('{"tool": "terngrad verify", "runs": [')
    assert report.main(["--reports", str(tmp_path), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert "broken.json" in err and "invalid JSON" in err
    assert (tmp_path / "index.md").read_text() == "previous report\n"
    assert not (tmp_path / "figures").exists()
    assert not list(tmp_path.glob(".report-*"))


def test_bad_arguments(tmp_path, capsys):
    assert report.main(["--reports", str(tmp_path / "missing"), "--no-live"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert report.main(["--reports", str(tmp_path), "--out", str(tmp_path / "x.txt")]) == 2
    bad = {"tool": "terngrad verify", "runs": 3}
    (tmp_path / "v.json").write_text(json.dumps(bad))
    assert report.main(["--reports", str(tmp_path), "--no-live"]) == 2
    assert "'runs' list" in capsys.readouterr().err


@pytest.mark.parametrize("name, data, problem", [
    ("v.json", {"tool": "terngrad verify", "runs": [1]}, "runs[0] is int, not an object"),
    ("v.json", {"tool": "terngrad verify", "runs": [{"rows": "x"}]}, "runs[0].rows is str, not a list"),
    ("v.json", {"tool": "terngrad verify", "runs": [{"rows": [{"check": 3}]}]}, "runs[0].rows[0].check is not text"),
    ("v.json", {"tool": "terngrad verify", "runs": [{"rows": [{"alpha": "0.1"}]}]}, "alpha is not a number"),
    ("v.json", {"tool": "terngrad verify", "runs": [{"sizes": [1]}]}, "runs[0].sizes is not an object"),
    ("b.json", {"benchmarks": "x", "context": {}}, "'benchmarks' is not a list"),
    ("b.json", {"benchmarks": [{"name": "BM_Memcpy/1024", "bytes_per_second": 1e9}], "context": "x"},
     "'context' is not an object"),
    ("b.json", {"benchmarks": [{"name": 7, "bytes_per_second": 1e9}], "context": {}}, "benchmarks[0].name is not text"),
    ("b.json", {"benchmarks": [3], "context": {}}, "benchmarks[0] is int, not an object"),
    ("run/run.json", {"config": {}, "evals": None}, "'evals' is not a list"),
    ("run/run.json", {"config": "x", "evals": []}, "'config' is not an object"),
    ("run/run.json", {"config": {}, "evals": [], "bytes_per_worker_step": {"payload_all": "1", "float32_all": "2"}},
     "bytes_per_worker_step.payload_all is not a number"),
    ("c.json", {"curves": [{"method": "float", "dist2_mean": "x", "t": [1, 2]}]}, "'dist2_mean' is str, not a list"),
])
def test_valid_json_of_the_wrong_shape_is_one_line_naming_the_file(tmp_path, capsys, name, data, problem):
    """Valid JSON, recognised as a tool's output, whose parts have the wrong types: exit 2 and one line naming the
    file and the part (was: a traceback from the section that read it)."""
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(json.dumps(data))
    assert report.main(["--reports", str(tmp_path), "--no-live", "--no-html"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and name in err and problem in err, err
    assert not (tmp_path / "index.md").exists()


def test_reports_and_out_that_are_the_wrong_kind_of_path(tmp_path, capsys):
    (tmp_path / "g.npy").write_bytes(b"\x93NUMPY")
    assert report.main(["--reports", str(tmp_path / "g.npy"), "--no-live"]) == 2
    assert "is not a folder" in capsys.readouterr().err  # was: "does not exist"
    (tmp_path / "x.md").mkdir()
    assert report.main(["--reports", str(tmp_path), "--out", str(tmp_path / "x.md"), "--no-live"]) == 2
    assert "is a folder, not a file" in capsys.readouterr().err
    assert report.main(["--reports", str(tmp_path), "--out", str(tmp_path / "g.npy" / "i.md"), "--no-live"]) == 2
    assert "g.npy is not a folder" in capsys.readouterr().err


def test_live_section_uses_the_bindings(tmp_path):
    pytest.importorskip("terngrad")
    assert report.main(["--reports", str(tmp_path), "--no-html", "--live-draws", "300"]) == 0
    md = (tmp_path / "index.md").read_text()
    assert "## Codec, live" in md and "live-variance.png" in md
    # the table has one row per family and clipping mode, each with a finite z-score (the live section is
    # informational; the statistical checks of the codec are python/tests/test_bindings.py and `terngrad verify`)
    cells = [line.split("|") for line in md.splitlines() if line.startswith("| ")]
    zs = [float(c[5]) for c in cells if c[2].strip() in ("none", "clip") and c[1].strip() != "family"]
    assert len(zs) == 12 and all(math.isfinite(z) for z in zs)


def test_index_links_the_figure_the_convex_renderer_drew_instead_of_drawing_it_again(tmp_path):
    write_inputs(tmp_path)
    curves = [{"method": m, "t": [0, 10, 100, 1000], "dist2_mean": [1.0, 0.1 * k, 0.01 * k, 0.001 * k],
               "seeds": 4, "diverged": 0, "slope_last_half": -1.0} for k, m in ((1, "float"), (2, "tern"))]
    run = tmp_path / "convex" / "decay"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"config": {"problem": "lsq"}, "curves": curves}))
    (tmp_path / "convex" / "decay.png").write_bytes(PNG_MAGIC + b"drawn by the convex renderer")
    out = tmp_path / "site" / "index.md"
    assert report.main(["--reports", str(tmp_path), "--out", str(out), "--no-live", "--no-html"]) == 0
    md = out.read_text()
    assert "![decay.png](../convex/decay.png)" in md  # relative to the output's folder
    assert "### `convex/decay/summary.json`" in md and "| tern | 4 | 0 | 0.002 | -1.000 |" in md
    # the CSV curves with no such figure are still drawn, once
    assert {p.name for p in (out.parent / "figures").glob("convex-*.png")} == {"convex-0.png"}


def test_cli_dispatches_to_each_report(tmp_path, capsys):
    assert cli.main(["--help"]) == 0
    usage = capsys.readouterr().out
    assert all(f"  {name} " in usage for name in ("index", "train", "convex"))
    assert cli.main(["nonsense"]) == 2 and "name a report" in capsys.readouterr().err
    assert cli.main([]) == 2
    assert cli.main(["index", "--reports", str(tmp_path), "--no-live", "--no-html"]) == 0
    assert (tmp_path / "index.md").read_text().startswith("# terngrad-bench report")
    # the module entry point, as `terngrad report` and the scripts run it
    run = subprocess.run([sys.executable, "-m", "terngrad.report", "--help"], capture_output=True, text=True)
    assert run.returncode == 0 and "python -m terngrad.report" in run.stdout


# ---- train ------------------------------------------------------------------------------------------

def write_train_run(runs, name, workers, codec, accs, layers=None, wall=10.0, step_s=(0.1, 0.002, 0.004, 0.01)):
    d = runs / name
    d.mkdir(parents=True)
    compute, encode, decode, optimizer = step_s
    evals = [{"step": s, "test_accuracy": a, "test_loss": 1 - a} for s, a in accs]
    layers = layers or [{"name": "w", "numel": 1000, "float_bytes": 4000, "payload_bytes": 282, "ternary": 1}]
    cfg = {"model": "lenet", "codec": codec, "packing": "2bit", "clip": "none", "workers": workers, "batch": 64,
           "steps": accs[-1][0], "momentum": 0.9, "lr": 0.01, "gamma": 1e-4, "power": 0.75, "weight_decay": 5e-4,
           "seed": 1, "test_limit": 10000}
    (d / "run.json").write_text(json.dumps({
        "config": cfg, "evals": evals, "steps_done": accs[-1][0], "final_test_accuracy": accs[-1][1],
        "layers": layers, "bytes_per_worker_step": {"float32_all": 4000, "payload_all": 282},
        "time_s": {"compute": 1.0, "encode": 0.02, "communicate": 0.0, "decode": 0.04, "optimizer": 0.1,
                   "wall": wall}}))
    (d / "evals.csv").write_text("step,train_loss,test_loss,test_accuracy\n"
                                 + "".join(f"{s},0.5,{1 - a},{a}\n" for s, a in accs))
    (d / "steps.csv").write_text("step,loss,compute_s,encode_s,decode_s,optimizer_s\n" + "".join(
        f"{s},{1 / (s + 1)},{compute},{encode},{decode},{optimizer}\n" for s in range(60)))


def test_train_renders_the_tables_from_the_runs(tmp_path):
    runs = tmp_path / "runs"
    for name, workers, codec, acc in (("lenet-float-2w", 2, "float", 0.90), ("lenet-terngrad-2w", 2, "terngrad", 0.88),
                                      ("lenet-float-8w", 8, "float", 0.91), ("lenet-terngrad-8w", 8, "terngrad", 0.91)):
        write_train_run(runs, name, workers, codec, [(50, acc - 0.1), (100, acc)], wall=2000.0 + workers)
    # only the lenet group: without --partial nothing is written (a shorter report never replaces the full one)
    assert train.main(["--runs", str(runs), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()
    assert train.main(["--runs", str(runs), "--out", str(tmp_path / "out"), "--partial"]) == 0
    md = (tmp_path / "out" / "README.md").read_text()
    assert "| lenet-terngrad-2w | 2 | terngrad | 88.00% | 0.1200 | 50: 78.00, 100: 88.00 |" in md
    # float minus TernGrad at step 100, with the binomial standard error of a difference on 10000 images
    se = 100 * math.sqrt(2 * 0.9 * 0.1 / 10000)
    assert "- 2 workers, step 100: float minus TernGrad = +2.00 percentage points" in md and f"{se:.2f} points" in md
    assert "- 8 workers, step 100: float minus TernGrad = +0.00 percentage points" in md
    assert "| **all (every tensor ternary)** | | 4000 | 282 | **14.18x** | - | - |" in md
    # medians per step: encode 0.002 / 2 workers, decode 0.004, float step 0.1 / 2 + 0.01
    assert "| the 1000-step runs above, which ran alongside 5 other runs | 1.00 | 4.00 | 60.0 | **8.3%** |" in md
    assert "| lenet | 4 | lenet-float-2w 2002, lenet-terngrad-2w 2002, lenet-float-8w 2008, lenet-terngrad-8w 2008 |" in md
    assert "## CifarNet" not in md and "## AlexNet" not in md  # groups without runs are left out
    assert (tmp_path / "out" / "lenet_fashion_mnist.png").read_bytes()[:8] == PNG_MAGIC


def test_train_with_a_group_missing_names_it_and_writes_nothing(tmp_path, capsys):
    runs = tmp_path / "runs"
    for group, names in train.GROUPS.items():
        for name in names:
            if name != "cifarnet-terngrad-clip":
                write_train_run(runs, name, 2, "float", [(50, 0.5), (100, 0.6)], wall=10.0)
    out = tmp_path / "out"
    assert train.main(["--runs", str(runs), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lacks 1 of the runs" in err and "(cifarnet/cifarnet-terngrad-clip)" in err
    assert "--partial" in err and not out.exists()


def test_train_without_runs_is_an_error(tmp_path, capsys):
    assert train.main(["--runs", str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "README.md").exists()


# ---- convex -----------------------------------------------------------------------------------------

def write_convex(folder):
    t = [0, 100, 500, 1000]

    def curve(method, scale):
        d = [scale / (x + 1) for x in t]
        return {"method": method, "t": t, "dist2_mean": d, "dist2_p10": [x / 2 for x in d],
                "dist2_p90": [2 * x for x in d], "dist2_predicted": d, "slope_last_half": -1.0,
                "final_dist2": d[-1], "loss_gap": d, "update_sq": d, "assumption3": d, "grad_sq": d,
                "var_measured": [scale] * 4, "var_identity": [scale] * 4,
                "block_dist2_normalized": [[scale] * 4, [scale * 100 if method == "tern-global" else scale] * 4]}

    config = {"problem": "lsq", "samples": 400, "workers": 4, "batch": 8, "schedule": "const", "seeds": 3}
    for k, name in enumerate(convex.RUNS):
        (folder / name).mkdir(parents=True)
        summary = {"config": config, "parameters": 10, "seconds": 1.5 + k,
                   "curves": [curve("float", 1.0), curve("tern", 2.0), curve("tern-global", 3.0)],
                   "polyak": [{"method": "float", "shift": 0.01, "predicted_shift": 0.0, "q": 0.1, "from_step": 100},
                              {"method": "tern-clip", "shift": 0.5, "predicted_shift": 0.52, "q": 0.96,
                               "from_step": 100}]}
        if name in convex.A3_RUNS:  # Assumption 3 as a bound: fitted line, its bins, the held-out test, exact constants
            bins = [{"r_mean": r, "fit_mean": 10 + 3 * r, "ucb": 11 + 3 * r, "bound": 12 + 3 * r, "held_excess": -1.0,
                     "held_seeds": 5} for r in (1.0, 2.0, 4.0)]
            fit = {"A": 12.0, "B": 3.0, "sgd_A": 6.0, "sgd_B": 1.5, "alpha": 1e-3, "bins": bins,
                   "holds_on_held_out": name != "a3-heavy", "global_holds": False, "violation_r": 0.0,
                   "visited_r_max": 4.0, "max_detectable_rel": 0.1, "held_steps": 100, "held_steps_above": 7,
                   "max_ratio": 2.5}
            summary["assumption3"] = {"exact": {"a_at_w_star": 20.0, "b_min": 5.0, "sgd_b_min": 2.5},
                                      "methods": [dict(fit, method="float"), dict(fit, method="tern")]}
        if name == "checks":
            summary.update(alpha_per_decision=1e-5, alpha_total=9e-5, checks=[
                {"name": "decay-float", "passed": True, "measured": 0.5, "predicted": 0.49},
                {"name": "clip-fixed-point", "passed": False, "q_mean": 0.2, "q_se": 0.05}])
        (folder / name / "summary.json").write_text(json.dumps(summary))
    (folder / "commands.txt").write_text(
        "# commands run by scripts/reproduce-convex.sh on 2026-12-01T10:00Z\n"
        + "".join(f"+ build/x/apps/terngrad converge --quiet --out reports/convex/{n} --seeds 3\n" for n in convex.RUNS))


def test_convex_renders_figures_and_readme_from_the_summaries(tmp_path):
    write_convex(tmp_path)
    assert convex.main([str(tmp_path)]) == 0
    md = (tmp_path / "README.md").read_text()
    assert "Runs made by `bash scripts/reproduce-convex.sh` on 2026-12-01T10:00Z" in md
    assert "`terngrad converge --quiet --out reports/convex/ball --seeds 3`" in md
    assert ("decay 1.5 s, ball 2.5 s, layerwise 3.5 s, clip 4.5 s, logistic 5.5 s, stall 6.5 s, a3-gauss 7.5 s, "
            "a3-heavy 8.5 s, a3-sparse 9.5 s, checks 10.5 s") in md
    assert "| gauss | tern |" in md and "REFUTED" in md  # the a3-heavy fixture's held-out test fails
    assert "| decay-float | float SGD's window-mean error equals the exact prediction | PASS: measured = 0.5, predicted = 0.49 |" in md
    assert "| clip-fixed-point |" in md and "| FAIL: q_mean = 0.2, q_se = 0.05 |" in md
    assert "| decay-tern | TernGrad's equals float's plus the identity's variance | (not run) |" in md
    assert "| tern-global | 3 | 300 |" in md  # block means over t >= 500
    assert "| tern-clip | 0.5 | 0.52 | 0.96 |" in md
    for name in ("decay", "assumption3", "ball", "layerwise", "clip", "logistic"):
        assert f"({name}.png)" in md and (tmp_path / f"{name}.png").read_bytes()[:8] == PNG_MAGIC


def test_convex_with_a_missing_summary_is_an_error_and_writes_nothing(tmp_path, capsys):
    write_convex(tmp_path)
    (tmp_path / "clip" / "summary.json").unlink()
    assert convex.main([str(tmp_path)]) == 2
    assert "clip/summary.json" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.png")) and not (tmp_path / "README.md").exists()
