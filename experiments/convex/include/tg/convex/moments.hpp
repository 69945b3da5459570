// terngrad-bench: exact second moments of data-parallel SGD on least squares, the prediction the
// convex checks compare against. With m = N*b samples per step drawn uniformly with replacement,
// e_t = w_t - w*, P_t = E[e_t e_t^T], mu_t = E[e_t], H = X^T X / n (per block), r_i = residual at w*:
//
//   mu_{t+1} = (I - g H) mu_t
//   P_{t+1}  = P - g (H P + P H) + g^2 [ (1 - 1/m) H P H + (1/m) E_i(P, mu) ] + g^2 diag(E[D_t])
//   E_i(P, mu)_bc = (1/n) sum_i (x_i^T P_bc x_i + (x_i^T mu_b) r_ic + r_ib (x_i^T mu_c) + r_ib r_ic) x_i x_i^T
//
// where D_t is the codec's conditional variance per coordinate given the workers' gradients (the
// variance identity; 0 for float SGD). The map is linear in D, so an objective
// f = sum_t omega_t sum_k c_k (P_t)_kk equals f0 + sum_t <S_t, E[D_t]> with S_t from the adjoint
// recursion (the homogeneous map is self-adjoint in the Frobenius product). Per seed, f0 + <S, D_r>
// has expectation f: the prediction to which a seed's measured objective is compared.
#pragma once

#include <Eigen/Dense>

#include <vector>

#include "tg/convex/problem.hpp"
#include "tg/convex/simulate.hpp"

namespace tg::convex {

struct Prediction {
  double f0 = 0.0;          // the objective without codec noise: float SGD's exact expectation
  Eigen::MatrixXd S;        // steps x dim: f = f0 + sum_{t,k} S(t,k) E[D_t](k)
  double value(const Eigen::MatrixXd& noise_var) const { return f0 + (S.array() * noise_var.array()).sum(); }
};

/// time_weights: size steps+1 (omega_t); block_weights: one per problem block (c_k within a block).
Prediction predict(const LeastSquares& problem, const RunSpec& run, const Eigen::VectorXd& time_weights,
                   const Eigen::VectorXd& block_weights);

/// Time weights 1/(count) on t in [from, steps] (a window average), 0 elsewhere.
Eigen::VectorXd window_weights(int steps, int from);

}  // namespace tg::convex

namespace tg::convex {
/// E||w_t - w*||^2 for t = 0..steps given the mean codec variance per step (steps x dim; empty or
/// zero for float SGD): the forward recursion with g_t^2 diag(mean_noise_var_t) injected.
std::vector<double> predict_curve(const LeastSquares& problem, const RunSpec& run, const Eigen::MatrixXd& mean_noise_var);
}  // namespace tg::convex
