// terngrad-bench: the battery's statistics layer against closed forms derived by hand.
// Run: ctest -R tg_verify_tests
#include <gtest/gtest.h>

#include <cmath>

#include "tg/error.hpp"
#include "tg/verify/stats.hpp"

namespace tg::verify {
namespace {

TEST(Stats, ClopperPearsonClosedFormsAtTheEdges) {
  // k = 0: lo = 0, hi solves (1 - hi)^n = alpha/2, so hi = 1 - (alpha/2)^(1/n); k = n mirrors it.
  for (std::uint64_t n : {1u, 10u, 256u}) {
    Interval a = clopper_pearson(n, 0, 0.05);
    EXPECT_EQ(a.lo, 0.0);
    EXPECT_NEAR(a.hi, 1.0 - std::pow(0.025, 1.0 / n), 1e-12);
    Interval b = clopper_pearson(n, n, 0.05);
    EXPECT_EQ(b.hi, 1.0);
    EXPECT_NEAR(b.lo, std::pow(0.025, 1.0 / n), 1e-12);
  }
  // The full profile's per-coordinate level (about 1e-9 / 70 / 2^18) at n = 4096.
  Interval f = clopper_pearson(4096, 0, 5e-17);
  EXPECT_NEAR(f.hi, -std::expm1(std::log(2.5e-17) / 4096), 1e-12);
  Interval g = clopper_pearson(4096, 2048, 5e-17);
  EXPECT_LT(g.lo, 0.5);
  EXPECT_GT(g.hi, 0.5);
  EXPECT_GT(g.lo, 0.35);
  // n = 2, k = 1: lo solves 1 - (1-lo)^2 = alpha/2, i.e. lo = 1 - sqrt(1 - alpha/2).
  Interval c = clopper_pearson(2, 1, 0.1);
  EXPECT_NEAR(c.lo, 1.0 - std::sqrt(0.95), 1e-12);
  EXPECT_NEAR(c.hi, std::sqrt(0.95), 1e-12);
  EXPECT_THROW(clopper_pearson(3, 4, 0.05), Error);
  EXPECT_THROW(clopper_pearson(3, 1, 0.0), Error);
}

TEST(Stats, BinomialPValue) {
  EXPECT_NEAR(binomial_two_sided_pvalue(10, 0, 0.5), 2.0 / 1024.0, 1e-15);
  EXPECT_NEAR(binomial_two_sided_pvalue(10, 10, 0.5), 2.0 / 1024.0, 1e-15);
  EXPECT_EQ(binomial_two_sided_pvalue(10, 5, 0.5), 1.0);
  EXPECT_EQ(binomial_two_sided_pvalue(10, 1, 0.0), 0.0);
  EXPECT_EQ(binomial_two_sided_pvalue(10, 10, 1.0), 1.0);
}

TEST(Stats, TableAgreesWithIntervalsAndPowerMatchesItsDefinition) {
  const std::uint64_t n = 200;
  const double alpha = 1e-6, beta = 1e-3;
  auto t = clopper_pearson_table(n, alpha);
  ASSERT_EQ(t.lo.size(), n + 1);
  for (std::uint64_t k : {0u, 17u, 100u, 200u}) {
    Interval iv = clopper_pearson(n, k, alpha);
    EXPECT_EQ(t.lo[k], iv.lo);
    EXPECT_EQ(t.hi[k], iv.hi);
  }
  // The exact test rejects p = 1/2 from above at counts kc.. where P_{1/2}(X >= kc) <= alpha/2 (the
  // CP lower bound at kc exceeds 1/2). Power at 1/2 + delta is P_{1/2+delta}(X >= kc), summed here
  // term by term from the binomial pmf, independently of Boost.
  std::uint64_t kc = 0;
  while (t.lo[kc] <= 0.5) ++kc;
  auto tail = [&](double q) {
    double s = 0.0;
    for (std::uint64_t k = kc; k <= n; ++k)
      s += std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) + k * std::log(q) +
                    (n - k) * std::log1p(-q));
    return s;
  };
  EXPECT_LE(tail(0.5), alpha / 2);
  double delta = binomial_detectable(n, alpha, beta);  // the same test, without the table
  EXPECT_GE(tail(0.5 + delta), 1.0 - beta - 1e-9);
  EXPECT_LT(tail(0.5 + delta - 1e-3), 1.0 - beta);
}

TEST(Stats, BernsteinThresholdInvertsItsPValue) {
  for (double V : {0.0, 1.0, 1e6}) {
    for (double b : {1.0, 64.0}) {
      double x = bernstein_threshold(V, b, 1e-8);
      EXPECT_NEAR(bernstein_tail_bound(x, V, b), 1e-8, 1e-14);
    }
  }
  // V = 0: x = 2 b L / 3 with L = ln(2/alpha).
  EXPECT_NEAR(bernstein_threshold(0.0, 3.0, 0.02), 2.0 * std::log(100.0), 1e-12);
  // one-sided: L = ln(1/beta)
  EXPECT_NEAR(bernstein_one_sided(0.0, 3.0, 0.01), 2.0 * std::log(100.0), 1e-12);
}

TEST(Stats, Quantiles) {
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, 1e-12);
  EXPECT_NEAR(normal_upper_tail(2.5), 0.006209665325776132, 1e-15);
  EXPECT_NEAR(chi_squared_quantile(1.0, 0.95), 3.841458820694124, 1e-10);
  EXPECT_THROW(normal_quantile(1.0), Error);
}

}  // namespace
}  // namespace tg::verify
