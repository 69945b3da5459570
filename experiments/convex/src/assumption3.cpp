// terngrad-bench: Assumption 3 as a bound: exact constants on least squares with batch 1, and estimated
// constants from the runs (fit half of the seeds, tested on the held-out half). See
// include/tg/convex/assumption3.hpp.
#include "tg/convex/assumption3.hpp"

#include "tg/convex/checks.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace tg::convex {

double Assumption3Exact::a_for(double B) const {
  if (!(B > b_min)) return std::numeric_limits<double>::infinity();
  Eigen::MatrixXd S = B * Eigen::MatrixXd::Identity(M.rows(), M.cols()) - M;
  return c + m.dot(S.ldlt().solve(m));
}

double Assumption3Exact::violation_r(double A, double B) const {
  // Along e = R * worst: F = lambda R^2 + 2 R (m.worst) + c against A + B R^2.
  const double lam = worst.dot(M * worst), mv = m.dot(worst);
  const double qa = lam - B, qb = 2.0 * mv, qc = c - A;
  if (qc > 0) return 0.0;
  if (qa <= 0) return std::numeric_limits<double>::infinity();  // along this direction the bound holds
  const double R = (-qb + std::sqrt(qb * qb - 4.0 * qa * qc)) / (2.0 * qa);
  return R * R;
}

Assumption3Exact assumption3_exact(const LeastSquares& p) {
  if (p.outputs() != 1) throw std::invalid_argument("the exact Assumption 3 constants need a single-block problem");
  const auto& X = p.X();
  const Eigen::VectorXd r = p.residuals().col(0);
  const int n = p.samples(), d = p.features();
  Assumption3Exact ex;
  ex.M.setZero(d, d);
  ex.m.setZero(d);
  Eigen::MatrixXd M2 = Eigen::MatrixXd::Zero(d, d);
  for (int i = 0; i < n; ++i) {
    Eigen::VectorXd x = X.row(i).transpose();
    const double a = x.cwiseAbs().maxCoeff() * x.lpNorm<1>(), a2 = x.squaredNorm();
    ex.M.noalias() += (a / n) * x * x.transpose();
    M2.noalias() += (a2 / n) * x * x.transpose();
    ex.m += (a * r(i) / n) * x;
    ex.c += a * r(i) * r(i) / n;
    ex.sgd_c += a2 * r(i) * r(i) / n;
  }
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(ex.M);
  ex.b_min = es.eigenvalues()(d - 1);
  ex.worst = es.eigenvectors().col(d - 1);
  if (ex.m.dot(ex.worst) < 0) ex.worst = -ex.worst;
  ex.sgd_b_min = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(M2, Eigen::EigenvaluesOnly).eigenvalues()(d - 1);
  return ex;
}

namespace {

struct Binned {
  std::vector<double> edges;  // K + 1
  // [bin][seed]: mean r, mean value (only seeds that visited the bin)
  std::vector<std::vector<double>> r, v;
};

Binned bin_traces(const std::vector<const Trace*>& traces, const std::vector<double> Trace::*member,
                  const std::vector<double>& edges) {
  const int K = static_cast<int>(edges.size()) - 1;
  Binned b;
  b.edges = edges;
  b.r.assign(K, {});
  b.v.assign(K, {});
  for (const Trace* tr : traces) {
    std::vector<double> sr(K, 0.0), sv(K, 0.0);
    std::vector<int> cnt(K, 0);
    const auto& vals = tr->*member;
    const std::size_t T = std::min(vals.size(), tr->dist2.size());
    for (std::size_t t = 0; t < T; ++t) {
      const double r = tr->dist2[t], v = vals[t];
      if (!(r > 0) || !std::isfinite(r) || !std::isfinite(v)) continue;
      auto it = std::upper_bound(edges.begin(), edges.end(), r);
      int k = static_cast<int>(it - edges.begin()) - 1;
      if (k < 0 || k >= K) continue;
      sr[k] += r;
      sv[k] += v;
      ++cnt[k];
    }
    for (int k = 0; k < K; ++k)
      if (cnt[k] > 0) {
        b.r[k].push_back(sr[k] / cnt[k]);
        b.v[k].push_back(sv[k] / cnt[k]);
      }
  }
  return b;
}

double mean(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v;
  return s / x.size();
}
double stderr_of(const std::vector<double>& x) {
  const double m = mean(x);
  double ss = 0;
  for (double v : x) ss += (v - m) * (v - m);
  return std::sqrt(ss / (x.size() - 1) / x.size());
}

// The line A + B r (A, B >= 0) above every (r_k, U_k) with the smallest sum over the k.
std::pair<double, double> envelope(const std::vector<double>& r, const std::vector<double>& u) {
  const std::size_t K = r.size();
  auto feasible = [&](double A, double B) {
    if (A < 0 || B < 0 || !std::isfinite(A) || !std::isfinite(B)) return false;
    for (std::size_t k = 0; k < K; ++k)
      if (A + B * r[k] < u[k] * (1.0 - 1e-12)) return false;
    return true;
  };
  double best = std::numeric_limits<double>::infinity(), bA = 0, bB = 0;
  auto consider = [&](double A, double B) {
    if (!feasible(A, B)) return;
    double obj = 0;
    for (std::size_t k = 0; k < K; ++k) obj += A + B * r[k];
    if (obj < best) { best = obj; bA = A; bB = B; }
  };
  consider(*std::max_element(u.begin(), u.end()), 0.0);
  double bmax = 0;
  for (std::size_t k = 0; k < K; ++k) bmax = std::max(bmax, u[k] / r[k]);
  consider(0.0, bmax);
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t l = k + 1; l < K; ++l) {
      if (r[l] == r[k]) continue;
      const double B = (u[l] - u[k]) / (r[l] - r[k]);
      consider(u[k] - B * r[k], B);
    }
  return {bA, bB};
}

}  // namespace

Assumption3Fit fit_assumption3(const std::vector<Trace>& all, int K, double alpha, double beta) {
  if (K < 1) throw std::invalid_argument("Assumption 3: bins must be >= 1");
  std::vector<const Trace*> ok;
  for (const auto& tr : all)
    if (!tr.diverged) ok.push_back(&tr);
  if (ok.size() < 4) throw std::invalid_argument("Assumption 3: the fit needs at least 4 runs that did not diverge");
  const std::size_t half = ok.size() / 2;
  std::vector<const Trace*> fit(ok.begin(), ok.begin() + half), held(ok.begin() + half, ok.end());
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const Trace* tr : fit)
    for (double r : tr->dist2)
      if (r > 0 && std::isfinite(r)) { lo = std::min(lo, r); hi = std::max(hi, r); }
  if (!(hi > lo)) throw std::invalid_argument("Assumption 3: the runs visit no range of ||w - w*||^2");
  std::vector<double> edges(K + 1);
  for (int k = 0; k <= K; ++k) edges[k] = std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * k / K);
  edges[0] = lo * (1 - 1e-12);
  edges[K] = hi * (1 + 1e-12);

  Assumption3Fit out;
  out.alpha = alpha;
  out.beta = beta;
  out.fit_seeds = static_cast<int>(fit.size());
  out.held_seeds = static_cast<int>(held.size());
  auto fit_line = [&](const std::vector<double> Trace::*member, std::vector<Assumption3Bin>* bins_out,
                      double* t_fit) {
    Binned b = bin_traces(fit, member, edges);
    std::vector<int> used;
    for (int k = 0; k < K; ++k)
      if (b.v[k].size() >= 3) used.push_back(k);
    if (used.empty()) throw std::invalid_argument("Assumption 3: no bin was visited by 3 or more fit runs");
    const int dof = out.fit_seeds - 1;
    const double tq = t_quantile(1.0 - alpha / used.size(), std::max(1, dof));
    if (t_fit) *t_fit = tq;
    std::vector<double> rs, us;
    for (int k : used) {
      Assumption3Bin bin;
      bin.r_lo = edges[k];
      bin.r_hi = edges[k + 1];
      bin.fit_seeds = static_cast<int>(b.v[k].size());
      bin.r_mean = mean(b.r[k]);
      bin.fit_mean = mean(b.v[k]);
      bin.fit_se = stderr_of(b.v[k]);
      bin.ucb = bin.fit_mean + t_quantile(1.0 - alpha / used.size(), bin.fit_seeds - 1) * bin.fit_se;
      rs.push_back(bin.r_mean);
      us.push_back(bin.ucb);
      if (bins_out) bins_out->push_back(bin);
    }
    return envelope(rs, us);
  };
  std::tie(out.A, out.B) = fit_line(&Trace::assumption3, &out.bins, &out.t_fit);
  std::tie(out.sgd_A, out.sgd_B) = fit_line(&Trace::grad_sq, nullptr, nullptr);

  // Held-out test: per-seed mean excess q_t - (A + B r_t) in each used bin.
  const double A = out.A, B = out.B;
  std::vector<double> k_of_bin;
  const int Kused = static_cast<int>(out.bins.size());
  std::vector<std::vector<double>> excess(Kused);
  for (const Trace* tr : held) {
    std::vector<double> s(Kused, 0.0);
    std::vector<int> cnt(Kused, 0);
    const std::size_t T = std::min(tr->assumption3.size(), tr->dist2.size());
    for (std::size_t t = 0; t < T; ++t) {
      const double r = tr->dist2[t], q = tr->assumption3[t];
      if (!std::isfinite(r) || !std::isfinite(q)) continue;
      const double bound = A + B * r;
      ++out.held_steps;
      out.held_steps_above += q > bound * (1.0 + 1e-12);  // rounding of the fitted line is not an excess
      if (bound > 0) out.max_ratio = std::max(out.max_ratio, q / bound);
      for (int j = 0; j < Kused; ++j)
        if (r >= out.bins[j].r_lo && r < out.bins[j].r_hi) {
          s[j] += q - bound;
          ++cnt[j];
        }
    }
    for (int j = 0; j < Kused; ++j)
      if (cnt[j] > 0) excess[j].push_back(s[j] / cnt[j]);
  }
  out.holds = true;
  out.t_test = 0;
  for (int j = 0; j < Kused; ++j) {
    auto& bin = out.bins[j];
    bin.bound = A + B * bin.r_mean;
    bin.held_seeds = static_cast<int>(excess[j].size());
    if (bin.held_seeds < 3) continue;  // not tested (stated in the bin's held_seeds)
    bin.held_excess = mean(excess[j]);
    if (std::fabs(bin.held_excess) <= 1e-12 * std::fabs(bin.bound)) bin.held_excess = 0.0;  // rounding
    bin.held_se = stderr_of(excess[j]);
    const double tc = t_quantile(1.0 - alpha / Kused, bin.held_seeds - 1);  // one-sided, Bonferroni
    out.t_test = std::max(out.t_test, tc);
    bin.t = bin.held_se > 0 ? bin.held_excess / bin.held_se : (bin.held_excess > 0 ? INFINITY : 0.0);
    bin.refuted = bin.t > tc;
    bin.detectable = (tc + t_quantile(1.0 - beta, bin.held_seeds - 1)) * bin.held_se;
    if (bin.bound > 0) out.max_detectable_rel = std::max(out.max_detectable_rel, bin.detectable / bin.bound);
    out.holds = out.holds && !bin.refuted;
  }
  return out;
}

nlohmann::json to_json(const Assumption3Exact& ex) {
  return {{"b_min", ex.b_min}, {"a_at_w_star", ex.c}, {"a_for_2b_min", ex.a_for(2.0 * ex.b_min)},
          {"sgd_b_min", ex.sgd_b_min}, {"sgd_a_at_w_star", ex.sgd_c}, {"b_ratio_to_sgd", ex.b_min / ex.sgd_b_min}};
}

nlohmann::json to_json(const Assumption3Fit& f) {
  nlohmann::json bins = nlohmann::json::array();
  for (const auto& b : f.bins)
    bins.push_back({{"r_lo", b.r_lo}, {"r_hi", b.r_hi}, {"r_mean", b.r_mean}, {"fit_seeds", b.fit_seeds},
                    {"held_seeds", b.held_seeds}, {"fit_mean", b.fit_mean}, {"fit_se", b.fit_se}, {"ucb", b.ucb},
                    {"bound", b.bound}, {"held_excess", b.held_excess}, {"held_se", b.held_se}, {"t", b.t},
                    {"refuted", b.refuted}, {"detectable", b.detectable}});
  return {{"A", f.A}, {"B", f.B}, {"alpha", f.alpha}, {"beta", f.beta}, {"fit_seeds", f.fit_seeds},
          {"held_seeds", f.held_seeds}, {"holds_on_held_out", f.holds}, {"max_detectable_rel", f.max_detectable_rel},
          {"held_steps", f.held_steps}, {"held_steps_above", f.held_steps_above}, {"max_ratio", f.max_ratio},
          {"sgd_A", f.sgd_A}, {"sgd_B", f.sgd_B}, {"bins", bins}};
}

}  // namespace tg::convex
