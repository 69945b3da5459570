// terngrad-bench: Assumption 3 of the paper, E{||g||_inf ||g||_1} <= A + B ||w - w*||^2, tested as a bound.
//
// Exact constants (least squares, one block, batch 1): the per-worker gradient at w = w* + e is
// g_i = x_i (x_i^T e + r_i), so F(w) = E||g||_inf ||g||_1 = (1/n) sum_i a_i (x_i^T e + r_i)^2 with
// a_i = ||x_i||_inf ||x_i||_1: a quadratic e^T M e + 2 m^T e + c. The smallest admissible B is lambda_max(M);
// for B > lambda_max(M) the smallest A is c + m^T (B I - M)^{-1} m. SGD's assumption (E||g||_2^2) is the
// same with a_i = ||x_i||_2^2.
//
// Estimated constants (any problem, from the runs): the seeds are split in halves. On the fit half, the
// visited distances r = ||w_t - w*||^2 are cut into log-spaced bins; per seed and bin, the mean of the
// recorded mean_w ||g_w||_inf ||g_w||_1 (an unbiased sample of F at w_t); per bin, an upper confidence
// bound U_k = mean + t_{1 - alpha/K} s.e. over seeds (Bonferroni over the K bins: with probability
// >= 1 - alpha every bin's expected value is below its U_k, normal approximation of seed averages).
// (A, B) = the line A + B r, A, B >= 0, above every U_k with the smallest sum over the bins. Held-out
// half: per bin, the per-seed mean excess q_t - (A + B r_t); one-sided t-test of "mean excess <= 0" at
// alpha / K per bin: the fitted bound is refuted if any bin rejects (false-refute <= alpha when it holds
// on the visited iterates); power: the excess detected with probability 1 - beta, per bin.
#pragma once

#include <nlohmann/json.hpp>

#include <Eigen/Dense>

#include <vector>

#include "tg/convex/problem.hpp"
#include "tg/convex/simulate.hpp"

namespace tg::convex {

struct Assumption3Exact {
  Eigen::MatrixXd M;  // (1/n) sum_i a_i x_i x_i^T
  Eigen::VectorXd m;  // (1/n) sum_i a_i r_i x_i
  double c = 0;       // (1/n) sum_i a_i r_i^2 = F(w*)
  double b_min = 0;   // lambda_max(M): no smaller B bounds F on the whole space
  double sgd_b_min = 0;  // the same for SGD's E||g||_2^2 (a_i = ||x_i||_2^2)
  double sgd_c = 0;      // E||g(w*)||_2^2
  Eigen::VectorXd worst;  // unit top eigenvector of M, signed so that m^T worst >= 0
  /// F at w* + e (exact).
  double value(const Eigen::VectorXd& e) const { return e.dot(M * e) + 2.0 * m.dot(e) + c; }
  /// Smallest A with F <= A + B r everywhere (+inf if B <= b_min).
  double a_for(double B) const;
  /// Smallest r = ||e||^2 along `worst` at which F exceeds A + B r (+inf if A + B r bounds F everywhere).
  double violation_r(double A, double B) const;
};
/// Throws std::invalid_argument unless the problem has one block.
Assumption3Exact assumption3_exact(const LeastSquares& problem);

struct Assumption3Bin {
  double r_lo = 0, r_hi = 0;
  int fit_seeds = 0, held_seeds = 0;
  double r_mean = 0;                  // mean over fit seeds of their mean r in the bin
  double fit_mean = 0, fit_se = 0, ucb = 0;
  double bound = 0;                   // A + B r_mean
  double held_excess = 0, held_se = 0, t = 0;  // held-out per-seed mean excess over the bound, its t
  bool refuted = false;
  double detectable = 0;              // excess detected with probability 1 - beta (absolute)
};
struct Assumption3Fit {
  double A = 0, B = 0;
  double alpha = 0, beta = 0, t_fit = 0, t_test = 0;
  int fit_seeds = 0, held_seeds = 0;
  std::vector<Assumption3Bin> bins;
  bool holds = false;                   // no bin refutes it on the held-out seeds
  double max_detectable_rel = 0;        // max over bins of detectable / bound
  long held_steps = 0, held_steps_above = 0;  // single held-out samples q_t above A + B r_t (descriptive)
  double max_ratio = 0;                 // max over held-out steps of q_t / (A + B r_t)
  double sgd_A = 0, sgd_B = 0;          // the same fit for mean_w ||g_w||_2^2 (SGD's assumption)
};
/// bins: number of log-spaced bins of r; traces: one per seed (needs >= 4, diverged ones are skipped).
Assumption3Fit fit_assumption3(const std::vector<Trace>& traces, int bins, double alpha, double beta);

nlohmann::json to_json(const Assumption3Exact& exact);
nlohmann::json to_json(const Assumption3Fit& fit);

}  // namespace tg::convex
