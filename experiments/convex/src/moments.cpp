// terngrad-bench: exact second-moment recursion of minibatch SGD on least squares and its adjoint.
// See include/tg/convex/moments.hpp for the equations.
#include "tg/convex/moments.hpp"

#include <stdexcept>

namespace tg::convex {

namespace {

class Recursion {
 public:
  Recursion(const LeastSquares& p, int m) : p_(p), m_(m), d_(p.features()), B_(p.outputs()) {}

  // E_i(P, 0) (the part linear in P)
  Eigen::MatrixXd sample_term(const Eigen::MatrixXd& P) const {
    const auto& X = p_.X();
    const int n = p_.samples();
    Eigen::MatrixXd out(d_ * B_, d_ * B_);
    for (int b = 0; b < B_; ++b) {
      for (int c = b; c < B_; ++c) {
        Eigen::VectorXd q = ((X * P.block(b * d_, c * d_, d_, d_)).array() * X.array()).rowwise().sum();
        Eigen::MatrixXd blk = X.transpose() * q.asDiagonal() * X / n;
        out.block(b * d_, c * d_, d_, d_) = blk;
        if (c != b) out.block(c * d_, b * d_, d_, d_) = blk.transpose();
      }
    }
    return out;
  }

  // H (block-diagonal) times M, and M times H.
  Eigen::MatrixXd left_H(const Eigen::MatrixXd& M) const {
    Eigen::MatrixXd out(M.rows(), M.cols());
    for (int b = 0; b < B_; ++b) out.middleRows(b * d_, d_) = p_.H() * M.middleRows(b * d_, d_);
    return out;
  }
  Eigen::MatrixXd right_H(const Eigen::MatrixXd& M) const {
    Eigen::MatrixXd out(M.rows(), M.cols());
    for (int b = 0; b < B_; ++b) out.middleCols(b * d_, d_) = M.middleCols(b * d_, d_) * p_.H();
    return out;
  }

  // The homogeneous map L_g(P) (self-adjoint in the Frobenius product).
  Eigen::MatrixXd apply(const Eigen::MatrixXd& P, double g) const {
    Eigen::MatrixXd HP = left_H(P);
    Eigen::MatrixXd out = P - g * (HP + right_H(P));
    out += g * g * ((1.0 - 1.0 / m_) * right_H(HP) + sample_term(P) / m_);
    return out;
  }

  // The affine part g^2/m (E_i(0, mu) with the residual terms).
  Eigen::MatrixXd affine(const Eigen::VectorXd& mu, double g) const {
    const auto& X = p_.X();
    const auto& R = p_.residuals();
    const int n = p_.samples();
    Eigen::MatrixXd xm(n, B_);  // x_i^T mu_b
    for (int b = 0; b < B_; ++b) xm.col(b) = X * mu.segment(b * d_, d_);
    Eigen::MatrixXd out(d_ * B_, d_ * B_);
    for (int b = 0; b < B_; ++b) {
      for (int c = b; c < B_; ++c) {
        Eigen::VectorXd q = (xm.col(b).array() * R.col(c).array() + R.col(b).array() * xm.col(c).array() +
                             R.col(b).array() * R.col(c).array()).matrix();
        Eigen::MatrixXd blk = X.transpose() * q.asDiagonal() * X / n;
        out.block(b * d_, c * d_, d_, d_) = blk;
        if (c != b) out.block(c * d_, b * d_, d_, d_) = blk.transpose();
      }
    }
    return out * (g * g / m_);
  }

  Eigen::VectorXd step_mean(const Eigen::VectorXd& mu, double g) const {
    Eigen::VectorXd out(mu.size());
    for (int b = 0; b < B_; ++b) out.segment(b * d_, d_) = mu.segment(b * d_, d_) - g * (p_.H() * mu.segment(b * d_, d_));
    return out;
  }

 private:
  const LeastSquares& p_;
  double m_;
  int d_, B_;
};

}  // namespace

Eigen::VectorXd window_weights(int steps, int from) {
  if (from < 0 || from > steps) throw std::invalid_argument("window start outside [0, steps]");
  Eigen::VectorXd w = Eigen::VectorXd::Zero(steps + 1);
  w.tail(steps + 1 - from).setConstant(1.0 / (steps + 1 - from));
  return w;
}

Prediction predict(const LeastSquares& problem, const RunSpec& run, const Eigen::VectorXd& time_weights,
                   const Eigen::VectorXd& block_weights) {
  validate(run);
  const int T = run.steps, D = problem.dim();
  if (time_weights.size() != T + 1) throw std::invalid_argument("time weights must have steps + 1 entries");
  if (block_weights.size() != static_cast<Eigen::Index>(problem.blocks().size()))
    throw std::invalid_argument("block weights must have one entry per block");
  Eigen::VectorXd c(D);
  for (std::size_t b = 0; b < problem.blocks().size(); ++b)
    c.segment(problem.blocks()[b].offset, problem.blocks()[b].size).setConstant(block_weights(b));
  Recursion rec(problem, run.workers * run.batch);
  // Forward: the noise-free part f0 (exact for float SGD).
  Eigen::VectorXd mu = run.start_at_optimum ? Eigen::VectorXd::Zero(D) : Eigen::VectorXd(-problem.w_star());
  Eigen::MatrixXd P = mu * mu.transpose();
  Prediction pred;
  for (int t = 0; t <= T; ++t) {
    if (time_weights(t) != 0.0) pred.f0 += time_weights(t) * c.dot(P.diagonal());
    if (t == T) break;
    double g = run.schedule.at(t);
    Eigen::MatrixXd next = rec.apply(P, g) + rec.affine(mu, g);
    mu = rec.step_mean(mu, g);
    P = std::move(next);
  }
  // Backward (adjoint): Lambda_T = omega_T diag(c); S_t = g_t^2 diag(Lambda_{t+1});
  // Lambda_t = omega_t diag(c) + L_t(Lambda_{t+1}).
  pred.S.resize(T, D);
  Eigen::MatrixXd Lambda = Eigen::MatrixXd(c.asDiagonal()) * time_weights(T);
  for (int t = T - 1; t >= 0; --t) {
    double g = run.schedule.at(t);
    pred.S.row(t) = (g * g) * Lambda.diagonal().transpose();
    Eigen::MatrixXd prev = rec.apply(Lambda, g);
    prev.diagonal() += time_weights(t) * c;
    Lambda = std::move(prev);
  }
  return pred;
}

std::vector<double> predict_curve(const LeastSquares& problem, const RunSpec& run, const Eigen::MatrixXd& noise) {
  validate(run);
  const int T = run.steps, D = problem.dim();
  const bool has_noise = noise.size() != 0;
  if (has_noise && (noise.rows() != T || noise.cols() != D)) throw std::invalid_argument("noise must be steps x dim");
  Recursion rec(problem, run.workers * run.batch);
  Eigen::VectorXd mu = run.start_at_optimum ? Eigen::VectorXd::Zero(D) : Eigen::VectorXd(-problem.w_star());
  Eigen::MatrixXd P = mu * mu.transpose();
  std::vector<double> out;
  out.reserve(T + 1);
  for (int t = 0; t <= T; ++t) {
    out.push_back(P.trace());
    if (t == T) break;
    double g = run.schedule.at(t);
    Eigen::MatrixXd next = rec.apply(P, g) + rec.affine(mu, g);
    if (has_noise) next.diagonal() += (g * g) * noise.row(t).transpose();
    mu = rec.step_mean(mu, g);
    P = std::move(next);
  }
  return out;
}

}  // namespace tg::convex
