// terngrad-bench: generated convex problems (least squares, multi-scale, logistic) and their w*.
// Used by `terngrad converge` and experiments/convex/tests.
#include "tg/convex/problem.hpp"

#include <cmath>
#include <random>
#include <stdexcept>

namespace tg::convex {

const char* to_string(ProblemKind kind) {
  switch (kind) {
    case ProblemKind::least_squares: return "lsq";
    case ProblemKind::multiscale: return "multiscale";
    case ProblemKind::logistic: return "logistic";
  }
  return "?";
}

ProblemKind parse_problem(const std::string& text) {
  if (text == "lsq") return ProblemKind::least_squares;
  if (text == "multiscale") return ProblemKind::multiscale;
  if (text == "logistic") return ProblemKind::logistic;
  throw std::invalid_argument("unknown problem '" + text + "' (expected lsq, multiscale or logistic)");
}

void validate(const ProblemSpec& s) {
  auto bad = [](const std::string& m) { throw std::invalid_argument(m); };
  if (s.dim < 1 || s.dim > 4096) bad("dim must be in [1, 4096], got " + std::to_string(s.dim));
  if (s.samples < 2 || s.samples > 10000000) bad("samples must be in [2, 1e7], got " + std::to_string(s.samples));
  if (s.samples < s.dim) bad("data size (" + std::to_string(s.samples) + ") must be >= dim (" + std::to_string(s.dim) + ")");
  if (!std::isfinite(s.kappa) || s.kappa < 1.0 || s.kappa > 1e8) bad("kappa must be in [1, 1e8]");
  if (s.blocks < 1 || s.blocks > 64) bad("blocks must be in [1, 64], got " + std::to_string(s.blocks));
  if (!std::isfinite(s.scale_ratio) || s.scale_ratio < 1.0 || s.scale_ratio > 1e6) bad("scale-ratio must be in [1, 1e6]");
  if (!std::isfinite(s.noise) || s.noise < 0.0 || s.noise > 1e6) bad("noise must be in [0, 1e6]");
  if (!std::isfinite(s.feature_mean) || std::fabs(s.feature_mean) > 1e3) bad("feature-mean must be in [-1e3, 1e3]");
  if (!std::isfinite(s.spike) || std::fabs(s.spike) > 1e3) bad("spike must be in [-1e3, 1e3]");
  if (!std::isfinite(s.tail_dof) || s.tail_dof < 0.0 || (s.tail_dof > 0.0 && s.tail_dof < 1.0) || s.tail_dof > 1e6)
    bad("tail-dof must be 0 (Gaussian) or in [1, 1e6]");
  if (!std::isfinite(s.density) || s.density <= 0.0 || s.density > 1.0) bad("density must be in (0, 1]");
  if (!std::isfinite(s.lambda) || s.lambda <= 0.0 || s.lambda > 1e6) bad("lambda must be in (0, 1e6]");
}

namespace {

// n x d Gaussian features, column j scaled by kappa^(-j / (2 (d-1))): E[x x^T] has condition kappa.
Eigen::MatrixXd make_features(const ProblemSpec& s, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  Eigen::MatrixXd X(s.samples, s.dim);
  if (s.tail_dof == 0.0 && s.density == 1.0) {  // the original stream: same data for the same seed as before
    for (int j = 0; j < s.dim; ++j) {
      double c = s.dim > 1 ? std::pow(s.kappa, -0.5 * j / (s.dim - 1)) : 1.0;
      for (int i = 0; i < s.samples; ++i) X(i, j) = c * normal(rng) + s.feature_mean;
    }
  } else {
    std::student_t_distribution<double> student(s.tail_dof > 0.0 ? s.tail_dof : 1.0);
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    const double unit = s.tail_dof > 2.0 ? std::sqrt((s.tail_dof - 2.0) / s.tail_dof) : 1.0;
    for (int j = 0; j < s.dim; ++j) {
      double c = s.dim > 1 ? std::pow(s.kappa, -0.5 * j / (s.dim - 1)) : 1.0;
      for (int i = 0; i < s.samples; ++i) {
        double z = s.tail_dof > 0.0 ? unit * student(rng) : normal(rng);
        bool keep = s.density == 1.0 || unif(rng) < s.density;
        X(i, j) = (keep ? c * z / std::sqrt(s.density) : 0.0) + s.feature_mean;
      }
    }
  }
  if (s.spike != 0.0)
    for (int i = 0; i < s.samples; i += 10) {
      X.row(i).setZero();
      X(i, 0) = s.spike;
    }
  return X;
}

}  // namespace

LeastSquares::LeastSquares(const ProblemSpec& spec) {
  validate(spec);
  spec_ = spec;
  std::mt19937_64 rng(spec.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  X_ = make_features(spec, rng);
  const int B = spec.kind == ProblemKind::multiscale ? spec.blocks : 1;
  const int d = spec.dim, n = spec.samples;
  Y_.resize(n, B);
  for (int b = 0; b < B; ++b) {
    double scale = B > 1 ? std::pow(spec.scale_ratio, -static_cast<double>(b) / (B - 1)) : 1.0;
    blocks_.push_back({b * d, d, scale});
    Eigen::VectorXd wt(d);
    for (int j = 0; j < d; ++j) wt(j) = scale * normal(rng);
    Y_.col(b) = X_ * wt;
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    for (int i = 0; i < n; ++i)
      Y_(i, b) += scale * spec.noise * (spec.spike != 0.0 && i % 10 == 0 ? 3.0
                                        : spec.skewed_noise ? (unif(rng) < 0.1 ? 3.0 : -1.0 / 3.0) : normal(rng));
  }
  H_ = X_.transpose() * X_ / n;
  Eigen::LDLT<Eigen::MatrixXd> ldlt(H_);
  if (ldlt.info() != Eigen::Success || ldlt.rcond() < 1e-12)
    throw std::runtime_error("least squares: X^T X is singular; use more samples or a smaller kappa");
  Eigen::MatrixXd W = ldlt.solve(X_.transpose() * Y_ / n);
  // One step of iterative refinement: w* to machine precision.
  W += ldlt.solve(X_.transpose() * (Y_ - X_ * W) / n);
  w_star_.resize(d * B);
  for (int b = 0; b < B; ++b) w_star_.segment(b * d, d) = W.col(b);
  R_ = X_ * W - Y_;
  loss_star_ = loss(w_star_);
}

double LeastSquares::loss(const Eigen::VectorXd& w) const {
  const int d = features();
  double sum = 0.0;
  for (int b = 0; b < outputs(); ++b) sum += (X_ * w.segment(b * d, d) - Y_.col(b)).squaredNorm();
  return sum / (2.0 * samples());
}

void LeastSquares::batch_gradient(const Eigen::VectorXd& w, std::span<const int> idx, Eigen::VectorXd& g) const {
  const int d = features();
  g.setZero(dim());
  for (int i : idx) {
    auto x = X_.row(i);
    for (int b = 0; b < outputs(); ++b) {
      double r = x.dot(w.segment(b * d, d)) - Y_(i, b);
      g.segment(b * d, d) += r * x.transpose();
    }
  }
  g /= static_cast<double>(idx.size());
}

Eigen::VectorXd LeastSquares::full_gradient(const Eigen::VectorXd& w) const {
  const int d = features();
  Eigen::VectorXd g(dim());
  for (int b = 0; b < outputs(); ++b)
    g.segment(b * d, d) = X_.transpose() * (X_ * w.segment(b * d, d) - Y_.col(b)) / samples();
  return g;
}

Eigen::VectorXd LeastSquares::hessian_eigenvalues() const {
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(H_);
  Eigen::VectorXd ev(dim());
  for (int b = 0; b < outputs(); ++b) ev.segment(b * features(), features()) = es.eigenvalues();
  std::sort(ev.data(), ev.data() + ev.size());
  return ev;
}

namespace {
double log1pexp(double z) { return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z)); }
double sigmoid(double z) { return z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z)); }
}  // namespace

Logistic::Logistic(const ProblemSpec& spec) {
  validate(spec);
  spec_ = spec;
  std::mt19937_64 rng(spec.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unif(1e-12, 1.0 - 1e-12);
  X_ = make_features(spec, rng);
  const int d = spec.dim, n = spec.samples;
  blocks_.push_back({0, d, 1.0});
  Eigen::VectorXd wt(d);
  for (int j = 0; j < d; ++j) wt(j) = normal(rng);
  wt *= 2.0 / std::sqrt(std::max(1e-300, (X_ * wt).squaredNorm() / n));  // margins of order 2
  y_.resize(n);
  for (int i = 0; i < n; ++i) {
    double u = unif(rng);
    y_(i) = X_.row(i).dot(wt) + std::log(u / (1.0 - u)) > 0.0 ? 1.0 : -1.0;
  }
  w_star_ = Eigen::VectorXd::Zero(d);
  for (newton_iterations_ = 1; newton_iterations_ <= 100; ++newton_iterations_) {
    Eigen::VectorXd g = full_gradient(w_star_);
    if (g.norm() < 1e-12) break;
    w_star_ -= hessian(w_star_).ldlt().solve(g);
  }
  if (full_gradient(w_star_).norm() >= 1e-10) throw std::runtime_error("logistic: Newton's method did not converge");
  loss_star_ = loss(w_star_);
}

double Logistic::loss(const Eigen::VectorXd& w) const {
  Eigen::VectorXd z = X_ * w;
  double sum = 0.0;
  for (int i = 0; i < samples(); ++i) sum += log1pexp(-y_(i) * z(i));
  return sum / samples() + 0.5 * spec_.lambda * w.squaredNorm();
}

void Logistic::batch_gradient(const Eigen::VectorXd& w, std::span<const int> idx, Eigen::VectorXd& g) const {
  g.setZero(dim());
  for (int i : idx) {
    double z = X_.row(i).dot(w);
    g += (-y_(i) * sigmoid(-y_(i) * z)) * X_.row(i).transpose();
  }
  g /= static_cast<double>(idx.size());
  g += spec_.lambda * w;
}

Eigen::VectorXd Logistic::full_gradient(const Eigen::VectorXd& w) const {
  Eigen::VectorXd z = X_ * w, coef(samples());
  for (int i = 0; i < samples(); ++i) coef(i) = -y_(i) * sigmoid(-y_(i) * z(i));
  return X_.transpose() * coef / samples() + spec_.lambda * w;
}

Eigen::MatrixXd Logistic::hessian(const Eigen::VectorXd& w) const {
  Eigen::VectorXd z = X_ * w, p(samples());
  for (int i = 0; i < samples(); ++i) {
    double s = sigmoid(z(i));
    p(i) = s * (1.0 - s);
  }
  Eigen::MatrixXd Hm = X_.transpose() * p.asDiagonal() * X_ / samples();
  Hm.diagonal().array() += spec_.lambda;
  return Hm;
}

Eigen::VectorXd Logistic::hessian_eigenvalues() const {
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(hessian(w_star_));
  return es.eigenvalues();
}

std::unique_ptr<Problem> make_problem(const ProblemSpec& spec) {
  if (spec.kind == ProblemKind::logistic) return std::make_unique<Logistic>(spec);
  return std::make_unique<LeastSquares>(spec);
}

}  // namespace tg::convex
