// terngrad-bench: the battery checking itself under the null (`terngrad calibrate`): runs it on a
// correct implementation over many seeds and checks, per statistical row, that its standardized
// statistic has mean 0 and SD <= 1 and that its p-values are valid (P(p <= 0.05) <= 0.05), with
// simultaneous confidence intervals (Bonferroni over the rows). docs/statistics.md, "Calibration".
#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/chi_squared.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <nlohmann/json.hpp>

#include "checks/common.hpp"
#include "tg/verify/stats.hpp"

namespace tg::verify {

bool Calibration::ok() const { return problems().empty(); }

std::vector<std::string> Calibration::problems() const {
  std::vector<std::string> out;
  for (const auto& r : rows)
    if (!r.ok) out.push_back(r.id + ": " + r.problem);
  if (run_fail_lo > options.alpha_total)
    out.push_back(strf("whole runs fail %zu of %zu times at alpha_total %.3g (CI %.3g..%.3g)", run_fails, runs,
                       options.alpha_total, run_fail_lo, run_fail_hi));
  return out;
}

Calibration calibrate(const std::function<std::unique_ptr<Sampler>()>& make, const std::string& impl,
                      const CalibrateOptions& o) {
  if (o.seeds < 2) throw Error(ErrorCode::invalid_argument, "calibrate needs at least 2 seeds");
  if (!(o.alpha_total > 0 && o.alpha_total < 1)) throw Error(ErrorCode::invalid_argument, "--alpha must be in (0, 1)");
  if (!(o.ci > 0 && o.ci < 1)) throw Error(ErrorCode::invalid_argument, "--ci must be in (0, 1)");
  const auto t0 = std::chrono::steady_clock::now();
  unsigned threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, o.seeds);
  std::vector<Result> results(o.seeds);
  std::atomic<std::uint32_t> next{0}, done{0};
  std::exception_ptr error;
  std::mutex mu;
  auto worker = [&]() {
    try {
      std::unique_ptr<Sampler> sampler = make();
      for (std::uint32_t i = next++; i < o.seeds; i = next++) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (error) return;
        }
        Options opt = o.base;
        opt.seed = o.base.seed + i;
        opt.profile.alpha_total = o.alpha_total;
        opt.progress = false;
        results[i] = run_battery(*sampler, opt);
        std::uint32_t k = ++done;
        if (o.progress) {
          std::lock_guard<std::mutex> lock(mu);
          std::fprintf(stderr, "calibrate: %u of %u runs\n", k, o.seeds);
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);

  Calibration cal;
  cal.impl = impl;
  cal.options = o;
  cal.runs = o.seeds;
  std::map<std::string, std::size_t> index;
  std::vector<std::vector<double>> zs;
  for (const auto& res : results) {
    cal.run_fails += res.pass() ? 0 : 1;
    for (const auto& r : res.rows) {
      if (r.kind != "stat") continue;
      auto it = index.find(r.id);
      if (it == index.end()) {
        it = index.emplace(r.id, cal.rows.size()).first;
        CalibrationRow c;
        c.id = r.id, c.check = r.check, c.family = r.family, c.alpha = r.alpha;
        cal.rows.push_back(c);
        zs.emplace_back();
      }
      CalibrationRow& c = cal.rows[it->second];
      if (std::isfinite(r.z)) zs[it->second].push_back(r.z);
      c.p05 += std::isfinite(r.p) && r.p <= 0.05;
      c.fails += r.pass ? 0 : 1;
      c.n += 1;
      if (!std::isfinite(r.z) && !std::isfinite(r.p)) c.problem = "uncalibrated: the row has neither a standardized statistic nor a p-value";
    }
  }
  namespace bm = boost::math;
  // The verdict's own false-alarm budget 1 - ci, split (Bonferroni) over the rows and the whole-run rate;
  // each row's share over its four one-sided decisions (mean: both tails; SD above 1; p-values too small;
  // failures too many), a quarter each.
  const double a_test = (1.0 - o.ci) / static_cast<double>(cal.rows.size() + 1);
  const double a = a_test / 4.0;  // per decision of a row
  for (std::size_t i = 0; i < cal.rows.size(); ++i) {
    CalibrationRow& c = cal.rows[i];
    const auto& z = zs[i];
    c.has_z = z.size() >= 2 && z.size() == c.n;
    if (c.has_z) {
      double m = 0.0, ss = 0.0;
      for (double v : z) m += v;
      m /= static_cast<double>(z.size());
      for (double v : z) ss += (v - m) * (v - m);
      const double dof = static_cast<double>(z.size() - 1);
      c.z_mean = m;
      c.z_sd = std::sqrt(ss / dof);
      // Student t with n - 1 degrees of freedom: the SD is estimated from the same few seeds
      const double tq = bm::quantile(bm::complement(bm::students_t_distribution<double>(dof), a / 2.0));  // a over both tails
      c.mean_lo = m - tq * c.z_sd / std::sqrt(static_cast<double>(z.size()));
      c.mean_hi = m + tq * c.z_sd / std::sqrt(static_cast<double>(z.size()));
      bm::chi_squared_distribution<double> chi(dof);
      c.sd_lo = std::sqrt(ss / bm::quantile(bm::complement(chi, a)));  // one-sided at a: only SD > 1 fails
      c.sd_hi = std::sqrt(ss / bm::quantile(chi, a));
      if (c.sd_lo > 1.0)
        c.problem = strf("standardized SD %.3f (CI %.3f..%.3f) is above 1: the row is anti-conservative", c.z_sd, c.sd_lo, c.sd_hi);
      else if (c.mean_lo > 0.0 || c.mean_hi < 0.0)
        c.problem = strf("standardized mean %.3f (CI %.3f..%.3f) is not 0: the statistic is biased under H0", c.z_mean,
                         c.mean_lo, c.mean_hi);
    } else if (c.problem.empty() && !zs[i].empty()) {
      c.problem = "the standardized statistic is missing on some seeds";
    }
    // p-values valid: P(p <= 0.05) <= 0.05 and P(fail) <= alpha, each with a simultaneous CP bound.
    using B = bm::binomial_distribution<double>;
    auto lower = [&](std::size_t k) {
      return k == 0 ? 0.0 : B::find_lower_bound_on_p(static_cast<double>(c.n), static_cast<double>(k), a,
                                                     B::clopper_pearson_exact_interval);
    };
    if (c.problem.empty() && lower(c.p05) > 0.05)
      c.problem = strf("%zu of %zu p-values <= 0.05: the p-values are too small", c.p05, c.n);
    if (c.problem.empty() && lower(c.fails) > c.alpha)
      c.problem = strf("failed %zu of %zu runs at alpha %.3g", c.fails, c.n, c.alpha);
    c.ok = c.problem.empty();
  }
  Interval iv = clopper_pearson(cal.runs, cal.run_fails, 2.0 * a_test);  // its lower end one-sided at a_test
  cal.run_fail_lo = iv.lo;
  cal.run_fail_hi = iv.hi;
  cal.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return cal;
}

std::string format_calibration(const Calibration& cal) {
  const auto& o = cal.options;
  std::string out = strf("terngrad calibrate: implementation %s, profile %s, seeds %llu..%llu (%u runs), alpha_total %.3g "
                         "per run\n",
                         cal.impl.c_str(), o.base.profile.name.c_str(), static_cast<unsigned long long>(o.base.seed),
                         static_cast<unsigned long long>(o.base.seed + o.seeds - 1), o.seeds, o.alpha_total);
  out += strf("Per statistical row: its standardized statistic z = S/sqrt(Var S under H0) over the seeds (mean 0 and "
              "SD 1 when the row's variance is right; SD < 1 is conservative), and how often its p-value (or bound) "
              "was <= 0.05 and it failed at its alpha share. The verdict wrongly says NOT CALIBRATED with probability "
              "at most %.2g: that budget is split over the %zu rows and the whole-run rate (Bonferroni), a row's share "
              "over its four decisions (mean 0, SD not above 1, p-values, failures). Each interval shown is the one its "
              "decision uses. The SD interval assumes normal z; with %u seeds it cannot tell an SD below its upper "
              "end from 1.\n\n",
              1.0 - o.ci, cal.rows.size(), o.seeds);
  std::size_t w = 2;
  for (const auto& r : cal.rows) w = std::max(w, r.id.size());
  out += strf("%-*s  %5s  %-24s  %-24s  %-9s  %-14s  %s\n", static_cast<int>(w), "row", "n", "mean z [CI]", "SD z [CI]",
              "p<=0.05", "fails (alpha)", "verdict");
  for (const auto& r : cal.rows) {
    std::string mean = r.has_z ? strf("%+.3f [%+.3f, %+.3f]", r.z_mean, r.mean_lo, r.mean_hi) : "- (p-value row)";
    std::string sd = r.has_z ? strf("%.3f [%.3f, %.3f]", r.z_sd, r.sd_lo, r.sd_hi) : "-";
    out += strf("%-*s  %5zu  %-24s  %-24s  %-9s  %-14s  %s\n", static_cast<int>(w), r.id.c_str(), r.n, mean.c_str(),
                sd.c_str(), strf("%.3f", r.n ? double(r.p05) / r.n : 0.0).c_str(),
                strf("%zu (%.2g)", r.fails, r.alpha).c_str(), r.ok ? "ok" : ("NOT CALIBRATED: " + r.problem).c_str());
  }
  out += strf("\nwhole runs: %zu of %zu failed at alpha_total %.3g: rate %.4f (CI %.4f..%.4f at %.3g%%)\n", cal.run_fails,
              cal.runs, o.alpha_total, cal.runs ? double(cal.run_fails) / cal.runs : 0.0, cal.run_fail_lo,
              cal.run_fail_hi, 100.0 * (1.0 - 2.0 * (1.0 - o.ci) / static_cast<double>(cal.rows.size() + 1)));
  auto problems = cal.problems();
  out += strf("verdict: %s in %.0f s\n", problems.empty() ? "CALIBRATED" : "NOT CALIBRATED", cal.seconds);
  for (const auto& p : problems) out += "  " + p + "\n";
  return out;
}

std::string format_calibration_json(const Calibration& cal) {
  nlohmann::json rows = nlohmann::json::array();
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  for (const auto& r : cal.rows)
    rows.push_back({{"id", r.id}, {"check", r.check}, {"family", r.family}, {"n", r.n}, {"has_z", r.has_z},
                    {"z_mean", num(r.z_mean)}, {"z_mean_ci", {num(r.mean_lo), num(r.mean_hi)}},
                    {"z_sd", num(r.z_sd)}, {"z_sd_ci", {num(r.sd_lo), num(r.sd_hi)}}, {"p_le_0_05", r.p05},
                    {"fails", r.fails}, {"alpha", r.alpha}, {"ok", r.ok}, {"problem", r.problem}});
  nlohmann::json doc = {{"implementation", cal.impl},
                        {"profile", cal.options.base.profile.name},
                        {"first_seed", cal.options.base.seed},
                        {"seeds", cal.options.seeds},
                        {"alpha_total", cal.options.alpha_total},
                        {"ci", cal.options.ci},
                        {"runs", cal.runs},
                        {"run_fails", cal.run_fails},
                        {"run_fail_ci", {cal.run_fail_lo, cal.run_fail_hi}},
                        {"seconds", cal.seconds},
                        {"calibrated", cal.ok()},
                        {"problems", cal.problems()},
                        {"rows", rows}};
  return doc.dump(2) + "\n";
}

}  // namespace tg::verify
