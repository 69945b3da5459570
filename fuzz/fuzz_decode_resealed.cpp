// terngrad-bench: libFuzzer target for the decoder past its checksums: both CRCs of the input are
// recomputed before decoding, so the fuzzer explores lengths, packings, scalars and body codes.
//   bash scripts/fuzz.sh 60
//   build/fuzz-clang/fuzz_decode_resealed fuzz/corpus/decode -max_total_time=60
#include <cstdio>
#include <cstdlib>

#include "checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto codecs = tg::cpu_codecs(2);
  std::vector<std::uint8_t> payload(data, data + size);
  tg::fuzz::reseal(payload);
  try {
    tg::fuzz::check_decode(codecs, payload);
  } catch (const tg::fuzz::PropertyViolation& e) {
    std::fprintf(stderr, "fuzz_decode_resealed: property violated: %s\n", e.what());
    std::abort();
  }
  return 0;
}
