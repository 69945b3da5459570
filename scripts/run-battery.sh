#!/usr/bin/env bash
# terngrad-bench: the main job (README): set-up, build, then run the statistical battery
# `terngrad verify` (default profile ci, optimized CPU codec; docs/battery.md explains the output).
#   bash scripts/run-battery.sh [extra arguments, e.g. --impl reference --json out.json]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh default --target terngrad >/dev/null
exec build/default/apps/terngrad verify "$@"
