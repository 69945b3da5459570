// terngrad-bench: `terngrad compare --stat`: two implementations whose random streams differ,
// compared in distribution (docs/statistics.md, "Two-sample comparison").
//
// For every gradient family, layer and clipping mode, A draws N encodings at steps 0..N-1 and B at
// steps N..2N-1 of the same key, so the two samples are independent even when both follow the spec's
// stream. Then:
//   * scalars and signs (deterministic): every draw's scalar of A and of B must equal the spec's (none:
//     exactly; clip/saturate: within clip_scalar_window, the battery's tolerance for a float32 sigma),
//     and every kept element must carry the sign of g and sit where g != 0;
//   Conditioning on K_k = K_Ak + K_Bk (coordinate k kept K_k times in the 2N draws), K_Ak is
//   hypergeometric (2N, N, K_k) when A and B keep k with the same probability, whatever it is, and the
//   coordinates are independent. So D_k = K_Ak - K_Bk has mean 0 and variance K_k (2N - K_k) / (2N - 1);
//   coordinates with K_k = 0 or 2N carry no information and are left out.
//   * total keep count: z = sum_k D_k / sqrt(sum_k Var D_k), two-sided, normal approximation of a sum
//     of thousands of independent bounded terms (calibrated in verify/tests). Under equal scalars
//     E||g~||^2 = s^2 E[kept], so this is also the comparison of the variances s||x||_1 - ||x||_2^2;
//   * signed total: z = sum_k sign(g_k) D_k / sqrt(sum_k Var D_k), the same test on the differences times
//     the signs. A keep rate higher for negative entries and lower for positive ones (a drift of every
//     coordinate's mean the same way) cancels in the total and adds up here;
//   * per-coordinate keep rates: T = sum_k D_k^2 / Var D_k. Each term has mean 1 and a variance computed
//     exactly from the hypergeometric law of its K_k; T is referred to a scaled chi-squared with the same
//     mean and variance (Satterthwaite), one-sided (differences only increase T). Coordinates with K_k = 1
//     or 2N - 1 are left out of T: their term is 1 with no variance.
// alpha_total is split equally over the 3 decisions of every case.
#include <boost/math/distributions/chi_squared.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "checks/common.hpp"
#include "tg/verify/battery.hpp"
#include "tg/verify/families.hpp"
#include "tg/verify/keys.hpp"
#include "tg/verify/stats.hpp"

namespace tg::verify {

using checks::Progress;

namespace {

// Upper tail P(T >= t) of c * chi2(nu) with mean m and variance v (c = v / 2m, nu = 2 m^2 / v).
double scaled_chi2_upper(double t, double m, double v) {
  if (v <= 0) return t > m ? 0.0 : 1.0;
  double c = v / (2 * m), nu = 2 * m * m / v;
  if (nu > 1e4) {  // Wilson-Hilferty: (X / nu)^(1/3) ~ N(1 - 2/(9 nu), 2/(9 nu)), accurate at these nu
    double q = 2.0 / (9.0 * nu);
    return normal_upper_tail((std::cbrt(t / c / nu) - (1 - q)) / std::sqrt(q));
  }
  // Far in a tail the incomplete gamma function overflows its intermediate terms: the policy returns
  // the limit (a p-value of 0 or 1) instead of throwing.
  using Policy = boost::math::policies::policy<boost::math::policies::overflow_error<boost::math::policies::ignore_error>>;
  boost::math::chi_squared_distribution<double, Policy> chi(nu);
  double p = boost::math::cdf(boost::math::complement(chi, t / c));
  return std::isfinite(p) ? std::clamp(p, 0.0, 1.0) : (t > m ? 0.0 : 1.0);
}

// For N draws each: by K = 1..2N-1 kept in all, Var D and Var(D^2 / Var D) under the hypergeometric law
// P(K_A = a | K) = C(N, a) C(N, K - a) / C(2N, K), D = 2a - K.
struct HypergeometricTable {
  std::vector<double> var_d, var_w;
};
const HypergeometricTable& hypergeometric_table(std::uint32_t n) {
  static thread_local std::uint32_t cached_n = 0;
  static thread_local HypergeometricTable table;
  if (cached_n == n) return table;
  const std::uint32_t two_n = 2 * n;
  table.var_d.assign(two_n + 1, 0.0);
  table.var_w.assign(two_n + 1, 0.0);
  auto lchoose = [](double a, double b) { return std::lgamma(a + 1) - std::lgamma(b + 1) - std::lgamma(a - b + 1); };
  for (std::uint32_t K = 1; K < two_n; ++K) {
    const double vd = static_cast<double>(K) * (two_n - K) / (two_n - 1.0);
    double m4 = 0;
    for (std::uint32_t a = K > n ? K - n : 0; a <= std::min(K, n); ++a) {
      double p = std::exp(lchoose(n, a) + lchoose(n, K - a) - lchoose(two_n, K));
      double d = 2.0 * a - K;
      m4 += p * d * d * d * d;
    }
    table.var_d[K] = vd;
    table.var_w[K] = std::max(0.0, m4 / (vd * vd) - 1.0);
  }
  cached_n = n;
  return table;
}

// Deterministic part: scalars in the window w (clip_scalar_window: the spec's, or under clipping a float32
// sigma's), signs and zeros right.
std::string structure(const Draws& d, std::span<const float> g, const Params& params, const ClipWindow& w,
                      const char* who) {
  if (!d.defect.empty()) return std::string(who) + ": output not of the form {-s, 0, +s}: " + d.defect;
  for (std::uint32_t j = 0; j < d.steps; ++j) {
    float s = d.scalars[j];
    std::uint64_t ulps = ulp_distance(s, w.spec);
    if (!w.contains(s))
      return strf("%s: draw %u has scalar %.9g, the spec's is %.9g (%llu ulps; %s)", who, j, static_cast<double>(s),
                  static_cast<double>(w.spec), static_cast<unsigned long long>(ulps),
                  w.lo == w.hi ? "must be equal"
                               : strf("a float32 sigma's lies in [%.9g, %.9g]", static_cast<double>(w.lo),
                                      static_cast<double>(w.hi)).c_str()) +
             scalar_hint(g, params, s, w.spec);
    auto row = d.row(j);
    for (std::size_t k = 0; k < g.size(); ++k) {
      int t = row[k];
      if (t == 0) continue;
      if (g[k] == 0.0f || (t > 0) != (g[k] > 0.0f))
        return strf("%s: draw %u element %zu (g = %.9g) has trit %d", who, j, k, static_cast<double>(g[k]), t);
    }
  }
  return "";
}

}  // namespace

bool StatCompareResult::same() const {
  return std::none_of(cases.begin(), cases.end(), [](const StatCompareCase& c) { return !c.difference.empty(); });
}

StatCompareResult compare_statistically(Sampler& a, Sampler& b, const StatCompareOptions& o) {
  if (o.d == 0 || o.draws < 2) throw Error(ErrorCode::invalid_argument, "compare --stat: needs d >= 1 and >= 2 draws");
  if (o.modes.empty()) throw Error(ErrorCode::invalid_argument, "compare --stat: no clipping mode to compare");
  if (!(o.alpha_total > 0 && o.alpha_total < 1) || !(o.beta > 0 && o.beta < 1))
    throw Error(ErrorCode::invalid_argument, "compare --stat: alpha and beta must be in (0, 1)");
  auto t0 = std::chrono::steady_clock::now();
  StatCompareResult res;
  res.a = a.name();
  res.b = b.name();
  res.options = o;

  // Plan first: the number of cases fixes each decision's alpha before any data is seen.
  std::vector<Gradient> grads;
  std::size_t ncases = 0;
  for (const auto& fam : family_names()) {
    grads.push_back(make_gradient(fam, o.d, derive_seed(o.seed, KeyPurpose::gradient,
                                                        static_cast<std::uint32_t>(GradientVariant::compare))));
    ncases += grads.back().layers.size() * o.modes.size();
  }
  res.decisions = 3 * ncases;
  res.alpha_per_decision = o.alpha_total / static_cast<double>(res.decisions);
  const double za = normal_quantile(1 - res.alpha_per_decision), zb = normal_quantile(1 - o.beta);
  const double zh = normal_quantile(1 - res.alpha_per_decision / 2);

  Progress progress(o.progress, static_cast<double>(grads.size()));
  for (std::size_t fi = 0; fi < grads.size(); ++fi) {
    const Gradient& G = grads[fi];
    for (std::size_t li = 0; li < G.layers.size(); ++li) {
      const auto& g = G.layers[li].g;
      const StreamKey key{derive_seed(o.seed, KeyPurpose::compare, 1), 3, static_cast<std::uint32_t>(li + 5), 0};
      for (ClipMode mode : o.modes) {
        Params params;
        params.clip = mode;
        StatCompareCase k;
        k.family = G.family;
        k.layer = G.layers[li].name;
        k.mode = to_string(mode);
        StreamKey kb = key;
        kb.step = key.step + o.draws;  // disjoint steps: independent samples even for one stream
        Draws da = a.draw({g, params, key, o.draws, std::nullopt});
        Draws db = b.draw({g, params, kb, o.draws, std::nullopt});
        k.scalar_a = da.scalars.empty() ? 0.0f : da.scalars[0];
        k.scalar_b = db.scalars.empty() ? 0.0f : db.scalars[0];
        // Each side's scalars against the spec's (the reference codec's): equal without clipping, within
        // clip_scalar_window under clipping (a float32 sigma), the battery's own rule.
        const ClipWindow w = clip_scalar_window(g, params);
        k.difference = structure(da, g, params, w, "A");
        if (k.difference.empty()) k.difference = structure(db, g, params, w, "B");
        // Counts per coordinate, whatever the structure verdict (reported either way).
        std::vector<std::uint32_t> ca(g.size(), 0), cb(g.size(), 0);
        for (std::uint32_t j = 0; j < o.draws; ++j) {
          auto ra = da.row(j), rb = db.row(j);
          for (std::size_t e = 0; e < g.size(); ++e) ca[e] += ra[e] != 0, cb[e] += rb[e] != 0;
        }
        const HypergeometricTable& h = hypergeometric_table(o.draws);
        double t = 0, v = 0, dsum = 0, ssum = 0, dvar = 0;
        for (std::size_t e = 0; e < g.size(); ++e) {
          const std::uint32_t kk = ca[e] + cb[e];
          k.kept_a += ca[e];
          k.kept_b += cb[e];
          if (kk == 0 || kk == 2 * o.draws) continue;  // no information: never or always kept
          const double diff = static_cast<double>(ca[e]) - static_cast<double>(cb[e]);
          dsum += diff;
          ssum += g[e] < 0.0f ? -diff : diff;  // kept only where g != 0 (else the structure check names it)
          dvar += h.var_d[kk];
          // K = 1 or 2N - 1: D = +-1, so D^2 / Var D = 1 whatever A and B do. A constant term adds to T's
          // mean and not its variance, which would make the scaled chi-squared too thin in its upper tail
          // (up to 2.4x the stated alpha on small layers); it carries nothing for this test.
          if (kk == 1 || kk == 2 * o.draws - 1) continue;
          t += diff * diff / h.var_d[kk];
          v += h.var_w[kk];
          ++k.coordinates;
        }
        const std::uint64_t total = k.kept_a + k.kept_b;
        k.z_total = dvar > 0 ? dsum / std::sqrt(dvar) : 0.0;
        k.p_total = dvar > 0 ? std::min(1.0, 2 * normal_upper_tail(std::fabs(k.z_total))) : 1.0;
        k.z_signed = dvar > 0 ? ssum / std::sqrt(dvar) : 0.0;
        k.p_signed = dvar > 0 ? std::min(1.0, 2 * normal_upper_tail(std::fabs(k.z_signed))) : 1.0;
        const double m = static_cast<double>(k.coordinates);
        k.z_coordinates = v > 0 ? (t - m) / std::sqrt(v) : 0.0;
        k.p_coordinates = k.coordinates ? scaled_chi2_upper(t, m, v) : 1.0;
        // Detectable effects at power 1 - beta. Total: every keep probability of A (1 + r) times B's moves
        // sum_k D_k by about r K / 2 (K = kept by both): r = 2 (z_{1-alpha/2} + z_{1-beta}) sqrt(Var) / K.
        // Per coordinate: relative differences +-eps with random signs raise E T by about eps^2 K over its
        // noise (z_{1-alpha} + z_{1-beta}) sd T.
        if (total > 0 && dvar > 0) {
          k.detectable_total = 2 * (zh + zb) * std::sqrt(dvar) / static_cast<double>(total);
          k.detectable_coordinates = std::sqrt((za + zb) * std::sqrt(std::max(v, 1.0)) / static_cast<double>(total));
        } else {
          k.detectable_total = k.detectable_coordinates = INFINITY;
        }
        if (k.difference.empty() && k.p_total <= res.alpha_per_decision)
          k.difference = strf("total kept %llu vs %llu (z = %.2f, p = %.3g <= %.3g)",
                              static_cast<unsigned long long>(k.kept_a), static_cast<unsigned long long>(k.kept_b),
                              k.z_total, k.p_total, res.alpha_per_decision);
        if (k.difference.empty() && k.p_signed <= res.alpha_per_decision)
          k.difference = strf("keep rates differ between positive and negative entries (signed total z = %.2f, "
                              "p = %.3g <= %.3g)", k.z_signed, k.p_signed, res.alpha_per_decision);
        if (k.difference.empty() && k.p_coordinates <= res.alpha_per_decision)
          k.difference = strf("per-coordinate keep rates differ (z = %.2f, p = %.3g <= %.3g)", k.z_coordinates,
                              k.p_coordinates, res.alpha_per_decision);
        res.cases.push_back(std::move(k));
      }
    }
    progress.add(1.0, "compare --stat " + G.family);
  }
  progress.finish();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::string format_stat_compare(const StatCompareResult& r) {
  const auto& o = r.options;
  std::string out = "terngrad compare --stat: " + r.a + " vs " + r.b +
                    strf(" (seed %llu, %zu elements per family, %u draws each)\n",
                         static_cast<unsigned long long>(o.seed), o.d, o.draws);
  out += strf("alpha_total %.3g over %zu decisions (%.3g each); detectable effects at power %.4g\n\n", o.alpha_total,
              r.decisions, r.alpha_per_decision, 1 - o.beta);
  std::size_t wf = 6, wl = 5;
  for (const auto& k : r.cases) wf = std::max(wf, k.family.size()), wl = std::max(wl, k.layer.size());
  out += strf("%-*s  %-*s  %-8s  %13s  %10s  %9s  %9s  %8s  %9s  %s\n", static_cast<int>(wf), "family",
              static_cast<int>(wl), "layer", "clip", "scalar A", "kept A/B", "p total", "p signed", "detect", "z coord",
              "verdict");
  std::size_t differ = 0;
  for (const auto& k : r.cases) {
    differ += !k.difference.empty();
    double ratio = k.kept_b ? static_cast<double>(k.kept_a) / static_cast<double>(k.kept_b) : 0.0;
    std::string detect = std::isfinite(k.detectable_total) ? strf("%.2g", k.detectable_total) : "-";
    out += strf("%-*s  %-*s  %-8s  %13.7g  %10.5f  %9.3g  %9.3g  %8s  %9.2f  %s\n", static_cast<int>(wf),
                k.family.c_str(), static_cast<int>(wl), k.layer.c_str(), k.mode.c_str(), static_cast<double>(k.scalar_a),
                ratio, k.p_total, k.p_signed, detect.c_str(), k.z_coordinates, k.difference.empty() ? "same" : ("DIFFERS: " + k.difference).c_str());
  }
  double worst_total = 0, worst_coord = 0;  // over the cases that carry information
  std::size_t uninformative = 0;
  for (const auto& k : r.cases) {
    if (!std::isfinite(k.detectable_total)) {
      ++uninformative;
      continue;
    }
    worst_total = std::max(worst_total, k.detectable_total);
    worst_coord = std::max(worst_coord, k.detectable_coordinates);
  }
  out += strf("\n'detect': the smallest relative difference of every keep probability the total test finds with "
              "probability %.4g (the signed total finds the same difference with opposite signs on positive and "
              "negative entries); per coordinate, relative differences of +-%.2g (random signs) in the worst case.\n",
              1 - o.beta, worst_coord);
  if (uninformative)
    out += strf("%zu case(s) carry no information ('-'): every element always or never kept (constant, zero or "
                "all-clipped gradients); their scalars and signs are still compared.\n", uninformative);
  if (differ == 0)
    out += strf("verdict: SAME DISTRIBUTION (%zu cases; no difference larger than the detectable ones, worst %.2g) "
                "in %.1f s\n", r.cases.size(), worst_total, r.seconds);
  else
    out += strf("verdict: DIFFERENT (%zu of %zu cases differ) in %.1f s\n", differ, r.cases.size(), r.seconds);
  return out;
}

std::string format_stat_compare_json(const StatCompareResult& r) {
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& k : r.cases)
    cases.push_back({{"family", k.family}, {"layer", k.layer}, {"clip", k.mode}, {"scalar_a", k.scalar_a},
                     {"scalar_b", k.scalar_b}, {"kept_a", k.kept_a}, {"kept_b", k.kept_b}, {"p_total", num(k.p_total)},
                     {"z_signed", num(k.z_signed)}, {"p_signed", num(k.p_signed)},
                     {"detectable_total", num(k.detectable_total)}, {"coordinates", k.coordinates},
                     {"z_coordinates", num(k.z_coordinates)}, {"p_coordinates", num(k.p_coordinates)},
                     {"detectable_coordinates", num(k.detectable_coordinates)}, {"same", k.difference.empty()},
                     {"difference", k.difference}});
  nlohmann::json doc = {{"a", r.a}, {"b", r.b}, {"mode", "stat"}, {"seed", r.options.seed},
                        {"elements", r.options.d}, {"draws", r.options.draws}, {"alpha_total", r.options.alpha_total},
                        {"alpha_per_decision", r.alpha_per_decision}, {"beta", r.options.beta},
                        {"decisions", r.decisions}, {"same", r.same()}, {"seconds", r.seconds}, {"cases", cases}};
  return doc.dump(1) + "\n";
}

}  // namespace tg::verify
