#!/usr/bin/env bash
# terngrad-bench: installs everything the project needs on Debian 12, idempotently.
#   bash scripts/setup.sh          (does nothing slow when all is already installed)
# Debian packages via apt-get; Python packages from PyPI into build/venv (never the system).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake g++ ninja-build ccache pkg-config git
  librandom123-dev libboost-math-dev libeigen3-dev
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libxtensor-dev
  libtorch-dev libgloo-dev dataset-fashion-mnist
  python3-torch python3-pytest   # PyTorch (+ pytest) for /usr/bin/python3: examples/torch_codec.py, ctest pip_fresh_venv, python_torch
  clang libclang-rt-14-dev valgrind
  python3 python3-dev python3-venv python3-pip
)
# wheel and setuptools: `pip install --no-build-isolation ./python` (offline) builds with this venv
PY_PACKAGES=(numpy matplotlib nbclient nbformat ipykernel nanobind pytest wheel setuptools jsonschema)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

VENV=build/venv
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  mkdir -p build
  python3 -m venv "$VENV"
fi
stamp="$VENV/.installed-$(echo "${PY_PACKAGES[*]}" | md5sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing Python packages ${PY_PACKAGES[*]} into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
  touch "$stamp"
fi
