// terngrad-bench: tests of the battery's gradient families (tg/verify/families.hpp): sizes, the
// Philox derivation recomputed independently, determinism across seeds, moments, and the exact bin
// counts of the keep-probability ladder. Run: ctest -R tg_verify_tests
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <cstdint>
#include <string>
#include <vector>

#include "tg/error.hpp"
#include "tg/philox.hpp"
#include "tg/verify/families.hpp"

namespace tg::verify {
namespace {

bool is_random_family(const std::string& f) { return f != "constant" && f != "zeros"; }

std::vector<float> all_values(const Gradient& g) {
  std::vector<float> v;
  for (const auto& l : g.layers) v.insert(v.end(), l.g.begin(), l.g.end());
  return v;
}

TEST(FamilyShapes, EveryFamilyHasItsSizeAndFiniteValues) {
  for (const auto& f : family_names()) {
    Gradient g = make_gradient(f, 1000, 1);
    EXPECT_EQ(g.family, f);
    if (f == "lenet") {
      EXPECT_EQ(g.size(), 61706u);
      EXPECT_EQ(g.layers.size(), 10u);
    } else if (f == "pladder") {
      EXPECT_EQ(g.size(), 5500u);  // the ladder, as many in [2^-18, 2^-12), half as many near 1, three times as many near 0
    } else {
      EXPECT_EQ(g.size(), 1000u) << f;
    }
    for (const auto& l : g.layers)
      for (float x : l.g) ASSERT_TRUE(std::isfinite(x)) << f << " " << l.name;
  }
}

TEST(FamilyShapes, BatteryOrderHasPladderAfterTheExtremes) {
  const std::vector<std::string> expected = {"gaussian", "laplace", "student_t", "sparse",  "spike",
                                             "constant", "zeros",   "tiny",      "huge",    "subnormal",
                                             "pladder",  "multilayer", "lenet"};
  EXPECT_EQ(family_names(), expected);
}

// Every element of the subnormal family lies below the normal range (or is 0 after rounding), its maximum
// too: a float32 1/s overflows there.
TEST(FamilyShapes, SubnormalIsBelowTheNormalRange) {
  Gradient g = make_gradient("subnormal", 4096, 3);
  float m = 0.0f;
  std::size_t nonzero = 0;
  for (float x : g.layers[0].g) {
    EXPECT_LT(std::fabs(x), std::numeric_limits<float>::min());
    EXPECT_EQ(std::fpclassify(x) == FP_SUBNORMAL || x == 0.0f, true) << x;
    m = std::max(m, std::fabs(x));
    nonzero += x != 0.0f;
  }
  EXPECT_GT(nonzero, 4000u);
  EXPECT_TRUE(std::isinf(1.0f / m)) << m;
}

TEST(FamilyShapes, MultilayerSplitsIntoFourTensors) {
  Gradient g = make_gradient("multilayer", 1000, 1);
  ASSERT_EQ(g.layers.size(), 4u);
  EXPECT_EQ(g.layers[0].g.size(), 500u);
  EXPECT_EQ(g.layers[1].g.size(), 250u);
  EXPECT_EQ(g.layers[2].g.size(), 125u);
  EXPECT_EQ(g.layers[3].g.size(), 125u);
}

TEST(FamilyShapes, UnknownNameAndZeroSizeThrow) {
  EXPECT_THROW(make_gradient("nope", 10, 1), Error);
  EXPECT_THROW(make_gradient("gaussian", 0, 1), Error);
  try {
    make_gradient("nope", 10, 1);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
  }
}

TEST(FamilyDeterminism, SameInputsGiveSameValues) {
  for (const auto& f : family_names()) {
    EXPECT_EQ(all_values(make_gradient(f, 1000, 42)), all_values(make_gradient(f, 1000, 42))) << f;
  }
}

TEST(FamilyDeterminism, OtherSeedGivesOtherValues) {
  const std::uint64_t low = 0x00000000'00000007ull;
  const std::uint64_t high_differs = 0x00000001'00000007ull;  // same low 32 bits
  for (const auto& f : family_names()) {
    if (!is_random_family(f)) continue;
    const auto base = all_values(make_gradient(f, 1000, low));
    EXPECT_NE(base, all_values(make_gradient(f, 1000, low + 1))) << f;
    EXPECT_NE(base, all_values(make_gradient(f, 1000, high_differs))) << f;
  }
}

// The documented recipe (families.hpp), written again here straight from Philox4x32-10.
std::uint32_t fnv1a_of(const std::string& s) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

double uniform_from_words(std::uint32_t a, std::uint32_t b) {
  return (static_cast<double>(a >> 5) * 67108864.0 + static_cast<double>(b >> 6) + 0.5) /
         9007199254740992.0;
}

double box_muller(std::uint32_t w0, std::uint32_t w1, std::uint32_t w2, std::uint32_t w3) {
  const double u1 = uniform_from_words(w0, w1), u2 = uniform_from_words(w2, w3);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

TEST(FamilyDerivation, GaussianMatchesTheDocumentedRecipe) {
  const std::uint64_t seed = 0x0123456789abcdefull;  // both key words nonzero and distinct
  const std::uint32_t tag = fnv1a_of("gaussian");
  const std::uint32_t key_low = 0x89abcdefu, key_high = 0x01234567u;
  const std::vector<float> g = make_gradient("gaussian", 3, seed).layers[0].g;
  // element k of gaussian uses words 4k .. 4k+3, i.e. the whole of block k
  for (std::uint32_t k = 0; k < 3; ++k) {
    const PhiloxBlock w = philox4x32_10(PhiloxBlock{{k, 0u, tag, 0u}}, key_low, key_high);
    EXPECT_EQ(g[k], static_cast<float>(box_muller(w.v[0], w.v[1], w.v[2], w.v[3]))) << k;
  }
}

TEST(FamilyDerivation, FamilyTagSeparatesStreams) {
  // huge is 1e30 * N() from its own stream (tag "huge"): scaled back, it is not gaussian's values
  const auto gaussian = make_gradient("gaussian", 100, 5).layers[0].g;
  const auto huge = make_gradient("huge", 100, 5).layers[0].g;
  int same = 0;
  for (std::size_t k = 0; k < gaussian.size(); ++k)
    same += static_cast<float>(static_cast<double>(huge[k]) / 1e30) == gaussian[k];
  EXPECT_LT(same, 5);
}

// Moments at d = 200,000; each tolerance is at least about 6 standard errors, so a correct stream
// fails with probability far below 1e-8 and a wrong transform (e.g. wrong scale) fails at once.
constexpr std::size_t kMomentSize = 200000;

TEST(FamilyMoments, GaussianHasMeanZeroAndVarianceOne) {
  const auto g = make_gradient("gaussian", kMomentSize, 11).layers[0].g;
  double sum = 0, sum_sq = 0;
  for (float x : g) sum += x, sum_sq += static_cast<double>(x) * x;
  const double mean = sum / g.size(), var = sum_sq / g.size() - mean * mean;
  EXPECT_LT(std::abs(mean), 0.02);     // SE = 1/sqrt(n) = 0.0022: about 9 SE
  EXPECT_LT(std::abs(var - 1.0), 0.02);  // SE = sqrt(2/n) = 0.0032: about 6.3 SE
}

TEST(FamilyMoments, LaplaceHasMeanMagnitudeOneAndBothSigns) {
  const auto g = make_gradient("laplace", kMomentSize, 12).layers[0].g;
  double sum_abs = 0, sum = 0;
  for (float x : g) sum_abs += std::abs(x), sum += x;
  // |x| ~ Exp(1), SE = 1/sqrt(n) = 0.0022: about 9 SE
  EXPECT_LT(std::abs(sum_abs / g.size() - 1.0), 0.02);
  EXPECT_LT(std::abs(sum / g.size()), 0.02);  // Var x = 2, SE = sqrt(2/n) = 0.0032: 6.3 SE
}

TEST(FamilyMoments, SparseIsNinetyFivePercentZeros) {
  const auto g = make_gradient("sparse", kMomentSize, 13).layers[0].g;
  const auto zeros = std::count(g.begin(), g.end(), 0.0f);
  // SE = sqrt(0.95 * 0.05 / n) = 0.00049: 0.005 is about 10 SE
  EXPECT_NEAR(static_cast<double>(zeros) / g.size(), 0.95, 0.005);
}

TEST(FamilyMoments, StudentTHasTheMedianMagnitudeOfT3) {
  auto g = make_gradient("student_t", kMomentSize, 14).layers[0].g;
  for (auto& x : g) x = std::abs(x);
  std::nth_element(g.begin(), g.begin() + g.size() / 2, g.end());
  // median |t_3| = t_3 quantile 0.75 = 0.7649; SE of the median = 1 / (2 f(m) sqrt(n)) with
  // f = density of |t_3| at m = 0.515, so SE = 0.0022 and 0.02 is about 9 SE
  EXPECT_NEAR(g[g.size() / 2], 0.7649, 0.02);
}

TEST(FamilyMoments, SpikeHasOneMinusOneAmongSmallValues) {
  const auto g = make_gradient("spike", 1000, 15).layers[0].g;
  EXPECT_EQ(std::count(g.begin(), g.end(), -1.0f), 1);
  for (float x : g) EXPECT_TRUE(x == -1.0f || std::abs(x) <= 1e-3f) << x;
}

TEST(FamilyMoments, LenetHasDeadRowsOnlyInFc1AndFc2) {
  const Gradient g = make_gradient("lenet", 1, 16);
  for (const auto& l : g.layers) {
    const std::size_t cols = l.name == "fc1.weight" ? 400 : l.name == "fc2.weight" ? 120 : 0;
    const auto zeros = std::count(l.g.begin(), l.g.end(), 0.0f);
    if (cols == 0) {
      EXPECT_EQ(zeros, 0) << l.name;
      continue;
    }
    EXPECT_EQ(zeros % cols, 0u) << l.name;  // whole rows
    const double rows = static_cast<double>(l.g.size() / cols);
    const double dead = static_cast<double>(zeros) / static_cast<double>(cols);
    const double p = cols == 400 ? 0.3 : 0.2, sd = std::sqrt(rows * p * (1 - p));
    EXPECT_NEAR(dead, rows * p, 6 * sd) << l.name;  // binomial count of dead rows, 6 SD
  }
}

// The ladder's bins (pladder's first half), by index: [2^-22, 2^-18), [2^-12, 2^-11), [2^-11, 2^-10),
// [2^-10, 2^-6), [2^-6, 2^-1), [2^-1, 1), and the single 1.0. -1 means below the ladder, or between 2^-18
// and 2^-12 (no bin of the first half).
int ladder_bin(float magnitude) {
  if (magnitude >= 0x1p-18f && magnitude < 0x1p-12f) return -1;
  const float edges[] = {0x1p-22f, 0x1p-12f, 0x1p-11f, 0x1p-10f, 0x1p-6f, 0x1p-1f, 1.0f};
  int bin = -1;
  for (float e : edges)
    if (magnitude >= e) ++bin;
  return bin;
}

int expected_ladder_bin(std::size_t k) {
  if (k == 0) return 6;
  if (k % 16 == 14) return 0;
  const std::size_t r = k % 8;
  return r <= 3 ? 1 : static_cast<int>(r) - 2;
}

// The second half: d magnitudes 1/U in [2^-18, 2^-12), U uniform in (2^12, 2^18]; so the two-octave bins
// [2^-18, 2^-16), [2^-16, 2^-14), [2^-14, 2^-12) hold 3/4, 3/16 and 3/64 of (2^18 / (2^18 - 2^12)) of them,
// and the same sum of magnitudes, d 2 ln 2 / (2^18 - 2^12) each. The third part: floor(d/2) magnitudes
// 1 - 1/U, U uniform in (2^10, 2^16], so the same holds for q = 1 - |g| in [2^-16, 2^-14), [2^-14, 2^-12),
// [2^-12, 2^-10) (q is a multiple of 2^-24, the float spacing below 1: a relative error of at most 2^-8,
// far inside the sums' tolerance). Counts within 6 binomial SD; sums within 6 SD of a sum of independent
// terms. `low` is log2 of the smallest value of 1/U, `q` maps an element to its 1/U.
void check_ladder_part(const std::vector<float>& g, std::size_t begin, std::size_t end, int low,
                       const std::function<double(float)>& q) {
  const double lo = std::ldexp(1.0, low), width = std::ldexp(1.0, -low) - std::ldexp(1.0, -low - 6);
  std::size_t counts[3] = {0, 0, 0}, negatives = 0;
  double sums[3] = {0, 0, 0};
  for (std::size_t k = begin; k < end; ++k) {
    const double v = q(g[k]);
    ASSERT_TRUE(v >= lo && v < 64 * lo) << "k " << k << " value " << g[k];
    const int b = v < 4 * lo ? 0 : (v < 16 * lo ? 1 : 2);
    ++counts[b], sums[b] += v;
    negatives += g[k] < 0;
  }
  const double n = static_cast<double>(end - begin);
  for (int b = 0; b < 3; ++b) {
    const double lower = std::ldexp(lo, 2 * b), upper = 4 * lower;
    const double share = (1 / lower - 1 / upper) / width;
    EXPECT_NEAR(static_cast<double>(counts[b]), n * share, 6 * std::sqrt(n * share * (1 - share)) + 1) << b;
    // E[v 1(bin b)] = 2 ln 2 / width; its variance is below E[v^2 1(bin b)] = (upper - lower) / width
    EXPECT_NEAR(sums[b], n * 2 * std::log(2.0) / width, 6 * std::sqrt(n * (upper - lower) / width)) << b;
  }
  EXPECT_NEAR(static_cast<double>(negatives), n / 2, 6 * std::sqrt(n / 4) + 1);
}

// The fourth part, the near drops: magnitudes 2^-40 (2^13)^U in [2^-40, 2^-27), log-uniform, so each of the 13
// octaves holds a thirteenth of them (counts within 6 binomial SD), with random signs.
void check_near_drops(const std::vector<float>& g, std::size_t begin, std::size_t end) {
  std::vector<std::size_t> octaves(13, 0);
  std::size_t negatives = 0;
  for (std::size_t k = begin; k < end; ++k) {
    const float m = std::abs(g[k]);
    ASSERT_TRUE(m >= 0x1p-40f && m < 0x1p-27f) << "k " << k << " value " << g[k];
    ++octaves[static_cast<std::size_t>(std::floor(std::log2(static_cast<double>(m)))) + 40];
    negatives += g[k] < 0;
  }
  const double n = static_cast<double>(end - begin);
  for (std::size_t o = 0; o < octaves.size(); ++o)
    EXPECT_NEAR(static_cast<double>(octaves[o]), n / 13, 6 * std::sqrt(n / 13 * 12 / 13) + 1) << "octave " << o;
  EXPECT_NEAR(static_cast<double>(negatives), n / 2, 6 * std::sqrt(n / 4) + 1);
}

void check_ladder(std::size_t d) {
  const auto g = make_gradient("pladder", d, 17).layers[0].g;
  ASSERT_EQ(g.size(), 5 * d + d / 2);
  check_ladder_part(g, d, 2 * d, -18, [](float x) { return static_cast<double>(std::abs(x)); });
  check_ladder_part(g, 2 * d, 2 * d + d / 2, -16, [](float x) { return 1.0 - std::abs(static_cast<double>(x)); });
  check_near_drops(g, 2 * d + d / 2, g.size());
  EXPECT_EQ(g[0], 1.0f);
  float max_abs = 0;
  std::size_t ones = 0, negatives = 0;
  std::vector<std::size_t> counts(7, 0);
  for (std::size_t k = 0; k < d; ++k) {  // the ladder, the first half
    const float m = std::abs(g[k]);
    max_abs = std::max(max_abs, m);
    ones += m == 1.0f;
    negatives += g[k] < 0;
    const int bin = ladder_bin(m);
    ASSERT_GE(bin, 0) << "k " << k << " value " << g[k];
    EXPECT_EQ(bin, expected_ladder_bin(k)) << "k " << k << " value " << g[k];
    ++counts[static_cast<std::size_t>(bin)];
  }
  EXPECT_EQ(max_abs, 1.0f);
  EXPECT_EQ(ones, 1u);
  // counts from the rule: k = 1 .. d-1 with k % m == r number ceil((d - r) / m), less k = 0
  auto with_residue = [d](std::size_t r, std::size_t m) { return (d - std::min(r, d) + m - 1) / m - (r == 0 ? 1 : 0); };
  auto r8 = [&](std::size_t r) { return with_residue(r, 8); };
  const std::vector<std::size_t> expected = {
      with_residue(14, 16), r8(0) + r8(1) + r8(2) + r8(3), r8(4), r8(5), with_residue(6, 16), r8(7), 1};
  EXPECT_EQ(counts, expected);
  // random signs: negatives ~ Binomial(d - 1, 1/2), 6 SD
  EXPECT_NEAR(static_cast<double>(negatives), (d - 1) / 2.0, 6 * std::sqrt((d - 1) / 4.0));
}

TEST(FamilyLadder, BinsHoldExactlyTheCountsOfTheRuleAtD1000) {
  check_ladder(1000);
  // 1000 = 125 * 8: 124 + 3 * 125 in [2^-12, 2^-11), and 62 (k % 16 = 14: k = 14, 30, .., 990) below 2^-18;
  // the second half's 1000 lie in [2^-18, 2^-12)
  const auto g = make_gradient("pladder", 1000, 17).layers[0].g;
  EXPECT_EQ(std::count_if(g.begin(), g.end(), [](float x) { return std::abs(x) < 0x1p-11f; }), 499 + 62 + 1000 + 3000);
  EXPECT_EQ(std::count_if(g.begin(), g.end(), [](float x) { return std::abs(x) < 0x1p-18f; }), 62 + 3000);
  // the third part: elements 2000 .. 2499, all in [1 - 2^-10, 1); the fourth: 2500 .. 5499, all below 2^-26
  ASSERT_EQ(g.size(), 5500u);
  EXPECT_EQ(std::count_if(g.begin() + 2000, g.begin() + 2500, [](float x) { return std::abs(x) >= 1.0f - 0x1p-10f && std::abs(x) < 1.0f; }), 500);
  EXPECT_EQ(std::count_if(g.begin() + 2500, g.end(), [](float x) { return std::abs(x) < 0x1p-26f; }), 3000);
  EXPECT_EQ(std::count_if(g.begin(), g.end(), [](float x) { return std::abs(x) < 0x1p-26f; }), 3000);
}

TEST(FamilyLadder, BinsHoldExactlyTheCountsOfTheRuleAtD8192) { check_ladder(8192); }

TEST(FamilyLadder, SmallSizesStayInTheirBins) {
  for (std::size_t d = 1; d <= 17; ++d) check_ladder(d);
}

}  // namespace
}  // namespace tg::verify
