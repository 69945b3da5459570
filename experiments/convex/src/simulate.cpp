// terngrad-bench: the simulated data-parallel SGD loop of the convex experiments.
// See include/tg/convex/simulate.hpp.
#include "tg/convex/simulate.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace tg::convex {

std::string Schedule::describe() const {
  std::ostringstream os;
  if (constant) os << "constant gamma = " << gamma;
  else os << "gamma_t = " << gamma0 << " / (t + " << t0 << ")";
  return os.str();
}

void validate(const RunSpec& r) {
  auto bad = [](const std::string& m) { throw std::invalid_argument(m); };
  if (r.workers < 1 || r.workers > 1024) bad("workers must be in [1, 1024], got " + std::to_string(r.workers));
  if (r.batch < 1 || r.batch > 100000) bad("batch must be in [1, 100000], got " + std::to_string(r.batch));
  if (r.steps < 1 || r.steps > 10000000) bad("steps must be in [1, 1e7], got " + std::to_string(r.steps));
  const Schedule& s = r.schedule;
  if (s.constant && !(std::isfinite(s.gamma) && s.gamma > 0.0)) bad("gamma must be finite and > 0");
  if (!s.constant && !(std::isfinite(s.gamma0) && s.gamma0 > 0.0)) bad("gamma0 must be finite and > 0");
  if (!s.constant && !(std::isfinite(s.t0) && s.t0 > 0.0)) bad("t0 must be finite and > 0");
  if (r.average_from > r.steps) bad("average-from must be <= steps");
}

Trace run_sgd(const Problem& problem, const MethodSpec& method, const RunSpec& run, std::uint64_t seed) {
  validate(run);
  const int D = problem.dim(), N = run.workers, T = run.steps;
  const auto& blocks = problem.blocks();
  Aggregator agg(method, blocks, N, seed);
  Trace tr;
  tr.seed = seed;
  Eigen::VectorXd w = run.start_at_optimum ? problem.w_star() : Eigen::VectorXd::Zero(D);
  tr.dist2.reserve(T + 1);
  tr.block_dist2.resize(T + 1, static_cast<int>(blocks.size()));
  if (run.keep_noise) tr.noise_var.setZero(T, D);
  tr.w_avg.setZero(D);
  int averaged = 0;
  std::vector<Eigen::VectorXd> grads(N, Eigen::VectorXd(D));
  std::vector<int> idx(run.batch);
  Eigen::VectorXd update(D);
  StepStats stats;
  auto record = [&](int t) {
    Eigen::VectorXd e = w - problem.w_star();
    tr.dist2.push_back(e.squaredNorm());
    for (std::size_t b = 0; b < blocks.size(); ++b)
      tr.block_dist2(t, static_cast<int>(b)) = e.segment(blocks[b].offset, blocks[b].size).squaredNorm();
    tr.loss_gap.push_back(problem.loss(w) - problem.loss_star());
    if (run.average_from >= 0 && t >= run.average_from) {
      tr.w_avg += w;
      ++averaged;
    }
  };
  record(0);
  const std::uint64_t n = static_cast<std::uint64_t>(problem.samples());
  // Steps t = 0..T-1 move w; at t = T the workers' gradients and the codec step at the final iterate are
  // computed and recorded but not applied, so every per-step quantity exists at every recorded t
  // (curves.csv's last row, t = T, included).
  for (int t = 0; t <= T; ++t) {
    for (int wk = 0; wk < N; ++wk) {
      // Minibatch indices, uniform with replacement: (u * n) >> 32 of Philox words on a tensor id
      // no codec stream uses (bias of each index below n / 2^32).
      StreamKey key{seed, static_cast<std::uint32_t>(wk), 0x42000000u, static_cast<std::uint32_t>(t)};
      for (int j = 0; j < run.batch; ++j) {
        std::uint32_t u = philox_block(key, static_cast<std::uint32_t>(j / 4)).v[j % 4];
        idx[j] = static_cast<int>((static_cast<std::uint64_t>(u) * n) >> 32);
      }
      problem.batch_gradient(w, idx, grads[wk]);
    }
    agg.combine(grads, static_cast<std::uint32_t>(t), update, stats);
    tr.update_sq.push_back(update.squaredNorm());
    tr.assumption3.push_back(stats.assumption3);
    tr.grad_sq.push_back(stats.grad_sq);
    tr.var_measured.push_back((update - stats.target).squaredNorm());
    tr.var_identity.push_back(stats.noise_var.sum());
    if (t == T) break;
    if (run.keep_noise) tr.noise_var.row(t) = stats.noise_var.transpose();
    w -= run.schedule.at(t) * update;
    double nrm = w.squaredNorm();
    if (!std::isfinite(nrm) || nrm > 1e60) {
      tr.diverged = true;
      for (int s = t + 1; s <= T; ++s) {
        tr.dist2.push_back(INFINITY);
        tr.block_dist2.row(s).setConstant(INFINITY);
        tr.loss_gap.push_back(INFINITY);
      }
      break;
    }
    record(t + 1);
  }
  tr.w_final = w;
  if (averaged > 0) tr.w_avg /= averaged;
  return tr;
}

std::vector<Trace> run_seeds(const Problem& problem, const MethodSpec& method, const RunSpec& run,
                             std::uint64_t seed0, int count, const std::function<void(int)>& progress) {
  std::vector<Trace> out;
  out.reserve(count);
  for (int r = 0; r < count; ++r) {
    out.push_back(run_sgd(problem, method, run, seed0 + static_cast<std::uint64_t>(r)));
    if (progress) progress(r + 1);
  }
  return out;
}

}  // namespace tg::convex
