// terngrad-bench: libFuzzer target for the .npy reader of the external-codec protocol
// (tg::verify::parse_npy): typed errors on malformed input, exact data and round trip otherwise.
//   bash scripts/fuzz.sh 60
//   build/fuzz-clang/fuzz_npy fuzz/corpus/npy -max_total_time=60
#include <cstdio>
#include <cstdlib>

#include "npy_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    tg::fuzz::check_npy({data, size});
  } catch (const tg::fuzz::PropertyViolation& e) {
    std::fprintf(stderr, "fuzz_npy: property violated: %s\n", e.what());
    std::abort();
  }
  return 0;
}
