#!/usr/bin/env bash
# terngrad-bench: the GPU check of the CUDA codec in one go (about 6 minutes on an H200): build
# (or take prebuilt programs), every CUDA test, compute-sanitizer memcheck and racecheck on the small
# case, the benchmark.
#   bash scripts/gpu-check.sh [--prebuilt DIR] [output folder]   (default: $OUT if set, else build/gpu-check)
# --prebuilt DIR: run the programs that scripts/gpu-bundle.sh built on the development machine (the GPU
# machine's image lacks this project's Debian packages, so building there fails); carry DIR with the run.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
prebuilt=""
if [ "${1:-}" = "--prebuilt" ]; then
  prebuilt=${2:?--prebuilt needs a folder (made by scripts/gpu-bundle.sh)}
  shift 2
fi
out=${1:-${OUT:-build/gpu-check}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
jobs=$(nproc)
build=${TG_GPU_BUILD:-build/gpu}
declare -a summary
failed=0
record() {  # record NAME STATUS
  summary+=("$1: $([ "$2" = 0 ] && echo PASS || echo "FAIL (exit $2)")")
  [ "$2" = 0 ] || failed=1
}
started=$(date +%s)
echo "gpu-check: output in $out"
{ nvidia-smi -L 2>&1 || true; nvcc --version 2>&1 | tail -1 || true; } | tee "$out/machine.txt"

if [ -n "$prebuilt" ]; then
  for f in tg_cuda_tests tg_cuda_tiles_tests tg_cuda_bench; do
    [ -x "$prebuilt/$f" ] || { echo "gpu-check: FAIL: $prebuilt/$f missing (run scripts/gpu-bundle.sh, carry $prebuilt)"; exit 2; }
  done
  tee -a "$out/machine.txt" 2>/dev/null < "$prebuilt/MANIFEST.txt"  # at most 8 files come back
  if ldd "$prebuilt"/tg_* 2>&1 | grep -q "not found"; then
    ldd "$prebuilt"/tg_* 2>&1 | grep "not found"
    echo "gpu-check: FAIL: a prebuilt program misses a shared library here"; exit 2
  fi
  tiles=$prebuilt/tg_cuda_tiles_tests gpu_tests=$prebuilt/tg_cuda_tests bench=$prebuilt/tg_cuda_bench
  record "prebuilt programs" 0
else
  # Configure the whole tree; if another module's CMakeLists does not configure, fall back to a tree
  # holding only the codec (symlinks), so a half-finished module elsewhere cannot block the GPU check.
  if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTG_ENABLE_CUDA=ON >"$out/configure.log" 2>&1; then
    echo "gpu-check: the full tree does not configure (configure.log); using the codec-only tree"
    src=$(mktemp -d)
    for f in CMakeLists.txt codec tests property_tests apps bench common; do ln -s "$PWD/$f" "$src/$f"; done
    build=$build-codec
    if ! cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTG_ENABLE_CUDA=ON \
        >"$out/configure-codec.log" 2>&1; then
      tail -30 "$out/configure-codec.log"
      echo "gpu-check: FAIL: cannot configure"; exit 2
    fi
  fi
  timeout 300 cmake --build "$build" --target tg_cuda_tests tg_cuda_tiles_tests tg_cuda_bench -j"$jobs" \
    >"$out/build.log" 2>&1
  rc=$?; record build $rc
  if [ $rc != 0 ]; then tail -40 "$out/build.log"; printf '%s\n' "${summary[@]}"; exit 1; fi
  echo "gpu-check: built in $(( $(date +%s) - started )) s"
  tiles=$build/tests/cuda/tg_cuda_tiles_tests gpu_tests=$build/tests/cuda/tg_cuda_tests
  bench=$build/bench/cuda/tg_cuda_bench
fi

# Every CUDA test (from the repository root: the known-answer files are read from codec/tests/data).
timeout 60 "$tiles" 2>&1 | tee "$out/tiles-tests.log" | tail -3
record "host replay tests" "${PIPESTATUS[0]}"
timeout 240 "$gpu_tests" 2>&1 | tee "$out/gpu-tests.log" | grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) " 
rc=${PIPESTATUS[0]}
if grep -q "SKIPPED \]" "$out/gpu-tests.log"; then
  echo "gpu-check: GPU tests were skipped on this machine (see gpu-tests.log): the device is not usable"
  [ "$rc" = 0 ] && rc=1
fi
record "GPU tests" "$rc"

# compute-sanitizer memcheck on the small case (the toolkit's copy, wherever this machine keeps it).
# (ls on glob patterns of fixed folder names: the first that exists)
# shellcheck disable=SC2012
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer \
  /usr/local/cuda*/compute-sanitizer/compute-sanitizer /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$sanitizer" ]; then
  timeout 240 "$sanitizer" --tool memcheck --leak-check full --error-exitcode 3 \
    "$gpu_tests" --gtest_filter='CudaSmall.*:CudaPhilox.*' >"$out/memcheck.log" 2>&1
  rc=$?; tail -5 "$out/memcheck.log"; record "memcheck (CudaSmall, CudaPhilox)" $rc
  # racecheck: the max pass's block reduction is the one kernel that shares memory between threads.
  timeout 120 "$sanitizer" --tool racecheck --error-exitcode 3 \
    "$gpu_tests" --gtest_filter='CudaSmall.*' >"$out/racecheck.log" 2>&1
  rc=$?; tail -3 "$out/racecheck.log"; record "racecheck (CudaSmall)" $rc
else
  echo "gpu-check: compute-sanitizer not found on this machine: memcheck and racecheck NOT run"
  summary+=("memcheck, racecheck: NOT RUN (compute-sanitizer not installed)")
  failed=1
fi

# Benchmark: encode/decode GB/s for 2^20 .. 2^28 next to the D2D copy of the same bytes.
timeout 240 "$bench" --min-exp 20 --max-exp 28 --out "$out/cuda-bench.md" \
  2>&1 | tee "$out/bench.log"
record benchmark "${PIPESTATUS[0]}"

echo "gpu-check: finished in $(( $(date +%s) - started )) s"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $failed
