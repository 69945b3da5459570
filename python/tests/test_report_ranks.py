"""terngrad-bench: tests of `python -m terngrad.report ranks` (per-rank time splits) on run folders written
here in the format of `terngrad train --out` under `terngrad launch`, with times chosen so that the expected
means are computed by hand below, not by the renderer.
Run: ctest -L python, or PYTHONPATH=build/<preset>/python/package build/venv/bin/python -m pytest python/tests/test_report_ranks.py"""
import json

from terngrad.report import __main__ as cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
HEADER = "step,rank,compute_s,encode_s,wait_s,wire_s,decode_s,optimizer_s\n"


def write_run(root, name, rows, uplink=100, downlink=300):
    run = root / name
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"config": {"model": "lenet"}, "bytes_per_worker_step": {
        "uplink": uplink, "downlink": downlink, "float32_all": 16000}}))
    (run / "ranks.csv").write_text(HEADER + "".join(",".join(str(x) for x in r) + "\n" for r in rows))
    return run


def test_means_per_rank_leave_out_the_warmup(tmp_path):
    runs = tmp_path / "runs"
    rows = []
    for step in range(20):  # warm-up: the first tenth = 2 steps, given absurd times that must not count
        for rank in (0, 1):
            c = 9.0 if step < 2 else (0.010 if step % 2 else 0.030)  # rank mean over steps 2..19: 0.020
            rows.append([step, rank, c, 0.001 * (rank + 1), 0.004, 0.002, 0.0005, 0.0015])
    write_run(runs, "lenet-terngrad-n2", rows)
    (runs / "schedule.log").write_text("2026-12-01T00:00:00Z start lenet-terngrad-n2 load 0.50 0.40 0.30 binary x\n")
    out = tmp_path / "out"
    assert cli.main(["ranks", "--runs", str(runs), "--out", str(out)]) == 0
    md = (out / "ranks.md").read_text()
    # rank 0: 20 + 1 + 4 + 2 + 0.5 + 1.5 = 29 ms per step; wait + wire = 6 / 29 = 21%
    assert "| terngrad | 0 | 20.00 | 1.00 | 4.00 | 2.00 | 0.50 | 1.50 | 29.00 | 21% | 100 / 300 | 0.50 0.40 0.30 |" in md
    # rank 1: encode 2 ms, so 30 ms per step; 6 / 30 = 20%
    assert "| terngrad | 1 | 20.00 | 2.00 | 4.00 | 2.00 | 0.50 | 1.50 | 30.00 | 20% | 100 / 300 | 0.50 0.40 0.30 |" in md
    assert "## 2 ranks" in md and "## 4 ranks" not in md
    assert (out / "ranks.png").read_bytes().startswith(PNG_MAGIC)


def test_contention_note_only_with_more_than_two_ranks(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs, "lenet-float-n4", [[s, r, 0.01, 0, 0, 0, 0, 0] for s in range(3) for r in range(4)])
    out = tmp_path / "out"
    assert cli.main(["ranks", "--runs", str(runs), "--out", str(out)]) == 0
    md = (out / "ranks.md").read_text()
    assert "## 4 ranks" in md and "more ranks than cores" in md
    assert md.count("| float | ") == 4


def test_bad_inputs_are_one_line_and_exit_2(tmp_path, capsys):
    assert cli.main(["ranks", "--runs", str(tmp_path / "none"), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["ranks", "--runs", str(empty), "--out", str(tmp_path / "o")]) == 2
    assert "no finished run" in capsys.readouterr().err
    bad = tmp_path / "bad"
    write_run(bad, "lenet-float-n2", [[0, 0, "", 0, 0, 0, 0, 0], [1, 0, 0.1, 0, 0, 0, 0, 0]])
    assert cli.main(["ranks", "--runs", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "non-finite" in err and err.count("\n") == 1
    assert not (tmp_path / "o" / "ranks.md").exists()


def test_runs_folder_is_named_relative_to_the_checkout(tmp_path, monkeypatch):
    # run from the checkout (here tmp_path), the report names the runs folder as "reports/train/ranks", not by the
    # machine's absolute path; a folder outside the working directory is named as given
    runs = tmp_path / "reports" / "train" / "ranks"
    write_run(runs, "lenet-float-n2", [[s, r, 0.01, 0, 0, 0, 0, 0] for s in range(3) for r in range(2)])
    monkeypatch.chdir(tmp_path)
    assert cli.main(["ranks", "--runs", str(runs), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "ranks.md").read_text()
    assert "(raw runs in `reports/train/ranks`, not in git)" in md and str(tmp_path) not in md
    monkeypatch.chdir(tmp_path / "out")
    assert cli.main(["ranks", "--runs", str(runs), "--out", str(tmp_path / "out2")]) == 0
    assert f"(raw runs in `{runs}`, not in git)" in (tmp_path / "out2" / "ranks.md").read_text()
