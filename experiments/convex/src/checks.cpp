// terngrad-bench: statistical checks of the convex experiments (prediction t-tests, Clopper-Pearson
// convergence fraction, layer-wise vs global, clipping fixed point). See include/tg/convex/checks.hpp.
#include "tg/convex/checks.hpp"
#include "tg/strf.hpp"
#include "tg/verify/stats.hpp"

#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/students_t.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

namespace tg::convex {

namespace {
double mean_of(const std::vector<double>& x) { return std::accumulate(x.begin(), x.end(), 0.0) / x.size(); }
}  // namespace

double t_quantile(double p, int dof) {
  boost::math::students_t dist(dof);
  return boost::math::quantile(dist, p);
}

TTest t_test(const std::vector<double>& x, double mu0, double alpha) {
  if (x.size() < 2) throw std::invalid_argument("a t-test needs at least 2 seeds");
  TTest r;
  r.n = static_cast<int>(x.size());
  r.mean = mean_of(x);
  double ss = 0;
  for (double v : x) ss += (v - r.mean) * (v - r.mean);
  r.sd = std::sqrt(ss / (r.n - 1));
  r.se = r.sd / std::sqrt(r.n);
  r.t_crit = t_quantile(1.0 - alpha / 2, r.n - 1);
  r.t = r.se > 0 ? (r.mean - mu0) / r.se : (r.mean == mu0 ? 0.0 : INFINITY);
  r.reject = std::fabs(r.t) > r.t_crit;
  return r;
}

int binomial_pass_count(int n, double p0, double alpha) {
  boost::math::binomial_distribution<> dist(n, p0);
  int k = 0;
  // P(X < k+1) = cdf(k); raise k while P(X < k + 1) <= alpha.
  while (k < n && boost::math::cdf(dist, k) <= alpha) ++k;
  return k;
}

double binomial_upper_tail(int n, double p, int k) {
  if (k <= 0) return 1.0;
  if (k > n) return 0.0;
  boost::math::binomial_distribution<> dist(n, p);
  return boost::math::cdf(boost::math::complement(dist, k - 1));
}

// ---- 1 ----------------------------------------------------------------------------------------
PredictionResult check_prediction(const PredictionSpec& spec, bool keep_traces) {
  PredictionResult res;
  if (spec.problem.kind == ProblemKind::logistic)
    throw std::invalid_argument("the exact prediction needs a least-squares problem");
  LeastSquares problem(spec.problem);
  RunSpec run = spec.run;
  run.keep_noise = true;
  const int B = static_cast<int>(problem.blocks().size());
  Eigen::VectorXd bw = Eigen::VectorXd::Ones(B);
  if (!spec.block_weights.empty()) {
    if (static_cast<int>(spec.block_weights.size()) != B) throw std::invalid_argument("one block weight per block");
    for (int b = 0; b < B; ++b) bw(b) = spec.block_weights[b];
  }
  Eigen::VectorXd tw = window_weights(run.steps, spec.window_from);
  Prediction pred = predict(problem, run, tw, bw);
  res.f0 = pred.f0;
  auto traces = run_seeds(problem, spec.method, run, spec.seed0, spec.seeds);
  std::vector<double> diff;
  for (const auto& tr : traces) {
    double a = tw.dot(tr.block_dist2 * bw);
    double p = pred.value(tr.noise_var);
    res.measured.push_back(a);
    res.predicted.push_back(p);
    diff.push_back(a - p);
  }
  res.test = t_test(diff, 0.0, spec.alpha);
  const double z_beta = t_quantile(1.0 - spec.beta, res.test.n - 1);
  const double mp = mean_of(res.predicted), mm = mean_of(res.measured);
  const double detect = (res.test.t_crit + z_beta) * res.test.se;
  res.min_detectable_total = detect / mp;
  res.min_detectable_codec = mp - res.f0 > 1e-9 * mp ? detect / (mp - res.f0) : INFINITY;
  bool finite = std::isfinite(mm) && std::isfinite(res.test.t);
  auto& o = res.outcome;
  o.name = spec.name;
  o.alpha = spec.alpha;
  o.passed = finite && !res.test.reject;
  o.lines.push_back(strf("%s: %s on %s (d=%d, n=%d, kappa=%g), N=%d workers x batch %d, %s, %d steps, %d seeds",
                        spec.name.c_str(), spec.method.name.c_str(), to_string(spec.problem.kind), spec.problem.dim,
                        spec.problem.samples, spec.problem.kappa, run.workers, run.batch,
                        run.schedule.describe().c_str(), run.steps, spec.seeds));
  o.lines.push_back(strf("  objective: mean over t in [%d, %d] of weighted ||w_t - w*||^2", spec.window_from, run.steps));
  o.lines.push_back(strf("  measured %.6g, predicted %.6g (float-SGD part %.6g, codec part %.6g), ratio %.4f",
                        mm, mp, res.f0, mp - res.f0, mm / mp));
  o.lines.push_back(strf("  paired t-test over seeds: t = %.3f, |t| must stay <= %.3f (two-sided alpha = %.1e, "
                        "normal approximation of seed averages)", res.test.t, res.test.t_crit, spec.alpha));
  if (mp - res.f0 > 1e-9 * mp)
    o.lines.push_back(strf("  power: detects with probability >= %.4g a relative error of %.3g of the codec variance "
                          "(%.3g of the whole objective)", 1.0 - spec.beta, res.min_detectable_codec,
                          res.min_detectable_total));
  else
    o.lines.push_back(strf("  power: detects with probability >= %.4g a relative error of %.3g of the objective",
                          1.0 - spec.beta, res.min_detectable_total));
  o.lines.push_back(std::string("  -> ") + (o.passed ? "PASS" : "FAIL"));
  o.json = {{"name", spec.name}, {"method", spec.method.name}, {"passed", o.passed}, {"alpha", spec.alpha},
            {"beta", spec.beta}, {"seeds", spec.seeds}, {"measured", mm}, {"predicted", mp}, {"float_part", res.f0},
            {"t", res.test.t}, {"t_crit", res.test.t_crit}, {"se", res.test.se},
            {"min_detectable_codec_rel", res.min_detectable_codec},
            {"min_detectable_total_rel", res.min_detectable_total},
            {"schedule", run.schedule.describe()}, {"steps", run.steps}, {"window_from", spec.window_from}};
  if (keep_traces) res.traces = std::move(traces);
  return res;
}

// ---- 2 ----------------------------------------------------------------------------------------
CheckOutcome check_converged_fraction(const PredictionSpec& spec, const std::vector<Trace>& traces,
                                      double tol_factor, double p_alt) {
  if (traces.empty()) throw std::invalid_argument("no traces");
  if (!(tol_factor > 1.0)) throw std::invalid_argument("tol_factor must be > 1");
  LeastSquares problem(spec.problem);
  RunSpec run = spec.run;
  run.keep_noise = true;
  Eigen::VectorXd tw = Eigen::VectorXd::Zero(run.steps + 1);
  tw(run.steps) = 1.0;
  Prediction pred = predict(problem, run, tw, Eigen::VectorXd::Ones(problem.blocks().size()));
  double expected = 0;
  for (const auto& tr : traces) expected += pred.value(tr.noise_var) / traces.size();
  const double tol = tol_factor * expected;
  const double p0 = 1.0 - 1.0 / tol_factor;
  const int n = static_cast<int>(traces.size());
  int k = 0;
  for (const auto& tr : traces) k += tr.dist2.back() <= tol;
  const int need = binomial_pass_count(n, p0, spec.alpha);
  auto [lo, hi] = tg::verify::clopper_pearson(static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(k), spec.alpha);
  CheckOutcome o;
  o.name = spec.name + "-fraction";
  o.alpha = spec.alpha;
  o.passed = k >= need;
  const double false_pass = binomial_upper_tail(n, p_alt, need);
  o.lines.push_back(strf("%s: ||w_T - w*||^2 <= tol = %.3g x E||w_T - w*||^2 = %.4g (T = %d, predicted E = %.4g)",
                        o.name.c_str(), tol_factor, tol, run.steps, expected));
  o.lines.push_back(strf("  Markov: a codec obeying the identity converges in a fraction >= p0 = %.3f of seeds", p0));
  o.lines.push_back(strf("  %d of %d seeds converged (Clopper-Pearson interval at 1 - %.0e: [%.3f, %.3f]); pass needs >= %d "
                        "(false-fail <= %.1e)", k, n, spec.alpha, lo, hi, need, spec.alpha));
  o.lines.push_back(strf("  power: a method converging in only a fraction %.2f of seeds passes with probability %.2e",
                        p_alt, false_pass));
  o.lines.push_back(std::string("  -> ") + (o.passed ? "PASS" : "FAIL"));
  o.json = {{"name", o.name}, {"passed", o.passed}, {"alpha", spec.alpha}, {"converged", k}, {"seeds", n},
            {"need", need}, {"p0", p0}, {"tol", tol}, {"expected_final", expected}, {"cp_low", lo}, {"cp_high", hi},
            {"p_alt", p_alt}, {"false_pass_at_p_alt", false_pass}};
  return o;
}

// ---- 3 ----------------------------------------------------------------------------------------
CheckOutcome check_layerwise(const PredictionResult& layer, const PredictionResult& global) {
  CheckOutcome o;
  o.name = "layerwise-vs-global";
  // Confidence intervals of each mean measured ball (t, same alpha as each prediction check).
  TTest ta = t_test(layer.measured, 0.0, layer.outcome.alpha);
  TTest tg_ = t_test(global.measured, 0.0, global.outcome.alpha);
  double hi_layer = ta.mean + ta.t_crit * ta.se;
  double lo_global = tg_.mean - tg_.t_crit * tg_.se;
  o.alpha = layer.outcome.alpha + global.outcome.alpha;
  o.passed = hi_layer < lo_global;
  double pred_l = mean_of(layer.predicted), pred_g = mean_of(global.predicted);
  o.lines.push_back(strf("%s: normalized noise ball of the small-scale block, layer-wise %.4g vs global %.4g "
                        "(ratio %.3g; predicted %.4g vs %.4g, ratio %.3g)", o.name.c_str(), ta.mean, tg_.mean,
                        tg_.mean / ta.mean, pred_l, pred_g, pred_g / pred_l));
  o.lines.push_back(strf("  pass iff the upper %.1e-interval end of layer-wise (%.4g) < the lower end of global (%.4g)",
                        layer.outcome.alpha, hi_layer, lo_global));
  o.lines.push_back(strf("  false-fail <= %.1e whenever the true gap exceeds both interval half-widths (%.3g + %.3g; "
                        "predicted gap %.3g); a method with no gain passes with probability <= %.1e",
                        o.alpha, ta.t_crit * ta.se, tg_.t_crit * tg_.se, pred_g - pred_l, o.alpha));
  o.lines.push_back(std::string("  -> ") + (o.passed ? "PASS" : "FAIL"));
  o.json = {{"name", o.name}, {"passed", o.passed}, {"alpha", o.alpha}, {"layerwise", ta.mean}, {"global", tg_.mean},
            {"predicted_layerwise", pred_l}, {"predicted_global", pred_g}, {"hi_layerwise", hi_layer},
            {"lo_global", lo_global}};
  return o;
}

// ---- 4 ----------------------------------------------------------------------------------------
FixedPoint clip_fixed_point(const LeastSquares& problem, const MethodSpec& method, int b, int K,
                            std::uint64_t seed) {
  if (b < 1 || K < 2) throw std::invalid_argument("batch must be >= 1 and draws >= 2");
  if (problem.outputs() != 1)
    throw std::invalid_argument("the clipping fixed point is implemented for single-block least squares");
  // F(w) = E[update | w] = E[clamp(g_w(w), cap_w)] (each worker's own clip bound; the shared scalar only
  // saturates values already below it). With batch 1 the expectation is an exact sum over the n data
  // points; otherwise a Monte-Carlo mean over fixed minibatch sets (common random numbers).
  const bool exact = b == 1;
  const int D = problem.dim();
  const int draws = exact ? problem.samples() : K;
  std::vector<std::vector<int>> sets(draws, std::vector<int>(b));
  const std::uint64_t n = problem.samples();
  for (int k = 0; k < draws; ++k)
    for (int j = 0; j < b; ++j) {
      if (exact) {
        sets[k][j] = k;
        continue;
      }
      StreamKey key{seed ^ 0xC11F0000C11F0000ull, 0, 0x43000000u, static_cast<std::uint32_t>(k)};
      std::uint32_t u = philox_block(key, static_cast<std::uint32_t>(j / 4)).v[j % 4];
      sets[k][j] = static_cast<int>((static_cast<std::uint64_t>(u) * n) >> 32);
    }
  auto codec = make_optimized_codec(1);
  Eigen::MatrixXd per_draw(draws, D);
  Eigen::VectorXd g(D);
  std::vector<float> gf;
  auto field = [&](const Eigen::VectorXd& w) {
    for (int k = 0; k < draws; ++k) {
      problem.batch_gradient(w, sets[k], g);
      for (const Block& blk : method.layerwise ? problem.blocks() : std::vector<Block>{Block{0, D, 1.0}}) {
        gf.resize(blk.size);
        for (int i = 0; i < blk.size; ++i) gf[i] = static_cast<float>(g(blk.offset + i));
        const double cap = clip_bound(*codec, gf, method.params);
        for (int i = 0; i < blk.size; ++i) per_draw(k, blk.offset + i) = std::clamp<double>(gf[i], -cap, cap);
      }
    }
    return Eigen::VectorXd(per_draw.colwise().mean().transpose());
  };
  Eigen::LDLT<Eigen::MatrixXd> Hinv(problem.H());
  Eigen::VectorXd w = problem.w_star();
  int it = 0;
  double last_step = INFINITY;
  Eigen::VectorXd bias, linear_shift;
  for (; it < 200; ++it) {
    Eigen::VectorXd f = field(w);
    Eigen::VectorXd step = Hinv.solve(f);
    if (it == 0) {  // w = w*: the estimator's bias at the optimum and the first-order shift it causes
      bias = f;
      linear_shift = -step;
    }
    w -= step;
    last_step = step.norm();
    if (last_step <= 1e-9 * (1.0 + w.norm())) break;
  }
  FixedPoint fp;
  fp.w = w;
  fp.iterations = it + 1;
  fp.last_step = last_step;
  fp.exact = exact;
  fp.draws = draws;
  fp.bias_at_optimum = bias;
  fp.linear_shift = linear_shift;
  Eigen::VectorXd delta = w - problem.w_star();
  if (!exact && delta.squaredNorm() > 0) {
    field(w);  // per-draw values at w_c for the Monte-Carlo error
    Eigen::VectorXd u = Hinv.solve(delta / delta.squaredNorm());
    Eigen::VectorXd z = per_draw * u;
    double zm = z.mean();
    fp.mc_se = std::sqrt((z.array() - zm).square().sum() / (draws - 1) / draws);
  }
  return fp;
}

ClipResult check_clip_fixed_point(const ClipSpec& spec) {
  ClipResult res;
  if (spec.method.scheme != Scheme::terngrad || spec.method.params.clip == ClipMode::none)
    throw std::invalid_argument("the clipping check needs a TernGrad method with clipping");
  LeastSquares problem(spec.problem);
  const int D = problem.dim(), N = spec.run.workers, b = spec.run.batch, K = spec.fixed_point_draws;
  FixedPoint fp = clip_fixed_point(problem, spec.method, b, K, spec.seed0);
  res.w_clip = fp.w;
  Eigen::VectorXd delta = fp.w - problem.w_star();
  res.shift = delta.norm();
  res.q_pred_se = fp.mc_se;
  const bool exact = fp.exact;
  const int draws = fp.draws, it = fp.iterations - 1;
  const double last_step = fp.last_step;
  (void)N;
  (void)D;

  auto traces = run_seeds(problem, spec.method, spec.run, spec.seed0, spec.seeds);
  for (const auto& tr : traces) res.q.push_back((tr.w_avg - problem.w_star()).dot(delta) / delta.squaredNorm());
  res.test_one = t_test(res.q, 1.0, spec.alpha);
  const double m = res.test_one.mean, se = res.test_one.se;
  // Decision: two-sided t-test of E q = 1 at alpha (the clamp(g) fixed point), valid when the design has
  // the power to tell it from E q = 0 (the g fixed point, i.e. no clipping bias): 1/se >= t_crit + t_beta.
  const double t_beta = t_quantile(1.0 - spec.beta, res.test_one.n - 1);
  const bool powered = se > 0 && 1.0 / se >= res.test_one.t_crit + t_beta;
  boost::math::students_t tdist(res.test_one.n - 1);
  const double pass_if_unbiased_for_g =
      se > 0 ? boost::math::cdf(tdist, -(1.0 / se - res.test_one.t_crit)) : 0.0;
  auto& o = res.outcome;
  o.name = "clip-fixed-point";
  o.alpha = spec.alpha;
  o.passed = powered && !res.test_one.reject && std::isfinite(m);
  o.lines.push_back(strf("%s: %s (c = %g) on least squares with spikes (d=%d, n=%d, spike %g), N=%d x batch %d, %s, "
                        "%d steps, Polyak average from step %d, %d seeds", o.name.c_str(), spec.method.name.c_str(),
                        spec.method.params.c, spec.problem.dim, spec.problem.samples, spec.problem.spike, N, b,
                        spec.run.schedule.describe().c_str(), spec.run.steps, spec.run.average_from, spec.seeds));
  o.lines.push_back(strf("  predicted fixed point w_c (E[clamp(g)](w_c) = 0, %s %d %s, %d Newton steps, last step "
                        "%.2g): ||w_c - w*|| = %.4g (||w*|| = %.4g)", exact ? "exact sum over" : "Monte-Carlo over",
                        draws, exact ? "data points" : "minibatch sets", it + 1, last_step, res.shift,
                        problem.w_star().norm()));
  o.lines.push_back(strf("  q = <w_avg - w*, w_c - w*> / ||w_c - w*||^2: mean %.4f +- %.4f (1 s.e. over seeds; "
                        "Monte-Carlo s.e. of w_c along the shift %.4f)", m, se, res.q_pred_se));
  o.lines.push_back(strf("  t-test of E q = 1 (moved by the clamp bias): t = %.3f, |t| must stay <= %.3f (two-sided "
                        "alpha = %.1e; normal approximation of seed averages; constant-step bias O(gamma) not modelled)",
                        res.test_one.t, res.test_one.t_crit, spec.alpha));
  o.lines.push_back(strf("  power: an estimator unbiased for g (E q = 0) passes with probability %.2e (1/s.e. = %.1f, "
                        "needs >= %.2f for beta = %.1e)", pass_if_unbiased_for_g, 1.0 / se,
                        res.test_one.t_crit + t_beta, spec.beta));
  o.lines.push_back(std::string("  -> ") + (o.passed ? "PASS" : "FAIL"));
  o.json = {{"name", o.name}, {"passed", o.passed}, {"alpha", spec.alpha}, {"shift", res.shift},
            {"q_mean", m}, {"q_se", se}, {"q_pred_se", res.q_pred_se}, {"pass_if_unbiased_for_g", pass_if_unbiased_for_g},
            {"t_one", res.test_one.t}, {"newton_steps", it + 1}};
  return res;
}

// ---- standard configurations --------------------------------------------------------------------
PredictionSpec standard_decay_spec(const std::string& method, double alpha, double beta) {
  PredictionSpec s;
  s.name = "decay-" + method;
  s.problem.dim = 20;
  s.problem.samples = 400;
  s.problem.kappa = 4;
  s.method = parse_method(method);
  s.run.workers = 4;
  s.run.batch = 8;
  s.run.steps = 2000;
  s.run.schedule = Schedule{false, 4.0, 20.0, 0.0};
  s.seeds = 40;
  s.window_from = 1000;
  s.alpha = alpha;
  s.beta = beta;
  return s;
}

PredictionSpec standard_ball_spec(const std::string& method, double alpha, double beta) {
  PredictionSpec s = standard_decay_spec(method, alpha, beta);
  s.name = "ball-" + method;
  s.problem.dim = 10;
  s.seeds = 30;
  s.run.schedule = Schedule{true, 0, 0, 0.05};
  s.run.start_at_optimum = true;
  s.window_from = 500;
  return s;
}

PredictionSpec standard_multiscale_spec(const std::string& method, double alpha, double beta) {
  PredictionSpec s = standard_ball_spec(method, alpha, beta);
  s.name = "multiscale-ball-" + method;
  s.problem.kind = ProblemKind::multiscale;
  s.problem.dim = 8;
  s.problem.blocks = 2;
  s.problem.scale_ratio = 100;
  s.block_weights = {0.0, 1e4};
  return s;
}

ClipSpec standard_clip_spec(double alpha, double beta) {
  ClipSpec c;
  c.problem.dim = 20;
  c.problem.samples = 400;
  c.problem.kappa = 4;
  c.problem.spike = 3.0;
  c.method = parse_method("tern-clip");
  c.run.workers = 4;
  c.run.batch = 1;
  c.run.steps = 4000;
  c.run.schedule = Schedule{true, 0, 0, 0.02};
  c.run.start_at_optimum = true;
  c.run.average_from = 1000;
  c.seeds = 20;
  c.alpha = alpha;
  c.beta = beta;
  return c;
}

std::vector<CheckOutcome> run_battery(double alpha, double beta, std::uint64_t seed_offset,
                                      const std::function<void(const std::string&)>& progress) {
  std::vector<CheckOutcome> out;
  auto note = [&](const std::string& n) {
    if (progress) progress(n);
  };
  auto shifted = [&](PredictionSpec s) {
    s.seed0 += seed_offset;
    return s;
  };
  note("decay-float");
  out.push_back(check_prediction(shifted(standard_decay_spec("float", alpha, beta))).outcome);
  note("decay-tern");
  auto spec = shifted(standard_decay_spec("tern", alpha, beta));
  auto tn = check_prediction(spec, true);
  out.push_back(tn.outcome);
  out.push_back(check_converged_fraction(spec, tn.traces, 20.0, 0.5));
  note("ball-float");
  out.push_back(check_prediction(shifted(standard_ball_spec("float", alpha, beta))).outcome);
  note("ball-tern");
  out.push_back(check_prediction(shifted(standard_ball_spec("tern", alpha, beta))).outcome);
  note("multiscale");
  auto a = check_prediction(shifted(standard_multiscale_spec("tern", alpha, beta)));
  auto b = check_prediction(shifted(standard_multiscale_spec("tern-global", alpha, beta)));
  out.push_back(a.outcome);
  out.push_back(b.outcome);
  out.push_back(check_layerwise(a, b));
  note("clip");
  ClipSpec c = standard_clip_spec(alpha, beta);
  c.seed0 += seed_offset;
  out.push_back(check_clip_fixed_point(c).outcome);
  return out;
}

}  // namespace tg::convex
