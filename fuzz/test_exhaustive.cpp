// terngrad-bench: the slow exhaustive corruption tests (ctest labels "reliability;long"): every
// double-bit flip and every byte substitution of the small payloads, and every 2-byte body with
// recomputed checksums. The fast single-bit and single-byte cases are in test_corruption.cpp.
//   ctest --test-dir build/<preset> -L reliability     (or build/.../fuzz/tg_reliability_exhaustive_tests)
#include <gtest/gtest.h>

#include <cstring>

#include "checks.hpp"
#include "reliability_util.hpp"

namespace {

using tg::ErrorCode;
using tg::fuzz::check_decode;
using tg::fuzz::PropertyViolation;
using tg::rel::small_payloads;

ErrorCode expected_code(std::size_t offset) {  // as in test_corruption.cpp
  if (offset < 4) return ErrorCode::bad_magic;
  if (offset < 6) return ErrorCode::bad_version;
  return ErrorCode::crc_mismatch;
}

// Double-bit errors E(x) = x^i (1 + x^d) go undetected only if G divides 1 + x^d; published tables
// of CRC-32C (Koopman) give Hamming distance 4 up to about 2^31 data bits, far beyond these payloads.
// With one flip in the header and one in the body, each region sees a single-bit error. The check
// is exhaustive, so it does not rest on that argument; it runs on the reference implementation only
// (the decoders share parse_header; test_corruption.cpp compares every implementation on single
// flips).
TEST(Corruption, EveryDoubleBitFlipIsRejected) {
  const tg::Codec& ref = tg::reference_codec();
  std::size_t tried = 0, accepted = 0;
  for (const auto& [name, good] : small_payloads()) {
    std::size_t bits = 8 * good.size();
    for (std::size_t a = 0; a < bits; ++a)
      for (std::size_t b = a + 1; b < bits; ++b) {
        auto p = good;
        p[a / 8] ^= static_cast<std::uint8_t>(1u << (a % 8));
        p[b / 8] ^= static_cast<std::uint8_t>(1u << (b % 8));
        ++tried;
        try {
          tg::decode(ref, p);
          ++accepted;
          ADD_FAILURE() << name << " with bits " << a << " and " << b << " flipped decoded";
        } catch (const tg::Error&) {
        }
      }
  }
  EXPECT_EQ(accepted, 0u);
  std::printf("double-bit flips: %zu tried, %zu accepted\n", tried, accepted);
}

// Every other value of every byte (a burst of at most 8 bits: CRC32C detects every burst of length
// <= 32, since E(x) = x^i B(x) with deg B < 32 and B(0) = 1 is not divisible by G).
TEST(Corruption, EveryByteSubstitutionIsRejected) {
  auto codecs = tg::cpu_codecs(2);
  std::size_t tried = 0, accepted = 0;
  for (const auto& [name, good] : small_payloads()) {
    for (std::size_t at = 0; at < good.size(); ++at)
      for (unsigned v = 0; v < 256; ++v) {
        if (v == good[at]) continue;
        auto p = good;
        p[at] = static_cast<std::uint8_t>(v);
        ++tried;
        for (const auto& entry : codecs) {
          try {
            tg::decode(*entry.codec, p);
            ++accepted;
            ADD_FAILURE() << entry.name << " decoded " << name << " byte " << at << " = " << v;
          } catch (const tg::Error& e) {
            EXPECT_EQ(e.code(), expected_code(at)) << entry.name << " " << name << " byte " << at << ": " << e.what();
          }
        }
      }
  }
  EXPECT_EQ(accepted, 0u);
  std::printf("byte substitutions: %zu tried, %zu accepted\n", tried, accepted);
}

TEST(Corruption, EveryTwoByteBodyWithForgedChecksums) {
  auto codecs = tg::cpu_codecs(2);
  std::size_t tried = 0, valid_pairs = 0;
  for (auto packing : {tg::Packing::two_bit, tg::Packing::base3}) {
    // all 65536 two-byte bodies (8 elements in 2bit, 10 in base3, so no padding; and 6 / 7 with padding)
    for (std::size_t n : {packing == tg::Packing::two_bit ? 8u : 10u, packing == tg::Packing::two_bit ? 6u : 7u}) {
      auto good = tg::rel::payload(packing, n);
      ASSERT_EQ(good.size(), tg::kHeaderBytes + 2);
      for (unsigned v = 0; v < 65536; ++v) {
        auto p = good;
        p[32] = static_cast<std::uint8_t>(v);
        p[33] = static_cast<std::uint8_t>(v >> 8);
        tg::fuzz::reseal(p);
        ++tried;
        valid_pairs += tg::fuzz::spec_decode(p).has_value();
        try {
          check_decode({codecs.front(), codecs.back()}, p);
        } catch (const PropertyViolation& e) {
          ADD_FAILURE() << tg::to_string(packing) << " n=" << n << " body " << v << ": " << e.what();
        }
      }
    }
  }
  // Counted by hand from the format: a 2bit byte is valid in 3^4 = 81 of 256 values, and with 2
  // padding codes in 3^2 = 9; a base3 byte in 243, with 3 padding digits in 9. So 81*81 + 81*9 = 7290
  // (2bit, n = 8 and 6) and 243*243 + 243*9 = 61236 (base3, n = 10 and 7).
  EXPECT_EQ(valid_pairs, 7290u + 61236u);
  std::printf("2-byte bodies with forged checksums: %zu tried, %zu valid per the format\n", tried, valid_pairs);
}

}  // namespace
