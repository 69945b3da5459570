#!/usr/bin/env bash
# terngrad-bench: the `terngrad` package as a user gets it (ctest pip_fresh_venv; docs/ci.md).
#   bash python/tests/fresh_venv.sh PYTHON CLONE
# In a temporary folder outside the clone: a fresh venv of PYTHON with --system-site-packages (so
# Debian's python3-torch and python3-numpy are seen), `pip install CLONE/python pytest`, then
# `pytest CLONE/examples/test_codecs.py --junitxml=...` run from that folder. Passes when the package
# came from the venv (not the clone), its wheel is platform-tagged, `python -m terngrad --version`
# says the top-level CMakeLists.txt's VERSION, and the JUnit file has 2 tests, 0 failures, 0 errors,
# 0 skipped. Needs PyPI (pytest, and setuptools/wheel/nanobind for the isolated build).
set -euo pipefail
python=${1:?usage: fresh_venv.sh PYTHON CLONE}
clone=$(cd "${2:?usage: fresh_venv.sh PYTHON CLONE}" && pwd)
fail() { echo "fresh_venv: FAIL: $*" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/terngrad-fresh-venv.XXXXXX")
trap 'rm -rf "$work"' EXIT
case "$work/" in "$clone"/*) fail "temporary folder $work is inside the clone" ;; esac
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1

t0=$SECONDS
"$python" -m venv --system-site-packages "$work/venv"
py="$work/venv/bin/python"
"$py" -c "import torch" 2>/dev/null || fail "torch is not importable from a venv of $python (Debian: apt-get install python3-torch)"
"$py" -m pip install -q "$clone/python" pytest || fail "pip install $clone/python pytest"
echo "fresh_venv: pip install took $((SECONDS - t0)) s"

cd "$work"
"$py" - "$clone" "$work/venv" <<'EOF' || exit 1
import importlib.metadata as md, pathlib, re, subprocess, sys
clone, venv = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
import terngrad
where = pathlib.Path(terngrad.__file__).resolve()
if venv.resolve() not in where.parents:
    sys.exit(f"fresh_venv: FAIL: terngrad imported from {where}, not from the venv")
cmake = re.search(r"project\(\w+ VERSION ([0-9.]+)", (clone / "CMakeLists.txt").read_text()).group(1)
out = subprocess.run([sys.executable, "-m", "terngrad", "--version"], capture_output=True, text=True).stdout
if terngrad.__version__ != cmake or md.version("terngrad") != cmake or cmake not in out:
    sys.exit(f"fresh_venv: FAIL: versions differ: CMake {cmake}, __version__ {terngrad.__version__}, "
             f"metadata {md.version('terngrad')}, --version {out.strip()!r}")
wheel = md.distribution("terngrad").read_text("WHEEL") or ""
tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
if "Root-Is-Purelib: false" not in wheel or not re.search(rf"Tag: {tag}-{tag}-linux_x86_64", wheel):
    sys.exit(f"fresh_venv: FAIL: the wheel is not platform-tagged:\n{wheel}")
print(f"fresh_venv: terngrad {terngrad.__version__} from {where.parent}, wheel tag {tag}-{tag}-linux_x86_64")
EOF

t1=$SECONDS
rc=0
"$py" -m pytest -p no:cacheprovider "$clone/examples/test_codecs.py" --junitxml="$work/junit.xml" -q || rc=$?
echo "fresh_venv: pytest took $((SECONDS - t1)) s (exit $rc)"
"$py" - "$work/junit.xml" <<'EOF' || exit 1
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suite = root if root.tag == "testsuite" else root.find("testsuite")
got = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
if got != {"tests": 2, "failures": 0, "errors": 0, "skipped": 0}:
    sys.exit(f"fresh_venv: FAIL: JUnit {got}, expected 2 tests, 0 failures, 0 errors, 0 skipped")
print(f"fresh_venv: JUnit {got}")
EOF
[ "$rc" -eq 0 ] || fail "pytest exited $rc"
echo "fresh_venv: passed in $((SECONDS - t0)) s"
