// terngrad-bench: statistics layer of the battery (see tg/verify/stats.hpp), on Boost.Math.
#include "tg/verify/stats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/chi_squared.hpp>
#include <boost/math/distributions/normal.hpp>

#include "tg/error.hpp"

namespace tg::verify {
namespace bm = boost::math;

namespace {
void check_alpha(double alpha, const char* what) {
  if (!(alpha > 0.0 && alpha < 1.0))
    throw Error(ErrorCode::invalid_argument, std::string(what) + " must be in (0, 1), got " + std::to_string(alpha));
}
}  // namespace

Interval clopper_pearson(std::uint64_t n, std::uint64_t k, double alpha) {
  check_alpha(alpha, "alpha");
  if (k > n) throw Error(ErrorCode::invalid_argument, "binomial count exceeds trials");
  Interval r;
  if (n == 0) return r;
  using B = bm::binomial_distribution<double>;
  double dn = static_cast<double>(n), dk = static_cast<double>(k);
  r.lo = k == 0 ? 0.0 : B::find_lower_bound_on_p(dn, dk, alpha / 2, B::clopper_pearson_exact_interval);
  r.hi = k == n ? 1.0 : B::find_upper_bound_on_p(dn, dk, alpha / 2, B::clopper_pearson_exact_interval);
  return r;
}

double binomial_two_sided_pvalue(std::uint64_t n, std::uint64_t k, double p) {
  if (k > n) throw Error(ErrorCode::invalid_argument, "binomial count exceeds trials");
  if (p <= 0.0) return k == 0 ? 1.0 : 0.0;
  if (p >= 1.0) return k == n ? 1.0 : 0.0;
  bm::binomial_distribution<double> b(static_cast<double>(n), p);
  double dk = static_cast<double>(k);
  double lower = bm::cdf(b, dk);                                    // P(X <= k)
  double upper = k == 0 ? 1.0 : bm::cdf(bm::complement(b, dk - 1));  // P(X >= k)
  return std::min(1.0, 2.0 * std::min(lower, upper));
}

ClopperPearsonTable clopper_pearson_table(std::uint64_t n, double alpha) {
  ClopperPearsonTable t;
  t.n = n;
  t.alpha = alpha;
  t.lo.resize(n + 1);
  t.hi.resize(n + 1);
  for (std::uint64_t k = 0; k <= n; ++k) {
    Interval iv = clopper_pearson(n, k, alpha);
    t.lo[k] = iv.lo;
    t.hi[k] = iv.hi;
  }
  return t;
}

double binomial_detectable(std::uint64_t n, double alpha, double beta) {
  check_alpha(alpha, "alpha");
  check_alpha(beta, "beta");
  if (n == 0) return 0.5;
  // Upper side by symmetry: k_crit = smallest k with 2 P(X >= k | 1/2) <= alpha.
  bm::binomial_distribution<double> half(static_cast<double>(n), 0.5);
  auto upper = [&](std::uint64_t k) { return k == 0 ? 1.0 : bm::cdf(bm::complement(half, static_cast<double>(k) - 1)); };
  if (2.0 * upper(n) > alpha) return 0.5;  // cannot reject p = 1/2 at all
  std::uint64_t lo = n / 2, hi = n;        // 2 P(X >= hi) <= alpha < 2 P(X >= lo)
  while (hi - lo > 1) {
    std::uint64_t mid = lo + (hi - lo) / 2;
    (2.0 * upper(mid) <= alpha ? hi : lo) = mid;
  }
  const double kc = static_cast<double>(hi);
  auto power = [&](double q) {
    if (q >= 1.0) return 1.0;
    bm::binomial_distribution<double> b(static_cast<double>(n), q);
    return bm::cdf(bm::complement(b, kc - 1));
  };
  if (power(1.0 - 1e-12) < 1.0 - beta) return 0.5;
  double a = 0.5, b = 1.0;
  for (int it = 0; it < 60; ++it) {
    double mid = 0.5 * (a + b);
    (power(mid) >= 1.0 - beta ? b : a) = mid;
  }
  return b - 0.5;
}

double binomial_upper_tail(std::uint64_t n, std::uint64_t k, double p) {
  if (k == 0) return 1.0;
  if (k > n || p <= 0.0) return 0.0;
  if (p >= 1.0) return 1.0;
  bm::binomial_distribution<double> b(static_cast<double>(n), p);
  return bm::cdf(bm::complement(b, static_cast<double>(k) - 1));
}

std::uint64_t miss_rate_critical(std::uint64_t n, double eps, double alpha, double beta, double* detectable) {
  check_alpha(alpha, "alpha");
  check_alpha(beta, "beta");
  if (!(eps > 0.0 && eps < 1.0)) throw Error(ErrorCode::invalid_argument, "miss-rate allowance must be in (0, 1)");
  // smallest k with P(Bin(n, eps) >= k) <= alpha, by bisection on k (the tail falls with k)
  std::uint64_t lo = 0, hi = n + 1;  // tail(lo) > alpha; tail(hi) = 0 <= alpha
  while (hi - lo > 1) {
    std::uint64_t mid = lo + (hi - lo) / 2;
    (binomial_upper_tail(n, mid, eps) <= alpha ? hi : lo) = mid;
  }
  if (detectable) {
    *detectable = 1.0;
    if (hi <= n) {
      double a = eps, b = 1.0;  // power(a) < 1 - beta <= power(b)
      for (int it = 0; it < 80; ++it) {
        double mid = 0.5 * (a + b);
        (binomial_upper_tail(n, hi, mid) >= 1.0 - beta ? b : a) = mid;
      }
      *detectable = b;
    }
  }
  return hi;
}

double bernstein_threshold(double variance, double bound, double alpha) {
  check_alpha(alpha, "alpha");
  double L = std::log(2.0 / alpha);
  double a = bound * L / 3.0;
  return a + std::sqrt(a * a + 2.0 * std::max(0.0, variance) * L);
}

double bernstein_one_sided(double variance, double bound, double beta) {
  check_alpha(beta, "beta");
  double L = std::log(1.0 / beta);
  double a = bound * L / 3.0;
  return a + std::sqrt(a * a + 2.0 * std::max(0.0, variance) * L);
}

double bernstein_tail_bound(double x, double variance, double bound) {
  x = std::fabs(x);
  if (x == 0.0) return 2.0;
  double denom = 2.0 * (std::max(0.0, variance) + bound * x / 3.0);
  if (denom <= 0.0) return 0.0;
  return 2.0 * std::exp(-x * x / denom);
}

double normal_quantile(double p) {
  check_alpha(p, "probability");
  return bm::quantile(bm::normal_distribution<double>(), p);
}

double normal_upper_tail(double z) { return bm::cdf(bm::complement(bm::normal_distribution<double>(), z)); }

double chi_squared_quantile(double dof, double p) {
  check_alpha(p, "probability");
  return bm::quantile(bm::chi_squared_distribution<double>(dof), p);
}

}  // namespace tg::verify
