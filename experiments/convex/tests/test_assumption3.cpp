// terngrad-bench: Assumption 3 as a bound (include/tg/convex/assumption3.hpp): the exact quadratic against a
// brute-force sum, the exact smallest A for a given B, and the fit / held-out test on traces whose
// E||g||_inf||g||_1 is known. Run: ctest -R tg_convex_tests.
#include <gtest/gtest.h>

#include <cmath>

#include "tg/convex/assumption3.hpp"

using namespace tg::convex;

TEST(ConvexAssumption3, ExactQuadraticEqualsTheSumOverPoints) {
  ProblemSpec s;
  s.dim = 6;
  s.samples = 80;
  s.tail_dof = 3;
  LeastSquares p(s);
  Assumption3Exact ex = assumption3_exact(p);
  Eigen::VectorXd e = Eigen::VectorXd::LinSpaced(6, -0.7, 0.4), g;
  double brute = 0, brute_sgd_b = 0;
  for (int i = 0; i < 80; ++i) {
    int idx[1] = {i};
    p.batch_gradient(p.w_star() + e, idx, g);
    brute += g.cwiseAbs().maxCoeff() * g.lpNorm<1>() / 80;
  }
  EXPECT_NEAR(ex.value(e), brute, 1e-10 * brute);
  (void)brute_sgd_b;
  EXPECT_GE(ex.b_min, ex.sgd_b_min);  // ||g||_inf ||g||_1 >= ||g||_2^2 pointwise
  // For B = 2 lambda_max(M) the smallest A is attained: F - B r <= A everywhere, = A at the maximizer.
  const double B = 2 * ex.b_min, A = ex.a_for(B);
  Eigen::MatrixXd S = B * Eigen::MatrixXd::Identity(6, 6) - ex.M;
  Eigen::VectorXd e_star = S.ldlt().solve(ex.m);
  EXPECT_NEAR(ex.value(e_star) - B * e_star.squaredNorm(), A, 1e-9 * A);
  for (int k = 0; k < 50; ++k) {
    Eigen::VectorXd r = Eigen::VectorXd::Random(6) * (k + 1);
    EXPECT_LE(ex.value(r) - B * r.squaredNorm(), A * (1 + 1e-12));
  }
  EXPECT_TRUE(std::isinf(ex.a_for(0.5 * ex.b_min)));
  // Below lambda_max(M) the bound fails along the top eigenvector at the distance violation_r gives.
  const double vr = ex.violation_r(A, 0.5 * ex.b_min);
  ASSERT_TRUE(std::isfinite(vr));
  Eigen::VectorXd at = std::sqrt(vr) * ex.worst;
  EXPECT_NEAR(ex.value(at), A + 0.5 * ex.b_min * vr, 1e-9 * ex.value(at));
  EXPECT_GT(ex.value(1.1 * at), A + 0.5 * ex.b_min * 1.21 * vr);
}

namespace {
// Traces with r_t = 100 / (t + 1) and q_t = a + b r_t exactly (no sampling noise).
Trace line_trace(double a, double b) {
  Trace tr;
  for (int t = 0; t <= 400; ++t) {
    double r = 100.0 / (t + 1);
    tr.dist2.push_back(r);
    tr.assumption3.push_back(a + b * r);
    tr.grad_sq.push_back(0.5 * (a + b * r));
  }
  return tr;
}
}  // namespace

TEST(ConvexAssumption3, FitRecoversAKnownLineAndTheHeldOutTestRefutesAnExcess) {
  std::vector<Trace> same(8, line_trace(2.0, 3.0));
  Assumption3Fit f = fit_assumption3(same, 8, 1e-3, 1e-3);
  EXPECT_NEAR(f.A, 2.0, 1e-9);
  EXPECT_NEAR(f.B, 3.0, 1e-9);
  EXPECT_NEAR(f.sgd_B, 1.5, 1e-9);
  EXPECT_TRUE(f.holds);
  EXPECT_EQ(f.held_steps_above, 0);
  // Held-out half (seeds 5..8) with a larger A: refuted in every bin.
  std::vector<Trace> shifted(4, line_trace(2.0, 3.0));
  for (int k = 0; k < 4; ++k) shifted.push_back(line_trace(10.0 + 0.01 * k, 3.0));
  Assumption3Fit g = fit_assumption3(shifted, 8, 1e-3, 1e-3);
  EXPECT_FALSE(g.holds);
  for (const auto& b : g.bins) EXPECT_TRUE(b.refuted);
  EXPECT_THROW(fit_assumption3(std::vector<Trace>(3, line_trace(1, 1)), 8, 1e-3, 1e-3), std::invalid_argument);
}
