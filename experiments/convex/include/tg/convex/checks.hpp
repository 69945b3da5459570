// terngrad-bench: the statistical checks of the convex experiments, each with its false-fail
// probability and power stated from its own sample size (docs/statistics.md). Used by the ctest checks
// (experiments/convex/tests) and by `terngrad converge --checks`.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tg/convex/methods.hpp"
#include "tg/convex/moments.hpp"
#include "tg/convex/problem.hpp"
#include "tg/convex/simulate.hpp"

namespace tg::convex {

// ---- statistics helpers ----------------------------------------------------------------------
/// Quantile of Student's t with dof degrees of freedom.
double t_quantile(double p, int dof);
struct TTest {
  int n = 0;
  double mean = 0, sd = 0, se = 0, t = 0, t_crit = 0;
  bool reject = false;  // |t| > t_crit (two-sided at alpha)
};
/// Two-sided one-sample t-test of E[x] = mu0 at level alpha (x: one value per independent seed).
TTest t_test(const std::vector<double>& x, double mu0, double alpha);
/// Smallest k with P(Binomial(n, p0) < k) <= alpha, i.e. "pass iff successes >= k" fails a
/// process with success probability >= p0 with probability <= alpha.
int binomial_pass_count(int n, double p0, double alpha);
/// P(Binomial(n, p) >= k).
double binomial_upper_tail(int n, double p, int k);

struct CheckOutcome {
  std::string name;
  bool passed = false;
  double alpha = 0;              // stated false-fail probability of the decision
  std::vector<std::string> lines;  // human-readable report
  nlohmann::json json;
};

// ---- 1. a seed average against the exact second-moment prediction (least squares) -----------
struct PredictionSpec {
  std::string name;
  ProblemSpec problem;
  MethodSpec method;
  RunSpec run;
  int seeds = 30;
  std::uint64_t seed0 = 1;
  double alpha = 1e-5, beta = 1e-3;
  int window_from = 0;           // objective = mean over t in [window_from, steps] of sum_b c_b ||e_t,b||^2
  std::vector<double> block_weights;  // c_b; empty: all 1
};
struct PredictionResult {
  CheckOutcome outcome;
  std::vector<double> measured, predicted;  // per seed
  double f0 = 0;                            // the noise-free (float SGD) expectation
  TTest test;
  double min_detectable_codec = 0;  // smallest relative error of the codec's variance detected w.p. 1 - beta
  double min_detectable_total = 0;  // smallest relative error of the whole objective detected w.p. 1 - beta
  std::vector<Trace> traces;
};
PredictionResult check_prediction(const PredictionSpec& spec, bool keep_traces = false);

// ---- 2. fraction of seeds converging under Assumption 2 (Clopper-Pearson) -------------------
/// tol = tol_factor * E||w_T - w*||^2 (exact prediction pooled over seeds); Markov's inequality gives
/// P(||w_T - w*||^2 <= tol) >= p0 = 1 - 1/tol_factor for a codec that obeys the identity.
CheckOutcome check_converged_fraction(const PredictionSpec& spec, const std::vector<Trace>& traces,
                                      double tol_factor, double p_alt);

// ---- 3. layer-wise scalars against one global scalar (multi-scale problem) ------------------
CheckOutcome check_layerwise(const PredictionResult& layerwise, const PredictionResult& global);

// ---- 4. clipping moves the fixed point to where E[clamp(g)] = 0 ------------------------------
struct ClipSpec {
  ProblemSpec problem;   // least squares whose gradients clipping cuts asymmetrically (spike != 0)
  MethodSpec method;     // tern-clip or tern-saturate
  RunSpec run;           // constant step from w*, Polyak average from run.average_from
  int seeds = 20;
  std::uint64_t seed0 = 1;
  int fixed_point_draws = 4000;  // batch > 1: Monte-Carlo minibatch sets for E[clamp(g)](w_c) = 0 (batch 1: exact)
  double alpha = 1e-5, beta = 1e-3;
};
struct ClipResult {
  CheckOutcome outcome;
  Eigen::VectorXd w_clip;     // predicted fixed point w_c
  double shift = 0;           // ||w_c - w*||
  double q_pred_se = 0;       // Monte-Carlo standard error of w_c along (w_c - w*)/||w_c - w*||^2
  std::vector<double> q;      // per seed: <w_avg - w*, w_c - w*> / ||w_c - w*||^2
  TTest test_one;             // E q = 1 (the decision)
};
ClipResult check_clip_fixed_point(const ClipSpec& spec);

/// The fixed point of TernGrad with clipping: w_c with E[update](w_c) = E[clamp(g)](w_c) = 0, by Newton
/// steps preconditioned with H. batch == 1: exact sum over the data points; otherwise `draws` Monte-Carlo
/// minibatch sets (then *mc_se, if given, is the standard error along the shift, in units of the shift).
struct FixedPoint {
  Eigen::VectorXd w;
  int iterations = 0;
  double last_step = 0;
  bool exact = true;
  int draws = 0;
  double mc_se = 0;
  Eigen::VectorXd bias_at_optimum;  // E[clamp(g)](w*) = E[g~](w*): 0 for an unbiased method, != 0 with clipping
  Eigen::VectorXd linear_shift;     // -H^{-1} E[clamp(g)](w*): the first Newton step, w_c - w* to first order
};
FixedPoint clip_fixed_point(const LeastSquares& problem, const MethodSpec& method, int batch, int draws,
                            std::uint64_t seed);

// ---- the standard configurations (ctest and `terngrad converge --checks`) ----------------------
// Least squares d = 20, n = 400, kappa = 4; 4 workers x 8 samples; gamma_t = 4 / (t + 20) from w = 0;
// 2000 steps, 40 seeds, window [1000, 2000].
PredictionSpec standard_decay_spec(const std::string& method, double alpha = 1e-5, double beta = 1e-3);
// d = 10, constant gamma = 0.05 from w*, 2000 steps, 30 seeds, window [500, 2000].
PredictionSpec standard_ball_spec(const std::string& method, double alpha = 1e-5, double beta = 1e-3);
// Two blocks of 8, scales 1 and 1/100; objective: the small block's ball / scale^2.
PredictionSpec standard_multiscale_spec(const std::string& method, double alpha = 1e-5, double beta = 1e-3);
// d = 20, every 10th point a spike 3 e_0; tern-clip, 4 workers x 1 sample, gamma = 0.02 from w*,
// 4000 steps, Polyak average from 1000, 20 seeds.
ClipSpec standard_clip_spec(double alpha = 1e-5, double beta = 1e-3);

/// All checks of the four claims with the standard configurations (9 decisions at alpha each).
/// seed_offset shifts every seed (0: the fixed CI seeds). progress(name) is called before each check.
std::vector<CheckOutcome> run_battery(double alpha, double beta, std::uint64_t seed_offset,
                                      const std::function<void(const std::string&)>& progress = {});

}  // namespace tg::convex
