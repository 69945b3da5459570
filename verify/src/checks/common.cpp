// terngrad-bench: the battery's shared pieces (checks/common.hpp): row builders, the Bernstein
// decision with its power, progress. The derivations are in docs/statistics.md.
#include "checks/common.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "tg/verify/stats.hpp"

namespace tg::verify {

std::uint64_t ulp_distance(float a, float b) {
  // Ordinal of a float: the bit pattern for x >= 0 (ordered like the values), its negation below 0, so
  // that -x lies as far from x as the ordinals of both magnitudes together (never 0 ulps away).
  auto ord = [](float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    const std::int64_t m = static_cast<std::int64_t>(u & 0x7fffffffu);
    return (u >> 31) ? -m : m;
  };
  std::int64_t d = ord(a) - ord(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

namespace {
float ulps_down(float x, std::uint32_t n) {
  for (std::uint32_t u = 0; u < n && x > 0.0f; ++u) x = std::nextafter(x, 0.0f);
  return x;
}
float ulps_up(float x, std::uint32_t n) {
  for (std::uint32_t u = 0; u < n && std::isfinite(x); ++u) x = std::nextafter(x, std::numeric_limits<float>::infinity());
  return x;
}
}  // namespace

std::uint32_t float32_sum_roundings(std::size_t d) {
  const double dd = static_cast<double>(std::max<std::size_t>(d, 1));
  return static_cast<std::uint32_t>(std::ceil(std::log2(dd))) +
         static_cast<std::uint32_t>(std::min<std::size_t>(d, kFloat32RunMax)) + 2u;
}

std::uint32_t clip_bound_ulps(std::size_t d) { return (float32_sum_roundings(d) + 10u + 1u) / 2u + 1u; }

ClipWindow clip_bound_window(std::span<const float> g, const Params& params) {
  ClipWindow w;
  const Codec& ref = reference_codec();
  w.spec = clip_bound(ref, g, params);
  if (params.clip == ClipMode::none || !std::isfinite(w.spec)) {
    w.lo = w.hi = w.spec;
    return w;
  }
  w.ulps = clip_bound_ulps(g.size());
  if (g.size() == 1) {  // one element's mean is itself, in float32 too: every correct codec's sigma is exactly 0
    w.lo = w.hi = w.spec;
    return w;
  }
  double abs_sum = 0.0;
  for (float x : g) abs_sum += std::fabs(static_cast<double>(x));
  const double d = static_cast<double>(g.size());
  // The float32 mean's error bound: h(d) roundings of the sum, one of the division.
  const double mean_err = (static_cast<double>(float32_sum_roundings(g.size())) + 1.0) * 0x1p-24;
  const double delta = mean_err * (abs_sum / d);
  const Moments mo = ref.moments(g);
  const double sigma = mo.sigma;
  const float wide = static_cast<float>(params.c * std::sqrt(sigma * sigma + delta * delta));
  w.lo = ulps_down(w.spec, w.ulps);
  w.hi = std::max(ulps_up(w.spec, w.ulps), ulps_up(wide, w.ulps));
  // A float32 sigma that updates a running mean (Welford, and Chan's merges of partial results: GPU
  // frameworks' var/std) carries the mean's rounding into every deviation to first order, both ways: its
  // relative error is bounded by about mean_err |mean| / sigma (Chan, Golub and LeVeque 1983). Where
  // |mean| is below sigma that is about one ulp; where the mean dwarfs sigma it widens the window on both sides.
  if (sigma > 0.0) {
    const double r = mean_err * std::fabs(mo.mean) / sigma;
    const double spec = static_cast<double>(w.spec);
    w.lo = std::min(w.lo, ulps_down(static_cast<float>(spec * std::max(0.0, 1.0 - r)), 1));
    w.hi = std::max(w.hi, ulps_up(static_cast<float>(spec * (1.0 + r)), 1));
  }
  w.wide = ulp_distance(w.hi, w.spec) > 2 * w.ulps || ulp_distance(w.lo, w.spec) > 2 * w.ulps;
  return w;
}

GivenScalarBound given_scalar_bound(const ClipWindow& bw, float max_abs) {
  GivenScalarBound b;
  b.lo = bw.lo;
  float hi = bw.hi;
  const bool subnormal = bw.spec > 0.0f && bw.spec < std::numeric_limits<float>::min();
  if (subnormal) {
    // k units of 2^-149: two roundings onto the grid, and the relative tolerance (ulps x 2^-23 of the value), which
    // is clip_bound_ulps(d) units at the smallest normal number (where this meets the plain window)
    const double units = static_cast<double>(bw.spec) * 0x1p149;
    const auto k = static_cast<std::uint32_t>(2.0 + std::ceil(static_cast<double>(bw.ulps) * units * 0x1p-23));
    // down to 0 where the bound is that small: a float32 codec's sigma may round to 0 there (g = [2^-149, 0]:
    // sigma 2^-150, halfway, ties to even), so a bound of one unit may bind or not, and no p can be stated
    b.lo = ulps_down(bw.spec, k);
    hi = std::max(ulps_up(bw.spec, k), hi);
  }
  b.hi = hi;
  if (!(max_abs > b.lo)) return b;  // the bound never binds: every magnitude is judged as it is
  if (!subnormal && bw.lo == bw.spec && bw.hi == bw.spec) {  // exact: every correct codec's bound (one element's: 0)
    b.spread = 0.0;
    b.judgeable = true;
    return b;
  }
  if (!(b.lo > 0.0f)) {
    b.spread = std::numeric_limits<double>::infinity();
  } else {
    b.spread = (static_cast<double>(std::min(max_abs, hi)) - static_cast<double>(b.lo)) / static_cast<double>(b.lo);
  }
  // A plain window (clip_bound_ulps(d) each way, normal numbers) is always judged, as it always was: its spread is
  // at most 4 x 147 ulps; only a wide or a subnormal one is measured against kMaxGivenBoundSpread.
  b.judgeable = b.lo > 0.0f && (!(bw.wide || subnormal) || b.spread <= kMaxGivenBoundSpread);
  return b;
}

ClipWindow clip_scalar_window(std::span<const float> g, const Params& params) {
  const Codec& ref = reference_codec();
  ClipWindow w;
  w.spec = tensor_scalar(ref, g, params, 0);
  if (params.clip == ClipMode::none) {
    w.lo = w.hi = w.spec;
    return w;
  }
  const float max_abs = ref.max_abs(g, 0);
  const ClipWindow b = clip_bound_window(g, params);
  w.ulps = clip_bound_ulps(g.size());
  w.lo = std::min(ulps_down(w.spec, w.ulps), b.lo);
  w.hi = std::min(max_abs, std::max(ulps_up(w.spec, w.ulps), b.hi));
  w.wide = ulp_distance(w.hi, w.spec) > 2 * w.ulps || ulp_distance(w.lo, w.spec) > 2 * w.ulps;
  return w;
}

std::string precision_hint(float scalar, float spec) {
  if (!(scalar > 0.0f) || !(spec > 0.0f) || !std::isfinite(scalar) || !std::isfinite(spec) || scalar == spec) return {};
  for (int bits : {8, 11}) {
    int e = 0;
    std::frexp(static_cast<double>(spec), &e);  // spec = f 2^e, f in [1/2, 1)
    const double unit = std::ldexp(1.0, e - bits), q = static_cast<double>(spec) / unit;
    for (double r : {std::floor(q), std::ceil(q), std::nearbyint(q)})
      if (static_cast<double>(scalar) == r * unit)
        return strf("; the scalar is the spec's rounded to %d significant bits, as %s holds it: a scalar stored in %s?",
                    bits, bits == 11 ? "float16" : "bfloat16", bits == 11 ? "float16" : "bfloat16");
  }
  if (spec < 0x1p-14f) {  // below float16's smallest normal number its values are multiples of 2^-24
    const double q = static_cast<double>(spec) * 0x1p24;
    for (double r : {std::floor(q), std::ceil(q), std::nearbyint(q)})
      if (static_cast<double>(scalar) == r * 0x1p-24)
        return "; the scalar is the spec's rounded to a multiple of 2^-24, float16's step below 6.1e-5: a scalar "
               "stored in float16?";
  }
  return {};
}

std::string partial_max_hint(std::span<const float> g, float scalar) {
  std::size_t first_equal = g.size(), first_above = g.size();
  for (std::size_t k = 0; k < g.size() && first_above == g.size(); ++k) {
    const float a = std::fabs(g[k]);
    if (a == scalar && first_equal == g.size()) first_equal = k;
    if (a > scalar) first_above = k;
  }
  if (!(first_equal < first_above && first_above < g.size())) return {};
  return strf("the scalar is the largest |g| among the first %zu of %zu elements (element %zu, |g| = %.9g, is larger): "
              "a maximum over part of the tensor?",
              first_above, g.size(), first_above, static_cast<double>(std::fabs(g[first_above])));
}

std::string sign_max_hint(std::span<const float> g, float scalar) {
  if (!(scalar > 0.0f)) return {};
  float pos = 0.0f, neg = 0.0f;
  for (float x : g) {
    if (x > 0.0f) pos = std::max(pos, x);
    if (x < 0.0f) neg = std::max(neg, -x);
  }
  std::string h;
  if (scalar == pos && neg > pos)
    h = "; the scalar is max g, the largest positive element, and max|g| lies at a negative one: max(g) where "
        "max(|g|) was meant?";
  else if (scalar == neg && pos > neg)
    h = "; the scalar is -min g, the magnitude of the most negative element, and max|g| lies at a positive one: "
        "-min(g) where max(|g|) was meant?";
  else
    return {};
  if (std::string p = partial_max_hint(g, scalar); !p.empty()) h += " Or " + p;
  return h;
}

std::string norm_hint(std::span<const float> g, float scalar) {
  if (!(scalar > 0.0f) || !std::isfinite(scalar) || g.empty()) return {};
  double l1 = 0.0, l2 = 0.0, top = 0.0;
  for (float x : g) {
    const double a = std::fabs(static_cast<double>(x));
    l1 += a, l2 += a * a, top = std::max(top, a);
  }
  const double n = static_cast<double>(g.size());
  // another summation order in float32 moves a norm by far less than 1e-5 at the battery's sizes
  const auto is = [&](double v) { return v > 0.0 && std::fabs(static_cast<double>(scalar) - v) <= 1e-5 * v &&
                                         std::fabs(top - v) > 1e-5 * v; };
  if (is(std::sqrt(l2)))
    return "; the scalar is ||g||_2, the L2 norm (QSGD's scale): ||g||_2 where TernGrad's max|g| was meant?";
  if (is(l1 / n)) return "; the scalar is mean |g| = ||g||_1 / d (a scaled sign's scale) where TernGrad's max|g| was meant?";
  if (is(std::sqrt(l2 / n)))
    return "; the scalar is the root mean square of g, sqrt(||g||_2^2 / d), where TernGrad's max|g| was meant?";
  if (is(l1)) return "; the scalar is ||g||_1, the L1 norm, where TernGrad's max|g| was meant?";
  return {};
}

std::string specific_scalar_hint(std::span<const float> g, float got, float spec, bool own_scalar) {
  std::string h = precision_hint(got, spec);
  if (h.empty() && own_scalar) h = sign_max_hint(g, got);
  if (h.empty() && own_scalar) h = norm_hint(g, got);
  return h;
}

std::string scalar_hint(std::span<const float> g, const Params& params, float got, float spec) {
  std::string h = specific_scalar_hint(g, got, spec, true);
  return h.empty() ? sigma_rule_hint(g, params, got) : h;
}

std::string clipped_values_hint(std::span<const float> g, float scalar, float max_abs, float spec,
                                const std::uint32_t* kept, std::uint32_t n) {
  if (scalar != max_abs || !(spec < max_abs)) return {};
  for (std::size_t k = 0; k < g.size(); ++k)
    if (std::fabs(g[k]) == max_abs && kept[k] < n)
      return strf("; the scalar is max|g|, yet element %zu, at max|g|, was kept in %u of %u draws: the values were "
                  "clipped (at %.9g?) while the scalar stayed max|g|; the spec's scalar is the clip bound itself",
                  k, kept[k], n, static_cast<double>(spec));
  return {};
}

std::string sigma_rule_hint(std::span<const float> g, const Params& params, float got) {
  if (params.clip == ClipMode::none || g.empty() || !std::isfinite(got) || got < 0.0f) return {};
  const ClipWindow b = clip_bound_window(g, params);
  if (!std::isfinite(b.spec)) return {};
  const Codec& ref = reference_codec();
  const float M = ref.max_abs(g, 0);
  if (!(std::min(M, b.spec) < M) && got == M) return {};  // the bound is above max|g|: max|g| is the spec's
  const Moments mo = ref.moments(g);
  const double n = static_cast<double>(g.size());
  double sq = 0.0, abs_sum = 0.0, max_dev = 0.0;
  for (float x : g) {
    const double v = static_cast<double>(x);
    sq += v * v, abs_sum += std::fabs(v), max_dev = std::max(max_dev, std::fabs(v - mo.mean));
  }
  double abs_var = 0.0;
  for (float x : g) {
    const double dv = std::fabs(static_cast<double>(x)) - abs_sum / n;
    abs_var += dv * dv;
  }
  // Each named rule's bound c sigma', with the window of the spec's bound carried over: scaled by sigma' / sigma,
  // one ulp more on each side for the scaling's rounding (a constant tensor, sigma = 0: the window's width in
  // ulps around float(c sigma')).
  struct Rule {
    double sigma;
    std::string text;
  };
  std::vector<Rule> rules;
  if (g.size() >= 2)
    rules.push_back({mo.sigma * std::sqrt(n / (n - 1.0)),
                     strf("c times the sample standard deviation (squares summed over n - 1 = %zu, torch.std()'s default "
                          "and numpy's std(ddof=1)): the spec's sigma is the population one (over n = %zu)",
                          g.size() - 1, g.size())});
  rules.push_back({std::sqrt(sq / n), strf("c times the root mean square of g (sqrt(mean(g^2)) = %.6g, the mean %.3g not "
                                           "subtracted): the spec's sigma is the standard deviation, %.6g",
                                           std::sqrt(sq / n), mo.mean, mo.sigma)});
  rules.push_back({std::sqrt(abs_var / n), strf("c times the standard deviation of |g| (%.6g): the spec's sigma is that of "
                                                "g, %.6g",
                                                std::sqrt(abs_var / n), mo.sigma)});
  std::vector<std::string> below, at_max;
  for (const Rule& r : rules) {
    float lo = 0.0f, hi = 0.0f;
    if (mo.sigma > 0.0) {
      const double f = r.sigma / mo.sigma;
      lo = ulps_down(static_cast<float>(static_cast<double>(b.lo) * f), 1);
      hi = ulps_up(static_cast<float>(static_cast<double>(b.hi) * f), 1);
    } else {
      const float x = static_cast<float>(params.c * r.sigma);
      lo = ulps_down(x, b.ulps + 1), hi = ulps_up(x, b.ulps + 1);
    }
    if (got < M && got >= lo && got <= hi) below.push_back(r.text);
    if (got == M && hi >= M) at_max.push_back(r.text);
  }
  // g clamped around its mean, to [mean - c sigma, mean + c sigma]: the largest clamped magnitude is |mean| + c sigma
  // (the spec clamps |g| at c sigma, around 0). Within 1e-5 relative (float32 arithmetic of the sum), outside the
  // spec's window.
  if (got < M && mo.mean != 0.0 && (got < b.lo || got > b.hi)) {
    const double target = std::fabs(mo.mean) + params.c * mo.sigma;
    if (std::fabs(static_cast<double>(got) - target) <= 1e-5 * target)
      below.insert(below.begin(), strf("|mean| + c sigma = %.6g + %.6g: g clamped to [mean - c sigma, mean + c sigma], "
                                       "around its mean, where the spec clamps it to [-c sigma, c sigma], around 0",
                                       std::fabs(mo.mean), params.c * mo.sigma));
  }
  // A sigma summed in float32 without scaling: squares above float32's range make it inf (no bound: the scalar
  // is max|g|); squares below its smallest normal number lose their digits or vanish (the bound falls, to 0).
  constexpr double kF32Max = static_cast<double>(std::numeric_limits<float>::max());
  constexpr double kF32MinNormal = static_cast<double>(std::numeric_limits<float>::min());
  if (got == M && sq > kF32Max)  // sum g^2 >= sum (g - mean)^2: either form of the sum overflows only if this does
    at_max.push_back(strf("from a float32 sum of squares, which overflows here (max|g| = %.3g: the squares sum to %.3g, "
                          "past float32's 3.4e38, and the sigma is inf)",
                          static_cast<double>(M), sq));
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (std::size_t k = 0; k < v.size(); ++k) {
      if (k) out += "; or ";
      out += v[k];
    }
    return out;
  };
  if (!below.empty()) return "; it is " + join(below);
  if (got < b.lo && max_dev * max_dev < kF32MinNormal)
    return strf("; the squares of g - mean (|g - mean| at most %.3g) are below float32's smallest normal number, 1.2e-38: "
                "a sigma from a float32 sum of squares without scaling loses them (to 0 where they underflow)",
                max_dev);
  if (got == M) {
    std::string h = "; the scalar is max|g|, as without clipping: were these draws made with clipping none?";
    if (!at_max.empty()) h += " Or is the clip bound, above max|g| here, " + join(at_max) + "?";
    return h;
  }
  if (got > M && got >= b.lo && got <= b.hi)  // the clip bound itself where it lies above max|g|
    return strf("; the scalar is c sigma, above max|g| = %.9g: the spec's scalar is min(max|g|, c sigma): the minimum "
                "left out?",
                static_cast<double>(M));
  return {};
}

namespace checks {

Progress::Progress(bool on, double total, std::function<void()> poll)
    : on_(on), total_(total), tty_(::isatty(2) != 0), poll_(std::move(poll)) {}

void Progress::add(double units, const std::string& what) {
  if (poll_) poll_();  // may throw: the caller stops the run
  done_ += units;
  if (!on_) return;
  double t = elapsed();
  if (t < 3.0 || t - last_ < (tty_ ? 0.5 : 5.0)) return;  // a line at least every 5 s in a log
  last_ = t;
  double frac = total_ > 0 ? std::min(1.0, done_ / total_) : 1.0;
  std::string eta = frac > 0.02 ? strf(", about %.0f s left", t * (1.0 - frac) / frac) : "";
  std::fprintf(stderr, "%sverify: %3.0f%% after %.0f s%s (%s)%s", tty_ ? "\r" : "", 100.0 * frac, t, eta.c_str(),
               what.c_str(), tty_ ? "\033[K" : "\n");
  std::fflush(stderr);
  shown_ = true;
}

void Progress::finish() {
  if (shown_ && tty_) std::fprintf(stderr, "\r\033[K");
  shown_ = false;
}

double Progress::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

bool supports(const Options& o, const std::string& capability) {
  return o.supports.empty() || o.supports.count(capability) > 0;
}

Params base_params(const Options& o) {
  Params p;
  p.clip = supports(o, "none") ? ClipMode::none : (supports(o, "clip") ? ClipMode::clip : ClipMode::saturate);
  return p;
}

std::vector<ClipMode> supported_modes(const Options& o) {
  std::vector<ClipMode> modes;
  for (ClipMode m : {ClipMode::none, ClipMode::clip, ClipMode::saturate})
    if (supports(o, to_string(m))) modes.push_back(m);
  return modes;
}

std::vector<Params> shared_clip_modes(const Options& o) {
  std::vector<Params> out;
  if (!supports(o, "shared-scalar")) return out;
  const ClipMode base = base_params(o).clip;
  for (ClipMode m : {ClipMode::clip, ClipMode::saturate})
    if (m != base && supports(o, to_string(m))) {
      Params p;
      p.clip = m;
      out.push_back(p);
    }
  return out;
}

std::string row_id(const std::string& check, const std::string& family, const std::string& label) {
  return check + "/" + family + (label.empty() ? "" : "/" + label);
}

namespace {
Row base_row(const char* kind, const std::string& check, const std::string& family, const std::string& label) {
  Row r;
  r.check = check;
  r.family = family;
  r.kind = kind;
  r.id = row_id(check, family, label);
  r.threshold = r.pvalue = r.power = "-";
  return r;
}
}  // namespace

Row stat_row(const Ctx& c, const std::string& check, const std::string& family, const std::string& label) {
  Row r = base_row("stat", check, family, label);
  r.alpha = c.alpha;
  return r;
}
Row exact_row(const std::string& check, const std::string& family, const std::string& label) {
  Row r = base_row("exact", check, family, label);
  r.threshold = "0";
  r.power = "any violation";
  return r;
}
Row info_row(const std::string& check, const std::string& family, const std::string& label) {
  return base_row("info", check, family, label);
}

BernsteinOutcome bernstein_decide(double S, double V, double b, double alpha, double beta) {
  BernsteinOutcome o;
  o.S = S;
  o.threshold = bernstein_threshold(V, b, alpha);
  o.p = bernstein_tail_bound(S, V, b);
  // Power: under an alternative with mean shift delta, S - delta deviates below by more than
  // t_beta with probability <= beta (one-sided Bernstein at the null variance V: shifts of the
  // detectable size change the variance only to first order). Detected if delta >= t_a + t_b.
  o.detectable = o.threshold + bernstein_one_sided(V, b, beta);
  o.z = V > 0 ? S / std::sqrt(V) : 0.0;
  o.judged = S;
  o.pass = std::fabs(S) <= o.threshold;
  return o;
}

BernsteinOutcome bernstein_decide_partial(double S, const PartialPeak& peak, double V, double b, double alpha,
                                          double beta) {
  BernsteinOutcome o = bernstein_decide(S, V, b, alpha, beta);
  if (std::fabs(peak.S) > std::fabs(S)) {  // S is itself a partial sum: the peak is never below it
    o.judged = peak.S;
    o.p = bernstein_tail_bound(peak.S, V, b);
    o.pass = std::fabs(peak.S) <= o.threshold;
  }
  return o;
}

Row violations_row(const std::string& check, const std::string& family, std::uint64_t bad, const std::string& power,
                   const std::string& first, const std::string& ok) {
  Row r = exact_row(check, family);
  r.statistic = strf("%llu violations", static_cast<unsigned long long>(bad));
  r.threshold = "0";
  r.power = power;
  r.pass = bad == 0;
  r.detail = bad ? first : ok;
  mark_rejected(r);
  return r;
}

std::vector<std::pair<double, std::size_t>> p_order(const std::vector<double>& p) {
  std::vector<std::pair<double, std::size_t>> order(p.size());
  for (std::size_t e = 0; e < p.size(); ++e) order[e] = {p[e], e};
  std::sort(order.begin(), order.end());
  return order;
}

std::string partial_text(const PartialPeak& peak, double unit, const std::string& units) {
  return strf("partial-sum peak %+.3g%s%s at p = %.3g (%zu/%zu)",
              unit > 0 ? peak.S / unit : 0.0, units.empty() ? "" : " ", units.c_str(), peak.p, peak.count, peak.of);
}

std::string bound_text(double p) {
  if (p < 1.0) return strf("p <= %.2g", p);
  return strf("bound %.2g (>= 1)", p);
}

void apply(Row& r, const BernsteinOutcome& o, double unit) {
  if (unit > 0.0) {
    r.effect = o.judged / unit;
    r.limit = o.threshold / unit;
    r.detectable = o.detectable / unit;
  }
  r.z = o.z;
  r.p = o.p;
  r.pvalue = bound_text(o.p);
  r.pass = o.pass;
}

void mark_rejected(Row& r) {
  if (!r.pass) r.detail = "rejected: " + r.statistic + ", outside " + r.threshold + "; " + r.detail;
}

Row pooled_bias_row(const Ctx& c, const std::string& check, const std::string& family, double S, double V,
                    double M, const std::string& detail, Pooled what, const PartialPeak* peak) {
  const char* word = what == Pooled::drift ? "drift" : "bias";
  Row r = stat_row(c, check, family);
  auto o = peak ? bernstein_decide_partial(S, *peak, V, 1.0, c.alpha, c.opt.profile.beta)
                : bernstein_decide(S, V, 1.0, c.alpha, c.opt.profile.beta);
  r.statistic = strf("mean %s %.3g s", word, S / M);
  if (peak) r.statistic += "; " + partial_text(*peak, M, "s");
  r.threshold = strf("|.| <= %.3g s", o.threshold / M);
  r.power = strf("%s >= %.3g s", word, o.detectable / M);
  apply(r, o, M);
  r.detail = detail;
  mark_rejected(r);
  return r;
}

void deterministic_row(Row& r, double S, double tol, const std::string& what) {
  r.kind = "exact";
  r.alpha = 0.0;
  r.statistic = strf("deviation %.3g", S);
  r.threshold = strf("|.| <= %.2g (rounding)", tol);
  r.pvalue = "-";
  r.power = "any deviation";
  r.pass = std::fabs(S) <= tol;
  r.detail = what + ": every keep probability is 0 or 1 under H0, so the sum has no randomness";
  mark_rejected(r);
}

bool row_without_scalar(const Draws& d, std::uint32_t j) {
  if (j >= d.scalars.size() || d.scalars[j] != 0.0f) return false;
  const std::span<const std::int8_t> row = d.row(j);
  return std::all_of(row.begin(), row.end(), [](std::int8_t t) { return t == 0; });
}
float first_row_scalar(const Draws& d) {
  for (std::uint32_t j = 0; j < d.scalars.size(); ++j)
    if (!row_without_scalar(d, j)) return d.scalars[j];
  return 0.0f;
}
Draws draw_one(Ctx& c, const std::vector<float>& g, const Params& params, const StreamKey& key) {
  const auto request = [&](std::uint32_t steps) {
    Draws dr = c.sampler.draw({g, params, key, steps, std::nullopt});
    if (dr.d != g.size() || dr.steps != steps || dr.scalars.size() != steps || dr.trits.size() != steps * g.size())
      throw Error(ErrorCode::invalid_argument, "implementation returned draws of the wrong size");
    return dr;
  };
  Draws dr = request(1);
  // An empty row from a nonzero gradient carries no scalar; steps 1..7 of the same key give it.
  if (row_without_scalar(dr, 0) && std::any_of(g.begin(), g.end(), [](float x) { return x != 0.0f; }))
    dr.scalars[0] = first_row_scalar(request(8));
  return dr;
}
bool count_defect(const Draws& dr, const std::string& what, std::uint64_t& bad, std::string& msg) {
  if (dr.defect.empty()) return false;
  if (bad++ == 0) msg = what + ": output not of the form {-s, 0, +s}: " + dr.defect;
  return true;
}
void count_wrong_signs(const Draws& dr, const std::vector<float>& g, const std::string& what, std::uint64_t& bad,
                       std::string& msg) {
  for (std::size_t k = 0; k < g.size(); ++k) {
    const int t = dr.trits[k];
    if (t != 0 && t != sign_of(g[k]) && bad++ == 0)
      msg = strf("%s: element %zu has trit %d, its gradient %.9g", what.c_str(), k, t, static_cast<double>(g[k]));
  }
}
}  // namespace checks
}  // namespace tg::verify
