#!/usr/bin/env bash
# terngrad-bench: configures and builds one preset (default: "default").
#   bash scripts/build.sh [preset] [extra cmake --build args]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-default}
shift || true
[ -f "build/$preset/CMakeCache.txt" ] || cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" "$@"
