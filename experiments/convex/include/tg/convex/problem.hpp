// terngrad-bench: convex problems on generated data for the convergence experiments (Eigen):
// least squares (w* exact), multi-scale least squares (parameter blocks 100x apart in scale) and
// L2-regularized logistic regression (w* by Newton's method). See experiments/convex/README.md.
#pragma once

#include <Eigen/Dense>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tg::convex {

enum class ProblemKind { least_squares, multiscale, logistic };
const char* to_string(ProblemKind kind);
/// "lsq", "multiscale" or "logistic"; throws std::invalid_argument naming the bad value.
ProblemKind parse_problem(const std::string& text);

struct ProblemSpec {
  ProblemKind kind = ProblemKind::least_squares;
  int dim = 10;              // features per block (per output)
  int samples = 400;         // data points n
  double kappa = 4.0;        // feature scales decay geometrically: condition number of E[x x^T]
  int blocks = 2;            // multiscale only: number of parameter blocks (outputs)
  double scale_ratio = 100;  // multiscale only: scale of block 0 over the last block
  double noise = 1.0;        // least squares: label noise std (times the block scale)
  bool skewed_noise = false; // least squares: noise * (two-point: +3 w.p. 0.1, -1/3 w.p. 0.9; mean 0, variance 1)
                             // instead of Gaussian: asymmetric gradients, so clipping biases the fixed point
  double feature_mean = 0.0; // added to every feature
  double spike = 0.0;        // != 0: every 10th point is spike * e_0 with label noise +3 * noise: its gradient is
                             // one large coordinate that clipping cuts, the others are not cut (clipping biases)
  double tail_dof = 0.0;     // > 0: features Student-t with this many degrees of freedom (heavy tails; scaled to
                             // unit variance when > 2), instead of Gaussian. 0: Gaussian
  double density = 1.0;      // fraction of nonzero features: each is kept with this probability (times
                             // 1/sqrt(density), same variance): sparse gradients. 1: dense
  double lambda = 1e-2;      // logistic: L2 regularization
  std::uint64_t seed = 1;    // data seed
};
/// Throws std::invalid_argument naming the first option out of range.
void validate(const ProblemSpec& spec);

/// One parameter block ("layer"): coordinates [offset, offset + size), nominal scale.
struct Block {
  int offset = 0;
  int size = 0;
  double scale = 1.0;
};

class Problem {
 public:
  virtual ~Problem() = default;
  const ProblemSpec& spec() const { return spec_; }
  int dim() const { return static_cast<int>(w_star_.size()); }
  int samples() const { return spec_.samples; }
  const std::vector<Block>& blocks() const { return blocks_; }
  const Eigen::VectorXd& w_star() const { return w_star_; }
  double loss_star() const { return loss_star_; }
  virtual double loss(const Eigen::VectorXd& w) const = 0;
  /// Mean gradient over the data points `idx` (with repetitions), written to g (size dim()).
  virtual void batch_gradient(const Eigen::VectorXd& w, std::span<const int> idx, Eigen::VectorXd& g) const = 0;
  virtual Eigen::VectorXd full_gradient(const Eigen::VectorXd& w) const = 0;
  /// Eigenvalues of the Hessian at w* (ascending).
  virtual Eigen::VectorXd hessian_eigenvalues() const = 0;

 protected:
  ProblemSpec spec_;
  std::vector<Block> blocks_;
  Eigen::VectorXd w_star_;
  double loss_star_ = 0.0;
};

/// Least squares with B outputs sharing the features: C(w) = 1/(2n) sum_i sum_b (x_i^T w_b - y_ib)^2,
/// w = [w_0; ...; w_{B-1}]. Everything in block b (true weights, noise) is scaled by blocks()[b].scale.
class LeastSquares : public Problem {
 public:
  explicit LeastSquares(const ProblemSpec& spec);
  double loss(const Eigen::VectorXd& w) const override;
  void batch_gradient(const Eigen::VectorXd& w, std::span<const int> idx, Eigen::VectorXd& g) const override;
  Eigen::VectorXd full_gradient(const Eigen::VectorXd& w) const override;
  Eigen::VectorXd hessian_eigenvalues() const override;
  const Eigen::MatrixXd& X() const { return X_; }          // n x d
  const Eigen::MatrixXd& residuals() const { return R_; }  // n x B, r_ib = x_i^T w*_b - y_ib
  const Eigen::MatrixXd& H() const { return H_; }          // d x d, X^T X / n (each block's Hessian)
  int outputs() const { return static_cast<int>(Y_.cols()); }
  int features() const { return static_cast<int>(X_.cols()); }

 private:
  Eigen::MatrixXd X_, Y_, R_, H_;
};

/// L2-regularized logistic regression, labels in {-1, +1}:
/// C(w) = 1/n sum_i log(1 + exp(-y_i x_i^T w)) + lambda/2 ||w||^2; w* by Newton to ||grad|| < 1e-12.
class Logistic : public Problem {
 public:
  explicit Logistic(const ProblemSpec& spec);
  double loss(const Eigen::VectorXd& w) const override;
  void batch_gradient(const Eigen::VectorXd& w, std::span<const int> idx, Eigen::VectorXd& g) const override;
  Eigen::VectorXd full_gradient(const Eigen::VectorXd& w) const override;
  Eigen::VectorXd hessian_eigenvalues() const override;
  Eigen::MatrixXd hessian(const Eigen::VectorXd& w) const;
  int newton_iterations() const { return newton_iterations_; }

 private:
  Eigen::MatrixXd X_;
  Eigen::VectorXd y_;
  int newton_iterations_ = 0;
};

std::unique_ptr<Problem> make_problem(const ProblemSpec& spec);

}  // namespace tg::convex
