// terngrad-bench: exhaustive corruption of small valid payloads of each packing: every single-bit
// flip, every double-bit flip, every byte value at every position, every truncation and extension,
// and bodies forged with recomputed checksums, decoded by every CPU implementation.
//   ctest --test-dir build/<preset> -L reliability     (or build/.../fuzz/tg_reliability_tests)
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "checks.hpp"
#include "reliability_util.hpp"

namespace {

using tg::ErrorCode;
using tg::fuzz::check_decode;
using tg::fuzz::PropertyViolation;
using tg::rel::small_payloads;

// What a single corrupted byte at `offset` must be reported as: the magic and the version are
// checked first, everything else in the header is covered by the header CRC (bytes 28..31 are that
// CRC), and the body by the body CRC.
ErrorCode expected_code(std::size_t offset) {
  if (offset < 4) return ErrorCode::bad_magic;
  if (offset < 6) return ErrorCode::bad_version;
  return ErrorCode::crc_mismatch;
}

// Decodes with every implementation and returns how many accepted the payload; records a failure
// for any outcome other than tg::Error with code `want` (when given).
int decode_all(const std::vector<tg::CodecEntry>& codecs, const std::vector<std::uint8_t>& p,
               std::optional<ErrorCode> want, const std::string& what) {
  int accepted = 0;
  for (const auto& entry : codecs) {
    try {
      tg::decode(*entry.codec, p);
      ++accepted;
      ADD_FAILURE() << entry.name << " decoded " << what << " as a valid payload";
    } catch (const tg::Error& e) {
      if (want) {
        EXPECT_EQ(e.code(), *want) << entry.name << " " << what << ": " << e.what();
      }
    }
  }
  return accepted;
}

// Single-bit errors. CRC32C's generator G(x) has degree 32 and a nonzero constant term, so it does
// not divide x^i for any i: the remainder of a one-bit error pattern E(x) = x^i is never zero, and
// every single flipped bit in a CRC-covered region changes the checksum. Bytes 0..27 of the header
// are covered by the header CRC, bytes 28..31 are that CRC (a flip there makes it disagree with the
// covered bytes), and the body is covered by the body CRC. Hence no flip can decode; the test still
// decodes every one, and counts any that does as a failure naming the bit.
TEST(Corruption, EverySingleBitFlipIsRejected) {
  auto codecs = tg::cpu_codecs(2);
  std::size_t tried = 0, accepted = 0;
  for (const auto& [name, good] : small_payloads()) {
    for (std::size_t bit = 0; bit < 8 * good.size(); ++bit) {
      auto p = good;
      p[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
      accepted += decode_all(codecs, p, expected_code(bit / 8), name + " with bit " + std::to_string(bit) + " flipped");
      ++tried;
    }
  }
  EXPECT_EQ(accepted, 0u);
  RecordProperty("single_bit_flips", static_cast<int>(tried));
  std::printf("single-bit flips: %zu payload variants x %zu implementations, %zu accepted\n", tried,
              codecs.size(), accepted);
}

TEST(Corruption, EveryTruncationAndExtensionIsRejected) {
  auto codecs = tg::cpu_codecs(2);
  std::size_t tried = 0;
  for (const auto& [name, good] : small_payloads()) {
    for (std::size_t len = 0; len < good.size(); ++len, ++tried)
      decode_all(codecs, {good.begin(), good.begin() + len}, ErrorCode::truncated,
                 name + " cut to " + std::to_string(len) + " bytes");
    for (std::size_t extra = 1; extra <= 5; ++extra, ++tried) {
      auto p = good;
      p.insert(p.end(), extra, 0);
      decode_all(codecs, p, ErrorCode::length_mismatch, name + " with " + std::to_string(extra) + " zero bytes appended");
    }
  }
  std::printf("truncations and extensions: %zu tried\n", tried);
}

// An adversary who recomputes both checksums: every value of every body byte of small ternary
// payloads (every pair of values of 2-byte bodies: test_exhaustive.cpp). The decoder must accept exactly the bodies
// the format allows (no code 11, no base3 byte above 242, zero padding) and return their trits;
// tg::fuzz::spec_decode states the format independently of the codec sources.
TEST(Corruption, ForgedChecksumsReachTheBodyValidation) {
  auto codecs = tg::cpu_codecs(2);
  std::size_t tried = 0, valid = 0;
  for (auto packing : {tg::Packing::two_bit, tg::Packing::base3}) {
    for (std::size_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}) {
      auto good = tg::rel::payload(packing, n);
      for (std::size_t at = tg::kHeaderBytes; at < good.size(); ++at)
        for (unsigned v = 0; v < 256; ++v) {
          auto p = good;
          p[at] = static_cast<std::uint8_t>(v);
          tg::fuzz::reseal(p);
          ++tried;
          valid += tg::fuzz::spec_decode(p).has_value();
          try {
            check_decode(codecs, p);
          } catch (const PropertyViolation& e) {
            ADD_FAILURE() << tg::to_string(packing) << " n=" << n << " byte " << at << " = " << v << ": " << e.what();
          }
        }
    }
  }
  EXPECT_GT(valid, 0u);
  EXPECT_LT(valid, tried);
  std::printf("forged-checksum bodies: %zu tried, %zu valid per the format\n", tried, valid);
}

// Header fields with a recomputed header CRC: every packing id and reserved byte, awkward scalars
// and counts. Outcomes must match the format (spec_decode) on every implementation.
TEST(Corruption, ForgedHeadersMatchTheFormat) {
  auto codecs = tg::cpu_codecs(2);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> scalars = {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), 1.0f, FLT_MAX,
                                -1.0f, -FLT_MAX, inf, -inf, std::nanf(""), -std::nanf("")};
  std::size_t tried = 0;
  auto check = [&](const std::vector<std::uint8_t>& p, const std::string& what) {
    ++tried;
    try {
      check_decode(codecs, p);
    } catch (const PropertyViolation& e) {
      ADD_FAILURE() << what << ": " << e.what();
    }
  };
  for (const auto& [name, good] : small_payloads()) {
    for (unsigned v = 0; v < 256; ++v) {
      auto p = good;
      p[6] = static_cast<std::uint8_t>(v);
      tg::fuzz::reseal(p);
      check(p, name + " packing id " + std::to_string(v));
      p = good;
      p[7] = static_cast<std::uint8_t>(v);
      tg::fuzz::reseal(p);
      check(p, name + " reserved byte " + std::to_string(v));
    }
    for (float s : scalars) {
      auto p = good;
      std::memcpy(p.data() + 16, &s, 4);
      tg::fuzz::reseal(p);
      check(p, name + " scalar " + std::to_string(s));
    }
    for (unsigned version = 0; version < 4; ++version) {
      auto p = good;
      p[4] = static_cast<std::uint8_t>(version);
      tg::fuzz::reseal(p);
      check(p, name + " version " + std::to_string(version));
    }
    std::uint64_t count = tg::fuzz::load_u64(good.data() + 8);
    for (std::int64_t delta = -6; delta <= 6; ++delta) {
      auto p = good;
      std::uint64_t c = count + static_cast<std::uint64_t>(delta);
      for (int i = 0; i < 8; ++i) p[8 + i] = static_cast<std::uint8_t>(c >> (8 * i));
      tg::fuzz::reseal(p);
      check(p, name + " count " + std::to_string(c));
    }
  }
  std::printf("forged headers: %zu tried\n", tried);
}

}  // namespace
