#!/usr/bin/env bash
# terngrad-bench: the main job (README): set-up, build, then run the program's main check.
#   bash scripts/run-battery.sh [extra arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh default --target terngrad >/dev/null
exec build/default/apps/terngrad demo "$@"
