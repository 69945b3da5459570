"""terngrad-bench: tests of the report renderer python/report.py on small inputs in the formats that
`terngrad verify --json`, `terngrad converge`, `terngrad train` and tg_bench write.
Run: ctest -L python, or build/venv/bin/python -m pytest python/tests/test_report.py"""
import importlib.util
import json
import math
import pathlib

import pytest

# python/report.py, loaded by path (putting python/ on sys.path would shadow the built terngrad package)
_spec = importlib.util.spec_from_file_location("report", pathlib.Path(__file__).resolve().parents[1] / "report.py")
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)

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
