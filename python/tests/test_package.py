"""terngrad-bench: the package's version, its command line `python -m terngrad` (terngrad/_cli.py) and
its sdist contents (setup.py). Run: ctest -L python, or
PYTHONPATH=build/<preset>/python/package build/venv/bin/python -m pytest python/tests/test_package.py

The CLI's battery runs use the quick profile and fixed seeds: the correct codec fails with
probability <= 1e-6, the mutant is rejected by many rows (docs/battery.md, self-test)."""
import json
import pathlib
import re
import subprocess
import sys

import pytest

import terngrad as tg
import terngrad.verify as tv

REPO = pathlib.Path(__file__).resolve().parents[2]


def cli(*args, cwd=None):
    env_path = str(pathlib.Path(tg.__file__).resolve().parent.parent)
    import os
    env = dict(os.environ, PYTHONPATH=env_path + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "terngrad", *args], capture_output=True, text=True, cwd=cwd, env=env)


def test_version_is_the_cmake_project_version():
    cmake = re.search(r"project\(terngrad_bench VERSION ([0-9.]+)", (REPO / "CMakeLists.txt").read_text()).group(1)
    assert tg.__version__ == cmake
    assert cli("--version").stdout.strip() == f"terngrad {cmake} (Python package)"
    # pyproject takes the version from terngrad/_version.py (one place for the wheel and the module)
    assert 'version = {attr = "terngrad._version.__version__"}' in (REPO / "python" / "pyproject.toml").read_text()


def test_verify_passes_and_writes_reports(tmp_path):
    r = cli("verify", "--profile", "quick", "--no-progress", "--json", str(tmp_path / "r.json"),
            "--junit", str(tmp_path / "out" / "r.xml"))
    assert r.returncode == 0, r.stderr
    assert "verdict: PASS" in r.stdout and r.stderr == ""
    run = json.loads((tmp_path / "r.json").read_text())["runs"][0]
    same = json.loads(tv.run("optimized", profile="quick").to_json())["runs"][0]  # the same run, in-process
    run.pop("seconds"), same.pop("seconds")
    assert run == same and run["seed"] == 20171204 and run["implementation"] == "optimized"
    assert "<testsuite" in (tmp_path / "out" / "r.xml").read_text()


def test_verify_fails_a_mutant_with_exit_1():
    r = cli("verify", "--profile", "quick", "--no-progress", "--impl", "mutant:uniform8", "--skip", "cross")
    assert r.returncode == 1 and "verdict: FAIL" in r.stdout


def test_verify_python_draw_function(tmp_path):
    (tmp_path / "mydraw.py").write_text(
        "import sys; sys.path.insert(0, %r)\nfrom numpy_codec import draw\n" % str(REPO / "examples"))
    r = cli("verify", "--profile", "quick", "--no-progress", "--impl", "python:mydraw:draw",
            "--supports", "none,shared-scalar", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    assert "python:mydraw:draw" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["verify", "--bogus"], "unrecognized arguments: --bogus"),
    (["verify", "--profile", "fast"], "invalid choice: 'fast'"),
    (["verify", "--skip", "cross,speed"], "unknown check 'speed'"),
    (["verify", "--supports", "clip,magic"], "unknown capability 'magic'"),
    (["verify", "--alpha", "0.9"], "0.9 is not in [1e-300, 0.5]"),
    (["verify", "--seed", "x"], "'x' is not an unsigned integer"),
    (["verify", "--seed", "0x10"], "'0x10' is not an unsigned integer"),  # the C++ program refuses it too
    (["verify", "--seed", "1_000"], "'1_000' is not an unsigned integer"),
    (["verify", "--seed", "1e3"], "'1e3' is not an unsigned integer"),
    (["verify", "--seed", "18446744073709551616"], "18446744073709551616 is not in [0, 2^64)"),
    (["verify", "--alpha", "nan"], "nan is not in [1e-300, 0.5]"),
    (["verify", "--impl", "fastest"], "unknown --impl 'fastest'"),
    (["verify", "--impl", "fastest"], "; here also python:MODULE:FUNCTION, a draw function)"),
    (["verify", "--samples", "g.npy", "v.npy", "--samples", "g.npy", "./v.npy"],
     "the draws file ./v.npy is given for layer 0 and for layer 1"),
    (["verify", "--impl", "python:no_such_module:draw"], "No module named 'no_such_module'"),
    (["verify", "--clip", "clip"], "--clip needs --samples"),
    (["verify", "--json", "/proc/none/r.json"], "cannot create folder /proc/none"),
    (["verify", "--json", "/"], "--json / is a folder, not a file"),  # was: "cannot write into folder /"
    (["verify", "--json", "-", "--junit", "-"], "cannot both go to stdout"),
    (["verify", "--json", ""], "--json: is empty"),
    (["verify", "--json", "r.xml", "--junit", "./r.xml"], "--json and --junit name the same file"),
    (["verify", "--supports", "spec-stream"], "names no clipping mode"),
    # an option given twice is refused (argparse kept the last), as by the C++ program; so is a list naming one twice
    (["verify", "--profile", "quick", "--profile", "ci"], "--profile given 2 times (give it once)"),
    (["verify", "--skip", "cross,cross"], "lists 'cross' twice"),
    # an empty item is refused, not dropped (as by the C++ program)
    (["verify", "--skip", "cross,"], "--skip: has an empty item in 'cross,'"),
    (["verify", "--supports", "clip,,saturate"], "--supports: has an empty item in 'clip,,saturate'"),
    (["verify", "--skip", ""], "--skip: is given an empty value"),
    (["verify", "--list-mutants", "--json", "m.json"], "--json excludes --list-mutants"),
    (["verify", "--exec-timeout", "0"], "0 is not in [0.001, 86400]"),
    # an option the run would not use is refused, not ignored (as by the C++ program)
    (["verify", "--impl", "reference", "--exec-timeout", "5"], "--exec-timeout is used only with an external"),
])
def test_usage_errors_are_one_line_and_exit_2(args, message):
    r = cli(*args)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("python -m terngrad"), r.stderr
    assert message in r.stderr and r.stdout == ""


def test_a_long_path_is_named_by_its_start_and_end(tmp_path):
    # a 20,000-character path is not echoed whole: the line keeps its start, its end and stays within 600
    long_dir = tmp_path / ("a" * 20000)
    r = cli("verify", "--profile", "quick", "--json", str(long_dir / "r.json"))
    assert r.returncode == 2 and r.stdout == "", r.stderr[:300]
    line = r.stderr.rstrip("\n")
    assert r.stderr.count("\n") == 1 and len(line) <= 600, len(line)
    assert line.startswith("python -m terngrad verify") and " ... " in line
    assert list(tmp_path.iterdir()) == []  # no folder made


def test_verify_bad_paths_are_one_line_and_leave_nothing(tmp_path):
    import numpy as np

    def refused(*args, message):
        r = cli(*args, cwd=tmp_path)
        assert r.returncode == 2 and r.stdout == "", r.stderr
        assert r.stderr.count("\n") == 1 and message in r.stderr, r.stderr

    # a usage error after an output path with missing folders: the folders are not made
    refused("verify", "--json", str(tmp_path / "nd1" / "a" / "b" / "x.json"), "--impl", "fastest",
            message="unknown --impl 'fastest'")
    assert not (tmp_path / "nd1").exists()
    refused("verify", "--json", str(tmp_path), message=f"--json {tmp_path} is a folder, not a file")
    # --samples files that are not .npy: named, no traceback (was: EOFError, exit 1; a pickle message)
    g = tmp_path / "g.npy"
    np.save(g, np.linspace(-1, 1, 8, dtype=np.float32))
    (tmp_path / "empty.npy").write_bytes(b"")
    (tmp_path / "garbage.npy").write_bytes(b"not a numpy file at all")
    np.save(tmp_path / "big.npy", np.linspace(-1, 1, 8).astype(">f4"))
    v = tmp_path / "v.npy"
    np.save(v, np.zeros((4, 8), dtype=np.float32))
    refused("verify", "--samples", str(tmp_path / "empty.npy"), str(v), message="empty.npy is not a .npy file (it is empty")
    refused("verify", "--samples", str(tmp_path / "garbage.npy"), str(v),
            message="garbage.npy is not a .npy file (it does not start with the .npy magic \\x93NUMPY")
    refused("verify", "--samples", str(tmp_path / "big.npy"), str(v),
            message="g must be little-endian (native) float32, got >f4")
    refused("verify", "--samples", str(g), str(tmp_path), message="not a regular file")
    np.save(tmp_path / "gF.npy", np.asfortranarray(np.ones((4, 2), np.float32)))  # named, as the C++ program does
    refused("verify", "--samples", str(tmp_path / "gF.npy"), str(v), message="gF.npy: a Fortran-order array")
    # an output naming an input would replace it
    refused("verify", "--samples", str(g), str(v), "--json", str(g), message=f"--json {g} is the input file given to --samples")
    refused("verify", "--samples", str(g), str(v), "--junit", "./v.npy", message="--junit ./v.npy is the input file given")
    assert np.load(g).shape == (8,) and np.load(v).shape == (4, 8)


def test_a_run_ending_in_an_error_leaves_no_earlier_report(tmp_path):
    # a pipeline that reads --json after a failed run must not find the previous run's PASS there
    old_json, old_xml, target = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "target.json"
    for p in (old_json, target):
        p.write_text('{"earlier": "a report of an earlier run"}\n')
    old_xml.write_text('<?xml version="1.0"?>\n<testsuites name="terngrad verify">\n</testsuites>\n')
    (tmp_path / "link.json").symlink_to(target)
    r = cli("verify", "--profile", "quick", "--no-progress", "--impl", "exec:false", "--json", str(old_json),
            "--junit", str(old_xml), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "external codec exited with status 1" in r.stderr and r.stderr.count("\n") == 1, r.stderr  # one line
    assert f"removed {old_json} and {old_xml}, reports of an earlier run" in r.stderr, r.stderr
    assert not old_json.exists() and not old_xml.exists()
    r = cli("verify", "--impl", "fastest", "--json", "link.json", cwd=tmp_path)  # refused after parsing
    assert r.returncode == 2 and "unknown --impl 'fastest'" in r.stderr and "removed link.json" in r.stderr, r.stderr
    assert not target.exists() and (tmp_path / "link.json").is_symlink()
    # a file at an output path that does not read as a report (notes; an input .npy) stays
    notes = tmp_path / "notes.json"
    notes.write_text("notes, not a report\n")
    r = cli("verify", "--profile", "quick", "--no-progress", "--impl", "exec:false", "--json", str(notes), cwd=tmp_path)
    assert r.returncode == 2 and "removed" not in r.stderr, r.stderr
    assert notes.read_text() == "notes, not a report\n"


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_an_interrupted_run_leaves_no_earlier_report(tmp_path, signame):
    # as `terngrad verify` does: Ctrl-C, a CI runner's SIGTERM or a closed terminal's SIGHUP in the middle of a run of
    # a built-in implementation stops it, removes the earlier report and ends with 128 + the signal's number
    import os
    import signal
    sig = getattr(signal, signame)
    old_json = tmp_path / "r.json"
    old_json.write_text('{"earlier": "a report of an earlier run"}\n')
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(tg.__file__).resolve().parent.parent) + os.pathsep +
               os.environ.get("PYTHONPATH", ""))
    # its own session: the signal reaches this run alone, and SIGINT is not ignored as in a background job
    p = subprocess.Popen([sys.executable, "-m", "terngrad", "verify", "--profile", "full", "--json", str(old_json)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first = p.stderr.readline()  # the first progress line, 3 s in: the run is under way, its handlers installed
    assert first.startswith("verify:"), first
    p.send_signal(sig)
    try:
        err = first + p.stderr.read()
        rc = p.wait(timeout=60)
    finally:
        p.kill()
    assert rc == 128 + sig, (rc, err)
    assert f"removed {old_json}, a report of an earlier run" in err, err
    assert not old_json.exists()


def test_verify_json_dash_is_stdout(tmp_path):
    r = cli("verify", "--profile", "quick", "--no-progress", "--skip", "streams,collision,cross,aggregate,independence",
            "--json", "-", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["runs"][0]["implementation"] == "optimized"  # the JSON alone, no table
    assert not (tmp_path / "-").exists()


def test_help_states_the_defaults():
    out = " ".join(cli("verify", "--help").stdout.split())
    for default in ("(default: optimized)", "(default: ci)", "(default: 20171204)", "(default: all)",
                    "1e-6 for quick and ci, 1e-9 for full"):  # --alpha: the full profile's is 1e-9
        assert default in out


def test_sdist_carries_the_cpp_sources():
    """setup.py's CPP_PARTS: every file the CMake build of tg_python_core reads lives under them."""
    spec = (REPO / "python" / "setup.py").read_text()
    parts = eval(re.search(r"CPP_PARTS = (\[.*?\])", spec, re.S).group(1))  # noqa: S307 (our own literal)
    for part in parts:
        assert (REPO / part).exists(), part
    for module in ("codec", "verify"):
        # every source the module's CMakeLists.txt names (inside if() blocks too: the AVX kernels)
        listed = re.findall(r"\b(src/[\w/]+\.(?:cpp|cu))", (REPO / module / "CMakeLists.txt").read_text())
        assert listed, f"no sources found in {module}/CMakeLists.txt"
        missing = [f for f in listed if not any(f"{module}/{f}".startswith(p) for p in parts)]
        assert not missing, missing
