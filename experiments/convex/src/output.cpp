// terngrad-bench: seed-averaged curves and their CSV / JSON form. See include/tg/convex/output.hpp.
#include "tg/convex/output.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace tg::convex {

namespace {
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double pos = q * (v.size() - 1);
  auto lo = static_cast<std::size_t>(std::floor(pos));
  auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}
}  // namespace

Curves summarize(const std::string& method, const std::vector<Trace>& traces, int every,
                 const std::vector<double>& predicted, const std::vector<double>& block_scales) {
  Curves c;
  c.method = method;
  c.seeds = static_cast<int>(traces.size());
  if (traces.empty()) return c;
  const int T = static_cast<int>(traces[0].dist2.size()) - 1;
  every = std::max(1, every);
  for (const auto& tr : traces) c.diverged += tr.diverged;
  auto mean_at = [&](auto member, int t) {
    double s = 0;
    int k = 0;
    for (const auto& tr : traces) {
      const auto& v = tr.*member;
      if (t < static_cast<int>(v.size())) { s += v[t]; ++k; }
    }
    return k ? s / k : NAN;
  };
  for (int t = 0; t <= T; t = (t == T ? T + 1 : std::min(T, t + every))) {
    c.t.push_back(t);
    std::vector<double> d;
    for (const auto& tr : traces) d.push_back(tr.dist2[t]);
    double m = 0;
    for (double x : d) m += x / d.size();
    c.dist2_mean.push_back(m);
    c.dist2_p10.push_back(quantile(d, 0.1));
    c.dist2_p90.push_back(quantile(d, 0.9));
    c.loss_gap.push_back(mean_at(&Trace::loss_gap, t));
    c.update_sq.push_back(mean_at(&Trace::update_sq, t));
    c.assumption3.push_back(mean_at(&Trace::assumption3, t));
    c.grad_sq.push_back(mean_at(&Trace::grad_sq, t));
    c.var_measured.push_back(mean_at(&Trace::var_measured, t));
    c.var_identity.push_back(mean_at(&Trace::var_identity, t));
    if (!predicted.empty()) c.dist2_predicted.push_back(predicted[t]);
    const int B = static_cast<int>(traces[0].block_dist2.cols());
    c.block_dist2.resize(B);
    for (int b = 0; b < B; ++b) {
      double sc = b < static_cast<int>(block_scales.size()) ? block_scales[b] : 1.0;
      double s = 0;
      for (const auto& tr : traces) s += tr.block_dist2(t, b) / (sc * sc) / traces.size();
      c.block_dist2[b].push_back(s);
    }
  }
  c.final_dist2 = c.dist2_mean.back();
  // Slope of log E||e_t||^2 against log t over t in [T/2, T] (every step, mean over seeds).
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int k = 0;
  for (int t = std::max(1, T / 2); t <= T; ++t) {
    double m = 0;
    for (const auto& tr : traces) m += tr.dist2[t] / traces.size();
    if (!(m > 0) || !std::isfinite(m)) continue;
    double x = std::log(static_cast<double>(t)), y = std::log(m);
    sx += x; sy += y; sxx += x * x; sxy += x * y; ++k;
  }
  c.slope = k > 1 ? (k * sxy - sx * sy) / (k * sxx - sx * sx) : NAN;
  return c;
}

std::string curves_csv(const std::vector<Curves>& curves) {
  std::ostringstream os;
  os.precision(9);
  os << kCurvesCsvHeader << '\n';
  // a value that is not finite (a diverged run: inf, nan) is an empty cell, as it is null in summary.json
  auto cell = [&os](double x) -> std::ostream& {
    if (std::isfinite(x)) os << x;
    return os;
  };
  for (const auto& c : curves)
    for (std::size_t i = 0; i < c.t.size(); ++i) {
      os << c.method << ',' << c.t[i] << ',';
      cell(c.dist2_mean[i]) << ',';
      cell(c.dist2_p10[i]) << ',';
      cell(c.dist2_p90[i]) << ',';
      if (!c.dist2_predicted.empty()) cell(c.dist2_predicted[i]);
      os << ',';
      cell(c.loss_gap[i]) << ',';
      cell(c.update_sq[i]) << ',';
      cell(c.assumption3[i]) << ',';
      cell(c.grad_sq[i]) << ',';
      cell(c.var_measured[i]) << ',';
      cell(c.var_identity[i]) << '\n';
    }
  return os.str();
}

nlohmann::json curves_json(const std::vector<Curves>& curves) {
  nlohmann::json out = nlohmann::json::array();
  auto clean = [](const std::vector<double>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (double x : v) a.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr));
    return a;
  };
  for (const auto& c : curves) {
    out.push_back({{"method", c.method}, {"seeds", c.seeds}, {"diverged", c.diverged},
                   {"slope_last_half", std::isfinite(c.slope) ? nlohmann::json(c.slope) : nlohmann::json(nullptr)},
                   {"final_dist2", std::isfinite(c.final_dist2) ? nlohmann::json(c.final_dist2) : nlohmann::json(nullptr)},
                   {"t", c.t}, {"dist2_mean", clean(c.dist2_mean)}, {"dist2_p10", clean(c.dist2_p10)},
                   {"dist2_p90", clean(c.dist2_p90)}, {"dist2_predicted", clean(c.dist2_predicted)},
                   {"loss_gap", clean(c.loss_gap)}, {"update_sq", clean(c.update_sq)},
                   {"assumption3", clean(c.assumption3)}, {"grad_sq", clean(c.grad_sq)},
                   {"var_measured", clean(c.var_measured)}, {"var_identity", clean(c.var_identity)}});
    nlohmann::json blocks = nlohmann::json::array();
    for (const auto& b : c.block_dist2) blocks.push_back(clean(b));
    out.back()["block_dist2_normalized"] = blocks;
  }
  return out;
}

}  // namespace tg::convex
