"""terngrad-bench: tests of `python -m terngrad.report seeds` (the multi-seed training report) on run folders
written here in the format of `terngrad train --out`, with accuracies chosen so that the expected means and
intervals are computed by hand below, not by the renderer.
Run: ctest -L python, or PYTHONPATH=build/<preset>/python/package build/venv/bin/python -m pytest python/tests/test_report_seeds.py"""
import json
import math

import pytest

from terngrad.report import __main__ as cli
from terngrad.report import seeds

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_run(root, name, acc, codec="terngrad", payload=1000, complete=True, steps=4, **extra):
    run = root / name
    run.mkdir(parents=True)
    evals = [{"step": 2, "train_loss": 1.0, "test_loss": 1.0, "test_accuracy": acc / 2},
             {"step": steps, "train_loss": 0.5, "test_loss": 0.5, "test_accuracy": acc}]
    cfg = {"model": "lenet", "codec": codec, "clip": "saturate", "c": 2.5, "batch": 64, "optimizer": "momentum",
           "lr": 0.01, "lr_policy": "inv", "weight_decay": 5e-4, "test_limit": 0, "workers": 2, **extra}
    (run / "run.json").write_text(json.dumps({
        "config": cfg, "evals": evals, "steps_done": steps, "final_test_accuracy": acc,
        "bytes_per_worker_step": {"payload_all": payload, "float32_all": 16000},
        "time_s": {"wall": 10.0}}))
    (run / "evals.csv").write_text("step,train_loss,test_loss,test_accuracy\n"
                                   + "".join(f"{e['step']},1,1,{e['test_accuracy']}\n" for e in evals))
    (run / "steps.csv").write_text("step,loss,lr,compute_s,encode_s,comm_s,decode_s,optimizer_s,payload_bytes,float_bytes\n"
                                   + "".join(f"{s},1,0.01,0.5,0.1,0,0.1,0.3,{payload},16000\n" for s in range(steps)))
    if complete:
        (run / ".complete").write_text("")


def test_means_intervals_and_paired_gaps(tmp_path):
    runs = tmp_path / "runs"
    float_acc = [0.80, 0.82, 0.84]
    tern_acc = [0.79, 0.80, 0.84]
    for s, (f, t) in enumerate(zip(float_acc, tern_acc), start=1):
        write_run(runs, f"lenet-float-w2-s{s}", f, codec="float", payload=16000)
        write_run(runs, f"lenet-terngrad-w2-s{s}", t)
    write_run(runs, "lenet-terngrad-w2-s9", 0.10, complete=False)  # unfinished: must be ignored
    out = tmp_path / "out"
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(out)]) == 0
    md = (out / "seeds.md").read_text()
    # float: mean 82.00, sd 2.00 points, half-width t_{.975,2} * 2 / sqrt(3) = 4.303 * 1.1547 = 4.97
    assert "| float | 2 | 3 | 82.00 +- 4.97 | 80.00, 82.00, 84.00 |" in md
    # terngrad: mean 81.00, sd = sqrt(((-2)^2 + (-1)^2 + 3^2) / 2) = sqrt(7) = 2.6458; 4.303 * 2.6458 / 1.7321 = 6.57
    assert "| terngrad | 2 | 3 | 81.00 +- 6.57 | 79.00, 80.00, 84.00 |" in md
    # paired gaps 1, 2, 0 points: mean 1.00, sd 1.00, half-width 4.303 / sqrt(3) = 2.48
    assert "| 2 | terngrad | 3 | 1.00 +- 2.48 | interval includes 0 |" in md
    # runs without uplink/downlink fields: the payload is the uplink, no downlink; float arm's 16000 bytes over 1000
    assert "| 1000 | - | 16.00x |" in md
    assert "the paper's gap 0.00 points is inside our interval [-1.48, 3.48]" in md
    # 3 seeds of 2 planned arms (the unfinished run left out); 4 arms and the other nets not started
    assert ("Study status (runs of `scripts/train-seeds.sh full` finished, out of 5 seeds x 6 arms): lenet, 2 workers:"
            " 6 of 30 (seeds so far: float 3, terngrad 3, terngrad-noclip 0, terngrad-noshare 0, qsgd 0, signsgd-ef 0);"
            " lenet, 4 workers: 0 of 30; cifarnet, 2 workers: 0 of 30; cifarnet, 4 workers: 0 of 30.") in md
    assert (out / "lenet_seeds.png").read_bytes()[:8] == PNG_MAGIC


def test_uplink_and_downlink_from_run_json(tmp_path):
    runs = tmp_path / "runs"
    for s in (1, 2):
        write_run(runs, f"lenet-float-w2-s{s}", 0.8, codec="float")
        write_run(runs, f"lenet-qsgd-w2-s{s}", 0.8, codec="qsgd")
    for name, up, down in (("float", 8000, 8000), ("qsgd", 1000, 1000)):
        for s in (1, 2):
            p = runs / f"lenet-{name}-w2-s{s}" / "run.json"
            j = json.loads(p.read_text())
            j["bytes_per_worker_step"].update({"uplink": up, "downlink": down})
            j["config"]["qsgd_levels"] = 4
            p.write_text(json.dumps(j))
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(tmp_path / "o")]) == 0
    md = (tmp_path / "o" / "seeds.md").read_text()
    assert "| qsgd | 2 | 2 | 80.00 +- 0.00 | 80.00, 80.00 | 1000 | 1000 | 8.00x |" in md
    assert "qsgd = codec qsgd, 4 levels" in md


def test_interval_excluding_zero_is_called_so(tmp_path):
    runs = tmp_path / "runs"
    for s, (f, t) in enumerate(zip([0.90, 0.91, 0.92, 0.93], [0.80, 0.815, 0.82, 0.83]), start=1):
        write_run(runs, f"cifarnet-float-w2-s{s}", f, codec="float")
        write_run(runs, f"cifarnet-terngrad-w2-s{s}", t)
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(tmp_path / "o")]) == 0
    md = (tmp_path / "o" / "seeds.md").read_text()
    # gaps 10, 9.5, 10, 10 points: mean 9.875, sd 0.25, half-width 3.182 * 0.25 / 2 = 0.40
    assert "| 2 | terngrad | 4 | 9.88 +- 0.40 | interval excludes 0 |" in md
    assert "outside our interval" in md  # the paper's 0.92-point CifarNet gap


def test_t_quantiles_and_single_seed():
    assert seeds.t975(1) == pytest.approx(12.706)
    assert seeds.t975(4) == pytest.approx(2.776)
    assert seeds.t975(200) == pytest.approx(1.96)
    m, h = seeds.mean_ci([0.5])
    assert m == 0.5 and h is None
    m, h = seeds.mean_ci([1.0, 3.0])
    assert m == 2.0 and h == pytest.approx(12.706 * math.sqrt(2) / math.sqrt(2))


def test_errors_are_one_line_and_exit_2(tmp_path, capsys):
    assert cli.main(["seeds", "--runs", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli.main(["seeds", "--runs", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no finished run" in err and err.count("\n") == 1


def test_arm_settings_and_pauses_are_stated(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs, "lenet-float-w2-s1", 0.80, codec="float", payload=16000)
    write_run(runs, "lenet-terngrad-noshare-w2-s1", 0.79, shared_scalar=False)
    write_run(runs, "lenet-qsgd-w2-s1", 0.78, codec="qsgd", qsgd_levels=4, qsgd_bucket=512)
    (runs / "pauses.log").write_text("# name seconds why\nlenet-terngrad-noshare-w2-s1 800 benchmarks on the quiet machine\n"
                                     "lenet-qsgd-w2-s1 27 a benchmark\nlenet-qsgd-w2-s1 13.5 a profile\nlenet-qsgd-w2-s1 2\n")
    out = tmp_path / "out"
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(out)]) == 0
    md = (out / "seeds.md").read_text()
    assert "terngrad-noshare = codec terngrad, clip saturate c=2.5, own scalars (not shared)" in md
    assert "qsgd = codec qsgd, 4 levels, a norm per 512 elements" in md
    assert "lenet-terngrad-noshare-w2-s1 (about 800 s, benchmarks on the quiet machine)" in md
    # a run stopped three times: 27 + 13.5 + 2 s, the reasons in order
    assert "lenet-qsgd-w2-s1 (about 42.5 s, a benchmark; a profile)" in md


def test_a_malformed_pause_line_is_one_line_and_exit_2(tmp_path, capsys):
    runs = tmp_path / "runs"
    write_run(runs, "lenet-float-w2-s1", 0.80, codec="float", payload=16000)
    (runs / "pauses.log").write_text("lenet-float-w2-s1 ten seconds of benchmarks\n")
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "pauses.log" in err and "is not '<run name> <seconds> <why>'" in err and err.count("\n") == 1


def test_simulation_threads_are_shown_per_arm(tmp_path):
    # run.json of runs before --sim-threads has no sim_threads: one thread
    runs = tmp_path / "runs"
    write_run(runs, "lenet-float-w2-s1", 0.80, codec="float", payload=16000)
    write_run(runs, "lenet-float-w2-s2", 0.82, codec="float", payload=16000, sim_threads=2)
    write_run(runs, "lenet-terngrad-w2-s1", 0.79, sim_threads=2)
    out = tmp_path / "out"
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(out)]) == 0
    md = (out / "seeds.md").read_text()
    assert "| wall s per run (median) | threads |" in md
    assert "| 1.00x | 10 | 1/2 |" in md  # float: one run of each
    assert "| 16.00x | 10 | 2 |" in md
    assert "The right panel averages runs made with 1 and 2 simulation threads" in md
    only_one = tmp_path / "one"
    write_run(only_one, "lenet-float-w2-s1", 0.80, codec="float", payload=16000)
    assert cli.main(["seeds", "--runs", str(only_one), "--out", str(tmp_path / "out1")]) == 0
    assert "simulation threads" not in (tmp_path / "out1" / "seeds.md").read_text()


def test_digests_keep_the_report_when_the_raw_runs_are_gone(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    for s, (f, t) in enumerate(zip([0.80, 0.82, 0.84], [0.79, 0.80, 0.84]), start=1):
        write_run(runs, f"lenet-float-w2-s{s}", f, codec="float", payload=16000)
        write_run(runs, f"lenet-terngrad-w2-s{s}", t)
    (runs / "schedule.log").write_text("2026-01-01T00:00:00Z start lenet-float-w2-s1 load 1.50 0.1 0.1 binary x\n"
                                       "2026-01-01T00:00:00Z start lenet-float-w2-s2 load 0.50 0.1 0.1 binary x"
                                       " cpu Some CPU @ 2GHz x 2\n"
                                       "2026-01-01T00:09:00Z done lenet-float-w2-s2 load 2.10 2.05 1.75\n"
                                       "2026-01-01T00:10:00Z start lenet-float-w2-s3 load 0.50 0.1 0.1 binary x source"
                                       " 0123456789ab+uncommitted_changes cpu Some CPU @ 2GHz x 2\n"
                                       "2026-01-01T00:10:00Z start lenet-terngrad-w2-s3 load 0.50 0.1 0.1 binary x source"
                                       " unknown cpu Some CPU @ 2GHz x 2\n")
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(out)]) == 0
    first = (out / "seeds.md").read_text()
    assert json.loads((out / "seeds-digest" / "lenet-float-w2-s3.json").read_text())["binary_source"] == \
        "0123456789ab+uncommitted_changes"
    assert json.loads((out / "seeds-digest" / "lenet-terngrad-w2-s3.json").read_text())["binary_source"] is None
    assert ("Binaries (the source commit `terngrad --version` named at each run's start, from schedule.log): "
            "0123456789ab+uncommitted_changes: 1 runs; not recorded: 5 runs.") in first
    d = json.loads((out / "seeds-digest" / "lenet-float-w2-s1.json").read_text())
    # 4 steps of 16000 bytes (uplink only) and 0.5 + 0.1 + 0 + 0.1 + 0.3 = 1.0 s each: after step 2, 32000 B and 2 s
    assert d["curve"] == [[2, 0.40, 32000.0, 2.0], [4, 0.80, 64000.0, 4.0]]
    assert d["load_at_start"] == 1.5 and d["wall_s"] == 10.0 and d["source"] == "raw run"
    assert "Load average (1 min) at the start of each run (4 of 6 runs recorded it): median 0.50" in first
    assert "Machines (CPU model x cores, from schedule.log): Some CPU @ 2GHz x 2: 3 runs; not recorded: 3 runs." in first
    assert json.loads((out / "seeds-digest" / "lenet-float-w2-s2.json").read_text())["cpu"] == "Some CPU @ 2GHz x 2"
    assert json.loads((out / "seeds-digest" / "lenet-float-w2-s2.json").read_text())["load15_at_end"] == 1.75
    assert "15-minute load average at the end of each run (1 runs recorded it" in first and "median 1.75" in first
    import shutil
    shutil.rmtree(runs)  # a fresh clone: the digests only, no runs folder
    (out / "seeds.md").unlink()
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(out)]) == 0
    assert (out / "seeds.md").read_text() == first


def test_raw_run_replaces_its_digest_and_recovered_digests_are_stated(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_run(runs, "lenet-float-w2-s1", 0.80, codec="float", payload=16000)
    write_run(runs, "lenet-terngrad-w2-s1", 0.70)
    digests = out / "seeds-digest"
    digests.mkdir(parents=True)
    stale = {"digest_version": 1, "name": "lenet-terngrad-w2-s1", "source": "raw run", "config": {"codec": "terngrad"},
             "steps_done": 4, "final_test_accuracy": 0.10, "bytes_per_worker_step": {"payload_all": 1}}
    (digests / "lenet-terngrad-w2-s1.json").write_text(json.dumps(stale))
    recovered = {"digest_version": 1, "name": "lenet-terngrad-w2-s2", "source": "an old report",
                 "config": {"codec": "terngrad", "clip": "saturate", "c": 2.5, "sim_threads": None, "batch": 64,
                            "optimizer": "momentum", "lr": 0.01, "lr_policy": "inv", "weight_decay": 5e-4, "test_limit": 0},
                 "steps_done": 4, "final_test_accuracy": 0.75, "bytes_per_worker_step": {"uplink": 1000, "downlink": 1000},
                 "wall_s": None, "curve": None}
    (digests / "lenet-terngrad-w2-s2.json").write_text(json.dumps(recovered))
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(out)]) == 0
    md = (out / "seeds.md").read_text()
    # the raw run's 70.00 replaced the stale digest's 10.00; the recovered run adds 75.00 without a wall time
    assert "| terngrad | 2 | 2 | 72.50 +- 31.77 | 70.00, 75.00 |" in md  # sd 3.5355 points, 12.706 * 3.5355 / sqrt(2)
    assert "| 10 (1 run) | 1/? |" in md
    assert "1 runs are known only from an old report" in md
    assert json.loads((digests / "lenet-terngrad-w2-s1.json").read_text())["final_test_accuracy"] == 0.70
    assert (out / "lenet_seeds.png").read_bytes()[:8] == PNG_MAGIC


GOOD = ('{"digest_version": 1, "name": "lenet-float-w2-s1", "config": {"codec": "float", "batch": 64, "optimizer": "sgd",'
        ' "lr": 0.1, "lr_policy": "fixed", "weight_decay": 0, "test_limit": 0}, "steps_done": 1, "final_test_accuracy": 0.5,'
        ' "bytes_per_worker_step": {"uplink": 1}, "up": 1}')  # a digest the renderer takes; "up": 1 marks a free slot


def test_a_raw_run_with_a_nan_accuracy_is_named_and_leaves_no_digest(tmp_path, capsys):
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_run(runs, "lenet-float-w2-s1", float("nan"), codec="float")
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "lenet-float-w2-s1/run.json: final_test_accuracy nan is not a number in [0, 1]" in err and err.count("\n") == 1
    assert not (out / "seeds-digest" / "lenet-float-w2-s1.json").exists()


def test_the_good_digest_renders(tmp_path):
    (tmp_path / "out" / "seeds-digest").mkdir(parents=True)
    (tmp_path / "out" / "seeds-digest" / "lenet-float-w2-s1.json").write_text(GOOD)
    assert cli.main(["seeds", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0


@pytest.mark.parametrize("bad, says", [
    ("[1, 2]", "a digest is a JSON object"),
    ('{"digest_version": 7}', "digest version 7"),
    ('{"digest_version": 1, "name": "lenet-float-w2-s1"}', "without 'config'"),
    ('{"digest_version": 1, "name": "lenet-float-w2-s2", "config": {}, "steps_done": 1, "final_test_accuracy": 0.5,'
     ' "bytes_per_worker_step": {}}', "is not the file's name"),
    (GOOD.replace('"up": 1', '"time_s": {"wall": "ten"}'), "time_s is not an object of seconds"),
    (GOOD.replace('"up": 1', '"time_s": {"wall": -1}'), "time_s is not an object of seconds"),
    (GOOD.replace('"final_test_accuracy": 0.5', '"final_test_accuracy": NaN'), "final_test_accuracy nan is not a number in [0, 1]"),
    (GOOD.replace('"final_test_accuracy": 0.5', '"final_test_accuracy": "0.5"'), "final_test_accuracy '0.5' is not a number"),
    (GOOD.replace('"final_test_accuracy": 0.5', '"final_test_accuracy": 91.2'), "final_test_accuracy 91.2 is not a number in [0, 1]"),
    (GOOD.replace('"steps_done": 1', '"steps_done": 1.5'), "steps_done 1.5 is not a whole number"),
    (GOOD.replace('"config": {', '"config": [{').replace('"test_limit": 0}', '"test_limit": 0}]'), "config is not an object"),
    (GOOD.replace('"batch": 64, ', ''), "config lacks 'batch'"),
    (GOOD.replace('"codec": "float"', '"codec": "terngrad", "clip": "saturate"'), "config lacks 'c'"),
    (GOOD.replace('{"uplink": 1}', '{}'), "bytes_per_worker_step is not an object of byte counts"),
    (GOOD.replace('{"uplink": 1}', '{"uplink": "many"}'), "bytes_per_worker_step is not an object of byte counts"),
    (GOOD.replace('"up": 1', '"wall_s": -3'), "wall_s -3 is not a number of seconds"),
    (GOOD.replace('"up": 1', '"curve": [[1, 0.5, 2]]'), "curve is not a list of [step, accuracy, bytes, seconds]"),
])
def test_a_malformed_digest_is_one_line_and_exit_2(tmp_path, capsys, bad, says):
    runs, out = tmp_path / "runs", tmp_path / "out"
    runs.mkdir()
    (out / "seeds-digest").mkdir(parents=True)
    (out / "seeds-digest" / "lenet-float-w2-s1.json").write_text(bad)
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert says in err and "lenet-float-w2-s1.json" in err and err.count("\n") == 1


def test_no_figure_when_no_run_kept_its_curve(tmp_path):
    out = tmp_path / "out"
    (out / "seeds-digest").mkdir(parents=True)
    d = {"digest_version": 1, "name": "cifarnet-float-w2-s1", "source": "an old report",
         "config": {"codec": "float", "batch": 64, "optimizer": "adam", "lr": 2e-4, "lr_policy": "fixed",
                    "weight_decay": 0.004, "test_limit": 0}, "steps_done": 4, "final_test_accuracy": 0.5,
         "bytes_per_worker_step": {"uplink": 8, "downlink": 8}, "curve": None}
    (out / "seeds-digest" / "cifarnet-float-w2-s1.json").write_text(json.dumps(d))
    assert cli.main(["seeds", "--runs", str(tmp_path / "none"), "--out", str(out)]) == 0
    md = (out / "seeds.md").read_text()
    assert "| float | 2 | 1 | 50.00 (1 seed: no interval) | 50.00 |" in md
    assert "![cifarnet]" not in md and not (out / "cifarnet_seeds.png").exists()


def test_time_split_is_the_median_per_arm_without_stopped_runs(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    splits = {  # compute, encode, decode, wait, wire, optimizer, wall
        1: (100, 20, 10, 0, 0, 5, 150),
        2: (110, 30, 14, 0, 0, 7, 170),
        3: (500, 500, 500, 0, 0, 500, 9000),  # stopped for a while: left out, though its numbers would move the median
    }
    for s, (c, e, d, wa, wi, o, wall) in splits.items():
        write_run(runs, f"lenet-qsgd-w2-s{s}", 0.8, codec="qsgd")
        run_json = runs / f"lenet-qsgd-w2-s{s}" / "run.json"
        run = json.loads(run_json.read_text())
        run["time_s"] = {"compute": c, "encode": e, "decode": d, "wait": wa, "wire": wi, "communicate": wa + wi,
                         "optimizer": o, "wall": wall}
        run_json.write_text(json.dumps(run))
    write_run(runs, "lenet-float-w2-s1", 0.8, codec="float")  # time_s has the wall alone: phases 0, all "other"
    (runs / "pauses.log").write_text("lenet-qsgd-w2-s3 600 a benchmark\n")
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(out)]) == 0
    md = (out / "seeds.md").read_text()
    # medians of seeds 1 and 2: compute 105, encode 25, decode 12, exchange 0, optimizer 6, wall 160,
    # other = median(150 - 135, 170 - 161) = median(15, 9) = 12; codec share median(30/150, 44/170) = (20 + 25.88) / 2 = 22.9
    assert "| qsgd | 2 | 2 | 105 | 25 | 12 | 0 | 6 | 12 | 160 | 23 |" in md
    assert "| float | 2 | 1 | 0 | 0 | 0 | 0 | 0 | 10 | 10 | 0 |" in md
    # the accuracy table's wall column leaves the stopped run out too: median(150, 170) over 2 of the 3 runs
    assert "| 160 (2 runs) | 1 |" in md
    digest = json.loads((out / "seeds-digest" / "lenet-qsgd-w2-s2.json").read_text())
    assert digest["time_s"]["encode"] == 30 and digest["time_s"]["wall"] == 170
    # the same table from the digests alone
    import shutil
    shutil.rmtree(runs)
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(out)]) == 0
    assert "| qsgd | 2 | 2 | 105 | 25 | 12 | 0 | 6 | 12 | 160 | 23 |" in (out / "seeds.md").read_text()


def test_last_step_noise_from_close_final_evaluations():
    run = lambda *points: {"curve": [[st, acc, 0.0, 0.0] for st, acc in points]}
    # 1400 -> 1407 (7 steps, within 1% of 1407): |0.7842 - 0.8082| = 2.40 points and |0.815 - 0.822| = 0.70
    text = seeds.last_step_noise([run((1200, 0.80), (1400, 0.8082), (1407, 0.7842)),
                                  run((1400, 0.822), (1407, 0.815)),
                                  run((9000, 0.9), (10000, 0.5)),  # 1000 steps apart: not counted
                                  {"curve": None}])
    assert text.startswith("Final-iterate noise: in 2 runs the last two evaluations lie 7 steps apart")
    assert "a median of 1.55 points (largest 2.40)" in text
    assert seeds.last_step_noise([run((9000, 0.9), (10000, 0.5))]) is None
    assert seeds.last_step_noise([run((100, 0.5), (105, 0.6)), run((200, 0.5), (203, 0.5))]).startswith(
        "Final-iterate noise: in 2 runs the last two evaluations lie 3-5 steps apart")


def test_wall_cell_leaves_out_stopped_runs():
    run = lambda wall, pause=None: {"wall_s": wall, "pause": pause}
    assert seeds.wall_text([run(100), run(300), run(900, "about 600 s, a benchmark")]) == "200 (2 runs)"
    assert seeds.wall_text([run(100), run(300)]) == "200"
    assert seeds.wall_text([run(700, "about 240 s, tests"), run(500, "x")]) == "600 (stopped)"
    assert seeds.wall_text([run(None), run(None)]) == "-"
    assert seeds.wall_text([run(None), run(120)]) == "120 (1 run)"


def test_change_of_the_gap_with_the_worker_count_is_paired_by_seed(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    # gaps (float - terngrad, points): 2 workers 1, 0, 2; 4 workers 2, 2, 3 -> changes 1, 2, 1
    accs = {2: ([0.80, 0.81, 0.82], [0.79, 0.81, 0.80]), 4: ([0.80, 0.81, 0.82], [0.78, 0.79, 0.79])}
    for wk, (fl, tg) in accs.items():
        for s, (f, t) in enumerate(zip(fl, tg), start=1):
            write_run(runs, f"lenet-float-w{wk}-s{s}", f, codec="float", payload=16000)
            write_run(runs, f"lenet-terngrad-w{wk}-s{s}", t)
    write_run(runs, "lenet-terngrad-w4-s4", 0.5)  # no float run of seed 4, none at 2 workers: not paired
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(out)]) == 0
    md = (out / "seeds.md").read_text()
    # changes 1, 2, 1: mean 1.333, sd 0.5774, half-width 4.303 * 0.5774 / sqrt(3) = 1.434
    assert "| terngrad | 2 -> 4 | 3 | 1.33 +- 1.43 | interval includes 0 |" in md


def test_clipping_and_shared_scalar_effects_are_paired_by_seed(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    tern, noclip, noshare = [0.80, 0.81, 0.82], [0.79, 0.79, 0.80], [0.80, 0.82, 0.81]
    for s in range(3):
        write_run(runs, f"lenet-terngrad-w2-s{s + 1}", tern[s])
        write_run(runs, f"lenet-terngrad-noclip-w2-s{s + 1}", noclip[s], clip="none")
        write_run(runs, f"lenet-terngrad-noshare-w2-s{s + 1}", noshare[s])
    write_run(runs, "lenet-terngrad-noclip-w2-s7", 0.10)  # no terngrad run of seed 7: not paired
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(out)]) == 0
    md = (out / "seeds.md").read_text()
    # clipping: differences 1, 2, 2 points: mean 1.667, sd 0.5774, half-width 4.303 * 0.5774 / sqrt(3) = 1.434
    assert "| clipping | terngrad minus terngrad-noclip | 2 | 3 | 1.67 +- 1.43 | interval excludes 0 |" in md
    # shared scalar: differences 0, -1, 1: mean 0, sd 1, half-width 4.303 / sqrt(3) = 2.48
    assert "| shared scalar | terngrad minus terngrad-noshare | 2 | 3 | 0.00 +- 2.48 | interval includes 0 |" in md
    # no float arm: no gaps; the two effects are the intervals the multiplicity note counts
    assert "Float minus arm" not in md
    assert "Of these 2 intervals about 0.1 would exclude 0 by chance alone if none" in md


def test_one_seed_gives_no_effect_interval_and_no_multiplicity_note(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_run(runs, "lenet-terngrad-w2-s1", 0.80)
    write_run(runs, "lenet-terngrad-noclip-w2-s1", 0.78, clip="none")
    assert cli.main(["seeds", "--runs", str(runs), "--out", str(out)]) == 0
    md = (out / "seeds.md").read_text()
    assert "| clipping | terngrad minus terngrad-noclip | 2 | 1 | 2.00 (1 seed: no interval) | - |" in md
    assert "Of these" not in md


def test_the_committed_report_is_what_the_committed_digests_render(tmp_path):
    # reports/train/seeds.md must be the renderer's output from reports/train/seeds-digest alone (no raw runs): a
    # fresh clone regenerates it exactly, and a renderer change that was not rendered into the report is caught
    import pathlib
    import shutil
    root = pathlib.Path(__file__).resolve().parents[2]
    digests, report = root / "reports" / "train" / "seeds-digest", root / "reports" / "train" / "seeds.md"
    if not digests.is_dir() or not report.is_file():
        pytest.skip("no committed study in this checkout")
    out = tmp_path / "out"
    shutil.copytree(digests, out / seeds.DIGESTS)
    assert cli.main(["seeds", "--runs", str(tmp_path / "no-raw-runs"), "--out", str(out)]) == 0
    assert (out / "seeds.md").read_text() == report.read_text(), (
        "reports/train/seeds.md differs from what its digests render: render it again "
        "(python -m terngrad.report seeds) and commit it")
