// terngrad-bench: the statistics layer of the verification battery (Boost.Math): exact binomial
// (Clopper-Pearson) bounds, Bernstein bounds, normal and chi-squared quantiles, and power (smallest
// detectable effect at 1 - beta). Used by tg_verify; derivations in docs/statistics.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tg::verify {

/// Two-sided Clopper-Pearson interval for p after k successes in n trials, coverage 1 - alpha.
struct Interval {
  double lo = 0.0;
  double hi = 1.0;
};
Interval clopper_pearson(std::uint64_t n, std::uint64_t k, double alpha);

/// Exact two-sided binomial p-value 2 min(P(X <= k), P(X >= k)), capped at 1, X ~ Bin(n, p).
double binomial_two_sided_pvalue(std::uint64_t n, std::uint64_t k, double p);

/// The acceptance table of the per-coordinate exact test: for k = 0..n, the Clopper-Pearson
/// interval at level alpha. A coordinate with claimed p and count k passes iff lo[k] <= p <= hi[k].
struct ClopperPearsonTable {
  std::uint64_t n = 0;
  double alpha = 0.0;
  std::vector<double> lo, hi;
};
ClopperPearsonTable clopper_pearson_table(std::uint64_t n, double alpha);

/// Power of the per-coordinate test, which rejects iff the exact two-sided p-value
/// (binomial_two_sided_pvalue) is <= alpha; the smallest delta such that a coordinate with true keep
/// probability 1/2 + delta, claimed 1/2, is rejected with probability >= 1 - beta.
double binomial_detectable(std::uint64_t n, double alpha, double beta);

/// Upper tail P(X >= k), X ~ Bin(n, p) (1 for k = 0).
double binomial_upper_tail(std::uint64_t n, std::uint64_t k, double p);
/// The one-sided test of a miss rate: X misses in n trials, H0 "each trial misses independently with
/// probability at most eps", rejected iff P(Bin(n, eps) >= X) <= alpha. Returns the smallest count that
/// rejects (n + 1 when none does) and, through `detectable`, the smallest true miss rate rejected with
/// probability >= 1 - beta (1 when none is).
std::uint64_t miss_rate_critical(std::uint64_t n, double eps, double alpha, double beta, double* detectable);

/// Bernstein's inequality for a sum S of independent zero-mean terms with |term| <= b and total
/// variance V: P(|S| >= x) <= 2 exp(-x^2 / (2 (V + b x / 3))). Returns the x at which the right side
/// equals alpha: x = bL/3 + sqrt((bL/3)^2 + 2 V L), L = ln(2/alpha).
double bernstein_threshold(double variance, double bound, double alpha);
/// One-sided version (L = ln(1/beta)): used for the deviation of the statistic under an alternative.
double bernstein_one_sided(double variance, double bound, double beta);
/// Bernstein's bound on the two-sided p-value of an observed |S| = x: 2 exp(-x^2 / (2 (V + b x / 3))),
/// NOT capped at 1 (a bound above 1 says the data carry no evidence; the report prints its value).
double bernstein_tail_bound(double x, double variance, double bound);

/// Standard normal quantile and upper tail; chi-squared quantile.
double normal_quantile(double p);
double normal_upper_tail(double z);
double chi_squared_quantile(double dof, double p);

}  // namespace tg::verify
