// terngrad-bench: wire format tests: hand-derived layout bytes, golden payloads from the independent
// Python implementation (codec/tests/data/golden_payloads.txt), and every way the decoder must refuse input.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "test_util.hpp"
#include "tg/codec.hpp"

namespace {

using tg::ErrorCode;

// Trits {+1, 0, -1, +1, -1}: 2bit byte0 = 01 | 00<<2 | 10<<4 | 01<<6 = 0x61, byte1 = 10 = 0x02;
// base3 byte0 = 1 + 0*3 + 2*9 + 1*27 + 2*81 = 208. Derived by hand from the layout in tg/format.hpp.
TEST(Layout, TwoBitAndBase3ByHand) {
  const tg::Codec& ref = tg::reference_codec();
  std::vector<std::int8_t> trits(5, 99);
  ref.unpack(tg::Packing::two_bit, std::vector<std::uint8_t>{0x61, 0x02}, trits);
  EXPECT_EQ(trits, (std::vector<std::int8_t>{1, 0, -1, 1, -1}));
  std::fill(trits.begin(), trits.end(), 99);
  ref.unpack(tg::Packing::base3, std::vector<std::uint8_t>{208}, trits);
  EXPECT_EQ(trits, (std::vector<std::int8_t>{1, 0, -1, 1, -1}));
}

TEST(Crc32c, CheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(tg::crc32c({reinterpret_cast<const std::uint8_t*>(s), 9}), 0xe3069283u);
  EXPECT_EQ(tg::crc32c({}), 0u);
}

// Long inputs take three interleaved chains joined by the zero-byte operator (format.cpp): against a
// bit-at-a-time CRC32C (reflected polynomial 0x82F63B78, initial and final xor 0xffffffff) at sizes
// around the split (2^16 bytes) and with every remainder modulo 24 (the chains take whole 8-byte words
// of each third).
TEST(Crc32c, LongInputsMatchTheBitwiseDefinition) {
  auto bitwise = [](const std::vector<std::uint8_t>& b, std::size_t n) {
    std::uint32_t c = 0xffffffffu;
    for (std::size_t i = 0; i < n; ++i) {
      c ^= b[i];
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
  };
  std::mt19937 rng(7);
  std::vector<std::uint8_t> b((std::size_t{1} << 20) + 64);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  std::vector<std::size_t> sizes = {65535, 65536, 65537, (std::size_t{1} << 20) + 61};
  for (std::size_t r = 0; r < 24; ++r) sizes.push_back(3 * 65536 + r);
  for (std::size_t n : sizes) EXPECT_EQ(tg::crc32c({b.data(), n}), bitwise(b, n)) << "n=" << n;
  std::vector<std::uint8_t> zeros(200000, 0);
  EXPECT_EQ(tg::crc32c(zeros), bitwise(zeros, zeros.size()));
}

// crc32c_combine(crc(A), crc(B), |B|) == crc(A B) at split points around the zero-byte operators' powers of
// two and the three-chain split, with empty parts; and every codec's checksum (the optimized codec's in parts
// on its threads, from 1 MiB per thread) equals crc32c at sizes around its part boundaries.
TEST(Crc32c, CombinedPartsEqualTheWholeAndEveryCodecsChecksum) {
  std::mt19937 rng(11);
  std::vector<std::uint8_t> b((std::size_t{3} << 20) + 4099);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  const std::span<const std::uint8_t> all(b);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{9}, std::size_t{65537}, b.size()})
    for (std::size_t a : {std::size_t{0}, std::size_t{1}, n / 3, n / 2 + 1, n > 0 ? n - 1 : 0, n}) {
      if (a > n) continue;
      const std::uint32_t whole = tg::crc32c(all.first(n));
      EXPECT_EQ(tg::crc32c_combine(tg::crc32c(all.first(a)), tg::crc32c(all.subspan(a, n - a)), n - a), whole)
          << "n=" << n << " split=" << a;
      const std::size_t c = a + (n - a) / 2;  // three parts, combined left to right
      EXPECT_EQ(tg::crc32c_combine(tg::crc32c_combine(tg::crc32c(all.first(a)), tg::crc32c(all.subspan(a, c - a)), c - a),
                                   tg::crc32c(all.subspan(c, n - c)), n - c),
                whole)
          << "n=" << n << " splits=" << a << "," << c;
    }
  std::vector<tg::CodecEntry> codecs = tg::cpu_codecs(2);
  for (unsigned t : {3u, 4u, 8u}) codecs.push_back({"optimized, " + std::to_string(t) + " threads", tg::make_optimized_codec(t)});
  const std::size_t mib = std::size_t{1} << 20;
  for (const auto& entry : codecs)
    for (std::size_t n : {std::size_t{0}, std::size_t{5}, 2 * mib - 1, 2 * mib, 2 * mib + 1, 3 * mib + 7, b.size()})
      EXPECT_EQ(entry.codec->checksum(all.first(n)), tg::crc32c(all.first(n))) << entry.name << " n=" << n;
}

TEST(Golden, EveryImplementationReproducesThePythonPayloads) {
  auto cases = tg::test::read_golden();
  ASSERT_GE(cases.size(), 8u);
  for (const auto& entry : tg::cpu_codecs(3)) {
    for (const auto& c : cases) {
      auto got = tg::encode(*entry.codec, c.input, c.params, c.key);
      EXPECT_EQ(tg::test::hex(got), tg::test::hex(c.payload)) << entry.name << " case " << c.name;
      auto d = tg::decode(*entry.codec, c.payload);
      EXPECT_EQ(d.values.size(), c.input.size());
    }
  }
}

std::vector<std::uint8_t> sample_payload(tg::Packing packing, std::size_t n = 37) {
  tg::Params p;
  p.packing = packing;
  return tg::encode(tg::reference_codec(), tg::test::gaussian(n, 5), p, {1, 2, 3, 4});
}

void expect_error(std::vector<std::uint8_t> payload, ErrorCode code, const char* what) {
  for (const auto& entry : tg::cpu_codecs(2)) {
    try {
      tg::decode(*entry.codec, payload);
      ADD_FAILURE() << entry.name << ": accepted " << what;
    } catch (const tg::Error& e) {
      EXPECT_EQ(e.code(), code) << entry.name << " " << what << ": " << e.what();
    }
  }
}

// Rewrites the header CRC so that a test reaches the check after it.
void reseal(std::vector<std::uint8_t>& p) {
  std::uint32_t crc = tg::crc32c({p.data(), 28});
  for (int i = 0; i < 4; ++i) p[28 + i] = static_cast<std::uint8_t>(crc >> (8 * i));
}
void reseal_body(std::vector<std::uint8_t>& p) {
  std::uint32_t crc = tg::crc32c({p.data() + 32, p.size() - 32});
  for (int i = 0; i < 4; ++i) p[24 + i] = static_cast<std::uint8_t>(crc >> (8 * i));
  reseal(p);
}

TEST(Decoder, RejectsMalformedPayloads) {
  for (auto packing : {tg::Packing::two_bit, tg::Packing::base3}) {
    auto good = sample_payload(packing);
    for (std::size_t len = 0; len < good.size(); ++len)
      expect_error({good.begin(), good.begin() + len}, ErrorCode::truncated, "a truncated payload");
    auto p = good;
    p[0] = 'X';
    expect_error(p, ErrorCode::bad_magic, "wrong magic");
    p = good;
    p[4] = 2;
    expect_error(p, ErrorCode::bad_version, "version 2");
    p = good;
    p[28] ^= 1;
    expect_error(p, ErrorCode::crc_mismatch, "a bad header CRC");
    p = good;
    p[6] = 7;
    reseal(p);
    expect_error(p, ErrorCode::bad_packing, "packing id 7");
    p = good;
    p[7] = 1;
    reseal(p);
    expect_error(p, ErrorCode::bad_packing, "a nonzero reserved byte");
    p = good;
    p.back() ^= 0x10;
    expect_error(p, ErrorCode::crc_mismatch, "a body bit flip");
    p = good;
    p.push_back(0);
    expect_error(p, ErrorCode::length_mismatch, "a trailing byte");
    for (std::uint64_t count : {std::uint64_t{1} << 34 | 1, ~std::uint64_t{0}, ~std::uint64_t{0} / 4 + 1}) {
      p = good;
      for (int i = 0; i < 8; ++i) p[8 + i] = static_cast<std::uint8_t>(count >> (8 * i));
      reseal(p);
      expect_error(p, ErrorCode::length_overflow, "an element count past 2^34");
    }
    p = good;
    p[8] = static_cast<std::uint8_t>(p[8] + 40);  // claims 40 more elements than bytes present
    reseal(p);
    expect_error(p, ErrorCode::truncated, "more elements than bytes");
    float bad_scalars[] = {-1.0f, std::numeric_limits<float>::infinity(), std::nanf("")};
    for (float s : bad_scalars) {
      p = good;
      std::memcpy(p.data() + 16, &s, 4);
      reseal(p);
      expect_error(p, ErrorCode::invalid_code, "a negative, infinite or NaN scalar");
    }
  }
}

TEST(Decoder, RejectsInvalidCodesWithValidChecksums) {
  auto p = sample_payload(tg::Packing::two_bit, 37);
  p[32 + 3] = 0xC0;  // code 11 in element 15
  reseal_body(p);
  expect_error(p, ErrorCode::invalid_code, "2bit code 11");
  p = sample_payload(tg::Packing::two_bit, 37);
  p.back() = 0x04;  // padding bits of the last byte (37 elements: one used code) set
  reseal_body(p);
  expect_error(p, ErrorCode::invalid_code, "nonzero 2bit padding");
  p = sample_payload(tg::Packing::base3, 37);
  p[32 + 2] = 243;
  reseal_body(p);
  expect_error(p, ErrorCode::invalid_code, "base3 byte 243");
  p = sample_payload(tg::Packing::base3, 37);
  p.back() = 2 + 2 * 3 + 1 * 9;  // 37 = 7*5 + 2: digit 2 is padding
  reseal_body(p);
  expect_error(p, ErrorCode::invalid_code, "nonzero base3 padding digit");
}

TEST(Decoder, RejectsFloat32PayloadsTheEncoderNeverWrites) {
  tg::Params params;
  params.float_below = 100;
  auto good = tg::encode(tg::reference_codec(), tg::test::gaussian(9, 3), params, {});
  auto p = good;
  float one = 1.0f;
  std::memcpy(p.data() + 16, &one, 4);  // scalar field must be 0 for float32 bodies
  reseal(p);
  expect_error(p, ErrorCode::invalid_code, "a float32 payload with a scalar");
  p = good;
  std::uint32_t nan_bits = 0x7fc00000u;
  std::memcpy(p.data() + 32 + 4 * 5, &nan_bits, 4);
  reseal_body(p);
  expect_error(p, ErrorCode::invalid_code, "a float32 payload holding NaN");
}

TEST(Decoder, FloatPayloadsRoundTripBelowTheSizeThreshold) {
  tg::Params p;
  p.float_below = 100;
  auto g = tg::test::gaussian(99, 3);
  auto payload = tg::encode(tg::reference_codec(), g, p, {1, 0, 4, 0});
  EXPECT_EQ(payload.size(), 32u + 4 * 99);
  auto d = tg::decode(tg::reference_codec(), payload);
  EXPECT_EQ(d.header.packing, tg::Packing::float32);
  EXPECT_EQ(d.header.tensor, 4u);
  EXPECT_EQ(d.values, g);
  auto big = tg::test::gaussian(100, 3);
  EXPECT_EQ(tg::decode(tg::reference_codec(), tg::encode(tg::reference_codec(), big, p, {})).header.packing,
            tg::Packing::two_bit);
}

}  // namespace
