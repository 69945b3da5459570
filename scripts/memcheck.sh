#!/usr/bin/env bash
# terngrad-bench: the codec under valgrind memcheck (small cases: corruption, hostile sizes, numeric
# edges, fuzz regressions), the threaded encoder/decoder under ThreadSanitizer, and every reliability
# test (exhaustive ones included) under AddressSanitizer + UndefinedBehaviorSanitizer (clang builds).
# Fails on any memcheck error, leak, data race or sanitizer report.
#   bash scripts/memcheck.sh [valgrind|tsan|asan|all]        (default all)
#   MEMCHECK_BUILD=build/default (a g++ build of the project); ThreadSanitizer in the `tsan` preset
#   (build/tsan), ASan + UBSan in the `fuzz` preset (build/fuzz, shared with scripts/fuzz.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
build=${MEMCHECK_BUILD:-build/default}
tsan=build/tsan
asan=build/fuzz

run_valgrind() {
  [ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DTG_ENABLE_CUDA=OFF -DTG_BUILD_BENCH=OFF >/dev/null
  cmake --build "$build" --target tg_reliability_tests -j2
  # The small cases only: the thread tests (4.2M elements) and the 64 GiB address-space reservation
  # of OversizedSpan (death tests fork) are for the TSan run and the plain run.
  local filter='Corruption.EverySingleBitFlipIsRejected:Corruption.EveryTruncationAndExtensionIsRejected:'
  filter+='HostileSizes.*:NumericEdges.*:FuzzRegressions.*'
  echo "memcheck: valgrind on tg_reliability_tests --gtest_filter=$filter"
  # nouserintercepts: the test program replaces operator new/delete (allocation probe of
  # test_hostile_sizes.cpp) with malloc/free; valgrind must see those, not intercept half of the pair.
  valgrind --tool=memcheck --soname-synonyms=somalloc=nouserintercepts --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --track-origins=yes -q "$build/fuzz/tg_reliability_tests" --gtest_brief=1 --gtest_filter="$filter"
  echo "memcheck: valgrind clean"
}

run_tsan() {
  [ -f "$tsan/CMakeCache.txt" ] || cmake --preset tsan >/dev/null
  cmake --build "$tsan" --target tg_reliability_tests -j2
  echo "memcheck: ThreadSanitizer on the threaded codec (Threads.*)"
  # clang 14's TSan needs the classic address-space layout; setarch -R disables randomization.
  TSAN_OPTIONS=${TSAN_OPTIONS:-"halt_on_error=1:second_deadlock_stack=1"} \
    setarch "$(uname -m)" -R "$tsan/fuzz/tg_reliability_tests" --gtest_brief=1 --gtest_filter='Threads.*'
  echo "memcheck: ThreadSanitizer clean"
}

run_asan() {
  [ -f "$asan/CMakeCache.txt" ] || cmake --preset fuzz >/dev/null
  cmake --build "$asan" --target tg_reliability_tests tg_reliability_exhaustive_tests -j2
  echo "memcheck: AddressSanitizer + UndefinedBehaviorSanitizer on the reliability tests"
  local rc=0
  ASAN_OPTIONS=${ASAN_OPTIONS:-"detect_leaks=1"} "$asan/fuzz/tg_reliability_tests" --gtest_brief=1 || rc=1
  ASAN_OPTIONS=${ASAN_OPTIONS:-"detect_leaks=1"} "$asan/fuzz/tg_reliability_exhaustive_tests" --gtest_brief=1 || rc=1
  if [ $rc -ne 0 ]; then
    echo "memcheck: ASan + UBSan run FAILED" >&2
    return 1
  fi
  echo "memcheck: ASan + UBSan clean"
}

case "$what" in
  valgrind) run_valgrind ;;
  tsan) run_tsan ;;
  asan) run_asan ;;
  all) run_valgrind; run_tsan; run_asan ;;
  *) echo "usage: bash scripts/memcheck.sh [valgrind|tsan|asan|all]" >&2; exit 2 ;;
esac
