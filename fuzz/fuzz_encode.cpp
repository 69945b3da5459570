// terngrad-bench: libFuzzer target for the encoder on arbitrary float32 bit patterns (NaN, Inf,
// subnormals, -0.0, FLT_MAX) under every clipping mode and packing, every CPU implementation.
//   bash scripts/fuzz.sh 60
//   build/fuzz-clang/fuzz_encode fuzz/corpus/encode -max_total_time=60
#include <cstdio>
#include <cstdlib>

#include "checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto codecs = tg::cpu_codecs(2);
  auto c = tg::fuzz::encode_case_from_bytes({data, size});
  if (!c) return 0;
  try {
    tg::fuzz::check_encode(codecs, *c);
  } catch (const tg::fuzz::PropertyViolation& e) {
    std::fprintf(stderr, "fuzz_encode: property violated: %s\n", e.what());
    std::abort();
  }
  return 0;
}
