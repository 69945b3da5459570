// terngrad-bench: the training exchange's QSGD and EF-SignSGD codecs (baselines.cpp) against their
// definitions written out element by element below (the header's formulas: one Philox block per 4
// elements, one code at a time, sums in element order). The library draws its uniforms in batches and
// packs codes 32 bits at a time; the bytes, decoded values, residuals and errors must be the definition's.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tg/error.hpp"
#include "tg/philox.hpp"
#include "tg/train/baselines.hpp"

namespace {

using tg::train::qsgd_buckets;
using tg::train::qsgd_payload_bytes;
using tg::train::sign_payload_bytes;

// ---- the definitions ----

// Little-endian float32 at byte `at`.
void put_f32(std::vector<std::uint8_t>& out, std::size_t at, float v) {
  const auto bits = std::bit_cast<std::uint32_t>(v);
  out[at] = static_cast<std::uint8_t>(bits & 0xffu);
  out[at + 1] = static_cast<std::uint8_t>((bits >> 8) & 0xffu);
  out[at + 2] = static_cast<std::uint8_t>((bits >> 16) & 0xffu);
  out[at + 3] = static_cast<std::uint8_t>(bits >> 24);
}
float get_f32(const std::vector<std::uint8_t>& in, std::size_t at) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(in[at]) | static_cast<std::uint32_t>(in[at + 1]) << 8 |
                              static_cast<std::uint32_t>(in[at + 2]) << 16 | static_cast<std::uint32_t>(in[at + 3]) << 24);
}

int level_bits(int levels) {
  int b = 0;
  while ((1L << b) < static_cast<long>(levels) + 1) ++b;
  return b;
}

// Bit i of the body is bit i % 8 of byte i / 8.
void put_bit(std::vector<std::uint8_t>& out, std::size_t base, std::size_t i, unsigned bit) {
  if (bit) out[base + i / 8] = static_cast<std::uint8_t>(out[base + i / 8] | (1u << (i % 8)));
}
unsigned get_bit(const std::vector<std::uint8_t>& in, std::size_t base, std::size_t i) {
  return (in[base + i / 8] >> (i % 8)) & 1u;
}

std::vector<std::uint8_t> qsgd_encode_def(const std::vector<float>& g, int levels, std::uint64_t bucket,
                                          const tg::StreamKey& key) {
  const int lb = level_bits(levels), bits = lb + 1;
  const std::size_t n = g.size(), buckets = qsgd_buckets(n, bucket);
  const std::size_t width = bucket == 0 ? n : static_cast<std::size_t>(bucket);
  std::vector<std::uint8_t> out(qsgd_payload_bytes(n, levels, bucket), 0);
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t lo_k = b * width, hi_k = std::min(n, lo_k + width);
    // ||g_b||_2: squares summed in double in element order, the root rounded up to the next float32
    const double root = std::sqrt(std::accumulate(g.begin() + static_cast<std::ptrdiff_t>(lo_k),
                                                  g.begin() + static_cast<std::ptrdiff_t>(hi_k), 0.0,
                                                  [](double acc, float x) { return acc + static_cast<double>(x) * x; }));
    float norm = static_cast<float>(root);
    while (static_cast<double>(norm) < root) norm = std::nextafter(norm, std::numeric_limits<float>::infinity());
    put_f32(out, 4 * b, norm);
    const double scale = norm > 0.0f ? static_cast<double>(levels) / static_cast<double>(norm) : 0.0;
    for (std::size_t k = lo_k; k < hi_k; ++k) {
      const std::uint32_t u = tg::philox_block(key, static_cast<std::uint32_t>(k / 4)).v[k % 4];
      const double r = std::fabs(static_cast<double>(g[k])) * scale;
      const double lo = std::floor(r);
      const auto threshold = static_cast<std::uint64_t>((r - lo) * 4294967296.0);
      const std::uint32_t level = static_cast<std::uint32_t>(lo) + (u < threshold ? 1u : 0u);
      const std::uint32_t code = level | ((level != 0 && g[k] < 0.0f ? 1u : 0u) << lb);
      for (int i = 0; i < bits; ++i) put_bit(out, 4 * buckets, k * bits + i, (code >> i) & 1u);
    }
  }
  return out;
}

// The decoded values, or the error's message.
std::string qsgd_decode_def(const std::vector<std::uint8_t>& p, int levels, std::uint64_t bucket, std::vector<float>& out) {
  const int lb = level_bits(levels), bits = lb + 1;
  const std::size_t n = out.size(), buckets = qsgd_buckets(n, bucket);
  const std::size_t width = bucket == 0 ? n : static_cast<std::size_t>(bucket);
  for (std::size_t b = 0; b < buckets; ++b) {
    const float norm = get_f32(p, 4 * b);
    if (!std::isfinite(norm) || norm < 0.0f) return "QSGD payload has an invalid norm in bucket " + std::to_string(b);
    for (std::size_t k = b * width; k < std::min(n, b * width + width); ++k) {
      std::uint32_t code = 0;
      for (int i = 0; i < bits; ++i) code |= get_bit(p, 4 * buckets, k * bits + i) << i;
      const std::uint32_t level = code & ((1u << lb) - 1u);
      if (level > static_cast<std::uint32_t>(levels))
        return "QSGD payload: element " + std::to_string(k) + " has level " + std::to_string(level) + " above " +
               std::to_string(levels);
      const auto v = static_cast<float>(static_cast<double>(norm) * level / levels);
      out[k] = (code >> lb) & 1u ? -v : v;
    }
  }
  return "";
}

std::vector<std::uint8_t> sign_encode_def(const std::vector<float>& g, std::vector<float>& e) {
  const std::size_t n = g.size();
  std::vector<std::uint8_t> out(sign_payload_bytes(n), 0);
  double l1 = 0.0;
  for (std::size_t k = 0; k < n; ++k) {
    e[k] = g[k] + e[k];
    l1 += std::fabs(static_cast<double>(e[k]));
  }
  const float scale = n > 0 ? static_cast<float>(l1 / static_cast<double>(n)) : 0.0f;
  put_f32(out, 0, scale);
  for (std::size_t k = 0; k < n; ++k) {
    const bool negative = e[k] < 0.0f;
    put_bit(out, 4, k, negative);
    e[k] = e[k] - (negative ? -scale : scale);
  }
  return out;
}

// ---- inputs ----

// Gradients of several kinds: Gaussian, with exact zeros, integer multiples (ties of the levels), a
// subnormal scale, and a few large elements among small ones.
std::vector<float> gradient(std::size_t n, int kind, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (std::size_t k = 0; k < n; ++k) {
    float x = normal(rng);
    switch (kind) {
      case 0: g[k] = x; break;
      case 1: g[k] = (rng() % 3 == 0) ? 0.0f : x; break;
      case 2: g[k] = static_cast<float>(static_cast<int>(rng() % 9) - 4); break;
      case 3: g[k] = x * 1e-41f; break;
      default: g[k] = (rng() % 100 == 0) ? x * 1e4f : x * 1e-3f; break;
    }
  }
  return g;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

const std::size_t kSizes[] = {0, 1, 3, 4, 5, 17, 511, 512, 513, 4095, 4096, 4097, 9001};

TEST(QsgdBaseline, EncodeAndDecodeEqualTheDefinition) {
  const int levels_list[] = {1, 2, 3, 4, 5, 7, 8, 15, 16, 255, 256, 65535};
  const std::uint64_t bucket_list[] = {0, 1, 2, 3, 7, 512, 1000, 5000};
  int cases = 0;
  for (std::size_t n : kSizes)
    for (int kind = 0; kind < 5; ++kind) {
      const std::vector<float> g = gradient(n, kind, 1000 * n + static_cast<std::uint64_t>(kind));
      for (int levels : levels_list)
        for (std::uint64_t bucket : bucket_list) {
          if ((levels > 16 || bucket == 1000) && kind != 0) continue;  // keep the count down; shapes vary above
          const tg::StreamKey key{0x1234 + n, static_cast<std::uint32_t>(kind), tg::train::kQsgdTensorBase + 2,
                                  static_cast<std::uint32_t>(levels)};
          const std::vector<std::uint8_t> want = qsgd_encode_def(g, levels, bucket, key);
          std::vector<std::uint8_t> got(want.size(), 0xA5);
          tg::train::qsgd_encode(g, levels, bucket, key, 0, got);
          const std::string what = "n " + std::to_string(n) + " kind " + std::to_string(kind) + " levels " +
                                   std::to_string(levels) + " bucket " + std::to_string(bucket);
          ASSERT_EQ(got, want) << what;
          std::vector<float> a(n, -7.0f), b(n, -7.0f);
          ASSERT_EQ(qsgd_decode_def(want, levels, bucket, a), "") << what;
          tg::train::qsgd_decode(got, levels, bucket, b);
          ASSERT_TRUE(same_bits(a, b)) << what;
          ++cases;
        }
    }
  EXPECT_GT(cases, 1000);
}

// Arbitrary bodies (codes above the level count included) under valid and invalid norms: the same
// values, or the same error.
TEST(QsgdBaseline, DecodeOfArbitraryPayloadsEqualsTheDefinition) {
  std::mt19937_64 rng(5);
  int errors = 0, decoded = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const std::size_t n = kSizes[trial % 13];
    const int levels = 1 + static_cast<int>(rng() % 20);
    const std::uint64_t bucket = std::uint64_t{trial % 4 == 0 ? 0u : 1u + static_cast<unsigned>(rng() % 600)};
    std::vector<std::uint8_t> p(qsgd_payload_bytes(n, levels, bucket));
    for (auto& byte : p) byte = static_cast<std::uint8_t>(rng() % 8 == 0 ? 0xFF : rng());
    const std::size_t buckets = qsgd_buckets(n, bucket);
    for (std::size_t b = 0; b < buckets; ++b)  // mostly valid norms, now and then a negative or NaN one
      put_f32(p, 4 * b, rng() % 50 == 0 ? (rng() % 2 ? -1.0f : std::nanf("")) : static_cast<float>(rng() % 1000) / 7.0f);
    std::vector<float> a(n, -7.0f), b(n, -7.0f);
    const std::string want = qsgd_decode_def(p, levels, bucket, a);
    std::string got;
    try {
      tg::train::qsgd_decode(p, levels, bucket, b);
    } catch (const std::runtime_error& e) {
      got = e.what();
    }
    ASSERT_EQ(got, want) << "trial " << trial;
    if (want.empty()) {
      ASSERT_TRUE(same_bits(a, b)) << "trial " << trial;
      ++decoded;
    } else {
      ++errors;
    }
  }
  EXPECT_GT(errors, 100);  // both branches were exercised
  EXPECT_GT(decoded, 100);
}

TEST(SignEfBaseline, PayloadsAndResidualsEqualTheDefinitionOverSteps) {
  for (std::size_t n : kSizes)
    for (int kind = 0; kind < 5; ++kind) {
      std::vector<float> e_def(n, 0.0f), e_lib(n, 0.0f);
      for (int step = 0; step < 4; ++step) {
        const std::vector<float> g = gradient(n, kind, 77 * n + 5 * static_cast<std::uint64_t>(kind) + step);
        const std::vector<std::uint8_t> want = sign_encode_def(g, e_def);
        std::vector<std::uint8_t> got(want.size(), 0xA5);
        tg::train::signsgd_ef_encode(g, e_lib, 4, got);
        const std::string what = "n " + std::to_string(n) + " kind " + std::to_string(kind) + " step " + std::to_string(step);
        ASSERT_EQ(got, want) << what;
        ASSERT_TRUE(same_bits(e_def, e_lib)) << what;
        std::vector<float> d(n, -7.0f);
        tg::train::sign_decode(got, d);
        const float scale = get_f32(want, 0);
        for (std::size_t k = 0; k < n; ++k)
          ASSERT_EQ(d[k], get_bit(want, 4, k) ? -scale : scale) << what << " element " << k;
      }
    }
}

// A non-finite gradient, or a finite gradient whose sum with the residual overflows, is named by its
// index, and the residual is left as it was.
TEST(SignEfBaseline, NonFiniteInputLeavesTheResidualUnchanged) {
  std::vector<float> g(20, 1.0f), e(20, 0.5f);
  e[13] = std::numeric_limits<float>::max();
  g[13] = std::numeric_limits<float>::max();  // finite, but g + e overflows to +inf
  std::vector<std::uint8_t> out(sign_payload_bytes(20));
  const std::vector<float> before = e;
  try {
    tg::train::signsgd_ef_encode(g, e, 6, out);
    FAIL() << "an overflowing sum must throw";
  } catch (const tg::NonFiniteError& err) {
    EXPECT_EQ(err.tensor(), 6u);
    EXPECT_EQ(err.index(), 13u);
  }
  EXPECT_TRUE(same_bits(e, before));
  g[13] = 1.0f;
  g[4] = std::nanf("");
  try {
    tg::train::signsgd_ef_encode(g, e, 6, out);
    FAIL() << "a NaN gradient must throw";
  } catch (const tg::NonFiniteError& err) {
    EXPECT_EQ(err.index(), 4u);
  }
  EXPECT_TRUE(same_bits(e, before));
}

}  // namespace
