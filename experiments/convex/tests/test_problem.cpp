// terngrad-bench: deterministic checks of the convex problems, methods and the exact moment recursion.
// Run: ctest -R tg_convex_tests (or build/<dir>/experiments/convex/tg_convex_tests).
#include <gtest/gtest.h>

#include <cmath>

#include "tg/convex/checks.hpp"
#include "tg/convex/methods.hpp"
#include "tg/convex/moments.hpp"
#include "tg/convex/problem.hpp"
#include "tg/convex/simulate.hpp"

using namespace tg::convex;

TEST(ConvexProblem, LeastSquaresOptimumHasZeroGradient) {
  ProblemSpec s;
  s.dim = 12;
  s.samples = 300;
  s.kappa = 100;
  LeastSquares p(s);
  EXPECT_LT(p.full_gradient(p.w_star()).norm(), 1e-13 * (1 + p.w_star().norm()));
  Eigen::VectorXd ev = p.hessian_eigenvalues();
  EXPECT_GT(ev(0), 0.0);
  // Loss is strictly larger away from w*, by exactly e^T H e / 2 (quadratic).
  Eigen::VectorXd e = Eigen::VectorXd::LinSpaced(12, -1, 1);
  double expect = 0.5 * e.dot(p.H() * e);
  EXPECT_NEAR(p.loss(p.w_star() + e) - p.loss_star(), expect, 1e-12 * (1 + expect));
}

TEST(ConvexProblem, MultiscaleBlocksDifferByTheRatio) {
  ProblemSpec s;
  s.kind = ProblemKind::multiscale;
  s.dim = 8;
  s.blocks = 2;
  s.scale_ratio = 100;
  LeastSquares p(s);
  ASSERT_EQ(p.blocks().size(), 2u);
  EXPECT_DOUBLE_EQ(p.blocks()[0].scale, 1.0);
  EXPECT_DOUBLE_EQ(p.blocks()[1].scale, 0.01);
  EXPECT_EQ(p.dim(), 16);
  EXPECT_LT(p.full_gradient(p.w_star()).norm(), 1e-13 * (1 + p.w_star().norm()));
  // Everything in block 1 is 100x smaller: the gradient at w = 0 too (same data, scaled targets).
  Eigen::VectorXd g = p.full_gradient(Eigen::VectorXd::Zero(16));
  double r = g.segment(0, 8).norm() / g.segment(8, 8).norm();
  EXPECT_GT(r, 10.0);
  EXPECT_LT(r, 1000.0);
}

TEST(ConvexProblem, LogisticNewtonOptimum) {
  ProblemSpec s;
  s.kind = ProblemKind::logistic;
  s.dim = 10;
  s.samples = 500;
  Logistic p(s);
  EXPECT_LT(p.full_gradient(p.w_star()).norm(), 1e-10);
  EXPECT_GT(p.hessian_eigenvalues()(0), s.lambda * 0.999);
  // Batch gradient over all points (in order) equals the full gradient.
  std::vector<int> all(500);
  for (int i = 0; i < 500; ++i) all[i] = i;
  Eigen::VectorXd w = Eigen::VectorXd::Ones(10), g;
  p.batch_gradient(w, all, g);
  EXPECT_LT((g - p.full_gradient(w)).norm(), 1e-12);
}

TEST(ConvexProblem, BadOptionsAreRejectedByName) {
  ProblemSpec s;
  s.samples = 5;
  s.dim = 10;
  try {
    LeastSquares p(s);
    FAIL() << "accepted a data size < dim";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("data size"), std::string::npos);
  }
  s = ProblemSpec{};
  s.kappa = NAN;
  EXPECT_THROW(LeastSquares{s}, std::invalid_argument);
  EXPECT_THROW(parse_problem("quadratic"), std::invalid_argument);
  EXPECT_THROW(parse_method("ternary"), std::invalid_argument);
  RunSpec r;
  r.schedule.constant = true;
  r.schedule.gamma = -1;
  EXPECT_THROW(validate(r), std::invalid_argument);
}

TEST(ConvexMethods, TernGradSharedScalarIsExactIntegerMean) {
  // Two workers, one block: every aggregated value is s * k / 2 with k in {-2..2}, s = max over workers.
  MethodSpec m = parse_method("tern");
  Aggregator agg(m, {Block{0, 6, 1.0}}, 2, 7);
  std::vector<Eigen::VectorXd> g(2, Eigen::VectorXd(6));
  g[0] << 0.5, -0.25, 0.0, 1.0, -2.0, 0.125;
  g[1] << -0.5, 0.25, 3.0, 0.0, 0.0, -0.125;
  Eigen::VectorXd u;
  StepStats st;
  agg.combine(g, 0, u, st);
  for (int k = 0; k < 6; ++k) {
    double q = u(k) / 3.0 * 2.0;
    EXPECT_EQ(q, std::round(q)) << k;
    EXPECT_LE(std::fabs(q), 2.0);
  }
  // Identity: (1/N^2) sum_w |g|(s - |g|) with s = 3; target = mean.
  EXPECT_DOUBLE_EQ(st.noise_var(0), (0.5 * 2.5 + 0.5 * 2.5) / 4.0);
  EXPECT_DOUBLE_EQ(st.noise_var(2), 0.0);  // |g| = s is always kept
  EXPECT_DOUBLE_EQ(st.target(4), -1.0);
  // Element 2: worker 1 has |g| = s = 3 (always kept), worker 0 has g = 0 (never kept): exactly 3/2.
  EXPECT_DOUBLE_EQ(u(2), 1.5);
}

TEST(ConvexMethods, SameSeedSameRunDifferentSeedDifferentRun) {
  ProblemSpec s;
  s.dim = 6;
  s.samples = 60;
  LeastSquares p(s);
  RunSpec r;
  r.steps = 50;
  for (const char* name : {"tern", "tern-global", "tern-unshared", "tern-clip", "qsgd", "sign", "float"}) {
    MethodSpec m = parse_method(name);
    Trace a = run_sgd(p, m, r, 3), b = run_sgd(p, m, r, 3), c = run_sgd(p, m, r, 4);
    EXPECT_EQ(a.dist2, b.dist2) << name;
    EXPECT_NE(a.dist2, c.dist2) << name;
  }
}

TEST(ConvexMoments, RecursionMatchesBruteForceOnOneStep) {
  // One step from a fixed w0: E||w_1 - w*||^2 over minibatches with replacement, enumerated exactly
  // for m = 1 (n equally likely samples), against the recursion.
  ProblemSpec s;
  s.dim = 3;
  s.samples = 7;
  s.kind = ProblemKind::multiscale;
  s.blocks = 2;
  s.scale_ratio = 10;
  LeastSquares p(s);
  RunSpec r;
  r.workers = 1;
  r.batch = 1;
  r.steps = 1;
  r.schedule.constant = true;
  r.schedule.gamma = 0.3;
  double brute = 0;
  for (int i = 0; i < 7; ++i) {
    Eigen::VectorXd g;
    int idx[1] = {i};
    p.batch_gradient(Eigen::VectorXd::Zero(6), idx, g);
    brute += (Eigen::VectorXd::Zero(6) - 0.3 * g - p.w_star()).squaredNorm() / 7.0;
  }
  auto curve = predict_curve(p, r, Eigen::MatrixXd());
  EXPECT_NEAR(curve[1], brute, 1e-12 * brute);
  EXPECT_NEAR(curve[0], p.w_star().squaredNorm(), 1e-12);
  // The adjoint gives the same number for the objective "value at t = 1".
  Eigen::VectorXd tw(2);
  tw << 0.0, 1.0;
  Prediction pred = predict(p, r, tw, Eigen::VectorXd::Ones(2));
  EXPECT_NEAR(pred.f0, brute, 1e-12 * brute);
  // Injected codec variance D enters as gamma^2 * sum D.
  Eigen::MatrixXd D = Eigen::MatrixXd::Constant(1, 6, 0.5);
  EXPECT_NEAR(pred.value(D), brute + 0.09 * 3.0, 1e-12);
}

TEST(ConvexMoments, AdjointEqualsForwardOverManySteps) {
  ProblemSpec s;
  s.dim = 4;
  s.samples = 40;
  LeastSquares p(s);
  RunSpec r;
  r.workers = 2;
  r.batch = 3;
  r.steps = 30;
  Eigen::MatrixXd D = Eigen::MatrixXd::Random(30, 4).cwiseAbs();
  auto curve = predict_curve(p, r, D);
  Eigen::VectorXd tw = window_weights(30, 10);
  Prediction pred = predict(p, r, tw, Eigen::VectorXd::Ones(1));
  double fwd = 0;
  for (int t = 10; t <= 30; ++t) fwd += curve[t] / 21.0;
  EXPECT_NEAR(pred.value(D), fwd, 1e-12 * fwd);
}

// The estimator's bias at the optimum, E[g~](w*), which puts clipped TernGrad outside Theorem 1: computed
// here independently (double precision, population sigma with the mean subtracted, a plain loop over the
// 400 points of batch 1) and compared with what clip_fixed_point reports; without clipping it is 0.
TEST(ConvexClip, BiasAtTheOptimumIsTheMeanOfTheClampedGradients) {
  ClipSpec spec = standard_clip_spec();  // d = 20, n = 400, every 10th point a spike 3 e_0
  LeastSquares p(spec.problem);
  const int d = p.dim(), n = p.samples();
  Eigen::VectorXd expect = Eigen::VectorXd::Zero(d), g(d);
  double grad_scale = 0;
  for (int i = 0; i < n; ++i) {
    int idx[1] = {i};
    p.batch_gradient(p.w_star(), idx, g);
    grad_scale += g.squaredNorm() / n;
    const double mean = g.mean();
    const double sigma = std::sqrt((g.array() - mean).square().mean());
    expect += g.cwiseMax(-2.5 * sigma).cwiseMin(2.5 * sigma) / n;
  }
  grad_scale = std::sqrt(grad_scale);
  FixedPoint clipped = clip_fixed_point(p, parse_method("tern-clip"), 1, 2, 1);
  FixedPoint plain = clip_fixed_point(p, parse_method("tern"), 1, 2, 1);
  ASSERT_EQ(clipped.bias_at_optimum.size(), d);
  EXPECT_GT(expect.norm(), 0.05 * grad_scale);  // the spikes make the clipped mean visibly nonzero
  EXPECT_LT((clipped.bias_at_optimum - expect).norm(), 1e-5 * grad_scale);
  EXPECT_LT(plain.bias_at_optimum.norm(), 1e-6 * grad_scale);  // float rounding of g only
  EXPECT_LT((plain.w - p.w_star()).norm(), 1e-5);
  // First order: w_c - w* ~ -H^{-1} E[g~](w*).
  Eigen::VectorXd lin = -p.H().ldlt().solve(expect);
  EXPECT_LT((clipped.linear_shift - lin).norm(), 1e-4 * lin.norm());
  // The exact w_c zeroes the mean clamped gradient (the same independent loop, at w_c).
  Eigen::VectorXd at_wc = Eigen::VectorXd::Zero(d);
  for (int i = 0; i < n; ++i) {
    int idx[1] = {i};
    p.batch_gradient(clipped.w, idx, g);
    const double mean = g.mean();
    const double sigma = std::sqrt((g.array() - mean).square().mean());
    at_wc += g.cwiseMax(-2.5 * sigma).cwiseMin(2.5 * sigma) / n;
  }
  EXPECT_LT(at_wc.norm(), 1e-5 * grad_scale);
  EXPECT_GT((clipped.w - p.w_star()).norm(), 0.5 * lin.norm());
}
