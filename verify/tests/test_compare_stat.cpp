// terngrad-bench: `terngrad compare --stat` (verify/src/compare_stat.cpp): calibrated under the null
// (two correct implementations, independent draws), powerful against wrong keep probabilities and
// wrong scalars, tolerant of a float32 sigma, and exact about what it reports.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "tg/verify/battery.hpp"
#include "tg/verify/stats.hpp"

namespace tv = tg::verify;

namespace {

tv::StatCompareResult run(const std::string& a, const std::string& b, std::uint64_t seed, std::size_t d,
                          std::uint32_t draws) {
  auto sa = tv::make_sampler(a, {});
  auto sb = tv::make_sampler(b, {});
  tv::StatCompareOptions o;
  o.d = d;
  o.draws = draws;
  o.seed = seed;
  o.modes = {tg::ClipMode::none};
  return tv::compare_statistically(*sa, *sb, o);
}

// 2,048 elements, 128 draws, every clipping mode (the default modes)
tv::StatCompareOptions options_2048() {
  tv::StatCompareOptions o;
  o.d = 2048;
  o.draws = 128;
  return o;
}

const tv::StatCompareCase& gaussian(const tv::StatCompareResult& r) {
  for (const auto& c : r.cases)
    if (c.family == "gaussian") return c;
  throw std::runtime_error("no gaussian case");
}

}  // namespace

// Under the null the three standardized statistics have mean 0 and SD 1. One case per seed (the gaussian
// family: cases of one run share stream keys, so only seeds are independent), 60 seeds. Each check
// below fails a correct implementation with probability <= 1e-6 (chi-squared interval for the SD at
// 59 degrees of freedom; |mean| <= 5.33 / sqrt(60) for the mean, normal); it would catch the SD of
// 0.3 that the earlier binomial conditioning gave (T concentrated far below its mean).
TEST(CompareStat, CalibratedUnderTheNull) {
  std::vector<double> zt, zs, zc;
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    auto r = run("reference", "optimized", seed, 1024, 64);
    ASSERT_TRUE(r.same()) << tv::format_stat_compare(r);
    zt.push_back(gaussian(r).z_total);
    zs.push_back(gaussian(r).z_signed);
    zc.push_back(gaussian(r).z_coordinates);
  }
  const double n = static_cast<double>(zt.size());
  const double lo = std::sqrt(tv::chi_squared_quantile(n - 1, 0.5e-6) / (n - 1));
  const double hi = std::sqrt(tv::chi_squared_quantile(n - 1, 1 - 0.5e-6) / (n - 1));
  for (const auto* z : {&zt, &zs, &zc}) {
    double mean = std::accumulate(z->begin(), z->end(), 0.0) / n, ss = 0;
    for (double x : *z) ss += (x - mean) * (x - mean);
    double sd = std::sqrt(ss / (n - 1));
    EXPECT_LE(std::fabs(mean), 5.33 / std::sqrt(n)) << "mean " << mean;
    EXPECT_GE(sd, lo) << "sd " << sd;
    EXPECT_LE(sd, hi) << "sd " << sd;
  }
}

// A keep rate p (1 - 1/64) for positive entries and p (1 + 1/64) for negative ones: the total keep count
// cancels, the per-coordinate test has no power for differences of 1.6%, and the signed total finds it.
TEST(CompareStat, FindsASignAsymmetricKeepRate) {
  auto r = run("reference", "mutant:sign-drift", 7, 8192, 1024);
  EXPECT_FALSE(r.same()) << tv::format_stat_compare(r);
  bool named = false;
  for (const auto& c : r.cases) named |= c.difference.find("between positive and negative") != std::string::npos;
  EXPECT_TRUE(named) << tv::format_stat_compare(r);
}

TEST(CompareStat, FindsWrongKeepProbabilitiesAndScalars) {
  auto det = run("reference", "mutant:deterministic", 7, 4099, 256);
  EXPECT_FALSE(det.same());
  auto u8 = run("reference", "mutant:uniform8", 7, 4099, 256);  // P(keep) rounded up to 1/256
  EXPECT_FALSE(u8.same());
  auto l2 = run("reference", "mutant:l2-scalar", 7, 4099, 256);  // scalar ||g||_2: deterministic difference
  EXPECT_FALSE(l2.same());
  bool named = false;
  for (const auto& c : l2.cases) named |= c.difference.find("scalar") != std::string::npos;
  EXPECT_TRUE(named) << tv::format_stat_compare(l2);
}

// A clip bound from the sample standard deviation (n - 1) is not a float32 sigma's rounding at 2,048 elements
// (a relative 2.4e-4, about 2,000 ulps): the comparison names it under clipping, and nothing differs without.
TEST(CompareStat, NamesASampleStandardDeviationClipBound) {
  auto sa = tv::make_sampler("reference", {});
  auto sb = tv::make_sampler("mutant:sample-sigma", {});
  tv::StatCompareOptions o = options_2048();
  o.modes = {tg::ClipMode::clip};
  auto r = tv::compare_statistically(*sa, *sb, o);
  EXPECT_FALSE(r.same());
  bool named = false;
  for (const auto& c : r.cases) named |= c.difference.find("sample standard deviation (squares summed over n - 1 = 2047") != std::string::npos;
  EXPECT_TRUE(named) << tv::format_stat_compare(r);
  o.modes = {tg::ClipMode::none};
  EXPECT_TRUE(tv::compare_statistically(*sa, *sb, o).same());
}

// A clip sigma computed in float32 moves the scalar by a few ulps: within clip_bound_ulps(d) it is the same
// distribution; the table reports the scalars it compared.
TEST(CompareStat, Float32SigmaIsTheSameDistribution) {
  auto sa = tv::make_sampler("reference", {});
  auto sb = tv::make_sampler("variant:f32-sigma", {});
  tv::StatCompareOptions o = options_2048();
  auto r = tv::compare_statistically(*sa, *sb, o);
  EXPECT_TRUE(r.same()) << tv::format_stat_compare(r);
  EXPECT_EQ(r.decisions, 3 * r.cases.size());  // total, signed total, per coordinate
  EXPECT_DOUBLE_EQ(r.alpha_per_decision, o.alpha_total / static_cast<double>(r.decisions));
  auto json = tv::format_stat_compare_json(r);
  EXPECT_NE(json.find("\"same\": true"), std::string::npos);
}
