// terngrad-bench: data-parallel SGD on a convex problem with N simulated workers: each worker draws
// its own minibatch (with replacement), the method combines the gradients, w <- w - gamma_t * update.
// Records ||w_t - w*||^2 (per block), the loss gap, ||update||^2, Assumption 3's ||g||_inf ||g||_1 and
// the per-step codec variance (measured and the identity's value).
#pragma once

#include <Eigen/Dense>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tg/convex/methods.hpp"
#include "tg/convex/problem.hpp"

namespace tg::convex {

/// gamma_t = gamma0 / (t + t0) (Assumption 2: sum gamma_t = inf, sum gamma_t^2 < inf), or constant.
struct Schedule {
  bool constant = false;
  double gamma0 = 4.0;
  double t0 = 20.0;
  double gamma = 0.05;
  double at(int t) const { return constant ? gamma : gamma0 / (t + t0); }
  std::string describe() const;
};

struct RunSpec {
  int workers = 4;
  int batch = 8;        // samples per worker per step
  int steps = 2000;
  Schedule schedule;
  bool start_at_optimum = false;  // w_0 = w* (noise-ball runs); otherwise w_0 = 0
  int average_from = -1;          // Polyak average of w_t over t >= average_from (-1: none)
  bool keep_noise = false;        // keep the per-step, per-coordinate identity variance (for predictions)
};
/// Throws std::invalid_argument naming the first option out of range.
void validate(const RunSpec& run);

struct Trace {
  std::uint64_t seed = 0;
  std::vector<double> dist2;         // ||w_t - w*||^2, t = 0..steps
  Eigen::MatrixXd block_dist2;       // (steps+1) x blocks
  std::vector<double> loss_gap;      // C(w_t) - C(w*), t = 0..steps
  std::vector<double> update_sq;     // ||update_t||^2, t = 0..steps (per-step values: the one at t = steps is
                                     // the gradients and codec step at w_T, recorded but not applied)
  std::vector<double> assumption3;   // mean_w ||g_w||_inf ||g_w||_1
  std::vector<double> grad_sq;       // mean_w ||g_w||_2^2
  std::vector<double> var_measured;  // ||update_t - E[update_t | g_1..g_N]||^2
  std::vector<double> var_identity;  // sum_k Var[update_tk | g_1..g_N] (the identity)
  Eigen::MatrixXd noise_var;         // steps x dim, if keep_noise
  Eigen::VectorXd w_final, w_avg;
  bool diverged = false;             // a non-finite or > 1e30 iterate stopped the run
};

/// One run with seed `seed` (minibatches and codec stream). Deterministic for a seed.
Trace run_sgd(const Problem& problem, const MethodSpec& method, const RunSpec& run, std::uint64_t seed);

/// Runs seeds seed0, seed0+1, ..., seed0+count-1; `progress` (may be empty) is called after each.
std::vector<Trace> run_seeds(const Problem& problem, const MethodSpec& method, const RunSpec& run,
                             std::uint64_t seed0, int count,
                             const std::function<void(int done)>& progress = {});

}  // namespace tg::convex
