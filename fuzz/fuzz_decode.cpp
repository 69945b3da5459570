// terngrad-bench: libFuzzer target for the payload decoder (tg::decode, parse_header, decode_trits)
// on the raw wire bytes, every CPU implementation cross-checked against the format (checks.hpp).
//   bash scripts/fuzz.sh 60            (builds with clang -fsanitize=fuzzer,address,undefined)
//   build/fuzz-clang/fuzz_decode fuzz/corpus/decode -max_total_time=60
#include <cstdio>
#include <cstdlib>

#include "checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto codecs = tg::cpu_codecs(2);
  try {
    tg::fuzz::check_decode(codecs, {data, size});
  } catch (const tg::fuzz::PropertyViolation& e) {
    std::fprintf(stderr, "fuzz_decode: property violated: %s\n", e.what());
    std::abort();
  }
  return 0;
}
