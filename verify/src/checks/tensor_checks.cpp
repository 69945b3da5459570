// terngrad-bench: the per-gradient checks (one "job": a gradient, its clipping rule, n draws):
// structure (exact), unbiased per coordinate (exact binomial), pooled and by bins of p (Bernstein),
// the variance identity (Bernstein), independence at several block scales and lags (Bernstein).
// Every threshold and power figure is derived in docs/statistics.md.
#include <algorithm>
#include <numeric>
#include <bit>
#include <array>
#include <limits>
#include <mutex>
#include <map>

#include "checks/common.hpp"
#include "tg/verify/stats.hpp"

namespace tg::verify::checks {

const std::vector<double>& p_bin_edges() {
  static const std::vector<double> edges = {0.0,     0x1p-18, 0x1p-16, 0x1p-14, 0x1p-12,      0x1p-11, 0x1p-10,
                                            0x1p-6,  0x1p-3,  0.5,     0.875,   1.0 - 0x1p-10, 1.0 - 0x1p-12,
                                            1.0 - 0x1p-14, 1.0};
  return edges;
}

std::string p_bin_label(std::size_t bin) {
  static const char* names[kPBins] = {
      "p<2^-18",           "p in [2^-18,2^-16)", "p in [2^-16,2^-14)", "p in [2^-14,2^-12)",
      "p in [2^-12,2^-11)", "p in [2^-11,2^-10)", "p in [2^-10,2^-6)",  "p in [2^-6,1/8)",
      "p in [1/8,1/2)",    "p in [1/2,7/8)",     "p in [7/8,1-2^-10)", "p in [1-2^-10,1-2^-12)",
      "p in [1-2^-12,1-2^-14)", "p in [1-2^-14,1)"};
  return names[bin];
}

namespace {

// A bin row is planned only where it can see a total loss of the bin's rarer outcome: the Bernstein
// threshold plus the power margin, at a fixed alpha = 1e-12 and beta = 1e-3 (so the plan does not
// depend on the number of decisions), must not exceed R = n sum_bin min(p, 1-p).
// The bin below 2^-18 is also planned where the excess of a keep floor at 2^-16 (16-bit uniforms: every
// p < 2^-16 kept at 2^-16), F = n sum_bin (2^-16 - p), would be detectable so: there the error of a
// short uniform is an excess of keeps, not a loss of them. The three bins of two octaves above it see
// keep probabilities lost below 2^-16 or 2^-14 (float16 with flush to zero), where R allows; the three
// bins above 1 - 2^-10, where the rarer outcome is the drop, see keep probabilities rounded up to 1
// (float16 or bfloat16 to nearest: every q = 1 - p below 2^-12 or 2^-9 is lost).
bool bin_planned(double R, double V, double F = 0.0) {
  const double need = bernstein_threshold(V, 1.0, 1e-12) + bernstein_one_sided(V, 1.0, 1e-3);
  return R > 0.0 && (need <= R || need <= F);
}

// Bin of a keep probability; -1 for p = 0 or p = 1 (no randomness) and for the near drops, p < kNearDropP (judged
// against the float32 allowance in near-drops: an excess of 2^-22 per element-draw there is a correct float32
// codec's, and would be a large relative bias in the bin p < 2^-18).
int p_bin(double p) {
  if (p < kNearDropP || p >= 1.0) return -1;
  const auto& e = p_bin_edges();
  for (std::size_t i = 0; i + 1 < e.size(); ++i)
    if (p < e[i + 1]) return static_cast<int>(i);
  return -1;
}

// ---- the spec: what the job's rows are, before any draw -------------------------------------------
struct SpecLayer {
  const Layer* layer = nullptr;
  std::uint32_t tensor = 0;
  ScalarRule rule;                      // spec rule (reference codec, sigma in double)
  std::optional<float> request_scalar;  // shared scalar asked for
  float max_abs = 0.0f;
  // Under a given (shared) scalar with clipping: the spec's clip bound c sigma of this layer (+inf
  // otherwise). The codec clamps at its own bound, which may lie clip_bound_ulps(d) below it.
  float bound = std::numeric_limits<float>::infinity();
  float bound_lo = std::numeric_limits<float>::infinity();  // the lowest correct bound (clip_bound_window's lo)
  ClipWindow window;  // with its own scalar under clipping: where a correct float32 codec's scalar lies
  std::size_t off = 0;
};

struct Spec {
  std::vector<SpecLayer> layers;
  std::vector<double> p;        // spec keep probability per element (job order)
  std::vector<int> bin;         // p bin per element, -1 none
  double pool_V = 0.0, var_V = 0.0;
  std::array<double, kPBins> bin_weight{};  // sum min(p, 1-p) per bin
  std::array<double, kPBins> bin_var{};     // sum p(1-p) per bin
  double floor_excess = 0.0;           // sum over the bin p < 2^-18 of 2^-16 - p (bin_planned)
  bool own_scalar = true;
};

Spec make_spec(const JobSpec& job) {
  const Codec& ref = reference_codec();
  const Gradient& G = job.grad;
  Spec sp;
  float global = 0.0f;
  if (job.global_scalar)
    for (const auto& l : G.layers) global = std::max(global, tensor_scalar(ref, l.g, job.params, 0));
  std::size_t off = 0;
  for (std::size_t i = 0; i < G.layers.size(); ++i) {
    SpecLayer s;
    s.layer = &G.layers[i];
    s.tensor = static_cast<std::uint32_t>(i);
    s.off = off;
    s.max_abs = ref.max_abs(s.layer->g, s.tensor);
    // A scalar the request gives: the global one, or this layer's shared one.
    std::optional<float> given;
    if (job.global_scalar)
      given = global;
    else if (i < job.given_scalars.size())
      given = job.given_scalars[i];
    if (given) {
      const ClipWindow bw = clip_bound_window(s.layer->g, job.params);
      const GivenScalarBound gb = given_scalar_bound(bw, s.max_abs);
      if (!gb.judgeable)
        // The draws do not show the codec's own bound, and on this tensor a correct float32 codec's may
        // lie far from the spec's: no keep probability can be stated (docs/statistics.md).
        throw Error(ErrorCode::invalid_argument,
                    strf("%s: cannot be judged under a given scalar with clipping: its clip bound c sigma is %.9g, "
                         "but %s, so a correct float32 codec's bound lies anywhere in [%.9g, %.9g] (%.2g relative, "
                         "more than %.2g); check it without a given scalar or without clipping",
                         s.layer->name.c_str(), static_cast<double>(bw.spec),
                         bw.spec < std::numeric_limits<float>::min() ? "it is subnormal (float32 steps of 2^-149)"
                                                                    : "the mean's float32 rounding is not small against sigma",
                         static_cast<double>(gb.lo), static_cast<double>(gb.hi), gb.spread,
                         kMaxGivenBoundSpread));
      s.bound = bw.spec;
      s.bound_lo = gb.lo;
      s.rule = make_rule(*given, s.bound);
      s.request_scalar = given;
      sp.own_scalar = false;
    } else {
      s.rule = own_rule(ref, s.layer->g, job.params, s.tensor);
      if (job.params.clip != ClipMode::none) s.window = clip_scalar_window(s.layer->g, job.params);
    }
    off += s.layer->g.size();
    sp.layers.push_back(s);
  }
  sp.p.resize(off);
  sp.bin.assign(off, -1);
  double N0 = 0.0;
  for (const auto& l : sp.layers) N0 = std::max(N0, static_cast<double>(l.rule.scalar));
  if (N0 == 0.0) N0 = 1.0;
  for (const auto& l : sp.layers) {
    const double s = l.rule.scalar / N0;
    for (std::size_t k = 0; k < l.layer->g.size(); ++k) {
      float a = std::min(std::fabs(l.layer->g[k]), l.rule.cap);
      double p = l.rule.scalar > 0.0f ? keep_probability(a, l.rule.scale) : 0.0;
      double x = a / N0, hi = (s - x) * (s - x), lo = x * x;
      sp.p[l.off + k] = p;
      sp.pool_V += p * (1 - p);
      sp.var_V += p * (1 - p) * (hi - lo) * (hi - lo);
      int b = p_bin(p);
      sp.bin[l.off + k] = b;
      if (b >= 0) sp.bin_weight[static_cast<std::size_t>(b)] += std::min(p, 1 - p);
      if (b >= 0) sp.bin_var[static_cast<std::size_t>(b)] += p * (1 - p);
      if (b == 0) sp.floor_excess += 0x1p-16 - p;  // p < 2^-18 < 2^-16
    }
  }
  return sp;
}

bool random_under_h0(double v) { return v > 0.0; }

std::string prefix(const JobSpec& j, const char* test) { return j.check.empty() ? std::string(test) : j.check + "." + test; }

// The layer that holds coordinate e of a job (nullptr past the end), and e's index in it.
std::pair<const SpecLayer*, std::size_t> layer_of(const Spec& sp, std::size_t e) {
  for (const SpecLayer& l : sp.layers)
    if (e >= l.off && e - l.off < l.layer->g.size()) return {&l, e - l.off};
  return {nullptr, 0};
}

// Where coordinate e of a job lies, index and size: "g[8191] (the last of 8192)" in a one-tensor job,
// "conv1.bias[4] (of 6; coordinate 154)" in a job of several, so that a failure near a tensor's end (a packing
// tail dropped, a loop one element short) reads as such.
std::string coordinate_name(const Spec& sp, std::size_t e) {
  const auto [l, i] = layer_of(sp, e);
  if (!l) return strf("coordinate %zu", e);
  const std::size_t d = l->layer->g.size();
  const char* end = d < 2 ? "" : (i + 1 == d ? "the last " : (i == 0 ? "the first " : ""));
  if (sp.layers.size() == 1) return strf("g[%zu] (%sof %zu)", i, end, d);
  return strf("%s[%zu] (%sof %zu; coordinate %zu)", l->layer->name.c_str(), i, end, d, e);
}

// What the rejected coordinates of a row have in common, where that names a likely cause: all clipped (|g_k|
// above the clip bound, so p_k = bound / s), or all among their tensor's last few elements. "" otherwise.
std::string rejected_pattern(const Spec& sp, const std::vector<float>& xmag, const std::vector<std::size_t>& rejected) {
  if (rejected.empty()) return "";
  constexpr std::size_t kTail = 3;
  bool clipped = true, tail = true;
  for (std::size_t e : rejected) {
    const auto [l, i] = layer_of(sp, e);
    if (!l) return "";
    clipped = clipped && std::fabs(l->layer->g[i]) > xmag[e];
    tail = tail && i + kTail >= l->layer->g.size() && l->layer->g.size() > kTail;
  }
  const char* every = rejected.size() == 1 ? "it is" : "every one is";
  if (clipped) return strf("; %s clipped (|g_k| above the clip bound, p_k = bound / s): is the bound applied?", every);
  if (tail) return strf("; %s among its tensor's last %zu elements: a tail left out?", every, kTail);
  // Many rejected coordinates of one tensor, all past an index (or all before one) that leaves at least an eighth of
  // it clean: elements past a size (or up to one) handled otherwise. A power of two just below the first is named.
  constexpr std::size_t kMinPattern = 8;
  if (rejected.size() < kMinPattern) return "";
  const auto [l0, i0] = layer_of(sp, rejected.front());
  std::size_t lo = i0, hi = i0;
  for (std::size_t e : rejected) {
    const auto [l, i] = layer_of(sp, e);
    if (l != l0) return "";
    lo = std::min(lo, i), hi = std::max(hi, i);
  }
  const std::size_t d = l0->layer->g.size();
  // Indices that are all multiples of one stride (of 16 or more): chunk boundaries, whatever range they span.
  std::size_t stride = 0;
  for (std::size_t e : rejected) stride = std::gcd(stride, layer_of(sp, e).second);
  if (stride >= 16)
    return strf("; every index is a multiple of %zu%s: elements at chunk boundaries handled otherwise (the first or "
                "last element of each chunk of %zu?)",
                stride, std::has_single_bit(stride) ? strf(" = 2^%d", std::countr_zero(stride)).c_str() : "", stride);
  // Pladder's layout (pladder, large) ends in near drops, which show few defects: a clean tail there says nothing.
  const bool near_drop_tail = l0->layer->name == "pladder" || l0->layer->name == "large";
  const bool after = lo >= 64 && lo >= d / 16, before = !near_drop_tail && d - 1 - hi >= 64 && d - 1 - hi >= d / 8;
  if (after) {
    const std::size_t pow2 = std::bit_floor(lo);
    const std::string note = pow2 == lo ? strf(", 2^%d", std::countr_zero(pow2))
                             : lo - pow2 <= lo / 64 ? strf(", %zu = 2^%d just below", pow2, std::countr_zero(pow2))
                                                    : std::string();
    return strf("; every one lies at index %zu or above of its %zu elements (none of the first %zu%s)%s: elements past "
                "a size handled otherwise?",
                lo, d, lo, note.c_str(), before ? strf(" and below %zu", hi + 1).c_str() : "");
  }
  if (before)
    return strf("; every one lies below index %zu of its %zu elements (none of the last %zu): elements up to a size "
                "handled otherwise?",
                hi + 1, d, d - 1 - hi);
  return "";
}

// Which independence rows a layer set supports (tensor sizes only).
// A lag row whose lag is each tensor's half, floor(d/2).
constexpr std::size_t kHalfLag = 0;
struct IndepPlan {
  std::vector<std::pair<std::size_t, std::size_t>> blocks;  // (scale, offset)
  std::vector<std::size_t> lags;                            // kHalfLag: each tensor's d/2
};
// The range a block row's terms are held to. B = sum of m centred keep bits, each in an interval of
// length 1, so P(|B| >= tau) <= 2 exp(-2 tau^2 / m) (Hoeffding). Over the K block-draws of a row, with
// delta = alpha / 2 spent on "some |B| exceeds tau": tau^2 = (m / 2) ln(2 K / delta); the row's terms are
// then min(B^2, tau^2) in [0, tau^2] instead of B^2 in [0, m^2] (a tighter Bernstein range term). Capped
// at m^2 (no truncation: the whole alpha goes to Bernstein).
double block_tau2(std::size_t m, double K, double alpha) {
  const double t = 0.5 * static_cast<double>(m) * std::log(2.0 * K / (0.5 * alpha));
  return std::min(t, static_cast<double>(m) * static_cast<double>(m));
}
// A block scale is planned only where it can see something: where the Bernstein bound's range term
// 2 tau^2 L0 / 3 (L0 = ln(2e12), i.e. alpha = 1e-12, and tau^2 at that alpha, fixed so the plan does
// not depend on the number of decisions) is below n N / 8, N the elements in whole blocks: with
// p(1-p) = 1/8 on average (a Gaussian gradient has 0.14) a doubling of the block variance is then
// detectable. The rule uses the sizes only, so the same rows appear on every seed.
IndepPlan indep_plan(const Gradient& G, std::uint32_t n) {
  std::size_t largest = 0;
  for (const auto& l : G.layers) largest = std::max(largest, l.g.size());
  IndepPlan ip;
  const double L0 = std::log(2e12);
  for (std::size_t m : kBlockScales) {
    if (largest < m + (m == 8 ? 4 : 0)) continue;
    double blocked = 0.0;
    for (const auto& l : G.layers) blocked += static_cast<double>(l.g.size() / m * m);
    const double K = static_cast<double>(n) * blocked / static_cast<double>(m);
    if (2.0 * block_tau2(m, K, 1e-12) * L0 / 3.0 >= n * blocked / 8.0) continue;
    ip.blocks.emplace_back(m, 0);
    if (m == 8) ip.blocks.emplace_back(m, 4);
  }
  for (std::size_t lag : kLags)
    if (largest >= 2 * lag) ip.lags.push_back(lag);
  // Each tensor's own half: element k against k + floor(d/2), where a generator that fills half a tensor
  // and reuses it (as it is or as 1 - u) puts its dependence, whatever d is. Left out where every tensor
  // large enough has its half among the fixed lags already (the row would repeat one of them).
  bool half_new = false;
  for (const auto& l : G.layers)
    if (l.g.size() >= 2 * kLags[0])
      half_new |= std::find(ip.lags.begin(), ip.lags.end(), l.g.size() / 2) == ip.lags.end();
  if (half_new) ip.lags.push_back(kHalfLag);
  return ip;
}
// The lag of row `lag` in a tensor of d elements (kHalfLag: d / 2).
std::size_t lag_in(std::size_t lag, std::size_t d) { return lag == kHalfLag ? d / 2 : lag; }
std::string block_label(std::size_t m, std::size_t o) { return strf("blocks of %zu%s", m, o ? strf(" at +%zu", o).c_str() : ""); }
std::string lag_label(std::size_t lag) { return lag == kHalfLag ? std::string("lag d/2") : strf("lag %zu", lag); }

// Screening tables for the per-coordinate minimum p-value: a coordinate whose count lies inside the
// Clopper-Pearson interval at level a has exact two-sided p-value > a, so the minimum is among those
// outside. Cached per (n, level): the tables cost 2(n+1) interval inversions.
const ClopperPearsonTable& screening_table(std::uint64_t n, double level) {
  static std::mutex mu;
  static std::map<std::pair<std::uint64_t, double>, ClopperPearsonTable> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(n, level);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, clopper_pearson_table(n, level)).first;
  return it->second;
}

double detectable_dp(std::uint64_t n, double alpha, double beta) {
  static std::mutex mu;
  static std::map<std::tuple<std::uint64_t, double, double>, double> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(n, alpha, beta);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, binomial_detectable(n, alpha, beta)).first;
  return it->second;
}

}  // namespace

std::vector<std::string> plan_job(const JobSpec& job) {
  Spec sp = make_spec(job);
  const std::string fam = job.grad.family;
  std::vector<std::string> ids;
  const bool random = random_under_h0(sp.pool_V);
  if (random && job.unbiased) ids.push_back(row_id(prefix(job, "unbiased"), fam));
  if (random && job.unbiased)
    for (const char* row : {"unbiased-dispersion", "unbiased-pooled", "unbiased-drift"})
      ids.push_back(row_id(prefix(job, row), fam));
  if (job.p_bins && job.unbiased)
    for (const char* row : {"unbiased-by-p", "unbiased-drift-by-p"})
      for (std::size_t b = 0; b < sp.bin_weight.size(); ++b)
        if (bin_planned(job.steps * sp.bin_weight[b], job.steps * sp.bin_var[b], b == 0 ? job.steps * sp.floor_excess : 0.0))
          ids.push_back(row_id(prefix(job, row), fam, p_bin_label(b)));
  if (random_under_h0(sp.var_V) && job.variance) ids.push_back(row_id(prefix(job, "variance"), fam));
  if (job.independence && random) {
    IndepPlan ip = indep_plan(job.grad, job.steps);
    for (auto [m, o] : ip.blocks) ids.push_back(row_id(prefix(job, "independence"), fam, block_label(m, o)));
    for (std::size_t lag : ip.lags) ids.push_back(row_id(prefix(job, "independence"), fam, lag_label(lag)));
  }
  return ids;
}

namespace {

// A scalar below max|g| that is no element's magnitude: c sigma for a c of two decimals, within the clip bound's
// tolerance (clip_bound_ulps), reads as clipping (under --clip none: were the draws clipped? under clipping: was
// another c used?); a multiple with one decimal (0.1 .. 10) of the root mean square, of mean |g|, of ||g||_2 or of
// ||g||_1, within 1e-5 (another summation order in float32 moves them far less), as another scale. The closest
// reading comes first, a second one within its tolerance follows ("or"), and with none the measured ratios are
// given: a guess is never made from a ratio alone (4 mean|g| is 0.73 sigma on one gradient and 3.19 on another).
std::string scale_hint(std::span<const float> g, float scalar, float max_abs, const Params& params) {
  const Moments mo = reference_codec().moments(g);
  double l1 = 0.0, l2 = 0.0;
  for (float x : g) {
    const double a = std::fabs(static_cast<double>(x));
    l1 += a, l2 += a * a;
  }
  const double n = static_cast<double>(g.size()), v = static_cast<double>(scalar);
  struct Reading {
    double distance;  // relative
    std::string text;
  };
  std::vector<Reading> found;
  if (mo.sigma > 0.0) {
    const double c = std::nearbyint(v / mo.sigma * 100.0) / 100.0;
    const float bound = static_cast<float>(c * mo.sigma);
    // in ulps as the clip bound's window, and relatively too: among subnormal numbers an ulp is a large step
    if (c > 0.0 && ulp_distance(scalar, bound) <= clip_bound_ulps(g.size()) + 1 &&
        std::fabs(v - c * mo.sigma) <= 1e-5 * c * mo.sigma) {
      std::string t = params.clip == ClipMode::none
                          ? strf("the scalar is c sigma with c = %.3g (within the clip bound's tolerance), below max|g| "
                                 "%.9g: were these draws clipped (--clip clip or saturate, --c %.3g)?",
                                 c, static_cast<double>(max_abs), c)
                          : (std::fabs(c - params.c) > 1e-9 * params.c
                                 ? strf("the scalar is c sigma with c = %.3g, not the c = %.4g checked: was c = %.3g used?",
                                        c, params.c, c)
                                 : std::string());
      if (!t.empty()) found.push_back({std::fabs(v - c * mo.sigma) / (c * mo.sigma), t});
    }
  }
  const struct {
    double value;
    const char* name;
  } scales[] = {{std::sqrt(l2 / n), "the root mean square of g"}, {l1 / n, "mean |g|"}, {std::sqrt(l2), "||g||_2"},
                {l1, "||g||_1"}};
  for (const auto& sc : scales) {
    if (!(sc.value > 0.0)) continue;
    const double k = std::nearbyint(v / sc.value * 10.0) / 10.0;
    if (k < 0.1 || k > 10.0 || std::fabs(v - k * sc.value) > 1e-5 * k * sc.value) continue;
    found.push_back({std::fabs(v - k * sc.value) / (k * sc.value),
                     strf("the scalar is %.2g x %s (%.9g), below max|g| %.9g: a scale other than TernGrad's max|g|?", k,
                          sc.name, k * sc.value, static_cast<double>(max_abs))});
  }
  std::sort(found.begin(), found.end(), [](const Reading& a, const Reading& b) { return a.distance < b.distance; });
  if (found.size() >= 2) return "; " + found[0].text + " Or " + found[1].text;
  if (found.size() == 1) return "; " + found[0].text;
  if (!(mo.sigma > 0.0) || !(l1 > 0.0)) return {};
  // under clipping, near the c checked but outside the clip bound's window: the bound of a sigma computed otherwise
  if (params.clip != ClipMode::none && std::fabs(v / mo.sigma - params.c) <= 1e-3 * params.c)
    return strf("; the scalar is %.7g sigma, c = %g times a sigma %.2g away from the spec's (relative), outside the clip "
                "bound's window: a sigma computed another way (its summation, its precision)?",
                v / mo.sigma, params.c, v / (params.c * mo.sigma) - 1.0);
  return strf("; the scalar %.9g is below max|g| %.9g and no element's magnitude: it is %.4g sigma, %.4g x the root mean "
              "square of g and %.4g x mean |g|, none of them c sigma for a c of two decimals (a clip bound) or a round "
              "multiple: a scale other than max|g|?",
              v, static_cast<double>(max_abs), v / mo.sigma, v / std::sqrt(l2 / n), v / (l1 / n));
}

// What a wrong scalar of a tensor with its own scalar most often means, said with the scalar's mismatch: the
// draws were made under another clipping rule than the one checked (a sigma over n - 1, without the mean, of |g|,
// a float32 sum of squares out of range: sigma_rule_hint; a maximum over part of the tensor; a codec that ignores
// --c, or saved draws checked without --clip). Empty when the scalar says nothing of the kind.
// A keep probability as text: 4 significant digits, and 1 - x where those would round a p below 1 up to "1" (which
// reads as a sure keep).
std::string probability_text(double p) {
  if (p < 1.0 && p >= 0.99995) return strf("1 - %.3g", 1.0 - p);
  return strf("%.4g", p);
}

// Where no element was output in any draw: a scalar of 0 read from all-zero rows, where the spec keeps max|g| with
// p = 1 (no correct codec draws an all-zero row for a gradient that is not 0).
std::string nothing_kept_hint(std::span<const float> g, float scalar, float spec, std::uint64_t kept, std::uint32_t n) {
  if (scalar != 0.0f || !(spec > 0.0f) || kept != 0 || g.empty()) return {};
  float top = 0.0f;
  for (float x : g) top = std::max(top, std::fabs(x));
  return strf("; no element was output in any of the %u draws, not even max|g| = %.9g, which the spec keeps with p = 1: "
              "every keep probability near 0%s",
              n, static_cast<double>(top),
              top < std::numeric_limits<float>::min()
                  ? " (subnormal inputs flushed to zero, FTZ/DAZ? an epsilon added to the scalar, |g| / (s + eps)?)"
                  : " (an epsilon added to the scalar, |g| / (s + eps), that outweighs |g| here?)");
}

std::string clipping_hint(std::span<const float> g, float scalar, float max_abs, const Params& params, bool own_scalar) {
  if (!own_scalar || !std::isfinite(scalar) || scalar < 0.0f || g.empty()) return {};
  if (std::string h = sigma_rule_hint(g, params, scalar); !h.empty()) return h;
  if (scalar >= max_abs || scalar == 0.0f) return {};
  // the magnitude of one of the elements: a maximum taken over part of the tensor (a half, a prefix without
  // its remainder, a subsample), which is no clip bound
  if (std::string p = partial_max_hint(g, scalar); !p.empty()) return "; " + p;
  for (std::size_t k = 0; k < g.size(); ++k)
    if (std::fabs(g[k]) == scalar)
      return strf("; the scalar is |g| of element %zu, below max|g|: a maximum over a subset of the elements?", k);
  return scale_hint(g, scalar, max_abs, params);
}

// What the implementation reports, set from its first draw of each layer.
struct Observed {
  float scalar = 0.0f;
  bool set = false;
  bool tolerated = false;  // equal to the spec's, or within the clip-bound tolerance
  std::uint64_t ulps = 0;
  std::vector<std::int8_t> first_rows;
  std::vector<float> first_scalars;
  std::uint64_t outputs = 0;  // nonzero outputs counted where the scalar is 0
};

struct Acc {
  double S = 0.0, V = 0.0, E = 0.0;  // statistic, its variance under H0, its expectation scale
  double K = 0.0, tau2 = 0.0;        // blocks: block-draws, and the range min(B^2, tau2) holds them to
  std::uint64_t exceed = 0;          // blocks: block-draws with B^2 > tau2
  double max_b2 = 0.0;               // blocks: the largest B^2
};

// The decision on a sum of squares: a.S = sum of min(B^2, tau2) - E[B^2] over a.K independent sums B of m centred
// bits each (variance a.V under H0). Truncated (tau2 < m^2): alpha / 2 on "some |B| > tau" (Hoeffding), alpha / 2
// on Bernstein for the truncated sum. Truncation lowers each term's mean by at most m^2 P(|B| > tau), in all at
// most m^2 delta (delta = alpha / 2): the sum is judged over that whole range, so the bias never rejects. An
// exceeded tau fails the row with p <= alpha / 2.
BernsteinOutcome decide_squares(const Acc& a, std::size_t m, double alpha, double beta) {
  const double m2 = static_cast<double>(m) * static_cast<double>(m);
  const bool truncated = a.tau2 < m2;
  const double bias = truncated ? m2 * 0.5 * alpha : 0.0;
  const double S_judged = a.S > 0.0 ? a.S : std::min(0.0, a.S + bias);
  BernsteinOutcome o = bernstein_decide(S_judged, a.V, truncated ? a.tau2 : m2, truncated ? 0.5 * alpha : alpha, beta);
  o.S = a.S;
  if (a.exceed) {
    o.pass = false;
    o.p = std::min(o.p, 0.5 * alpha);
  }
  return o;
}

// "3 of 1024 block-draws have |B| > 41 (largest 57): beyond Hoeffding's bound at alpha/2; ", or "" when none did.
std::string exceed_note(const Acc& a, const char* what, const char* sum) {
  if (!a.exceed) return "";
  return strf("%llu of %.0f %s have |%s| > %.4g (largest %.4g): beyond Hoeffding's bound at alpha/2; ",
              static_cast<unsigned long long>(a.exceed), a.K, what, sum, std::sqrt(a.tau2), std::sqrt(a.max_b2));
}

// Everything a job accumulates over its draws; the emitters below turn it into rows.
struct JobState {
  Spec sp;
  std::vector<Observed> obs;
  std::vector<float> xmag;          // |x_k|, x = clamp(g, cap)
  std::vector<std::int8_t> sgn;
  std::vector<double> phat;         // keep probability with the observed scalar
  std::vector<double> xrel, evar;   // |x_k| / N0; E (s t_k - x_k)^2 in N0 units
  double N0 = 1.0, var_V = 0.0, var_E = 0.0, identity = 0.0, bvar = 0.0;
  std::uint64_t infeasible = 0, structure_bad = 0, wrong_total = 0, max_ulps = 0, tol_ulps = 0;
  std::string structure_msg;
  std::vector<std::uint32_t> count;
  double pooled_S = 0.0, drift_S = 0.0, var_S = 0.0;
  std::array<double, kPBins> bin_S{}, bin_D{}, bin_V{};  // by bins of p: pooled terms, drift terms, variance
  IndepPlan ip;
  std::vector<Acc> blockacc, lagacc;
  std::vector<std::uint8_t> must_keep;  // sure keeps: |x| >= observed scalar (p = 1)
  std::uint64_t sure_n = 0, sure_miss = 0, sure_n_neg = 0, sure_miss_neg = 0;  // _neg: at negative elements
  std::string sure_msg;
  std::vector<std::uint32_t> sure_miss_at;  // misses per coordinate (allocated at the first miss)
  std::uint32_t sure_most = 0;              // the most misses of one sure keep, and where
  std::string sure_most_msg;
  std::vector<std::uint8_t> near_drop;  // near drops: 0 < p < kNearDropP with the observed scalar
  std::uint64_t near_n = 0, near_keep = 0, near_kept = 0;  // near_kept: near drops kept at least once
  std::uint64_t near_n_neg = 0, near_keep_neg = 0;        // at negative elements
  std::uint32_t near_most = 0;  // the most keeps of one near drop
  std::string near_msg, near_most_msg;
};

}  // namespace

namespace {

// ---- the rows of a job, from its accumulated sums ---------------------------------------------------

void emit_structure(Ctx& c, const JobSpec& job, const JobState& st) {
  const Spec& sp = st.sp;
  const std::size_t D = job.grad.size();
  const std::uint32_t n = job.steps;
  const std::string& fam = job.grad.family;
  const std::uint64_t structure_bad = st.structure_bad, max_ulps = st.max_ulps;
  const std::string& structure_msg = st.structure_msg;
  // structure (exact)
  {
    Row r = exact_row(prefix(job, "structure"), fam);
    r.statistic = strf("%llu violations", static_cast<unsigned long long>(structure_bad));
    r.pass = structure_bad == 0;
    const bool tol = job.params.clip != ClipMode::none && sp.own_scalar;
    r.detail = structure_bad ? structure_msg
                             : strf("%u steps x %zu elements: values in {-s,0,+s}, signs kept, g = 0 never kept%s; "
                                    "|x| >= s left out %llu times in %llu draws (judged in sure-keeps); scalar %s%s",
                                    n, D, job.fixed_samples || !c.opt.reproducible ? "" : ", same key same bytes",
                                    static_cast<unsigned long long>(st.sure_miss),
                                    static_cast<unsigned long long>(st.sure_n),
                                    tol ? "within the clip-bound tolerance of the spec's" : "equal to the spec's",
                                    tol ? strf(" (largest distance %llu float32 ulps; tolerance %llu for this size, "
                                               "more where the mean is large against sigma)",
                                               static_cast<unsigned long long>(max_ulps),
                                               static_cast<unsigned long long>(st.tol_ulps)).c_str()
                                        : "");
    c.rows.push_back(r);
  }
}

void emit_unbiased(Ctx& c, const JobSpec& job, const JobState& st, JobOut& out) {
  const Spec& sp = st.sp;
  const std::size_t D = job.grad.size();
  const std::uint32_t n = job.steps;
  const std::string& fam = job.grad.family;
  const double beta = c.opt.profile.beta;
  const bool random = random_under_h0(st.sp.pool_V);
  const auto& phat = st.phat;
  const auto& count = st.count;
  const auto &bin_S = st.bin_S, &bin_D = st.bin_D, &bin_V = st.bin_V;
  const std::uint64_t infeasible = st.infeasible, wrong_total = st.wrong_total;
  const double pooled_S = st.pooled_S, drift_S = st.drift_S;
  const std::string target = job.params.clip == ClipMode::none ? "x = g" : "x = clamp(g, c sigma)";
  // The pooled rows also judge their partial sums, the coordinates taken in the order of their spec keep
  // probability (ties by position; fixed before any draw). A coordinate's term is its pooled term summed over
  // the draws, as the sums above add it: count - n p, or count (1 - p) for a sure keep, whose misses are left
  // out of the pooled sums. So a keep-rate error that changes sign along p, and cancels in a total or a bin,
  // shows at the p where it changes sign.
  PartialWalk walk_bias, walk_drift;
  std::array<PartialWalk, kPBins> bin_walk_bias, bin_walk_drift;
  if (random) out.terms.reserve(D);
  for (const auto& [p_e, e] : p_order(sp.p)) {
    const double term = st.must_keep[e] ? count[e] * (1.0 - phat[e]) : count[e] - n * phat[e];
    walk_bias.add(term, p_e);
    walk_drift.add(st.sgn[e] * term, p_e);
    if (random) out.terms.push_back({p_e, term, st.sgn[e] * term});
    if (sp.bin[e] >= 0) {
      bin_walk_bias[static_cast<std::size_t>(sp.bin[e])].add(term, p_e);
      bin_walk_drift[static_cast<std::size_t>(sp.bin[e])].add(st.sgn[e] * term, p_e);
    }
  }
  // unbiased, per coordinate: count_k ~ Binomial(n, p_k) exactly under H0; exact two-sided p-value per
  // coordinate, the minimum Bonferroni-adjusted over the D coordinates.
  {
    Row r = random ? stat_row(c, prefix(job, "unbiased"), fam) : exact_row(prefix(job, "unbiased"), fam);
    std::vector<std::size_t> candidates;
    // A sure keep (p = 1) is tested at 1 - kSureKeepMiss: a correct float32 codec may leave one out now
    // and then; its misses are judged together in the run's sure-keeps row. A near drop (p < kNearDropP) is
    // tested at p + kNearDropKeep, as a correct float32 codec may keep one now and then: its keeps are
    // judged together in near-drops.
    auto p_test = [&](std::size_t e) {
      return st.must_keep[e] ? 1.0 - kSureKeepMiss : (st.near_drop[e] ? phat[e] + kNearDropKeep : phat[e]);
    };
    for (double level : {1e-3, 0.2}) {
      const ClopperPearsonTable& tab = screening_table(n, level);
      for (std::size_t e = 0; e < D; ++e) {
        const double p = p_test(e);
        const std::uint32_t k = count[e];
        const bool degenerate = p <= 0.0 || p >= 1.0;
        if (degenerate ? (k != (p >= 1.0 ? n : 0)) : !(tab.lo[k] <= p && p <= tab.hi[k])) candidates.push_back(e);
      }
      if (!candidates.empty()) break;
    }
    if (candidates.empty())
      for (std::size_t e = 0; e < D; ++e) candidates.push_back(e);
    double minp = 1.0;
    std::size_t worst = candidates.front(), bad = 0;
    const double a_coord = c.alpha / static_cast<double>(D);
    std::string named;  // the first few rejected coordinates (index order), where they lie and what they kept
    std::vector<std::size_t> rejected;
    constexpr std::size_t kNamed = 4;
    for (std::size_t e : candidates) {
      double pv = binomial_two_sided_pvalue(n, count[e], p_test(e));
      if (random ? pv <= a_coord : pv == 0.0) {
        if (bad < kNamed)
          named += strf("%s%s kept %u of %u, p_k = %s", bad ? "; " : ": ", coordinate_name(sp, e).c_str(), count[e],
                        n, probability_text(phat[e]).c_str());
        rejected.push_back(e);
        ++bad;
      }
      if (pv < minp || (pv == minp && e < worst)) minp = pv, worst = e;
    }
    if (bad > kNamed) named += strf("; and %zu more", bad - kNamed);
    named += rejected_pattern(sp, st.xmag, rejected);
    const double adj = std::min(1.0, minp * static_cast<double>(D));
    r.statistic = strf("worst: %u/%u kept, p_k = %s", count[worst], n, probability_text(phat[worst]).c_str());
    if (random) {
      r.threshold = "adj. p <= alpha";
      r.p = adj;
      r.pvalue = strf("adj. p = %.2g (min %.2g x %zu)", adj, minp, D);
      r.power = strf("|dp| >= %.3g", detectable_dp(n, a_coord, beta));
      r.pass = bad == 0;
    } else {
      // Every p is 0 or 1: a count is either possible or not. A sure keep's misses are possible for a correct
      // float32 codec (tested at p = 1 - kSureKeepMiss) and judged, with their allowance, in sure-keeps.
      r.threshold = "0 impossible counts";
      r.pass = minp > 0.0;
      r.power = "any impossible count";
    }
    r.pass = r.pass && infeasible == 0 && wrong_total == 0;
    std::vector<std::string> found;
    if (infeasible) found.push_back(strf("%llu elements have |x_k| > s (cannot be unbiased)", static_cast<unsigned long long>(infeasible)));
    if (wrong_total) found.push_back(strf("%llu outputs with the wrong sign", static_cast<unsigned long long>(wrong_total)));
    if (random && bad)
      found.push_back(strf("%zu of %zu coordinates with exact p-value <= alpha/%zu = %.2g", bad, D, D, a_coord) + named);
    if (!random && bad) found.push_back("keep probabilities are 0 or 1 under H0 but a count differs" + named);
    for (std::size_t k = 0; k < found.size(); ++k) r.detail += (k ? "; " : "") + found[k];
    if (r.pass)
      r.detail = strf("E[g~_k] = x_k for each of %zu coordinates (%s, s the reported scalar); %u draws; %s", D,
                      target.c_str(), n,
                      random ? "exact binomial, Bonferroni over coordinates"
                             : strf("every p is 0 or 1: no count impossible; %llu misses of sure keeps are judged in "
                                    "sure-keeps", static_cast<unsigned long long>(st.sure_miss)).c_str());
    c.rows.push_back(r);
  }
  // unbiased, dispersion: each coordinate's count over the n draws is Binomial(n, p_k) under H0, so B_k = count_k -
  // n p_k has E[B_k^2] = n p_k (1 - p_k). The sum over coordinates of min(B_k^2, tau2) - n p_k (1 - p_k) is judged
  // as the independence blocks are, with a block of n draws of one coordinate: keep-rate errors of either sign,
  // too small for the worst coordinate and cancelling in every sum (pooled, drift, bins, partial sums), add up
  // here as n (n - 1) sum dp^2; so does dependence between the draws of one coordinate (over-dispersion) or
  // draws spread more evenly than independent ones would be (under-dispersion). Sure keeps (judged in
  // sure-keeps), near drops (judged in near-drops) and p in {0, 1} are left out.
  if (random) {
    Acc a;
    for (std::size_t e = 0; e < D; ++e) {
      const double p = phat[e];
      if (st.must_keep[e] || st.near_drop[e] || p <= 0.0 || p >= 1.0) continue;
      const double v = p * (1.0 - p), m4 = (1.0 - p) * (1.0 - p) * (1.0 - p) + p * p * p;
      a.V += n * v * m4 + 2.0 * n * n * v * v - 3.0 * n * v * v;  // Var(B^2), B a sum of n centred Bernoullis
      a.E += n * v;
      a.K += 1.0;
    }
    a.tau2 = block_tau2(n, std::max(a.K, 1.0), c.alpha);
    std::size_t largest = D;  // the coordinate of the largest B_k^2 beyond tau2
    for (std::size_t e = 0; e < D; ++e) {
      const double p = phat[e];
      if (st.must_keep[e] || st.near_drop[e] || p <= 0.0 || p >= 1.0) continue;
      const double B = count[e] - n * p, B2 = B * B;
      if (B2 > a.tau2) {
        ++a.exceed;
        if (B2 > a.max_b2) a.max_b2 = B2, largest = e;
      }
      a.S += std::min(B2, a.tau2);
    }
    a.S -= a.E;
    Row r = stat_row(c, prefix(job, "unbiased-dispersion"), fam);
    const BernsteinOutcome o = decide_squares(a, n, c.alpha, beta);
    // rms keep-rate error that moves the sum by the detectable amount: n (n - 1) K dp^2
    const double nn = static_cast<double>(n) * (static_cast<double>(n) - 1.0) * a.K;
    r.statistic = strf("var ratio %.4f", a.E > 0 ? 1.0 + a.S / a.E : 1.0);
    r.threshold = strf("1 +- %.3g", a.E > 0 ? o.threshold / a.E : 0.0);
    r.power = nn > 0 ? strf("rms dp >= %.3g", std::sqrt(o.detectable / nn)) : std::string("-");
    apply(r, o, a.E);
    r.detail = strf("the spread of the %.0f coordinates' counts over %u draws: B_k = count_k - n p_k, E[B_k^2] = n p_k "
                    "(1 - p_k) when each count is Binomial(n, p_k); Bernstein with exact fourth moments on min(B_k^2, "
                    "%.4g) (Hoeffding: |B_k| > %.4g anywhere has probability <= alpha/2 under H0); keep-rate errors of "
                    "either sign add n (n - 1) sum dp_k^2, dependent draws of a coordinate change E[B_k^2]",
                    a.K, n, a.tau2, std::sqrt(a.tau2));
    if (largest < D)
      r.detail = strf("the largest at %s: kept %u of %u, n p_k = %.4g; ", coordinate_name(sp, largest).c_str(),
                      count[largest], n, n * phat[largest]) + r.detail;
    r.detail = exceed_note(a, "coordinates", "B_k") + r.detail;
    mark_rejected(r);
    c.rows.push_back(r);
  }
  // unbiased, pooled: S = sum (sign(x) t - p), |term| <= 1, Var = n sum p(1-p).
  double pooled_V = 0.0;
  for (std::size_t e = 0; e < D; ++e) pooled_V += phat[e] * (1.0 - phat[e]);
  pooled_V *= n;
  out.pooled_S = pooled_S;
  out.drift_S = drift_S;
  out.pooled_V = pooled_V;
  if (random) {
    c.rows.push_back(pooled_bias_row(c, prefix(job, "unbiased-pooled"), fam, pooled_S, pooled_V,
                                     static_cast<double>(n) * static_cast<double>(D),
                                     "Bernstein on the sum over draws and coordinates of sign(x_k) t_k - p_k (terms in "
                                     "[-1,1], variance known under H0), and Freedman on its partial sums in p order",
                                     Pooled::bias, &walk_bias.peak));
    // The same terms, each times sign(x_k): sum of t_k - sign(x_k) p_k = sum (g~_k - x_k) / s. A keep rate too
    // low on one sign and too high on the other (positives rounded down, negatives up) cancels in the sum
    // above and adds up here.
    c.rows.push_back(pooled_bias_row(c, prefix(job, "unbiased-drift"), fam, drift_S, pooled_V,
                                     static_cast<double>(n) * static_cast<double>(D),
                                     "Bernstein on the sum over draws and coordinates of t_k - sign(x_k) p_k = (g~_k - "
                                     "x_k) / s (a drift of every coordinate the same way; terms in [-1,1], variance "
                                     "known under H0), and Freedman on its partial sums in p order",
                                     Pooled::drift, &walk_drift.peak));
  } else {
    Row r = exact_row(prefix(job, "unbiased-pooled"), fam);
    deterministic_row(r, pooled_S, 1e-9 * n * static_cast<double>(D), "sum of sign(x_k) t_k - p_k");
    c.rows.push_back(r);
  }
  // unbiased by bins of p: a keep-probability error that depends on p and averages out overall, in the
  // pooled terms and (drift-by-p) in the same terms times sign(x_k): an error that depends on p and on the
  // sign, and cancels in both totals (too high for one sign and too low for the other in one range of p).
  if (job.p_bins) {
    std::array<double, kPBins> rarer{};  // per bin: expected count of the rarer outcome, n sum min(p, 1 - p)
    for (std::size_t e = 0; e < D; ++e)
      if (sp.bin[e] >= 0) rarer[static_cast<std::size_t>(sp.bin[e])] += n * std::min(phat[e], 1.0 - phat[e]);
    for (Pooled what : {Pooled::bias, Pooled::drift})
      for (std::size_t b = 0; b < sp.bin_weight.size(); ++b) {
        if (!bin_planned(n * sp.bin_weight[b], n * sp.bin_var[b], b == 0 ? n * sp.floor_excess : 0.0)) continue;
        const bool drift = what == Pooled::drift;
        const double S = drift ? bin_D[b] : bin_S[b], R = rarer[b];
        Row r = stat_row(c, prefix(job, drift ? "unbiased-drift-by-p" : "unbiased-by-p"), fam, p_bin_label(b));
        const PartialPeak& peak = (drift ? bin_walk_drift : bin_walk_bias)[b].peak;
        auto o = bernstein_decide_partial(S, peak, bin_V[b], 1.0, c.alpha, beta);
        r.statistic = strf("%s: rel. %s %+.3g; %s", p_bin_label(b).c_str(), drift ? "drift" : "bias",
                           R > 0 ? S / R : 0.0, partial_text(peak, R, "").c_str());
        r.threshold = strf("|.| <= %.3g", R > 0 ? o.threshold / R : 0.0);
        r.power = strf("rel. %s >= %.3g", drift ? "drift" : "bias", R > 0 ? o.detectable / R : 0.0);
        apply(r, o, R);
        r.detail = strf("sum of %s over the coordinates whose keep probability is in the bin, relative to the expected "
                        "count of the rarer outcome (%.0f); Bernstein, and Freedman on its partial sums in p order",
                        drift ? "t_k - sign(x_k) p_k = (g~_k - x_k) / s" : "sign(x_k) t_k - p_k", R);
        mark_rejected(r);
        c.rows.push_back(r);
      }
  }
}

void emit_variance(Ctx& c, const JobSpec& job, const JobState& st, JobOut& out) {
  const Spec& sp = st.sp;
  const std::uint32_t n = job.steps;
  const std::string& fam = job.grad.family;
  const double beta = c.opt.profile.beta;
  const double var_S = st.var_S, var_V = st.var_V, var_E = st.var_E, bvar = st.bvar, identity = st.identity, N0 = st.N0;
  // variance identity: sum over draws of (s t_k - x_k)^2 - E_k; |term| <= s^2; Var known exactly.
  {
    const double V = n * var_V, E = n * var_E;
    Row r = random_under_h0(sp.var_V) ? stat_row(c, prefix(job, "variance"), fam) : exact_row(prefix(job, "variance"), fam);
    if (random_under_h0(sp.var_V)) {
      auto o = bernstein_decide(var_S, V, bvar, c.alpha, beta);
      r.statistic = strf("ratio %.5f", E > 0 ? 1.0 + var_S / E : 1.0);
      r.threshold = strf("1 +- %.3g", E > 0 ? o.threshold / E : 0.0);
      r.power = strf("rel. error >= %.3g", E > 0 ? o.detectable / E : 0.0);
      apply(r, o, E);
      r.detail = strf("E||g~ - x||^2 = sum_l (s_l ||x_l||_1 - ||x_l||_2^2) = %.6g; observed mean %.6g", identity,
                      (var_S / n + var_E) * N0 * N0);
      mark_rejected(r);
    } else {
      deterministic_row(r, var_S, 1e-9 * n * std::max(1.0, E), "sum of (s t_k - x_k)^2 - E_k");
    }
    c.rows.push_back(r);
    out.var_observed = (var_S / n + var_E) * N0 * N0;
    out.var_identity = identity;
  }
}

void emit_independence(Ctx& c, const JobSpec& job, const JobState& st) {
  const std::string& fam = job.grad.family;
  const double beta = c.opt.profile.beta;
  const IndepPlan& ip = st.ip;
  for (std::size_t i = 0; i < ip.blocks.size(); ++i) {
    auto [m, off] = ip.blocks[i];
    Row r = stat_row(c, prefix(job, "independence"), fam, block_label(m, off));
    Acc a = st.blockacc[i];
    a.S -= a.E;
    const BernsteinOutcome o = decide_squares(a, m, c.alpha, beta);
    r.statistic = strf("%s: var ratio %.4f", block_label(m, off).c_str(), a.E > 0 ? 1.0 + a.S / a.E : 1.0);
    r.threshold = strf("1 +- %.3g", a.E > 0 ? o.threshold / a.E : 0.0);
    r.power = strf("block var +- %.3g", a.E > 0 ? o.detectable / a.E : 0.0);
    apply(r, o, a.E);
    r.detail = strf("keep masks in aligned blocks of %zu neighbours (from offset %zu): B = sum (b_k - p_k), E[B^2] = sum "
                    "p(1-p) when the masks are independent (any correlation within a block moves it); Bernstein with "
                    "exact fourth moments on min(B^2, %.4g) (Hoeffding: |B| > %.4g in any of %.0f block-draws has "
                    "probability <= alpha/2 under H0)",
                    m, off, a.tau2, std::sqrt(a.tau2), a.K);
    r.detail = exceed_note(a, "block-draws", "B") + r.detail;
    mark_rejected(r);
    c.rows.push_back(r);
  }
  for (std::size_t i = 0; i < ip.lags.size(); ++i) {
    const std::size_t lag = ip.lags[i];
    Row r = stat_row(c, prefix(job, "independence"), fam, lag_label(lag));
    const Acc& a = st.lagacc[i];
    auto o = bernstein_decide(a.S, a.V, 1.0, c.alpha, beta);
    r.statistic = strf("%s: corr %+.4f", lag_label(lag).c_str(), a.E > 0 ? a.S / a.E : 0.0);
    r.threshold = strf("|.| <= %.3g", a.E > 0 ? o.threshold / a.E : 0.0);
    r.power = strf("corr >= %.3g", a.E > 0 ? o.detectable / a.E : 0.0);
    apply(r, o, a.E);
    r.detail = lag == kHalfLag
                   ? std::string("sum of (b_k - p_k)(b_{k+h} - p_{k+h}) over k < h = floor(d/2) of each tensor of d "
                                 "elements: disjoint pairs, independent terms in [-1,1]; Bernstein")
                   : strf("sum of (b_k - p_k)(b_{k+%zu} - p_{k+%zu}) over disjoint pairs (k in the first half of each "
                          "window of %zu), independent terms in [-1,1]; Bernstein", lag, lag, 2 * lag);
    mark_rejected(r);
    c.rows.push_back(r);
  }
}

}  // namespace

JobOut run_job(Ctx& c, const JobSpec& job) {
  const Gradient& G = job.grad;
  const std::size_t D = G.size();
  const std::uint32_t n = job.steps;

  JobState st;
  st.sp = make_spec(job);
  const Spec& sp = st.sp;
  std::vector<Observed>& obs = st.obs;
  obs.resize(sp.layers.size());

  // Per-element quantities under H0 with the observed scalar (set with it), and the sums.
  auto& xmag = st.xmag;
  auto& sgn = st.sgn;
  auto& phat = st.phat;
  auto& xrel = st.xrel;
  auto& evar = st.evar;
  xmag.assign(D, 0.0f), sgn.assign(D, 0), phat.assign(D, 0.0), xrel.assign(D, 0.0), evar.assign(D, 0.0);
  std::vector<double> wscale(sp.layers.size(), 0.0);
  double &N0 = st.N0, &var_V = st.var_V, &var_E = st.var_E, &identity = st.identity, &bvar = st.bvar;
  std::uint64_t& infeasible = st.infeasible;
  std::string defect;
  auto structure_fail = [&](const std::string& m) {
    if (st.structure_bad++ == 0) st.structure_msg = m;
  };
  auto& count = st.count;
  count.assign(D, 0);
  std::uint64_t& wrong_total = st.wrong_total;
  double &pooled_S = st.pooled_S, &drift_S = st.drift_S, &var_S = st.var_S;
  auto &bin_S = st.bin_S, &bin_D = st.bin_D, &bin_V = st.bin_V;
  std::uint64_t scalar_changes = 0;

  // independence accumulators
  st.ip = job.independence && random_under_h0(sp.pool_V) ? indep_plan(G, n) : IndepPlan{};
  const IndepPlan& ip = st.ip;
  auto &blockacc = st.blockacc, &lagacc = st.lagacc;
  blockacc.assign(ip.blocks.size(), {}), lagacc.assign(ip.lags.size(), {});
  std::vector<double> centred;

  // Sets the observed scalar of layer li and every per-element quantity that depends on it.
  auto observe = [&](std::size_t li, float s_obs) {
    const SpecLayer& l = sp.layers[li];
    Observed& o = obs[li];
    o.set = true;
    o.scalar = s_obs;
    o.ulps = std::isfinite(s_obs) ? ulp_distance(s_obs, l.rule.scalar) : std::numeric_limits<std::uint64_t>::max();
    const bool clipping = job.params.clip != ClipMode::none && sp.own_scalar;
    o.tolerated = s_obs == l.rule.scalar || (clipping && l.window.contains(s_obs));
  };
  auto finish_observed = [&]() {
    // The reference scalar of each layer: the observed one when it is correct (within the
    // tolerance), else the spec's (the variance identity is the paper's, with the spec's s).
    N0 = 0.0;
    for (std::size_t li = 0; li < sp.layers.size(); ++li)
      N0 = std::max(N0, static_cast<double>(obs[li].tolerated ? obs[li].scalar : sp.layers[li].rule.scalar));
    if (N0 == 0.0) N0 = 1.0;
    for (std::size_t li = 0; li < sp.layers.size(); ++li) {
      const SpecLayer& l = sp.layers[li];
      const Observed& o = obs[li];
      const float s_ref = o.tolerated ? o.scalar : l.rule.scalar;
      float cap = sp.own_scalar ? (o.tolerated ? o.scalar : l.rule.cap) : l.rule.cap;
      if (!sp.own_scalar && std::isfinite(l.bound)) {
        // A given scalar with clipping: the draws do not show the codec's clip bound, and a correct one
        // lies within clip_bound_ulps(d) of the spec's. Magnitudes within that distance of the bound are
        // judged at its lowest correct value, so that no element the codec may keep with probability
        // bound/s < 1 is taken as a sure keep (p = 1, where one miss would fail structure and the exact
        // per-coordinate test). This moves p by at most 2 x 147 x 2^-24 < 2^-15 relative: below every
        // detectable effect.
        cap = std::min(cap, l.bound_lo);
      }
      const double scale_ref = s_ref > 0.0f ? kTwo32 / static_cast<double>(s_ref) : 0.0;
      const double scale_obs = o.scalar > 0.0f ? kTwo32 / static_cast<double>(o.scalar) : 0.0;
      const double sn = static_cast<double>(s_ref) / N0;
      wscale[li] = static_cast<double>(o.scalar) / N0;
      bvar = std::max(bvar, std::max(sn, wscale[li]) * std::max(sn, wscale[li]));
      for (std::size_t k = 0; k < l.layer->g.size(); ++k) {
        const std::size_t e = l.off + k;
        const float g = l.layer->g[k];
        const float a = std::min(std::fabs(g), cap);
        xmag[e] = a;
        sgn[e] = static_cast<std::int8_t>(a == 0.0f ? 0 : sign_of(g));
        if (o.scalar > 0.0f && a > o.scalar) {
          ++infeasible;  // E[s^ t] cannot reach |x_k| when |x_k| > s^
          phat[e] = 1.0;
        } else {
          phat[e] = o.scalar > 0.0f ? keep_probability(a, scale_obs) : 0.0;
        }
        const double p = s_ref > 0.0f ? keep_probability(a, scale_ref) : 0.0;
        const double x = a / N0, hi = (sn - x) * (sn - x), lo = x * x;
        xrel[e] = x;
        evar[e] = p * hi + (1.0 - p) * lo;  // E (s t - x)^2 for this element
        var_E += evar[e];
        var_V += p * (1.0 - p) * (hi - lo) * (hi - lo);
        identity += static_cast<double>(a) * (static_cast<double>(s_ref) - static_cast<double>(a));
        const int b = sp.bin[e];
        if (b >= 0) bin_V[static_cast<std::size_t>(b)] += n * phat[e] * (1.0 - phat[e]);
      }
      // independence: variances of the block sums and lag products under H0 (observed p)
      const std::size_t d = l.layer->g.size();
      for (std::size_t i = 0; i < ip.blocks.size(); ++i) {
        auto [m, off] = ip.blocks[i];
        for (std::size_t b0 = off; b0 + m <= d; b0 += m) {
          double sv = 0.0, sv2 = 0.0, sm4 = 0.0;
          for (std::size_t q = 0; q < m; ++q) {
            double p = phat[l.off + b0 + q], v = p * (1.0 - p);
            sv += v, sv2 += v * v, sm4 += v * ((1.0 - p) * (1.0 - p) * (1.0 - p) + p * p * p);
          }
          blockacc[i].V += n * (sm4 + 2.0 * sv * sv - 3.0 * sv2);  // Var(B^2), B a sum of independent centred Bernoullis
          blockacc[i].E += n * sv;
          blockacc[i].K += n;
        }
      }
      for (std::size_t i = 0; i < ip.lags.size(); ++i) {
        const std::size_t lag = lag_in(ip.lags[i], d);
        if (lag == 0) continue;
        // pairs (k, k + lag) with k in the first half of each block of 2 lag: the same k in the same
        // order as testing k % (2 lag) < lag, without a division per element
        for (std::size_t base = 0; base + lag < d; base += 2 * lag)
        for (std::size_t k = base; k < base + lag && k + lag < d; ++k) {
          double v1 = phat[l.off + k] * (1 - phat[l.off + k]), v2 = phat[l.off + k + lag] * (1 - phat[l.off + k + lag]);
          lagacc[i].V += n * v1 * v2;
          lagacc[i].E += n * std::sqrt(v1 * v2);
        }
      }
    }
  };

  const std::uint64_t per_req = c.sampler.max_request_elements();
  std::uint32_t chunk = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(per_req / std::max<std::size_t>(D, 1), 2, n));
  chunk -= chunk % 2;
  const std::string what = (job.check.empty() ? "" : job.check + " ") + G.family;
  bool observed_all = false;
  std::vector<std::uint8_t>& must_keep = st.must_keep;
  for (std::uint32_t j0 = 0; j0 < n; j0 += chunk) {
    const std::uint32_t cnt = std::min(chunk, n - j0);
    std::vector<Draws> draws;
    for (std::size_t li = 0; li < sp.layers.size(); ++li) {
      const SpecLayer& l = sp.layers[li];
      DrawRequest r{l.layer->g, job.params, {job.stream_seed, 0, l.tensor, j0}, cnt, l.request_scalar};
      draws.push_back(c.sampler.draw(r));
      const Draws& d = draws.back();
      if (d.d != l.layer->g.size() || d.steps != cnt || d.trits.size() != std::size_t{cnt} * d.d ||
          d.scalars.size() != cnt)
        throw Error(ErrorCode::invalid_argument, "implementation returned draws of the wrong size");
      if (!d.defect.empty() && defect.empty()) {  // before the scalar checks: a row's wrong magnitude is its scalar
        defect = l.layer->name + ": " + d.defect;
        structure_fail(defect);
      }
      if (j0 == 0) {
        obs[li].first_rows.assign(d.trits.begin(), d.trits.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(2, cnt) * d.d));
        obs[li].first_scalars.assign(d.scalars.begin(), d.scalars.begin() + std::min<std::size_t>(2, cnt));
        observe(li, first_row_scalar(d));  // a row without a scalar (row_without_scalar) says nothing of it
      }
    }
    if (!observed_all) {
      finish_observed();
      for (std::size_t i = 0; i < ip.blocks.size(); ++i)
        blockacc[i].tau2 = block_tau2(ip.blocks[i].first, blockacc[i].K, c.alpha);
      observed_all = true;
      // elements the observed scalar keeps for sure (p = 1): a 0 there is counted against the float32
      // allowance kSureKeepMiss (row sure-keeps), and their coordinate test takes p = 1 - kSureKeepMiss
      must_keep.assign(D, 0);
      std::uint64_t sure = 0, sure_neg = 0;
      for (std::size_t li = 0; li < sp.layers.size(); ++li) {
        const SpecLayer& l = sp.layers[li];
        for (std::size_t k = 0; k < l.layer->g.size(); ++k) {
          const std::size_t e = l.off + k;
          must_keep[e] = phat[e] >= 1.0 && xmag[e] >= obs[li].scalar;
          sure += must_keep[e];
          sure_neg += must_keep[e] && l.layer->g[k] < 0.0f;
        }
      }
      st.sure_n = sure * n;
      st.sure_n_neg = sure_neg * n;
      // elements the observed scalar keeps with a tiny probability: their keeps are counted against the float32
      // allowance (row near-drops), and their coordinate test takes p + kNearDropKeep
      st.near_drop.assign(D, 0);
      std::uint64_t near = 0, near_neg = 0;
      for (std::size_t e = 0; e < D; ++e) {
        st.near_drop[e] = phat[e] > 0.0 && phat[e] < kNearDropP && !must_keep[e];
        near += st.near_drop[e];
        near_neg += st.near_drop[e] && sgn[e] < 0;
      }
      st.near_n = near * n;
      st.near_n_neg = near_neg * n;
    }
    for (std::uint32_t j = 0; j < cnt; ++j) {
      for (std::size_t li = 0; li < sp.layers.size(); ++li) {
        const SpecLayer& l = sp.layers[li];
        const Draws& d = draws[li];
        // The same scalar at every step, bit for bit; under clipping with the codec's own scalar, within the
        // float32 window when the first row's is: a float32 sigma summed in another order at another call (atomics,
        // split reductions) may move the bound within it, as the fresh-gradients row accepts. Accepted up to 2^-14
        // relative (a plain window's width, 4 x 147 ulps at most): p moves by less, far below every detectable
        // effect; a wide window's larger moves still fail.
        const bool moved_within_window =
            job.params.clip != ClipMode::none && sp.own_scalar && obs[li].tolerated && l.window.contains(d.scalars[j]) &&
            std::fabs(static_cast<double>(d.scalars[j]) - static_cast<double>(obs[li].scalar)) <=
                0x1p-14 * static_cast<double>(obs[li].scalar);
        if (d.scalars[j] != obs[li].scalar && !moved_within_window && !row_without_scalar(d, j) &&
            scalar_changes++ == 0)
          structure_fail(strf("%s step %u: scalar %.9g, but %.9g at step 0 (same gradient)", l.layer->name.c_str(),
                              j0 + j, static_cast<double>(d.scalars[j]), static_cast<double>(obs[li].scalar)));
        const double w = wscale[li];
        const std::int8_t* t = d.trits.data() + static_cast<std::size_t>(j) * d.d;
        if (obs[li].scalar == 0.0f)  // a scalar of 0: were any outputs nonzero (nothing_kept_hint)?
          for (std::size_t k = 0; k < d.d; ++k) obs[li].outputs += t[k] != 0;
        double ps = 0.0, ds = 0.0, vs = 0.0;
        // A row without anything for structure_fail (every trit in -1..1 with the input's sign, no
        // element the observed scalar must keep left out), checked on the bytes alone, takes a loop
        // with no calls in it: its sums stay in registers. It adds the same terms in the same order as
        // the careful loop below, which names the first anomaly of the other rows.
        bool clean = true;
        {
          const std::int8_t* sg = sgn.data() + l.off;
          const std::uint8_t* mk = must_keep.data() + l.off;
          unsigned bad = 0;
          for (std::size_t k = 0; k < d.d; ++k) {  // branch-free, so that it vectorizes
            const int tk = t[k];
            bad |= static_cast<unsigned>(static_cast<unsigned>(tk + 1) > 2u) |
                   (static_cast<unsigned>(tk != 0) & static_cast<unsigned>(sg[k] * tk != 1)) |
                   (static_cast<unsigned>(tk == 0) & static_cast<unsigned>(mk[k] != 0));
          }
          clean = bad == 0;
        }
        if (clean) {
          std::array<double, kPBins> bs = bin_S, bd = bin_D;
          std::uint32_t* cnt = count.data() + l.off;
          const std::int8_t* sg = sgn.data() + l.off;
          const double* ph = phat.data() + l.off;
          const double* xr = xrel.data() + l.off;
          const double* ev = evar.data() + l.off;
          const int* bn = sp.bin.data() + l.off;
          double p_acc = 0.0, d_acc = 0.0, v_acc = 0.0;  // ps, ds and vs (all 0 here), in registers
          for (std::size_t k = 0; k < d.d; ++k) {
            const int tk = t[k];
            const int y = sg[k] * tk;
            cnt[k] += y == 1;
            p_acc += y - ph[k];
            d_acc += sg[k] * (y - ph[k]);
            const int b = bn[k];
            if (b >= 0) {
              bs[static_cast<std::size_t>(b)] += y - ph[k];
              bd[static_cast<std::size_t>(b)] += sg[k] * (y - ph[k]);
            }
            const double diff = w * tk - sg[k] * xr[k];
            v_acc += diff * diff - ev[k];
          }
          ps = p_acc;
          ds = d_acc;
          vs = v_acc;
          bin_S = bs;
          bin_D = bd;
        }
        for (std::size_t k = 0; k < d.d && !clean; ++k) {
          const std::size_t e = l.off + k;
          const int tk = t[k];
          const int y = sgn[e] * tk;
          if (tk < -1 || tk > 1) {
            structure_fail(strf("%s step %u element %zu: trit %d", l.layer->name.c_str(), j0 + j, k, tk));
            continue;
          }
          if (tk != 0 && y != 1) {
            ++wrong_total;
            structure_fail(strf("%s step %u element %zu: output sign %d for g = %.9g", l.layer->name.c_str(), j0 + j, k,
                                tk, static_cast<double>(l.layer->g[k])));
          } else if (tk == 0 && must_keep[e]) {
            st.sure_miss_neg += l.layer->g[k] < 0.0f;
            if (st.sure_miss_at.empty()) st.sure_miss_at.assign(D, 0);
            ++st.sure_miss_at[e];
            if (st.sure_miss++ == 0)
              st.sure_msg = strf("%s%s, %s step %u element %zu: |x| = %.9g >= s = %.9g but not kept",
                                 job.check.empty() ? "" : (job.check + " ").c_str(), job.grad.family.c_str(),
                                 l.layer->name.c_str(), j0 + j, k, static_cast<double>(xmag[e]),
                                 static_cast<double>(obs[li].scalar));
            // A sure keep's miss is judged in sure-keeps (a correct float32 codec may make one) and left out
            // of the pooled and variance sums: where every p is 0 or 1 those rows are exact, and would fail
            // on it. The coordinate's own test still counts it (at p = 1 - kSureKeepMiss).
            continue;
          }
          count[e] += y == 1;
          ps += y - phat[e];
          ds += sgn[e] * (y - phat[e]);
          const int b = sp.bin[e];
          if (b >= 0) {
            bin_S[static_cast<std::size_t>(b)] += y - phat[e];
            bin_D[static_cast<std::size_t>(b)] += sgn[e] * (y - phat[e]);
          }
          const double diff = w * tk - sgn[e] * xrel[e];
          vs += diff * diff - evar[e];
        }
        pooled_S += ps;
        drift_S += ds;
        var_S += vs;
        if (!ip.blocks.empty() || !ip.lags.empty()) {
          centred.resize(d.d);
          for (std::size_t k = 0; k < d.d; ++k) centred[k] = (t[k] != 0) - phat[l.off + k];
          for (std::size_t i = 0; i < ip.blocks.size(); ++i) {
            auto [m, off] = ip.blocks[i];
            Acc& a = blockacc[i];
            double acc = 0.0;
            for (std::size_t b0 = off; b0 + m <= d.d; b0 += m) {
              double B = 0.0;
              for (std::size_t q = 0; q < m; ++q) B += centred[b0 + q];
              const double B2 = B * B;
              if (B2 > a.tau2) ++a.exceed, a.max_b2 = std::max(a.max_b2, B2);
              acc += std::min(B2, a.tau2);  // E[B^2] = sum p(1-p) of the block is subtracted once, below
            }
            a.S += acc;
          }
          for (std::size_t i = 0; i < ip.lags.size(); ++i) {
            const std::size_t lag = lag_in(ip.lags[i], d.d);
            if (lag == 0) continue;
            double acc = 0.0;
            for (std::size_t base = 0; base + lag < d.d; base += 2 * lag)  // as above: same terms, same order
              for (std::size_t k = base; k < base + lag && k + lag < d.d; ++k) acc += centred[k] * centred[k + lag];
            lagacc[i].S += acc;
          }
        }
      }
    }
    c.progress.add(static_cast<double>(cnt) * static_cast<double>(D), what);
  }
  // Determinism: the same key gives the same trits and scalar (first layer, steps 0..1), and row j of a
  // request is the draw of step K + j whatever the request: step 1 asked alone must be row 1 of the first
  // request (a codec that seeds its generator per request instead of per step differs there).
  // A scalar that changes when the same request is drawn again is state kept between calls (a stale scalar, a
  // running maximum): the reading of the first layer's wrong scalar, before any guess at a clip rule.
  std::string repeat_scalar_note;
  if (!job.fixed_samples && c.opt.reproducible) {
    const SpecLayer& l = sp.layers.front();
    std::uint32_t m = std::min<std::uint32_t>(2, n);
    Draws again = c.sampler.draw({l.layer->g, job.params, {job.stream_seed, 0, l.tensor, 0}, m, l.request_scalar});
    if (again.trits != obs.front().first_rows || again.scalars != obs.front().first_scalars)
      structure_fail(l.layer->name + ": drawing steps 0..1 again with the same key gave different output");
    if (!again.scalars.empty() && !obs.front().first_scalars.empty() && again.scalars[0] != obs.front().first_scalars[0])
      repeat_scalar_note = strf("; the same request drawn again gave the scalar %.9g, not %.9g: a scalar kept from an "
                                "earlier call (state between calls)?",
                                static_cast<double>(again.scalars[0]), static_cast<double>(obs.front().first_scalars[0]));
    if (m == 2) {
      const std::size_t d = l.layer->g.size();
      Draws alone = c.sampler.draw({l.layer->g, job.params, {job.stream_seed, 0, l.tensor, 1}, 1, l.request_scalar});
      const auto& first = obs.front().first_rows;
      if (alone.scalars.size() != 1 || alone.scalars[0] != obs.front().first_scalars[1] || alone.trits.size() != d ||
          !std::equal(alone.trits.begin(), alone.trits.end(), first.begin() + static_cast<std::ptrdiff_t>(d)))
        structure_fail(l.layer->name + ": step 1 drawn alone differs from row 1 of a request for steps 0..1 (row j of "
                       "a request must be the draw of step K + j)");
    }
  }
  // The near drops' keeps (counted with the others above), and the first coordinate kept.
  for (std::size_t li = 0; li < sp.layers.size() && !st.near_drop.empty(); ++li) {
    const SpecLayer& l = sp.layers[li];
    for (std::size_t k = 0; k < l.layer->g.size(); ++k) {
      const std::size_t e = l.off + k;
      if (!st.near_drop[e] || count[e] == 0) continue;
      const std::string where = strf("%s%s, %s element %zu: p = %.3g, kept %u times in %u draws",
                                     job.check.empty() ? "" : (job.check + " ").c_str(), job.grad.family.c_str(),
                                     l.layer->name.c_str(), k, phat[e], count[e], n);
      if (st.near_keep == 0) st.near_msg = where;
      // a coordinate kept in more than half its draws: a wrong p there, not a short uniform (which keeps every
      // near drop at 2^-k, so one draw at a time)
      if (2 * count[e] > n && count[e] > st.near_most) st.near_most = count[e], st.near_most_msg = where;
      st.near_keep += count[e];
      st.near_kept += 1;
      if (sgn[e] < 0) st.near_keep_neg += count[e];
    }
  }
  // The sure keep missed most often, and where.
  for (std::size_t li = 0; li < sp.layers.size() && !st.sure_miss_at.empty(); ++li) {
    const SpecLayer& l = sp.layers[li];
    for (std::size_t k = 0; k < l.layer->g.size(); ++k) {
      const std::uint32_t m = st.sure_miss_at[l.off + k];
      if (m <= st.sure_most) continue;
      st.sure_most = m;
      st.sure_most_msg = strf("%s%s, %s element %zu (|x| at or above s) missed in %u of %u draws",
                              job.check.empty() ? "" : (job.check + " ").c_str(), job.grad.family.c_str(),
                              l.layer->name.c_str(), k, m, n);
    }
  }
  // The scalar against the spec's: bit for bit, or within the clip-bound tolerance under clipping.
  std::uint64_t& max_ulps = st.max_ulps;
  for (std::size_t li = 0; li < sp.layers.size(); ++li) {
    const Observed& o = obs[li];
    const SpecLayer& l = sp.layers[li];
    if (o.tolerated) {
      max_ulps = std::max(max_ulps, o.ulps);
      st.tol_ulps = std::max<std::uint64_t>(st.tol_ulps, l.window.ulps);
      continue;
    }
    std::string dist = std::isfinite(o.scalar) ? strf("%llu float32 ulps away", static_cast<unsigned long long>(o.ulps)) : "not finite";
    // the specific readings (half precision, no absolute value, another norm) before the clipping ones
    std::string hint = specific_scalar_hint(l.layer->g, o.scalar, l.rule.scalar, sp.own_scalar);
    if (hint.empty() && !sp.own_scalar && l.request_scalar && o.scalar == l.max_abs && o.scalar != l.rule.scalar)
      hint = strf("; the scalar is this tensor's own max|g|, not the shared scalar %.9g it was given: the shared scalar "
                  "ignored?",
                  static_cast<double>(*l.request_scalar));
    if (hint.empty() && li == 0) hint = repeat_scalar_note;
    if (hint.empty() && sp.own_scalar && job.params.clip != ClipMode::none)
      hint = clipped_values_hint(l.layer->g, o.scalar, l.max_abs, l.rule.scalar, count.data() + l.off, n);
    if (hint.empty()) hint = clipping_hint(l.layer->g, o.scalar, l.max_abs, job.params, sp.own_scalar);
    // after a reading of the scalar (a clip bound of 0 from a sigma that underflowed also outputs nothing)
    hint += nothing_kept_hint(l.layer->g, o.scalar, l.rule.scalar, o.outputs, n);
    const std::string m = strf("%s: scalar %.9g, spec %.9g (%s; %s)%s", l.layer->name.c_str(), static_cast<double>(o.scalar),
                               static_cast<double>(l.rule.scalar), dist.c_str(),
                               job.params.clip != ClipMode::none && sp.own_scalar
                                   ? strf("a float32 sigma's scalar lies in [%.9g, %.9g]: %u ulps at this size, more where the "
                                          "mean is large against sigma, at most max|g|", static_cast<double>(l.window.lo),
                                          static_cast<double>(l.window.hi), l.window.ulps).c_str()
                                   : "must be equal", hint.c_str());
    // A wrong scalar is named first: the element findings before it (signs, values judged against the
    // spec's cap) follow from it. Outputs not of the form {-s, 0, +s} stay first: the scalar is read from them.
    if (st.structure_bad++ == 0)
      st.structure_msg = m;
    else if (!defect.empty() && st.structure_msg.starts_with(defect))
      st.structure_msg += "; then (the scalar read from those outputs) " + m;
    else if (st.structure_msg.find(", spec ") == std::string::npos)  // not already a wrong scalar named first
      st.structure_msg = m + "; then " + st.structure_msg;
  }

  // The rows, from what was accumulated.
  // Rows of a check left out (--skip) are computed, then dropped: the sums in `out` are still needed.
  auto emit = [&](bool report, auto&& rows) {
    const std::size_t before = c.rows.size();
    rows();
    if (!report) c.rows.resize(before);
  };
  JobOut out;
  out.sure_n = st.sure_n;
  out.sure_miss = st.sure_miss;
  out.sure_msg = st.sure_msg;
  out.sure_n_neg = st.sure_n_neg;
  out.sure_most = st.sure_most;
  out.sure_most_msg = st.sure_most_msg;
  out.sure_miss_neg = st.sure_miss_neg;
  out.near_n = st.near_n;
  out.near_keep = st.near_keep;
  out.near_kept = st.near_kept;
  out.near_n_neg = st.near_n_neg;
  out.near_keep_neg = st.near_keep_neg;
  out.job = (job.check.empty() ? std::string() : job.check + " ") + job.grad.family;
  out.job_elements = job.grad.size();
  out.near_msg = st.near_msg;
  out.near_most = st.near_most;
  out.near_most_msg = st.near_most_msg;
  emit(job.structure, [&] { emit_structure(c, job, st); });
  emit(job.unbiased, [&] { emit_unbiased(c, job, st, out); });
  emit(job.variance, [&] { emit_variance(c, job, st, out); });
  emit_independence(c, job, st);
  return out;
}

void clipping_info(Ctx& c, const Gradient& G, const Params& params) {
  double dot = 0, nx = 0, ng = 0, nb = 0;
  std::size_t clipped = 0, n = 0;
  for (const auto& l : G.layers) {
    float bound = clip_bound(reference_codec(), l.g, params);
    for (float g : l.g) {
      double x = std::clamp(static_cast<double>(g), -static_cast<double>(bound), static_cast<double>(bound));
      dot += x * g, nx += x * x, ng += static_cast<double>(g) * g, nb += (x - g) * (x - g);
      clipped += std::fabs(g) > bound;
      ++n;
    }
  }
  const double pred = 2.0 * normal_upper_tail(params.c);
  Row r = info_row("clipping.bias", G.family);
  r.statistic = strf("|bias|/|g| %.4f, angle %.3f deg", ng > 0 ? std::sqrt(nb / ng) : 0.0,
                     nx > 0 && ng > 0 ? std::acos(std::min(1.0, dot / std::sqrt(nx * ng))) * 180.0 / M_PI : 0.0);
  r.statistic += strf(", clipped %.4f%% (Gaussian %.4f%%)", n ? 100.0 * clipped / n : 0.0, 100.0 * pred);
  r.detail = strf("fraction clipped %.5f; Gaussian prediction 2(1 - Phi(%g)) = %.5f%s", n ? double(clipped) / n : 0.0,
                  params.c, pred, G.family == "gaussian" ? "" : " (this family is not Gaussian)");
  c.rows.push_back(r);
}

namespace {

// What a rare-event row counts: sure keeps left out, or near drops kept.
struct RareEvents {
  const char* check;    // row name
  const char* events;   // "misses", "keeps"
  const char* rate_of;  // what the power column's rate counts: "miss", "keep"
  const char* of;       // "sure keeps", "near drops"
  const char* rate;     // the allowance as printed: "2^-22"
  double eps;           // the allowance per element-draw
  bool rate_as_power2;  // print the detectable rate as a power of 2 too
};

// Rare events of one sign only, where both signs have element-draws: a rule or a scale that depends on the sign.
// n, events: element-draws and events in all; n_neg, events_neg: at negative elements.
std::string one_sign_note(std::uint64_t n, std::uint64_t n_neg, std::uint64_t events, std::uint64_t events_neg,
                          const char* event, const char* of) {
  const std::uint64_t n_pos = n - n_neg, events_pos = events - events_neg;
  if (events == 0 || n_neg == 0 || n_pos == 0 || (events_neg != 0 && events_pos != 0)) return "";
  const bool pos = events_pos != 0;
  return strf("; every %s is at a %s element (%llu in %llu element-draws of %s %s, none in %llu of %s ones): a keep "
              "rule or a scale that depends on the sign (the %s elements' p computed otherwise?)",
              event, pos ? "positive" : "negative", static_cast<unsigned long long>(events),
              static_cast<unsigned long long>(pos ? n_pos : n_neg), pos ? "positive" : "negative", of,
              static_cast<unsigned long long>(pos ? n_neg : n_pos), pos ? "negative" : "positive",
              pos ? "positive" : "negative");
}

// A run's count K of rare events among N element-draws, each of probability at most eps under any codec within
// the allowance: one decision, reject iff P(Bin(N, eps) >= K) <= alpha (the sum is stochastically below Bin(N, eps)).
Row rare_events_row(const Ctx& c, const RareEvents& w, std::uint64_t n, std::uint64_t k, const std::string& detail) {
  Row r = stat_row(c, w.check, "all jobs");
  double detectable = 1.0;
  const std::uint64_t crit = n ? miss_rate_critical(n, w.eps, c.alpha, c.opt.profile.beta, &detectable) : 1;
  r.statistic = strf("%llu %s in %llu %s", static_cast<unsigned long long>(k), w.events, static_cast<unsigned long long>(n), w.of);
  r.threshold = n ? strf("<= %llu (rate %s)", static_cast<unsigned long long>(crit - 1), w.rate) : std::string("no ") + w.of;
  r.p = binomial_upper_tail(n, k, w.eps);
  r.pvalue = strf("P(Bin(N, %s) >= %s) = %.2g", w.rate, w.events, r.p);
  r.power = !n ? std::string("-")
               : strf("%s rate >= %.3g", w.rate_of, detectable) +
                     (w.rate_as_power2 ? strf(" (2^%.1f)", std::log2(detectable)) : std::string());
  r.pass = r.p > c.alpha;
  r.detail = detail;
  mark_rejected(r);
  return r;
}

}  // namespace

std::string sure_keeps_id() { return row_id("sure-keeps", "all jobs"); }

Row sure_keeps_row(const Ctx& c, const std::vector<JobOut>& outs) {
  std::uint64_t n = 0, miss = 0, n_neg = 0, miss_neg = 0;
  std::uint32_t most = 0;
  std::string first, most_msg;
  for (const auto& o : outs) {
    n += o.sure_n, miss += o.sure_miss, n_neg += o.sure_n_neg, miss_neg += o.sure_miss_neg;
    if (first.empty()) first = o.sure_msg;
    if (o.sure_most > most) most = o.sure_most, most_msg = o.sure_most_msg;
  }
  Row r = rare_events_row(
      c, {"sure-keeps", "misses", "miss", "sure keeps", "2^-22", kSureKeepMiss, false}, n, miss,
      strf("elements at or above the scalar (p = 1: the maximum, and every clipped element) left out; a correct "
           "float32 codec may leave one out with probability <= 2^-22 per draw (p one or two roundings below 1, "
           "a 24-bit uniform)%s%s", first.empty() ? "" : "; first: ", first.c_str()));
  // Misses at one coordinate (more than half of them there, and more than one) read as a wrong p at it, not as
  // a rule that depends on the sign, which would miss sure keeps of that sign wherever they are.
  if (!r.pass && most > 1 && 2 * static_cast<std::uint64_t>(most) > miss)
    r.detail += strf("; the misses are not spread: %s (%u of the %llu misses): a wrong keep probability at that "
                     "coordinate (an element's p taken from another element or another scalar? the unbiased rows "
                     "name the coordinates)",
                     most_msg.c_str(), most, static_cast<unsigned long long>(miss));
  else if (!r.pass)
    r.detail += one_sign_note(n, n_neg, miss, miss_neg, "miss", "sure keeps");
  return r;
}

std::string near_drops_id() { return row_id("near-drops", "all jobs"); }

Row near_drops_row(const Ctx& c, const std::vector<JobOut>& outs) {
  std::uint64_t n = 0, keep = 0, kept = 0, n_neg = 0, keep_neg = 0;
  std::uint32_t most = 0;
  std::string first, most_msg;
  std::size_t jobs_with_near = 0;
  const JobOut* only = nullptr;  // the one job whose near drops were kept, where only one was
  bool one_job = true;
  for (const auto& o : outs) {
    n += o.near_n, keep += o.near_keep, kept += o.near_kept, n_neg += o.near_n_neg, keep_neg += o.near_keep_neg;
    jobs_with_near += o.near_n > 0;
    if (o.near_keep > 0) {
      one_job = one_job && only == nullptr;
      only = &o;
    }
    if (first.empty()) first = o.near_msg;
    if (o.near_most > most) most = o.near_most, most_msg = o.near_most_msg;
  }
  // every near drop's p plus the allowance is below kNearDropKeep + kNearDropP
  Row r = rare_events_row(
      c, {"near-drops", "keeps", "keep", "near drops", "2^-23 + 2^-26", kNearDropKeep + kNearDropP, true}, n, keep,
      strf("elements with keep probability 0 < p < 2^-26 kept; the spec keeps one with probability p, a correct "
           "float32 codec with at most p + 2^-23 per draw (its uniform's grid step is 2^-23, the mantissa form "
           "1.m - 1, or finer)%s%s", first.empty() ? "" : "; first: ", first.c_str()));
  // How the keeps lie tells the two readings apart: a k-bit uniform keeps every near drop with probability 2^-k,
  // so its keeps are spread one draw at a time; a coordinate kept in most of its draws has a wrong p.
  if (!r.pass) {
    if (most > 0)
      r.detail += strf("; the keeps are not spread: %s, more than half its draws: a wrong keep probability at that "
                       "coordinate (an element's p taken from another element or another scalar? the unbiased rows "
                       "name the coordinates), not a short uniform", most_msg.c_str());
    else
      r.detail += strf("; the keeps are spread: %llu keeps at %llu coordinates, none kept in more than half its "
                       "draws: a k-bit uniform, which keeps every p < 2^-k with probability 2^-k (16 bits: 2^-16, "
                       "21 bits: 2^-21; the power column's rate as a power of 2 is the shortest one this run sees)?",
                       static_cast<unsigned long long>(keep), static_cast<unsigned long long>(kept));
    r.detail += one_sign_note(n, n_neg, keep, keep_neg, "keep", "near drops");
    if (only && one_job && jobs_with_near > 1)
      r.detail += strf("; every keep is in one job's tensors, %s (%zu elements; %llu of the %llu near-drop "
                       "element-draws): a code path that only this gradient takes (a size, a layout)?",
                       only->job.c_str(), only->job_elements, static_cast<unsigned long long>(only->near_n),
                       static_cast<unsigned long long>(n));
  }
  return r;
}

}  // namespace tg::verify::checks
