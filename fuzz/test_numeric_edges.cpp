// terngrad-bench: numeric edge cases on encode, every CPU implementation: NaN and +-Inf (typed error
// naming tensor and first bad index, also across thread ranges), subnormals (exact keep decisions),
// -0.0, FLT_MAX, and gradients whose ||g||_inf * ||g||_1 overflows float (identity in double).
//   build/<preset>/fuzz/tg_reliability_tests --gtest_filter='NumericEdges.*:Threads.*'
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <thread>

#include "checks.hpp"
#include "reliability_util.hpp"

namespace {

using tg::ErrorCode;
using tg::fuzz::bits_of_float;
using tg::fuzz::float_of_bits;

const float kInf = std::numeric_limits<float>::infinity();

std::vector<tg::Params> all_params(std::uint64_t float_below = 0) {
  std::vector<tg::Params> out;
  for (auto clip : {tg::ClipMode::none, tg::ClipMode::clip, tg::ClipMode::saturate})
    for (auto packing : {tg::Packing::two_bit, tg::Packing::base3}) {
      tg::Params p;
      p.clip = clip;
      p.packing = packing;
      p.float_below = float_below;
      out.push_back(p);
    }
  return out;
}

// Non-finite values by bit pattern: quiet NaN, negative quiet NaN, a signalling NaN, a NaN with a
// payload, +Inf, -Inf.
const std::vector<std::uint32_t> kNonFinite = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu,
                                               0x7f800000u, 0xff800000u};

void expect_non_finite(const std::function<void()>& fn, std::uint32_t tensor, std::uint64_t index,
                       const std::string& what) {
  try {
    fn();
    ADD_FAILURE() << what << ": accepted a non-finite gradient";
  } catch (const tg::NonFiniteError& e) {
    EXPECT_EQ(e.code(), ErrorCode::non_finite) << what;
    EXPECT_EQ(e.tensor(), tensor) << what;
    EXPECT_EQ(e.index(), index) << what << ": " << e.what();
    std::string msg = e.what();
    EXPECT_NE(msg.find(std::to_string(index)), std::string::npos) << what << ": message lacks the index: " << msg;
    EXPECT_NE(msg.find(std::to_string(tensor)), std::string::npos) << what << ": message lacks the tensor: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": wrong exception type: " << e.what();
  }
}

TEST(NumericEdges, NaNAndInfAreTypedErrorsNamingTheFirstBadIndex) {
  auto codecs = tg::cpu_codecs(2);
  std::size_t cases = 0;
  for (std::size_t n : {1, 9, 1000}) {
    for (std::uint32_t bad_bits : kNonFinite) {
      for (std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
        auto g = tg::rel::gaussian(n, n);
        g[at] = float_of_bits(bad_bits);
        if (at + 2 < n) g[at + 2] = -kInf;  // a later bad value must not be the one reported
        for (const auto& entry : codecs)
          for (const auto& p : all_params(n % 2 ? 0 : n + 1)) {  // n = 1000: the float32 path
            std::string what = entry.name + " n=" + std::to_string(n) + " bits=" + std::to_string(bad_bits) +
                               " at " + std::to_string(at) + " clip " + tg::to_string(p.clip);
            tg::StreamKey key{3, 1, 77, 5};
            expect_non_finite([&] { tg::encode(*entry.codec, g, p, key); }, 77, at, what + " encode");
            expect_non_finite([&] { tg::encode_with_scalar(*entry.codec, g, p, key, 1.0f); }, 77, at,
                              what + " encode_with_scalar");
            expect_non_finite([&] { tg::tensor_scalar(*entry.codec, g, p, 77); }, 77, at, what + " tensor_scalar");
            std::vector<std::int8_t> trits(n);
            expect_non_finite([&] { tg::ternarize(*entry.codec, g, p, key, trits); }, 77, at, what + " ternarize");
            ++cases;
          }
      }
    }
  }
  std::printf("non-finite cases: %zu (x 4 entry points)\n", cases);
}

TEST(NumericEdges, NonFiniteSharedScalarOrClipFactorIsRejected) {
  auto g = tg::rel::gaussian(16, 1);
  tg::Params p;
  for (float s : {std::nanf(""), kInf, -kInf, -1.0f}) {
    try {
      tg::encode_with_scalar(tg::reference_codec(), g, p, {}, s);
      ADD_FAILURE() << "accepted shared scalar " << s;
    } catch (const tg::Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    }
    float scalars[2] = {1.0f, s};
    EXPECT_THROW(tg::shared_scalar(scalars), tg::Error);
  }
  for (double c : {std::nan(""), HUGE_VAL, 0.0, -1.0, 1e-320, 9.99e-4, 1.0001e6}) {  // outside [1e-3, 1e6]
    tg::Params q;
    q.c = c;
    q.clip = tg::ClipMode::clip;
    try {
      tg::encode(tg::reference_codec(), g, q, {});
      ADD_FAILURE() << "accepted c = " << c;
    } catch (const tg::Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    }
  }
}

// Stream word u_k of element k (the documented Philox stream, pinned by known-answer tests).
std::uint32_t stream_word(const tg::StreamKey& key, std::size_t k) {
  return tg::philox_block(key, static_cast<std::uint32_t>(k / 4)).v[k % 4];
}

// The keep decision in exact arithmetic, independent of the codec's double formula: keep iff
// u < (|g| / s) 2^32, i.e. u * s < |g| * 2^32. With u < 2^32 and 24-bit float significands both
// products are exact in long double (64-bit significand, 15-bit exponent).
int exact_trit(float g, float s, std::uint32_t u) {
  long double lhs = static_cast<long double>(u) * static_cast<long double>(s);
  long double rhs = std::fabs(static_cast<long double>(g)) * 4294967296.0L;
  if (!(lhs < rhs)) return 0;
  return g < 0 ? -1 : 1;
}

// Subnormal gradients whose scalar is a power of two: the codec's double threshold |g| * (2^32 / s)
// is then exact, so its decisions must equal the exact ones element by element (no flush to zero,
// no rounding). Elements are multiples of the smallest subnormal 2^-149.
TEST(NumericEdges, SubnormalGradientsGiveExactDecisions) {
  std::mt19937_64 rng(2024);
  const float tiny = std::numeric_limits<float>::denorm_min();
  for (int scalar_exp : {-149, -140, -130, -127}) {  // all subnormal (below FLT_MIN = 2^-126)
    float s = std::ldexp(1.0f, scalar_exp);
    ASSERT_LT(s, FLT_MIN);
    ASSERT_GT(s, 0.0f);
    std::size_t n = 333;
    std::vector<float> g(n);
    std::uint64_t steps = std::uint64_t(s / tiny);  // s in units of 2^-149
    for (std::size_t k = 0; k < n; ++k) {
      float mag = tiny * static_cast<float>(rng() % (steps + 1));
      g[k] = (rng() & 1) ? -mag : mag;
    }
    g[17] = -s;  // the maximum is attained
    for (const auto& entry : tg::cpu_codecs(2))
      for (auto packing : {tg::Packing::two_bit, tg::Packing::base3}) {
        tg::Params p;
        p.packing = packing;
        tg::StreamKey key{99, 0, 4, static_cast<std::uint32_t>(scalar_exp + 200)};
        auto d = tg::decode(*entry.codec, tg::encode(*entry.codec, g, p, key));
        ASSERT_EQ(bits_of_float(d.header.scalar), bits_of_float(s)) << entry.name;
        std::size_t kept = 0;
        for (std::size_t k = 0; k < n; ++k) {
          int want = exact_trit(g[k], s, stream_word(key, k));
          ASSERT_EQ(bits_of_float(d.values[k]), bits_of_float(s * static_cast<float>(want)))
              << entry.name << " 2^" << scalar_exp << " element " << k << " g=" << g[k];
          kept += want != 0;
        }
        EXPECT_GT(kept, 0u);
      }
  }
}

TEST(NumericEdges, NegativeZeroIsZero) {
  for (const auto& entry : tg::cpu_codecs(2))
    for (const auto& p : all_params()) {
      std::vector<float> zeros(37, -0.0f);
      auto d = tg::decode(*entry.codec, tg::encode(*entry.codec, zeros, p, {5, 0, 0, 0}));
      EXPECT_EQ(bits_of_float(d.header.scalar), 0u) << entry.name << ": scalar of an all -0.0 tensor is not +0.0";
      for (float v : d.values) EXPECT_EQ(v, 0.0f);
      // mixed: -0.0 elements must never be kept, whatever the stream word, over many steps
      auto g = tg::rel::gaussian(64, 8);
      for (std::size_t k = 0; k < g.size(); k += 3) g[k] = -0.0f;
      for (std::uint32_t step = 0; step < 50; ++step) {
        auto m = tg::decode(*entry.codec, tg::encode(*entry.codec, g, p, {5, 0, 0, step}));
        for (std::size_t k = 0; k < g.size(); k += 3) ASSERT_EQ(m.values[k], 0.0f) << entry.name << " step " << step;
      }
    }
}

TEST(NumericEdges, FltMaxIsEncodedExactly) {
  std::vector<float> g = {FLT_MAX, -FLT_MAX, 0.0f, -0.0f, FLT_MIN, -1.0f, FLT_MAX, -FLT_MAX};
  for (const auto& entry : tg::cpu_codecs(2)) {
    // in double: mean = (FLT_MIN - 1) / 8 (the FLT_MAX pairs cancel), var = 4 FLT_MAX^2 / 8 to within
    // 1e-38 relative, sigma = FLT_MAX / sqrt(2); c sigma with c = 2.5 exceeds FLT_MAX, so clipping
    // leaves s = FLT_MAX.
    tg::Moments m = entry.codec->moments(g);
    EXPECT_TRUE(std::isfinite(m.mean) && std::isfinite(m.sigma)) << entry.name;
    EXPECT_NEAR(m.sigma / (static_cast<double>(FLT_MAX) / std::sqrt(2.0)), 1.0, 1e-15) << entry.name;
    for (const auto& p : all_params()) {
      auto d = tg::decode(*entry.codec, tg::encode(*entry.codec, g, p, {1, 2, 3, 4}));
      ASSERT_EQ(d.header.scalar, FLT_MAX) << entry.name << " " << tg::to_string(p.clip);
      EXPECT_EQ(d.values[0], FLT_MAX);
      EXPECT_EQ(d.values[1], -FLT_MAX);
      EXPECT_EQ(d.values[2], 0.0f);
      EXPECT_EQ(d.values[3], 0.0f);
      EXPECT_EQ(d.values[6], FLT_MAX);
      EXPECT_EQ(d.values[7], -FLT_MAX);
      for (float v : d.values) EXPECT_TRUE(v == 0.0f || std::fabs(v) == FLT_MAX);
    }
    // a tensor of identical FLT_MAX values: mean FLT_MAX, sigma exactly 0, so clipping to c*0 zeroes it
    std::vector<float> same(100, FLT_MAX);
    tg::Moments ms = entry.codec->moments(same);
    EXPECT_EQ(ms.mean, static_cast<double>(FLT_MAX)) << entry.name;
    EXPECT_EQ(ms.sigma, 0.0) << entry.name;
    tg::Params none;
    auto d = tg::decode(*entry.codec, tg::encode(*entry.codec, same, none, {}));
    for (float v : d.values) EXPECT_EQ(v, FLT_MAX);
  }
}

// ||g||_inf * ||g||_1 in float overflows past ~3.4e38; the identity is computed in double.
// g = {2^70, 2^69, -2^68}: inf = 2^70, l1 = 7 * 2^68, l2^2 = 21 * 2^136, so
// inf * l1 - l2^2 = 28 * 2^136 - 21 * 2^136 = 7 * 2^136 (about 6.1e41), exact in double.
TEST(NumericEdges, VarianceIdentityDoesNotOverflowInDouble) {
  std::vector<float> g = {std::ldexp(1.0f, 70), std::ldexp(1.0f, 69), -std::ldexp(1.0f, 68)};
  float inf_f = std::ldexp(1.0f, 70), l1_f = 7 * std::ldexp(1.0f, 68);
  ASSERT_TRUE(std::isinf(inf_f * l1_f));  // the float product does overflow
  EXPECT_EQ(tg::variance_identity(g), std::ldexp(7.0, 136));
  EXPECT_EQ(tg::variance_for_scalar(g, std::ldexp(1.0, 70)), std::ldexp(7.0, 136));
  // 4096 equal magnitudes 2^100: inf * l1 = 2^212 (beyond float by 84 binary orders), identity 0 exactly
  std::vector<float> flat(4096, std::ldexp(1.0f, 100));
  for (std::size_t k = 0; k < flat.size(); k += 2) flat[k] = -flat[k];
  EXPECT_EQ(tg::variance_identity(flat), 0.0);
  // FLT_MAX-sized gradient: identity finite in double
  std::vector<float> big = {FLT_MAX, -FLT_MAX / 2, FLT_MAX / 4};
  double want = static_cast<double>(FLT_MAX) * (1.75 * FLT_MAX) - (1.0 + 0.25 + 0.0625) * FLT_MAX * static_cast<double>(FLT_MAX);
  EXPECT_TRUE(std::isfinite(tg::variance_identity(big)));
  EXPECT_NEAR(tg::variance_identity(big) / want, 1.0, 1e-15);
  // and such gradients encode: elements at max|g| are always kept, others are 0 or +-s
  for (const auto& entry : tg::cpu_codecs(2)) {
    auto d = tg::decode(*entry.codec, tg::encode(*entry.codec, g, {}, {7, 0, 0, 0}));
    EXPECT_EQ(d.header.scalar, std::ldexp(1.0f, 70));
    EXPECT_EQ(d.values[0], std::ldexp(1.0f, 70));
    for (float v : d.values) EXPECT_TRUE(v == 0.0f || std::fabs(v) == std::ldexp(1.0f, 70));
  }
}

// ---- threads: the multi-threaded paths (also run under ThreadSanitizer by scripts/memcheck.sh) ----
// The optimized codec splits work only above kMinPerThread = 1,024,000 elements per thread
// (codec/src/cpu/optimized.cpp); kSplitSize with 4 threads gives 4 ranges at that threshold.
constexpr std::size_t kSplitSize = 4200000;

// Bad values in two different thread ranges: the lowest index must be reported, whatever the timing.
TEST(Threads, NonFiniteIndexIsTheFirstAcrossThreadRanges) {
  std::size_t n = kSplitSize + 1;
  auto g = tg::rel::gaussian(n, 3);
  auto codec = tg::make_optimized_codec(4);
  for (std::size_t first : {std::size_t{5}, std::size_t{1500000}, n - 1}) {
    auto h = g;
    h[first] = std::nanf("");
    if (first < 3500000) h[3500000] = kInf;
    for (int repeat = 0; repeat < 3; ++repeat)
      expect_non_finite([&] { tg::encode(*codec, h, {}, {1, 0, 9, 0}); }, 9, first,
                        codec->name() + " first bad at " + std::to_string(first));
  }
}

TEST(Threads, ThreadedEncodeAndDecodeMatchTheReference) {
  std::size_t n = kSplitSize + 3;
  auto g = tg::rel::gaussian(n, 21);
  for (std::size_t k = 0; k < n; k += 97) g[k] = std::numeric_limits<float>::denorm_min() * float(k % 5);
  g[12345] = FLT_MAX / 8;
  auto params = all_params();
  for (const auto& p : {params[0], params[3]}) {  // none/2bit and clip/base3
    tg::StreamKey key{77, 1, 2, 3};
    auto want = tg::encode(tg::reference_codec(), g, p, key);
    auto codec = tg::make_optimized_codec(4);
    EXPECT_EQ(tg::encode(*codec, g, p, key), want) << tg::to_string(p.clip) << " " << tg::to_string(p.packing);
    auto a = tg::decode(tg::reference_codec(), want), b = tg::decode(*codec, want);
    EXPECT_EQ(std::memcmp(a.values.data(), b.values.data(), 4 * n), 0);
    EXPECT_EQ(tg::decode_trits(tg::reference_codec(), want), tg::decode_trits(*codec, want));
  }
}

// A corrupted byte deep in a large body (with a recomputed CRC) is found by the threaded decoder,
// which reports the same first bad byte as the reference.
TEST(Threads, ThreadedDecoderReportsTheFirstInvalidByte) {
  auto g = tg::rel::gaussian(kSplitSize, 4);
  tg::Params p;
  auto codec = tg::make_optimized_codec(4);
  auto good = tg::encode(*codec, g, p, {1, 1, 1, 1});
  ASSERT_EQ(good.size(), 32u + kSplitSize / 4);
  for (std::size_t at : {std::size_t{40}, std::size_t{400000}, std::size_t{900000}}) {
    auto bad = good;
    bad[32 + at] = 0xff;              // code 11
    bad[32 + at + 20000] |= 0xC0;     // and a later one
    tg::fuzz::reseal(bad);
    std::string want, got;
    try {
      tg::decode(tg::reference_codec(), bad);
    } catch (const tg::Error& e) {
      want = e.what();
    }
    try {
      tg::decode(*codec, bad);
    } catch (const tg::Error& e) {
      got = e.what();
      EXPECT_EQ(e.code(), ErrorCode::invalid_code);
    }
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(got, want);
    EXPECT_NE(got.find("byte " + std::to_string(at)), std::string::npos) << got;
  }
}

// One codec's worker threads serve call after call (codec/src/cpu/optimized.cpp, WorkerPool): tensors split
// into 4, 2, 1 and 3 parts in turn (a worker with no part in a call must sit it out and still run the next),
// clipping (several parallel passes per encode), a failing call (the error of the lowest range), and a good
// call after it: every result is the reference's.
TEST(Threads, OneCodecsWorkersServeCallsOfEveryPartCount) {
  auto codec = tg::make_optimized_codec(4);
  auto params = all_params();
  std::uint32_t step = 0;
  for (std::size_t n : {kSplitSize, std::size_t{450000}, std::size_t{100000}, std::size_t{700001}, kSplitSize + 1}) {
    auto g = tg::rel::gaussian(n, static_cast<unsigned>(n % 1000));
    for (const auto& p : {params[0], params[3]}) {  // none/2bit and clip/base3
      tg::StreamKey key{5, 0, 1, step++};
      EXPECT_EQ(tg::encode(*codec, g, p, key), tg::encode(tg::reference_codec(), g, p, key))
          << n << " elements, " << tg::to_string(p.clip);
    }
    if (n == kSplitSize) {  // a NaN in the last range: the call fails, the next ones still run
      auto h = g;
      h[n - 2] = std::nanf("");
      expect_non_finite([&] { tg::encode(*codec, h, {}, {1, 0, 4, 0}); }, 4, n - 2, "pool, NaN in the last range");
    }
  }
}

// Several threads encode with one codec at once: one call holds the workers, the others start threads of
// their own; each gets the reference's bytes.
TEST(Threads, ConcurrentCallersOfOneCodec) {
  auto codec = tg::make_optimized_codec(2);
  auto g = tg::rel::gaussian(1000003, 8);
  std::vector<std::vector<std::uint8_t>> want(3);
  for (std::uint32_t t = 0; t < 3; ++t) want[t] = tg::encode(tg::reference_codec(), g, {}, {3, 0, t, 0});
  std::vector<int> wrong(3, 0);
  std::vector<std::thread> callers;
  for (std::uint32_t t = 0; t < 3; ++t)
    callers.emplace_back([&, t] {
      for (int r = 0; r < 3; ++r) wrong[t] += tg::encode(*codec, g, {}, {3, 0, t, 0}) != want[t];
    });
  for (auto& c : callers) c.join();
  for (std::uint32_t t = 0; t < 3; ++t) EXPECT_EQ(wrong[t], 0) << "caller " << t;
}

// Tensors between the two thread thresholds (OptimizedCodec::parts_for: 2 or 3 parts from 51,200 elements
// while the workers poll, from 409,600 while they sleep) wake the workers without waiting for them; with
// three callers of one codec the wake-ups race with the calls that hold the workers and with larger tensors.
// Each caller gets the reference's bytes (also run under ThreadSanitizer: scripts/memcheck.sh tsan).
TEST(Threads, WakeUpsRaceWithCallsOfOneCodec) {
  auto codec = tg::make_optimized_codec(3);
  const std::vector<std::size_t> sizes = {100003, 60000, 450001};
  std::vector<std::vector<float>> g;
  std::vector<std::vector<std::uint8_t>> want;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    g.push_back(tg::rel::gaussian(sizes[i], static_cast<unsigned>(i + 30)));
    want.push_back(tg::encode(tg::reference_codec(), g[i], {}, {4, 0, static_cast<std::uint32_t>(i), 0}));
  }
  std::vector<int> wrong(3, 0);
  std::vector<std::thread> callers;
  for (std::size_t t = 0; t < 3; ++t)
    callers.emplace_back([&, t] {
      for (int r = 0; r < 6; ++r) {
        const std::size_t i = (t + static_cast<std::size_t>(r)) % sizes.size();
        wrong[t] += tg::encode(*codec, g[i], {}, {4, 0, static_cast<std::uint32_t>(i), 0}) != want[i];
      }
    });
  for (auto& c : callers) c.join();
  for (std::size_t t = 0; t < 3; ++t) EXPECT_EQ(wrong[t], 0) << "caller " << t;
  for (int r = 0; r < 20; ++r) EXPECT_EQ(tg::encode(*codec, g[0], {}, {4, 0, 0, 0}), want[0]) << "alone, call " << r;
}

}  // namespace
