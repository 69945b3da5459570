// terngrad-bench: how N simulated workers' gradients become one update in the convex experiments:
// float mean, TernGrad through the real codec (shared scalar + exact integer aggregation, or each
// worker's own scalar; layer-wise or one global scalar; clipping none/clip/saturate), and two
// contrast codecs implemented here: QSGD-style (1 level, L2 scalar) and scaled SignSGD.
#pragma once

#include <Eigen/Dense>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tg/codec.hpp"
#include "tg/convex/problem.hpp"

namespace tg::convex {

enum class Scheme { float32, terngrad, qsgd, signsgd };

struct MethodSpec {
  std::string name = "float";
  Scheme scheme = Scheme::float32;
  Params params;               // TernGrad: clipping mode and c
  bool layerwise = true;       // TernGrad/QSGD/sign: one scalar per block (false: one for all of w)
  bool shared = true;          // TernGrad: workers share the max scalar (exact integer aggregation)
  double scalar_factor = 1.0;  // != 1 only for deliberately wrong codecs that test the checks' power:
                               // encodes with factor * s while the identity is stated for s
};

/// Names accepted by parse_method (the --methods option of `terngrad converge`).
std::vector<std::string> method_names();
/// float, tern, tern-clip, tern-saturate, tern-global, tern-unshared, qsgd, sign, and the deliberately
/// wrong codec tern-mutant-2s (shared scalar doubled). Throws std::invalid_argument on other names.
MethodSpec parse_method(const std::string& name, double c = 2.5);

/// What one aggregation step knows exactly, given the workers' gradients g_w:
struct StepStats {
  Eigen::VectorXd noise_var;  // Var[update_k | g_1..g_N]: (1/N^2) sum_w |x_wk| (s - |x_wk|) (0 for float, sign)
  Eigen::VectorXd target;     // E[update | g_1..g_N]: mean_w x_w, x_w = clamp(g_w) under clipping, else g_w
  double assumption3 = 0.0;   // mean_w ||g_w||_inf ||g_w||_1 (whole vector)
  double grad_sq = 0.0;       // mean_w ||g_w||_2^2
};

class Aggregator {
 public:
  Aggregator(MethodSpec method, std::vector<Block> blocks, int workers, std::uint64_t seed);
  const MethodSpec& method() const { return method_; }
  /// Combines the workers' gradients at `step` into `update`; fills `stats`.
  void combine(const std::vector<Eigen::VectorXd>& grads, std::uint32_t step, Eigen::VectorXd& update,
               StepStats& stats);

 private:
  void terngrad_shared(const std::vector<Eigen::VectorXd>& grads, std::uint32_t step, Eigen::VectorXd& update,
                       StepStats& stats);
  void terngrad_own(const std::vector<Eigen::VectorXd>& grads, std::uint32_t step, Eigen::VectorXd& update,
                    StepStats& stats);
  void qsgd(const std::vector<Eigen::VectorXd>& grads, std::uint32_t step, Eigen::VectorXd& update,
            StepStats& stats);
  void signsgd(const std::vector<Eigen::VectorXd>& grads, Eigen::VectorXd& update);

  MethodSpec method_;
  std::vector<Block> blocks_;  // the scalar's scope: problem blocks (layer-wise) or one block
  int workers_;
  std::uint64_t seed_;
  std::unique_ptr<Codec> codec_;
  std::vector<std::vector<float>> buf_;  // per worker, one block as float32
};

}  // namespace tg::convex
