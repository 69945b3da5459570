// terngrad-bench: `terngrad converge`: SGD with N simulated workers on a generated convex problem, float
// vs TernGrad (through the codec) vs QSGD-style and SignSGD; writes curves (CSV + JSON) and, with
// --checks, runs the statistical checks of the four convergence claims. `terngrad converge --help`.
#include <algorithm>
#include <chrono>
#include <optional>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tg/atomic_file.hpp"
#include "tg/convex/assumption3.hpp"
#include "tg/convex/checks.hpp"
#include "tg/convex/moments.hpp"
#include "tg/convex/output.hpp"

namespace tg::app {
namespace {

using namespace tg::convex;

struct ConvergeOptions {
  std::string problem = "lsq";
  int dim = 10;
  int samples = 400;
  double kappa = 4.0;
  int blocks = 2;
  double scale_ratio = 100.0;
  double noise = 1.0;
  double lambda = 1e-2;
  double spike = 0.0;
  double tail_dof = 0.0;
  double density = 1.0;
  bool no_prediction = false;
  bool assumption3 = false;
  std::uint64_t data_seed = 1;
  std::vector<std::string> methods{"float", "tern", "tern-clip", "tern-global", "qsgd", "sign"};
  double c = 2.5;
  int workers = 4;
  int batch = 8;
  int steps = 2000;
  int seeds = 10;
  std::uint64_t seed = 1;
  std::string schedule = "decay";
  double gamma0 = 4.0;
  double t0 = 20.0;
  double gamma = 0.05;
  bool start_at_optimum = false;
  int every = 10;
  std::string out = "converge-out";
  bool checks = false;
  double alpha = 1e-5;
  double beta = 1e-3;
  std::string json;  // FILE, or "-" for stdout
  bool quiet = false;
};

std::string num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", x);
  return b;
}

bool unbiased(const MethodSpec& m) {
  return m.scheme == Scheme::float32 || m.scheme == Scheme::qsgd ||
         (m.scheme == Scheme::terngrad && m.params.clip == ClipMode::none);
}

int run_converge(const ConvergeOptions& o) {
  const auto started = std::chrono::steady_clock::now();
  ProblemSpec ps;
  ps.kind = parse_problem(o.problem);
  ps.dim = o.dim;
  ps.samples = o.samples;
  ps.kappa = o.kappa;
  ps.blocks = o.blocks;
  ps.scale_ratio = o.scale_ratio;
  ps.noise = o.noise;
  ps.lambda = o.lambda;
  ps.spike = o.spike;
  ps.tail_dof = o.tail_dof;
  ps.density = o.density;
  ps.seed = o.data_seed;
  RunSpec run;
  run.workers = o.workers;
  run.batch = o.batch;
  run.steps = o.steps;
  run.schedule = Schedule{o.schedule == "const", o.gamma0, o.t0, o.gamma};
  run.start_at_optimum = o.start_at_optimum;
  run.keep_noise = ps.kind != ProblemKind::logistic && !o.no_prediction;
  run.average_from = o.steps / 4;  // Polyak average over the last three quarters
  validate(run);
  std::vector<MethodSpec> methods;
  for (const auto& name : o.methods) methods.push_back(parse_method(name, o.c));
  if (methods.empty()) throw std::invalid_argument("--methods is empty");
  if (o.assumption3 && o.seeds < 4) throw std::invalid_argument("--assumption3 needs --seeds >= 4 (half fit, half held out)");
  check_seed_range(o.seed, static_cast<std::uint64_t>(o.seeds));
  auto problem = make_problem(ps);  // validates ps, throws naming the bad option
  std::filesystem::path dir(o.out);
  // The outputs, after every other check and before the runs; nothing is created until they are written.
  check_output_folder("--out", o.out);
  for (const char* name : {"curves.csv", "summary.json"})  // a folder of that name in --out, say
    check_output_file("--out", (dir / name).string(), false);
  check_output_file("--json", o.json);
  check_output_not_in_folder("--json", o.json, "--out", o.out, {"curves.csv", "summary.json"});

  // Progress: one updating line on a terminal, one line per method otherwise (logs).
  const bool tty = !o.quiet && ::isatty(::fileno(stderr));
  std::vector<Curves> curves;
  nlohmann::json polyak = nlohmann::json::array();
  // Assumption 3 as a bound: exact constants where they are known (least squares, one block, batch 1), and
  // per method the constants fitted on half of the seeds and tested on the other half.
  nlohmann::json a3 = nlohmann::json::object();
  std::vector<std::string> a3_lines;
  std::optional<Assumption3Exact> a3_exact;
  if (o.assumption3) {
    if (ps.kind == ProblemKind::least_squares && o.batch == 1) {
      a3_exact = assumption3_exact(static_cast<const LeastSquares&>(*problem));
      a3["exact"] = to_json(*a3_exact);
    }
    a3["methods"] = nlohmann::json::array();
  }
  for (std::size_t m = 0; m < methods.size(); ++m) {
    auto progress = [&](int done) {
      if (tty)
        std::fprintf(stderr, "\rconverge: method %zu/%zu (%s), seed %d/%d   ", m + 1, methods.size(),
                     methods[m].name.c_str(), done, o.seeds);
    };
    auto traces = run_seeds(*problem, methods[m], run, o.seed, o.seeds, progress);
    std::vector<double> predicted;
    if (run.keep_noise && unbiased(methods[m])) {
      Eigen::MatrixXd mean_noise = Eigen::MatrixXd::Zero(run.steps, problem->dim());
      for (const auto& tr : traces) mean_noise += tr.noise_var / static_cast<double>(traces.size());
      predicted = predict_curve(static_cast<const LeastSquares&>(*problem), run, mean_noise);
    }
    // Where the iterates settle: the mean over seeds of the Polyak averages, against w* and (clipping on
    // single-block least squares) the predicted fixed point w_c with E[clamp(g)](w_c) = 0.
    Eigen::VectorXd avg = Eigen::VectorXd::Zero(problem->dim());
    int finite = 0;
    for (const auto& tr : traces) finite += !tr.diverged;
    for (const auto& tr : traces)
      if (!tr.diverged) avg += tr.w_avg / static_cast<double>(finite);
    nlohmann::json pj = {{"method", methods[m].name}, {"from_step", run.average_from}, {"runs", finite},
                         {"shift", finite ? nlohmann::json((avg - problem->w_star()).norm()) : nlohmann::json(nullptr)}};
    if (unbiased(methods[m])) pj["predicted_shift"] = 0.0;
    if (methods[m].scheme == Scheme::terngrad && methods[m].params.clip != ClipMode::none &&
        ps.kind == ProblemKind::least_squares) {
      FixedPoint fp = clip_fixed_point(static_cast<const LeastSquares&>(*problem), methods[m], o.batch, 2000, o.seed);
      Eigen::VectorXd delta = fp.w - problem->w_star();
      pj["predicted_shift"] = delta.norm();
      pj["fixed_point_exact"] = fp.exact;
      if (delta.squaredNorm() > 0 && finite) pj["q"] = (avg - problem->w_star()).dot(delta) / delta.squaredNorm();
      // Outside Theorem 1: clipping biases the estimator, E[g~](w*) = E[clamp(g)](w*) != 0, so no step schedule
      // takes w_t to w*; the iterates go to w_c and E||w_t - w*||^2 -> ||w_c - w*||^2 (the predicted stall)
      // as the variance around w_c decays. Checked on the final iterates: q_T = <w_T - w*, w_c - w*> /
      // ||w_c - w*||^2 per seed, two-sided t-test of E q_T = 1 at --alpha.
      const double stall = delta.squaredNorm();
      pj["bias_at_optimum"] = fp.bias_at_optimum.norm();
      pj["linear_shift"] = fp.linear_shift.norm();
      pj["predicted_stall"] = stall;
      std::vector<double> qT;
      double to_wc = 0;
      Eigen::VectorXd mean_T = Eigen::VectorXd::Zero(problem->dim());
      for (const auto& tr : traces) {
        if (tr.diverged) continue;
        qT.push_back((tr.w_final - problem->w_star()).dot(delta) / stall);
        to_wc += (tr.w_final - fp.w).squaredNorm() / finite;
        mean_T += tr.w_final / static_cast<double>(finite);
      }
      if (stall > 0 && qT.size() >= 2) {
        TTest tt = t_test(qT, 1.0, o.alpha);
        const double t_beta = t_quantile(1.0 - o.beta, tt.n - 1);
        pj["final"] = {{"step", o.steps}, {"q_mean", tt.mean}, {"q_se", tt.se}, {"t", tt.t}, {"t_crit", tt.t_crit},
                       {"alpha", o.alpha}, {"consistent", !tt.reject && std::isfinite(tt.mean)},
                       {"powered", tt.se > 0 && 1.0 / tt.se >= tt.t_crit + t_beta},
                       {"bias2", (mean_T - problem->w_star()).squaredNorm()}, {"dist2_to_wc", to_wc}};
      }
    }
    polyak.push_back(pj);
    if (o.assumption3) {
      Assumption3Fit fit = fit_assumption3(traces, 8, o.alpha, o.beta);
      nlohmann::json fj = to_json(fit);
      fj["method"] = methods[m].name;
      char line[512];
      std::snprintf(line, sizeof line,
                    "  %-15s fitted E||g||_inf||g||_1 <= %.4g + %.4g ||w - w*||^2 (SGD's E||g||_2^2 <= %.4g + %.4g r); "
                    "held out: %s in %zu bins (false-refute <= %.1e, detects an excess of %.3g of the bound w.p. "
                    "%.4g); %ld of %ld single steps above it, max ratio %.3g",
                    methods[m].name.c_str(), fit.A, fit.B, fit.sgd_A, fit.sgd_B, fit.holds ? "holds" : "REFUTED",
                    fit.bins.size(), o.alpha, fit.max_detectable_rel, 1.0 - o.beta, fit.held_steps_above,
                    fit.held_steps, fit.max_ratio);
      a3_lines.push_back(line);
      if (a3_exact) {
        const double vr = a3_exact->violation_r(fit.A, fit.B);
        const double a_needed = a3_exact->a_for(fit.B);
        fj["global_holds"] = std::isfinite(a_needed) && fit.A >= a_needed;
        fj["violation_r"] = std::isfinite(vr) ? nlohmann::json(vr) : nlohmann::json(nullptr);
        double r_max = 0;
        for (const auto& tr : traces)
          for (double r : tr.dist2)
            if (std::isfinite(r)) r_max = std::max(r_max, r);
        fj["visited_r_max"] = r_max;
        std::snprintf(line, sizeof line,
                      "  %-15s exact: B >= lambda_max(M) = %.4g needed everywhere (fitted B = %.4g): %s",
                      "", a3_exact->b_min, fit.B,
                      fit.B > a3_exact->b_min && fit.A >= a_needed
                          ? "the fitted bound holds on the whole space"
                          : (std::isfinite(vr) ? ("fails at ||w - w*||^2 = " + num(vr) +
                                                  " along the top eigenvector of M (the iterates visited r <= " +
                                                  num(r_max) + ")").c_str()
                                               : "fails off the top eigenvector of M"));
        a3_lines.push_back(line);
      }
      a3["methods"].push_back(fj);
    }
    std::vector<double> scales;
    for (const auto& b : problem->blocks()) scales.push_back(b.scale);
    curves.push_back(summarize(methods[m].name, traces, o.every, predicted, scales));
    if (!tty && !o.quiet)
      std::fprintf(stderr, "converge: method %zu/%zu (%s) done, %d seeds\n", m + 1, methods.size(),
                   methods[m].name.c_str(), o.seeds);
  }
  if (tty) std::fprintf(stderr, "\r%70s\r", "");

  std::vector<CheckOutcome> checks;
  if (o.checks) {
    checks = run_battery(o.alpha, o.beta, o.seed - 1, [&](const std::string& name) {
      if (tty) std::fprintf(stderr, "\rconverge: check %-24s", name.c_str());
      else if (!o.quiet) std::fprintf(stderr, "converge: check %s\n", name.c_str());
    });
    if (tty) std::fprintf(stderr, "\r%70s\r", "");
  }
  bool all_pass = true;
  for (const auto& c : checks) all_pass = all_pass && c.passed;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  nlohmann::json config = {{"problem", o.problem}, {"dim", o.dim}, {"samples", o.samples}, {"kappa", o.kappa},
                           {"blocks", problem->blocks().size()}, {"scale_ratio", o.scale_ratio}, {"noise", o.noise},
                           {"lambda", o.lambda}, {"spike", o.spike}, {"tail_dof", o.tail_dof},
                           {"density", o.density}, {"data_seed", o.data_seed},
                           {"methods", o.methods}, {"c", o.c}, {"workers", o.workers}, {"batch", o.batch},
                           {"steps", o.steps}, {"seeds", o.seeds}, {"seed", o.seed},
                           {"schedule", run.schedule.describe()}, {"start_at_optimum", o.start_at_optimum},
                           {"every", o.every}};
  nlohmann::json summary = {{"config", config}, {"parameters", problem->dim()},
                            {"hessian_eigenvalues", {problem->hessian_eigenvalues().minCoeff(),
                                                     problem->hessian_eigenvalues().maxCoeff()}},
                            {"curves", curves_json(curves)}, {"polyak", polyak}, {"seconds", secs}};
  if (o.assumption3) summary["assumption3"] = a3;
  if (o.checks) {
    nlohmann::json cj = nlohmann::json::array();
    for (const auto& c : checks) cj.push_back(c.json);
    summary["checks"] = cj;
    summary["checks_passed"] = all_pass;
    summary["alpha_per_decision"] = o.alpha;
    summary["alpha_total"] = o.alpha * checks.size();
  }
  // --json first (a device such as a full disk fails there, before the folder is touched; it is removed on a
  // later failure as every report of a failed run is); then the folder's two files, both or neither
  if (!o.json.empty() && o.json != "-") write_file_atomic(o.json, summary.dump(1) + "\n");
  try {
    write_file_atomic(dir / "curves.csv", curves_csv(curves));
    write_file_atomic(dir / "summary.json", summary.dump() + "\n");
  } catch (...) {
    std::error_code ec;
    for (const char* name : {"curves.csv", "summary.json"})
      if (std::filesystem::is_regular_file(dir / name, ec)) std::filesystem::remove(dir / name, ec);
    throw;
  }
  if (o.json == "-") {
    std::printf("%s\n", summary.dump(1).c_str());
  } else {
    auto ev = problem->hessian_eigenvalues();
    std::printf("problem %s: %d parameters in %zu block(s), n = %d, Hessian eigenvalues [%.3g, %.3g]\n",
                o.problem.c_str(), problem->dim(), problem->blocks().size(), o.samples, ev.minCoeff(), ev.maxCoeff());
    std::printf("%d workers x batch %d, %s, %d steps, %d seeds from %llu, start at %s\n", o.workers, o.batch,
                run.schedule.describe().c_str(), o.steps, o.seeds, static_cast<unsigned long long>(o.seed),
                o.start_at_optimum ? "w*" : "0");
    std::printf("%-15s %13s %13s %8s %13s %13s %13s %9s\n", "method", "E||w_T-w*||^2", "predicted", "slope",
                "loss gap", "var measured", "var identity", "diverged");
    for (const auto& c : curves) {
      double vm = 0, vi = 0;
      for (std::size_t i = 0; i < c.t.size(); ++i) {
        vm += c.var_measured[i];
        vi += c.var_identity[i];
      }
      char pred[32] = "-";
      if (!c.dist2_predicted.empty() && std::isfinite(c.dist2_predicted.back()))
        std::snprintf(pred, sizeof pred, "%.4g", c.dist2_predicted.back());
      char slope[32] = "-";
      if (!run.schedule.constant) std::snprintf(slope, sizeof slope, "%.3f", c.slope);
      std::printf("%-15s %13.4g %13s %8s %13.4g %13.4g %13.4g %6d/%d\n", c.method.c_str(), c.final_dist2, pred,
                  slope, c.loss_gap.back(), vm / std::max<std::size_t>(1, c.t.size()),
                  vi / std::max<std::size_t>(1, c.t.size()), c.diverged, c.seeds);
    }
    std::printf("(slope: of log E||w_t - w*||^2 on log t over the last half; var: per-step codec variance, mean "
                "over recorded steps)\n");
    std::printf("Polyak average from step %d, mean over seeds: distance to w* (predicted: 0 if unbiased, ||w_c - w*|| "
                "with clipping)\n", run.average_from);
    for (const auto& pj : polyak) {
      if (pj["shift"].is_null()) {
        std::printf("  %-15s every run diverged\n", pj["method"].get<std::string>().c_str());
        continue;
      }
      std::printf("  %-15s %.4g", pj["method"].get<std::string>().c_str(), pj["shift"].get<double>());
      if (pj.contains("predicted_shift")) std::printf("   predicted %.4g", pj["predicted_shift"].get<double>());
      if (pj.contains("q")) std::printf("   projection on w_c - w*: %.3f of the predicted shift", pj["q"].get<double>());
      std::printf("\n");
      if (pj.contains("bias_at_optimum")) {
        std::printf("  %-15s biased: ||E[g~](w*)|| = %.4g (Theorem 1 needs 0), so E||w_t - w*||^2 stalls at "
                    "||w_c - w*||^2 = %.4g (first order ||H^-1 E[g~](w*)||^2 = %.4g)\n",
                    "", pj["bias_at_optimum"].get<double>(), pj["predicted_stall"].get<double>(),
                    std::pow(pj["linear_shift"].get<double>(), 2));
      }
      if (pj.contains("final")) {
        const auto& f = pj["final"];
        std::printf("  %-15s final iterates (T = %d): ||mean w_T - w*||^2 = %.4g (predicted %.4g), E||w_T - w_c||^2 = "
                    "%.4g, q_T = %.4f +- %.4f, t-test of E q_T = 1: t = %.3f, |t| <= %.3f: %s%s\n",
                    "", o.steps, f["bias2"].get<double>(), pj["predicted_stall"].get<double>(),
                    f["dist2_to_wc"].get<double>(), f["q_mean"].get<double>(), f["q_se"].get<double>(),
                    f["t"].get<double>(), f["t_crit"].get<double>(),
                    f["consistent"].get<bool>() ? "consistent" : "REJECTED",
                    f["powered"].get<bool>() ? "" : " (underpowered: cannot tell q_T = 1 from 0)");
      }
    }
    if (o.assumption3) {
      std::printf("Assumption 3, E||g||_inf ||g||_1 <= A + B ||w - w*||^2 (per worker g): fitted on seeds 1..%d as the "
                  "smallest line over per-bin upper %.0e-confidence bounds, tested on the other seeds\n",
                  o.seeds / 2, o.alpha);
      if (a3_exact)
        std::printf("  exact (batch 1): E||g||_inf||g||_1 is a quadratic in w - w*; the smallest B is lambda_max(M) = "
                    "%.4g, SGD's (E||g||_2^2) is %.4g: %.3gx; at w*: %.4g vs %.4g\n",
                    a3_exact->b_min, a3_exact->sgd_b_min, a3_exact->b_min / a3_exact->sgd_b_min, a3_exact->c,
                    a3_exact->sgd_c);
      for (const auto& l : a3_lines) std::printf("%s\n", l.c_str());
    }
    for (const auto& c : checks)
      for (const auto& l : c.lines) std::printf("%s\n", l.c_str());
    if (o.checks)
      std::printf("checks: %s (%zu decisions at alpha = %.1e each, false-fail <= %.1e in all)\n",
                  all_pass ? "PASS" : "FAIL", checks.size(), o.alpha, o.alpha * checks.size());
    int diverged = 0;
    for (const auto& c : curves) diverged += c.diverged;
    if (diverged)
      std::printf("note: %d run(s) diverged (||w|| > 1e30 or not finite; try a smaller step size)\n", diverged);
    std::printf("wrote %s and %s (%.1f s)\n", (dir / "curves.csv").c_str(), (dir / "summary.json").c_str(), secs);
  }
  return all_pass ? 0 : 1;
}

}  // namespace

static Command converge_command() {
  auto o = std::make_shared<ConvergeOptions>();
  Command cmd;
  cmd.add_fn = [o](CLI::App& app) {
    CLI::App* s = app.add_subcommand(
        "converge",
        "SGD on a generated convex problem with N simulated workers: float vs TernGrad (real codec) vs QSGD/SignSGD.\n"
        "Writes <out>/curves.csv and <out>/summary.json: ||w_t - w*||^2 (mean, 10%/90% over seeds, exact\n"
        "prediction for unbiased methods on least squares), loss gap, ||update||^2, ||g||_inf ||g||_1 (Assumption 3),\n"
        "per-step codec variance measured and by the identity. --checks adds the statistical checks.");
    s->add_option("--problem", o->problem,
                  "lsq: least squares (w* exact); multiscale: least squares whose parameter blocks differ in "
                  "scale by --scale-ratio; logistic: L2-regularized logistic regression (w* by Newton)")
        ->check(CLI::IsMember({"lsq", "multiscale", "logistic"}))->capture_default_str();
    s->add_option("--dim", o->dim, "Features (parameters per block)")->check(tg::app::in_range(1, 4096))->capture_default_str();
    s->add_option("--data-size", o->samples, "Data points n (>= dim)")->check(tg::app::in_range(2, 10000000))->capture_default_str();
    hidden_alias(s, "--samples", o->samples, "--data-size")->check(tg::app::in_range(2, 10000000));
    s->add_option("--kappa", o->kappa, "Condition number of the feature covariance (feature scales decay geometrically)")
        ->check(tg::app::in_range(1.0, 1e8))->capture_default_str();
    s->add_option("--blocks", o->blocks, "multiscale: number of parameter blocks (layers)")->check(tg::app::in_range(1, 64))->capture_default_str();
    s->add_option("--scale-ratio", o->scale_ratio, "multiscale: scale of the first block over the last")
        ->check(tg::app::in_range(1.0, 1e6))->capture_default_str();
    s->add_option("--noise", o->noise, "Least squares: label noise standard deviation")->check(tg::app::in_range(0.0, 1e6))->capture_default_str();
    s->add_option("--lambda", o->lambda, "logistic: L2 regularization (> 0)")->check(tg::app::in_range(1e-12, 1e6))->capture_default_str();
    s->add_option("--spike", o->spike,
                  "Least squares: every 10th point becomes spike * e_0 with label noise +3*noise (clipping then "
                  "biases the fixed point; 0: off)")->check(tg::app::in_range(-1e3, 1e3))->capture_default_str();
    s->add_option("--tail-dof", o->tail_dof,
                  "Features Student-t with this many degrees of freedom, 0 (Gaussian features) or in [1, 1e6] "
                  "(heavy-tailed gradients; unit variance when > 2)")
        ->check(CLI::Validator(
            [](std::string& text) {
              double v = -1;
              if (!CLI::detail::lexical_cast(text, v) || !(v == 0.0 || (v >= 1.0 && v <= 1e6)))
                return "must be 0 (Gaussian) or in [1, 1e6], got " + text;
              return std::string();
            },
            "0 or [1, 1e6]"))
        ->capture_default_str();
    s->add_option("--density", o->density, "Fraction of nonzero features (sparse gradients; scaled to keep the variance)")
        ->check(tg::app::in_range(1e-6, 1.0))->capture_default_str();
    s->add_flag("--no-prediction", o->no_prediction,
                "Skip the exact prediction of least squares (it costs O(steps * data-size * dim^2); for large --dim)");
    s->add_flag("--assumption3", o->assumption3,
                "Test Assumption 3 as a bound: fit A, B of E||g||_inf||g||_1 <= A + B||w - w*||^2 on half of the seeds "
                "(upper confidence bounds per distance bin at --alpha), test it on the other half; exact constants "
                "for least squares with --batch 1");
    s->add_option("--data-seed", o->data_seed, "Seed of the generated data")->capture_default_str();
    s->add_option("--methods", o->methods,
                  "Comma-separated: float, tern (layer-wise shared scalar), tern-clip, tern-saturate, tern-global "
                  "(one scalar for all blocks), tern-unshared (each worker's own scalar), qsgd (1 level, L2 scalar), "
                  "sign (scaled SignSGD), tern-mutant-2s (deliberately wrong: scalar doubled)")
        ->delimiter(',')->capture_default_str();
    s->add_option("--c", o->c, "Clip factor: bound c*sigma for tern-clip / tern-saturate")->check(tg::app::in_range(tg::kMinClipFactor, tg::kMaxClipFactor))->capture_default_str();
    s->add_option("--workers", o->workers, "Simulated workers N")->check(tg::app::in_range(1, 1024))->capture_default_str();
    s->add_option("--batch", o->batch, "Samples per worker per step (uniform with replacement)")->check(tg::app::in_range(1, 100000))->capture_default_str();
    s->add_option("--steps", o->steps, "SGD steps T")->check(tg::app::in_range(1, 10000000))->capture_default_str();
    s->add_option("--seeds", o->seeds, "Independent runs per method (curves are means over them)")->check(tg::app::in_range(1, 100000))->capture_default_str();
    s->add_option("--seed", o->seed, "First seed (minibatches and codec stream); --checks shifts its fixed seeds by seed-1")->capture_default_str();
    s->add_option("--schedule", o->schedule, "decay: gamma_t = gamma0/(t + t0) (Assumption 2); const: gamma")
        ->check(CLI::IsMember({"decay", "const"}))->capture_default_str();
    s->add_option("--gamma0", o->gamma0, "decay: gamma0")->check(tg::app::in_range(1e-12, 1e6))->capture_default_str();
    s->add_option("--t0", o->t0, "decay: t0")->check(tg::app::in_range(1e-6, 1e12))->capture_default_str();
    s->add_option("--gamma", o->gamma, "const: step size")->check(tg::app::in_range(1e-12, 1e6))->capture_default_str();
    s->add_flag("--start-at-optimum", o->start_at_optimum, "Start at w* (noise-ball runs) instead of w = 0");
    s->add_option("--every", o->every, "Record curves every this many steps")->check(tg::app::in_range(1, 10000000))->capture_default_str();
    s->add_option("--out", o->out, "Output folder for curves.csv and summary.json")->capture_default_str()->check(non_empty_path());
    // an earlier run's results in --out are removed if this run ends in an error or is interrupted (main.cpp)
    s->parse_complete_callback([o] {
      tg::app::note_folder_report((std::filesystem::path(o->out) / "summary.json").string());
      tg::app::note_folder_report((std::filesystem::path(o->out) / "curves.csv").string(), tg::convex::kCurvesCsvHeader);
    });
    s->add_flag("--checks", o->checks,
                "Also run the statistical checks of the four claims at their standard sizes (about 15 s): exit 1 "
                "if one fails");
    s->add_option("--alpha", o->alpha, "False-fail probability per decision: --checks, and the clipped methods' final-iterate test of the predicted stall (least squares)")->check(tg::app::in_range(1e-12, 0.5))->capture_default_str();
    s->add_option("--beta", o->beta, "--checks: 1 - power at which detectable effects are stated")->check(tg::app::in_range(1e-12, 0.5))->capture_default_str();
    s->add_option("--json", o->json, "Also write the summary JSON to FILE ('-': on stdout, instead of the table)")->check(non_empty_path());
    s->add_flag("--no-progress", o->quiet, "No progress line on stderr");
    hidden_alias(s, "--quiet", o->quiet, "--no-progress");
    // options that only some runs use are refused in the others, not ignored
    auto problem_is = [o](std::initializer_list<const char*> kinds) {
      return [o, k = std::vector<std::string>(kinds.begin(), kinds.end())] {
        return std::find(k.begin(), k.end(), o->problem) != k.end();
      };
    };
    only_with(s, "--gamma0", "--schedule decay", [o] { return o->schedule == "decay"; });
    only_with(s, "--t0", "--schedule decay", [o] { return o->schedule == "decay"; });
    only_with(s, "--gamma", "--schedule const", [o] { return o->schedule == "const"; });
    only_with(s, "--blocks", "--problem multiscale", problem_is({"multiscale"}));
    only_with(s, "--scale-ratio", "--problem multiscale", problem_is({"multiscale"}));
    only_with(s, "--noise", "--problem lsq or multiscale (least squares)", problem_is({"lsq", "multiscale"}));
    only_with(s, "--no-prediction", "--problem lsq or multiscale (least squares)", problem_is({"lsq", "multiscale"}));
    only_with(s, "--lambda", "--problem logistic", problem_is({"logistic"}));
    auto clipped = [o] {
      for (const auto& m : o->methods)
        if (m == "tern-clip" || m == "tern-saturate") return true;
      return false;
    };
    only_with(s, "--c", "a clipped method in --methods (tern-clip, tern-saturate)", clipped);
    // the decisions that take alpha and beta: --checks, --assumption3's fit, a clipped method's stall test on
    // least squares
    auto decides = [o, clipped, least_squares = problem_is({"lsq", "multiscale"})] {
      return o->checks || o->assumption3 || (clipped() && least_squares());
    };
    for (const char* option : {"--alpha", "--beta"})
      only_with(s, option,
                "--checks, --assumption3, or a clipped method in --methods on --problem lsq or multiscale (the "
                "stall test)",
                decides);
    return s;
  };
  cmd.run_fn = [o] { return run_converge(*o); };
  return cmd;
}

const RegisterCommands kRegistered{40, [] { return std::vector<Command>{converge_command()}; }};

}  // namespace tg::app
