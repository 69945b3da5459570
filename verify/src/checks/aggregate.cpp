// terngrad-bench: the aggregate check: N workers ternarize their own gradients with one shared scalar
// s = max_w s_w; the mean of their outputs is unbiased with variance (1/N^2) sum_w (s ||g_w||_1 -
// ||g_w||_2^2), and tg::aggregate of their payloads is the exact integer sum (docs/statistics.md).
// Under clipping each worker first clamps its g_w at its own bound c sigma_w (as encode_with_scalar
// does), so g_w reads as the clamped gradient throughout.
#include <algorithm>

#include "checks/common.hpp"
#include "tg/verify/keys.hpp"

namespace tg::verify::checks {

// ---- aggregate: N workers sharing one scalar --------------------------------------------------------
namespace {
// "aggregate" in the base mode; "aggregate.clip" / "aggregate.saturate" for the runs in the other modes.
std::string aggregate_check(const Options& o, const Params& params) {
  return params.clip == base_params(o).clip ? std::string("aggregate") : std::string("aggregate.") + to_string(params.clip);
}
}  // namespace

std::vector<std::string> plan_aggregate(const Options& o, const Params& params) {
  const std::string fam = "gaussian x" + std::to_string(o.profile.agg_workers), check = aggregate_check(o, params);
  return {row_id(check + ".unbiased-pooled", fam), row_id(check + ".unbiased-drift", fam), row_id(check + ".variance", fam)};
}

void run_aggregate(Ctx& c, std::size_t d, const Params& params) {
  const std::uint32_t N = c.opt.profile.agg_workers, n = c.opt.profile.agg_steps;
  const std::string check = aggregate_check(c.opt, params);
  // the base run keeps its stream seed; a run in another mode draws from its own (clip 1, saturate 2)
  const std::uint64_t seed = derive_seed(c.opt.seed, KeyPurpose::aggregate,
                                         check == "aggregate" ? 0 : (params.clip == ClipMode::clip ? 1 : 2));
  const Codec& ref = reference_codec();
  std::vector<std::vector<float>> g(N);
  std::vector<float> own(N), bound(N);
  for (std::uint32_t w = 0; w < N; ++w) {
    g[w] = make_gradient("gaussian", d,
                         derive_seed(c.opt.seed, KeyPurpose::gradient,
                                     static_cast<std::uint32_t>(GradientVariant::aggregate) + w)).layers[0].g;
    float scale = 0.5f + static_cast<float>(w % 4) * 0.5f;  // workers differ: 0.5, 1, 1.5, 2
    for (auto& x : g[w]) x *= scale;
    own[w] = tensor_scalar(ref, g[w], params, 0);
    bound[w] = clip_bound(ref, g[w], params);  // +inf without clipping
  }
  float s = shared_scalar(own);
  std::vector<double> p(static_cast<std::size_t>(N) * d);
  std::vector<std::int8_t> sgn(p.size());
  double Vpool = 0.0, Vvar = 0.0, Evar = 0.0, identity = 0.0;
  for (std::uint32_t w = 0; w < N; ++w) {
    // Each worker clamps at its own clip bound (encode_with_scalar): E[s t_k] = sign(g) min(|g|, cap_w).
    const ScalarRule rule = make_rule(s, bound[w]);
    double l1 = 0, l2 = 0;
    for (std::size_t k = 0; k < d; ++k) {
      float a = std::min(std::fabs(g[w][k]), rule.cap);
      p[w * d + k] = keep_probability(a, rule.scale);
      sgn[w * d + k] = static_cast<std::int8_t>(g[w][k] > 0 ? 1 : (g[w][k] < 0 ? -1 : 0));
      Vpool += p[w * d + k] * (1 - p[w * d + k]);
      l1 += a;
      l2 += static_cast<double>(a) * a;
    }
    identity += static_cast<double>(s) * l1 - l2;
  }
  identity /= static_cast<double>(N) * N;
  for (std::size_t k = 0; k < d; ++k) {
    double sv = 0, sv2 = 0, sm4 = 0;
    for (std::uint32_t w = 0; w < N; ++w) {
      double q = p[w * d + k], v = q * (1 - q);
      sv += v, sv2 += v * v, sm4 += v * ((1 - q) * (1 - q) * (1 - q) + q * q * q);
    }
    Evar += sv;
    Vvar += sm4 + 2 * sv * sv - 3 * sv2;
  }
  Vpool *= n;
  Vvar *= n;
  double Spool = 0.0, Sdrift = 0.0, Svar = 0.0;
  std::vector<double> term(p.size(), 0.0);  // each (worker, coordinate)'s pooled term summed over the draws
  std::uint64_t bad = 0;
  std::string msg;
  std::uint32_t chunk = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(c.sampler.max_request_elements() / d, 1, n));
  bool payload_ok = true;
  std::string payload_msg = "no codec behind this implementation: payload aggregation not compared";
  const Codec* codec = c.sampler.codec();
  for (std::uint32_t j0 = 0; j0 < n; j0 += chunk) {
    std::uint32_t cnt = std::min(chunk, n - j0);
    std::vector<Draws> dw;
    for (std::uint32_t w = 0; w < N; ++w) {
      dw.push_back(c.sampler.draw({g[w], params, {seed, w, 0, j0}, cnt, s}));
      if (!dw.back().defect.empty() && bad++ == 0) msg = dw.back().defect;
    }
    for (std::uint32_t j = 0; j < cnt; ++j) {
      for (std::uint32_t w = 0; w < N; ++w)
        if (dw[w].scalars[j] != s && bad++ == 0)
          msg = strf("worker %u step %u: scalar %.9g, shared %.9g", w, j0 + j, static_cast<double>(dw[w].scalars[j]),
                     static_cast<double>(s));
      for (std::size_t k = 0; k < d; ++k) {
        double T = 0.0;
        for (std::uint32_t w = 0; w < N; ++w) {
          int t = dw[w].row(j)[k];
          std::size_t e = w * d + k;
          double y = sgn[e] * t;
          if (t != 0 && y != 1 && bad++ == 0) msg = strf("worker %u step %u element %zu: wrong sign", w, j0 + j, k);
          Spool += y - p[e];
          Sdrift += sgn[e] * (y - p[e]);
          term[e] += y - p[e];
          T += y - p[e];
        }
        Svar += T * T;  // centred below
      }
    }
    // The payload path: encode_with_scalar + aggregate must give the sum of the trits exactly.
    if (codec && j0 == 0) {
      std::vector<std::vector<std::uint8_t>> pl;
      std::vector<std::span<const std::uint8_t>> spans;
      for (std::uint32_t w = 0; w < N; ++w) pl.push_back(encode_with_scalar(*codec, g[w], params, {seed, w, 0, 0}, s));
      for (auto& x : pl) spans.emplace_back(x);
      Aggregate agg = aggregate(*codec, spans);
      payload_msg = strf("tg::aggregate of %u encode_with_scalar payloads: the sum of the trits, the shared scalar, "
                         "%u workers, mean = s sum / N", N, N);
      if (agg.workers != N || agg.sums.size() != d || agg.mean.size() != d) {
        payload_ok = false;
        payload_msg = strf("aggregate of %u payloads: %u workers, %zu sums, %zu means for %zu elements", N, agg.workers,
                           agg.sums.size(), agg.mean.size(), d);
      }
      for (std::size_t k = 0; k < d && payload_ok; ++k) {
        int sum = 0;
        for (std::uint32_t w = 0; w < N; ++w) sum += dw[w].row(0)[k];
        const float mean = static_cast<float>(static_cast<double>(s) * sum / N);
        if (agg.sums[k] != sum || agg.scalar != s || agg.mean[k] != mean) {
          payload_ok = false;
          payload_msg = strf("element %zu: aggregate sum %d (trits sum %d), scalar %.9g (shared %.9g), mean %.9g "
                             "(s sum / N = %.9g)", k, agg.sums[k], sum, static_cast<double>(agg.scalar),
                             static_cast<double>(s), static_cast<double>(agg.mean[k]), static_cast<double>(mean));
        }
      }
    }
    c.progress.add(static_cast<double>(cnt) * d * N, check);
  }
  Svar -= static_cast<double>(n) * Evar;
  // The pooled rows also judge their partial sums, the (worker, coordinate) terms taken in the order of their
  // keep probability under the shared scalar (ties by position, worker-major): fixed before any draw.
  PartialWalk walk_bias, walk_drift;
  for (const auto& [p_e, e] : p_order(p)) {
    walk_bias.add(term[e], p_e);
    walk_drift.add(sgn[e] * term[e], p_e);
  }
  Row st = exact_row(check + ".structure", "gaussian x" + std::to_string(N));
  st.statistic = strf("%llu violations", static_cast<unsigned long long>(bad));
  st.pass = bad == 0 && payload_ok;
  st.detail = bad ? msg : payload_msg;
  c.rows.push_back(st);
  c.rows.push_back(pooled_bias_row(c, check + ".unbiased-pooled", st.family, Spool, Vpool,
                                    static_cast<double>(n) * d * N,
                                    params.clip == ClipMode::none
                                        ? "E[mean of the workers' g~] = mean of the g_w with the shared scalar s = max_w s_w; the "
                                          "sum and its partial sums in p order"
                                        : "E[mean of the workers' g~] = mean of the g_w clamped at each worker's own clip "
                                          "bound, with the shared scalar s = max_w s_w; the sum and its partial sums in p order",
                                    Pooled::bias, &walk_bias.peak));
  c.rows.push_back(pooled_bias_row(c, check + ".unbiased-drift", st.family, Sdrift, Vpool,
                                    static_cast<double>(n) * d * N,
                                    "the same terms, each times sign(x): the sum of (g~ - x) / s over workers, "
                                    "coordinates and draws (a drift of every coordinate the same way), and its partial sums "
                                    "in p order",
                                    Pooled::drift, &walk_drift.peak));
  {
    Row r = stat_row(c, check + ".variance", st.family);
    auto o = bernstein_decide(Svar, Vvar, static_cast<double>(N) * N, c.alpha, c.opt.profile.beta);
    double E = static_cast<double>(n) * Evar;
    r.statistic = strf("ratio %.5f", 1.0 + Svar / E);
    r.threshold = strf("1 +- %.3g", o.threshold / E);
    r.power = strf("rel. error >= %.3g", o.detectable / E);
    apply(r, o, E);
    r.detail = strf("E||mean g~ - mean g||^2 = (1/N^2) sum_w (s ||g_w||_1 - ||g_w||_2^2) = %.6g", identity);
    mark_rejected(r);
    c.rows.push_back(r);
  }
}

}  // namespace tg::verify::checks
