// terngrad-bench: the checks of STATISTICS.md and the runner of the battery (tg/verify/battery.hpp).
// Every statistical decision gets an equal share alpha_total / m of the error budget (Bonferroni);
// each row states its threshold, its p-value (or a bound on it) and its power: the smallest effect
// it detects with probability >= 1 - beta, computed from the same sample size and threshold.
#include "tg/verify/battery.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>

#include <unistd.h>

#include "tg/verify/families.hpp"
#include "tg/verify/stats.hpp"

namespace tg::verify {

std::string strf(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string strf(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

Profile profile_named(const std::string& name) {
  Profile p;
  p.name = name;
  if (name == "quick") {
    p.d = 1 << 13, p.steps = 128, p.stream_steps = 256, p.agg_workers = 4, p.agg_steps = 128, p.cross_d = 4099;
  } else if (name == "ci") {
    p.d = 1 << 16, p.steps = 1024, p.stream_steps = 1024, p.agg_workers = 4, p.agg_steps = 1024, p.cross_d = 65537;
  } else if (name == "full") {
    p.d = 1 << 18, p.steps = 4096, p.stream_steps = 4096, p.agg_workers = 8, p.agg_steps = 4096, p.cross_d = 1 << 20;
    p.alpha_total = 1e-9;
  } else {
    throw Error(ErrorCode::invalid_argument, "unknown profile '" + name + "' (expected quick, ci or full)");
  }
  return p;
}

const std::vector<std::string>& check_names() {
  static const std::vector<std::string> names = {"structure", "unbiased",  "variance",  "independence",
                                                 "streams",   "clipping",  "layerwise", "aggregate",
                                                 "cross"};
  return names;
}

bool Result::pass() const {
  for (const auto& r : rows)
    if (!r.pass) return false;
  return true;
}

std::vector<std::string> Result::failed_checks() const {
  std::vector<std::string> out;
  for (const auto& r : rows)
    if (!r.pass) {
      std::string c = r.check;
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
  return out;
}

namespace {

constexpr double kTwo32 = 4294967296.0;
const std::string kDash = "-";

// Exact keep probability of the spec rule for magnitude a (already clamped) and rule scale.
double keep_probability(float a, double scale) {
  double t = static_cast<double>(a) * scale;
  if (t >= kTwo32) return 1.0;
  return std::ceil(t) / kTwo32;
}

// ---- progress ------------------------------------------------------------------------------------
class Progress {
 public:
  Progress(bool on, double total, std::function<void()> poll = {})
      : on_(on), total_(total), tty_(::isatty(2) != 0), poll_(std::move(poll)) {}
  ~Progress() { finish(); }
  void add(double units, const std::string& what) {
    if (poll_) poll_();  // may throw: the caller stops the run
    done_ += units;
    if (!on_) return;
    double t = elapsed();
    if (t < 3.0 || t - last_ < (tty_ ? 0.5 : 10.0)) return;
    last_ = t;
    double frac = total_ > 0 ? std::min(1.0, done_ / total_) : 1.0;
    std::fprintf(stderr, "%sverify: %3.0f%% after %.0f s (%s)%s", tty_ ? "\r" : "", 100.0 * frac, t, what.c_str(),
                 tty_ ? "\033[K" : "\n");
    std::fflush(stderr);
    shown_ = true;
  }
  void finish() {
    if (shown_ && tty_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  bool on_;
  double total_, done_ = 0.0, last_ = 0.0;
  bool tty_, shown_ = false;
  std::function<void()> poll_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

struct Ctx {
  Sampler& sampler;
  const Options& opt;
  double alpha = 0.0;  // per decision
  std::vector<Row>& rows;
  Progress& progress;
  bool skipped(const std::string& check) const { return opt.skip.count(check) > 0; }
};

Row stat_row(const Ctx& c, std::string check, std::string family) {
  Row r;
  r.check = std::move(check);
  r.family = std::move(family);
  r.kind = "stat";
  r.alpha = c.alpha;
  return r;
}

// A Bernstein decision on a sum S of independent zero-mean terms (under H0) with |term| <= b and
// known total variance V. `unit` converts S into the reported scale.
struct BernsteinOutcome {
  double threshold, pvalue, detectable;
  bool pass;
};
BernsteinOutcome bernstein_decide(double S, double V, double b, double alpha, double beta) {
  BernsteinOutcome o;
  o.threshold = bernstein_threshold(V, b, alpha);
  o.pvalue = bernstein_pvalue(S, V, b);
  // Power: under an alternative with mean shift delta, S - delta deviates below by more than
  // t_beta with probability <= beta (Bernstein, one-sided, at the null variance V: shifts of
  // the detectable size change the variance only to first order). Detected if delta >= t_a + t_b.
  o.detectable = o.threshold + bernstein_one_sided(V, b, beta);
  o.pass = std::fabs(S) <= o.threshold;
  return o;
}

// A failed row's detail starts with what was observed and where the line was.
void mark_rejected(Row& r) {
  if (!r.pass) r.detail = "rejected: " + r.statistic + ", outside " + r.threshold + "; " + r.detail;
}

// The pooled unbiasedness row: S = sum of M terms sign(x) t - p in [-1, 1], variance V under H0,
// reported per term in units of the scalar.
Row pooled_bias_row(const Ctx& c, std::string check, std::string family, double S, double V, double M,
                    std::string detail) {
  Row r = stat_row(c, std::move(check), std::move(family));
  auto o = bernstein_decide(S, V, 1.0, c.alpha, c.opt.profile.beta);
  r.statistic = strf("mean bias %.3g s", S / M);
  r.threshold = strf("|.| <= %.3g s", o.threshold / M);
  r.pvalue = strf("p <= %.2g", o.pvalue);
  r.power = strf("bias >= %.3g s", o.detectable / M);
  r.pass = o.pass;
  r.detail = std::move(detail);
  mark_rejected(r);
  return r;
}

// ---- the per-family job: structure, unbiased (per coordinate + pooled), variance, independence --

struct JobSpec {
  std::string check;   // row prefix: "" for the main checks, "clipping", "layerwise"
  Gradient grad;
  Params params;
  bool global_scalar = false;
  bool independence = false;
  std::uint32_t steps = 0;
  std::vector<std::optional<float>> given_scalars;  // per layer: the shared scalar asked for, if any
  bool fixed_samples = false;  // draws given by the caller (check_samples): no determinism re-draw
};

struct JobOut {
  double pooled_S = 0.0, pooled_V = 0.0;  // for the all-family pooled test
  double var_expected = 0.0, var_observed = 0.0, var_identity = 0.0;  // absolute units
  bool ok = true;
};

struct LayerState {
  const Layer* layer;
  std::uint32_t tensor;
  ScalarRule rule;       // spec rule (reference codec)
  std::optional<float> request_scalar;
  std::size_t off;
  float observed_scalar = 0.0f;
  bool scalar_set = false;
  std::vector<std::int8_t> first_rows;  // rows 0..1 for the determinism check
  std::vector<float> first_scalars;
};

std::string row_prefix(const JobSpec& j, const char* test) {
  return j.check.empty() ? std::string(test) : j.check + "." + test;
}

JobOut run_job(Ctx& c, const JobSpec& job) {
  const Codec& ref = reference_codec();
  const Gradient& G = job.grad;
  const std::size_t D = G.size();
  const std::uint32_t n = job.steps;
  const std::uint64_t seed = c.opt.seed;
  std::vector<LayerState> layers;
  {
    std::size_t off = 0;
    float global = 0.0f;
    if (job.global_scalar)
      for (const auto& l : G.layers) global = std::max(global, tensor_scalar(ref, l.g, job.params, 0));
    for (std::size_t i = 0; i < G.layers.size(); ++i) {
      LayerState s{&G.layers[i], static_cast<std::uint32_t>(i), {}, std::nullopt, off, 0.0f, false, {}, {}};
      if (job.global_scalar) {
        s.rule = make_rule(global, clip_bound(ref, G.layers[i].g, job.params));
        s.request_scalar = global;
      } else if (i < job.given_scalars.size() && job.given_scalars[i]) {
        s.rule = make_rule(*job.given_scalars[i], clip_bound(ref, G.layers[i].g, job.params));
        s.request_scalar = job.given_scalars[i];
      } else {
        s.rule = own_rule(ref, G.layers[i].g, job.params, s.tensor);
      }
      off += G.layers[i].g.size();
      layers.push_back(std::move(s));
    }
  }
  // Per-element spec quantities, in units of N0 = the largest scalar of the job.
  double N0 = 0.0;
  for (const auto& l : layers) N0 = std::max(N0, static_cast<double>(l.rule.scalar));
  if (N0 == 0.0) N0 = 1.0;
  std::vector<float> amag(D);          // |x_k|, x = clamp(g, cap)
  std::vector<std::int8_t> sgn(D);
  std::vector<double> u(D), srel(D), pspec(D), evar(D);
  double var_V = 0.0, var_E = 0.0, bvar = 0.0, identity = 0.0;
  for (const auto& l : layers) {
    double s = static_cast<double>(l.rule.scalar);
    double snorm = s / N0;
    bvar = std::max(bvar, snorm * snorm);
    for (std::size_t k = 0; k < l.layer->g.size(); ++k) {
      std::size_t e = l.off + k;
      float g = l.layer->g[k];
      float a = std::min(std::fabs(g), l.rule.cap);
      amag[e] = a;
      sgn[e] = static_cast<std::int8_t>(g > 0.0f ? 1 : (g < 0.0f ? -1 : 0));
      if (a == 0.0f) sgn[e] = 0;
      double p = l.rule.scalar > 0.0f ? keep_probability(a, l.rule.scale) : 0.0;
      pspec[e] = p;
      u[e] = static_cast<double>(a) / N0;
      srel[e] = snorm;
      double hi = (snorm - u[e]) * (snorm - u[e]), lo = u[e] * u[e];
      evar[e] = p * hi + (1.0 - p) * lo;  // E (s t - x)^2 for this element
      var_E += evar[e];
      var_V += p * (1.0 - p) * (hi - lo) * (hi - lo);
      identity += static_cast<double>(a) * (s - static_cast<double>(a));
    }
  }
  // Observed-scalar probabilities (set from the first row), Bonferroni tables.
  std::vector<double> phat(D, 0.0);
  std::vector<std::uint32_t> count(D, 0), wrong(D, 0);
  std::uint64_t infeasible = 0;
  std::string structure_msg, defect;
  std::uint64_t structure_bad = 0;
  auto structure_fail = [&](const std::string& m) {
    if (structure_bad++ == 0) structure_msg = m;
  };
  bool scalar_varies = false;
  double pooled_S = 0.0, var_S = 0.0;
  // independence: aligned block sums of m = 8 at offsets 0 and 4 within each tensor
  constexpr int kBlock = 8;
  struct BlockAcc { double S = 0.0, V = 0.0, E = 0.0; };
  BlockAcc blocks[2];

  const std::uint64_t per_req = c.sampler.max_request_elements();
  std::uint32_t chunk = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(per_req / std::max<std::size_t>(D, 1), 2, n));
  chunk -= chunk % 2;
  std::string what = (job.check.empty() ? "" : job.check + " ") + G.family;
  for (std::uint32_t j0 = 0; j0 < n; j0 += chunk) {
    std::uint32_t cnt = std::min(chunk, n - j0);
    std::vector<Draws> draws;
    for (auto& l : layers) {
      DrawRequest r{l.layer->g, job.params, {seed, 0, l.tensor, j0}, cnt, l.request_scalar};
      draws.push_back(c.sampler.draw(r));
      const Draws& d = draws.back();
      if (d.d != l.layer->g.size() || d.steps != cnt || d.trits.size() != std::size_t{cnt} * d.d)
        throw Error(ErrorCode::invalid_argument, "implementation returned draws of the wrong size");
      if (!d.defect.empty() && defect.empty()) defect = l.layer->name + ": " + d.defect;
      if (j0 == 0) {
        l.first_rows.assign(d.trits.begin(), d.trits.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(2, cnt) * d.d));
        l.first_scalars.assign(d.scalars.begin(), d.scalars.begin() + std::min<std::size_t>(2, cnt));
      }
      if (!l.scalar_set) {
        l.scalar_set = true;
        l.observed_scalar = d.scalars[0];
        double sh = static_cast<double>(l.observed_scalar);
        double scale = sh > 0.0 ? kTwo32 / sh : 0.0;
        for (std::size_t k = 0; k < d.d; ++k) {
          std::size_t e = l.off + k;
          if (amag[e] > l.observed_scalar) {
            ++infeasible;  // E[s^ t] cannot reach |x_k| when |x_k| > s^
            phat[e] = 1.0;
          } else {
            phat[e] = sh > 0.0 ? keep_probability(amag[e], scale) : 0.0;
          }
        }
        // block variances under H0 (with the observed scalar's probabilities)
        if (job.independence) {
          for (int o = 0; o < 2; ++o) {
            for (std::size_t b0 = static_cast<std::size_t>(o * kBlock / 2); b0 + kBlock <= d.d; b0 += kBlock) {
              double sv = 0.0, sv2 = 0.0, sm4 = 0.0;
              for (int q = 0; q < kBlock; ++q) {
                double p = phat[l.off + b0 + static_cast<std::size_t>(q)];
                double v = p * (1.0 - p);
                sv += v;
                sv2 += v * v;
                sm4 += v * ((1.0 - p) * (1.0 - p) * (1.0 - p) + p * p * p);
              }
              blocks[o].V += n * (sm4 + 2.0 * sv * sv - 3.0 * sv2);
              blocks[o].E += n * sv;
            }
          }
        }
      }
    }
    for (std::uint32_t j = 0; j < cnt; ++j) {
      for (std::size_t li = 0; li < layers.size(); ++li) {
        auto& l = layers[li];
        const Draws& d = draws[li];
        float sr = d.scalars[j];
        if (sr != l.rule.scalar && structure_bad == 0)
          structure_fail(strf("%s step %u: scalar %.9g, spec %.9g", l.layer->name.c_str(), j0 + j,
                              static_cast<double>(sr), static_cast<double>(l.rule.scalar)));
        if (sr != l.observed_scalar) scalar_varies = true;
        double w = static_cast<double>(sr) / N0;
        const std::int8_t* t = d.trits.data() + static_cast<std::size_t>(j) * d.d;
        double ps = 0.0, vs = 0.0;
        for (std::size_t k = 0; k < d.d; ++k) {
          std::size_t e = l.off + k;
          int tk = t[k];
          int y = sgn[e] * tk;
          if (tk < -1 || tk > 1) {
            if (structure_bad++ == 0)
              structure_msg = strf("%s step %u element %zu: trit %d", l.layer->name.c_str(), j0 + j, k, tk);
          } else if (tk != 0 && y != 1) {
            ++wrong[e];
            if (structure_bad++ == 0)
              structure_msg = strf("%s step %u element %zu: output sign %d for g = %.9g", l.layer->name.c_str(),
                                   j0 + j, k, tk, static_cast<double>(l.layer->g[k]));
          } else if (tk == 0 && pspec[e] >= 1.0) {
            if (structure_bad++ == 0)
              structure_msg = strf("%s step %u element %zu: |g| = %.9g >= s but not kept", l.layer->name.c_str(),
                                   j0 + j, k, static_cast<double>(std::fabs(l.layer->g[k])));
          }
          count[e] += y == 1;
          ps += y - phat[e];
          double diff = w * tk - sgn[e] * u[e];
          vs += diff * diff - evar[e];
        }
        pooled_S += ps;
        var_S += vs;
        if (job.independence) {
          for (int o = 0; o < 2; ++o) {
            double acc = 0.0;
            for (std::size_t b0 = static_cast<std::size_t>(o * kBlock / 2); b0 + kBlock <= d.d; b0 += kBlock) {
              double B = 0.0, sv = 0.0;
              for (int q = 0; q < kBlock; ++q) {
                std::size_t k = b0 + static_cast<std::size_t>(q), e = l.off + k;
                B += (t[k] != 0) - phat[e];  // the keep mask
                sv += phat[e] * (1.0 - phat[e]);
              }
              acc += B * B - sv;
            }
            blocks[o].S += acc;
          }
        }
      }
    }
    c.progress.add(static_cast<double>(cnt) * static_cast<double>(D), what);
  }
  // Determinism: the same key gives the same trits and scalar (first layer, steps 0..1).
  if (!job.fixed_samples) {
    auto& l = layers.front();
    std::uint32_t m = std::min<std::uint32_t>(2, n);
    Draws again = c.sampler.draw({l.layer->g, job.params, {seed, 0, l.tensor, 0}, m, l.request_scalar});
    if (again.trits != l.first_rows || again.scalars != l.first_scalars)
      structure_fail(l.layer->name + ": drawing steps 0..1 again with the same key gave different output");
  }
  if (!defect.empty()) structure_fail(defect);

  JobOut out;
  std::string fam = G.family;
  const double beta = c.opt.profile.beta;
  // structure (exact)
  {
    Row r;
    r.check = row_prefix(job, "structure");
    r.family = fam;
    r.kind = "exact";
    r.statistic = structure_bad ? strf("%llu violations", static_cast<unsigned long long>(structure_bad)) : "0 violations";
    r.threshold = "0";
    r.pvalue = "-";
    r.power = "any violation";
    r.pass = structure_bad == 0;
    r.detail = structure_bad ? structure_msg
                             : strf("%u steps x %zu elements: values in {-s,0,+s}, s = spec scalar, signs kept, "
                                    "|g| >= s always kept, g = 0 never kept%s", n, D,
                                    job.fixed_samples ? "" : ", same key same bytes");
    c.rows.push_back(r);
  }
  // unbiased, per coordinate: count_k ~ Binomial(n, p_k) exactly under H0; Clopper-Pearson at alpha/D.
  {
    Row r = stat_row(c, row_prefix(job, "unbiased"), fam);
    double a_coord = c.alpha / static_cast<double>(D);
    ClopperPearsonTable tab = clopper_pearson_table(n, a_coord);
    std::size_t bad = 0, worst = 0;
    double worst_z = -1.0;
    std::uint64_t wrong_total = 0;
    for (std::size_t e = 0; e < D; ++e) {
      wrong_total += wrong[e];
      double p = phat[e];
      std::uint32_t k = count[e];
      if (!(tab.lo[k] <= p && p <= tab.hi[k])) ++bad;
      double z = std::fabs(k - n * p) / std::sqrt(n * p * (1.0 - p) + 0.25);
      if (z > worst_z) worst_z = z, worst = e;
    }
    double pv = binomial_two_sided_pvalue(n, count[worst], phat[worst]);
    r.statistic = strf("worst: %u/%u kept, p = %.4g", count[worst], n, phat[worst]);
    r.threshold = strf("CP at alpha/%zu", D);
    r.pvalue = strf("min p = %.2g", pv);
    r.power = strf("|dp| >= %.3g", clopper_pearson_detectable(tab, beta));
    r.pass = bad == 0 && infeasible == 0 && !scalar_varies && wrong_total == 0;
    if (infeasible) r.detail = strf("%llu elements have |x_k| > s (cannot be unbiased); ", static_cast<unsigned long long>(infeasible));
    if (scalar_varies) r.detail += "scalar differs between steps; ";
    if (wrong_total) r.detail += strf("%llu outputs with the wrong sign; ", static_cast<unsigned long long>(wrong_total));
    if (bad) r.detail += strf("%zu of %zu coordinates outside their Clopper-Pearson interval at level %.2g", bad, D, a_coord);
    if (r.pass) r.detail = strf("E[g~_k] = x_k for each of %zu coordinates (x = clamp(g) under clipping); %u draws", D, n);
    c.rows.push_back(r);
  }
  // unbiased, pooled: S = sum (sign(x) t - p), |term| <= 1, Var = n sum p(1-p).
  double pooled_V = 0.0;
  for (std::size_t e = 0; e < D; ++e) pooled_V += phat[e] * (1.0 - phat[e]);
  pooled_V *= n;
  {
    c.rows.push_back(pooled_bias_row(
        c, row_prefix(job, "unbiased-pooled"), fam, pooled_S, pooled_V, static_cast<double>(n) * static_cast<double>(D),
        "Bernstein on sum over draws and coordinates of sign(x_k) t_k - p_k (terms in [-1,1], known variance)"));
    out.pooled_S = pooled_S;
    out.pooled_V = pooled_V;
  }
  // variance identity: sum over draws of (s t_k - x_k)^2 - E_k; |term| <= s^2; Var known exactly.
  {
    Row r = stat_row(c, row_prefix(job, "variance"), fam);
    double V = n * var_V, E = n * var_E;
    auto o = bernstein_decide(var_S, V, bvar, c.alpha, beta);
    if (E > 0.0) {
      r.statistic = strf("ratio %.5f", 1.0 + var_S / E);
      r.threshold = strf("1 +- %.3g", o.threshold / E);
      r.power = strf("rel. error >= %.3g", o.detectable / E);
    } else {
      r.statistic = strf("sum %.3g (expected 0)", var_S);
      r.threshold = strf("|.| <= %.3g", o.threshold);
      r.power = "any nonzero error";
    }
    r.pvalue = strf("p <= %.2g", o.pvalue);
    r.pass = o.pass;
    r.detail = strf("E||g~ - x||^2 = sum_l (s_l ||x_l||_1 - ||x_l||_2^2) = %.6g; observed mean %.6g", identity,
                    (var_S / n + var_E) * N0 * N0);
    mark_rejected(r);
    c.rows.push_back(r);
    out.var_expected = var_E * N0 * N0;
    out.var_observed = (var_S / n + var_E) * N0 * N0;
    out.var_identity = identity;
  }
  if (job.independence) {
    for (int o = 0; o < 2; ++o) {
      Row r = stat_row(c, row_prefix(job, "independence"), fam);
      auto b = bernstein_decide(blocks[o].S, blocks[o].V, kBlock * kBlock, c.alpha, beta);
      double E = blocks[o].E;
      r.statistic = strf("block var ratio %.5f", E > 0 ? 1.0 + blocks[o].S / E : 1.0);
      r.threshold = strf("1 +- %.3g", E > 0 ? b.threshold / E : 0.0);
      r.pvalue = strf("p <= %.2g", b.pvalue);
      r.power = strf("block var +- %.3g", E > 0 ? b.detectable / E : 0.0);
      r.pass = b.pass;
      r.detail = strf("keep masks, blocks of %d neighbours (offset %d): B = sum (b_k - p_k), E[B^2] = sum p(1-p) "
                      "when the masks are independent (correlation within a block moves it); Bernstein with exact fourth moments",
                      kBlock, o * kBlock / 2);
      mark_rejected(r);
      c.rows.push_back(r);
    }
  }
  out.ok = true;
  return out;
}

// ---- streams: independence across steps, workers, tensors ----------------------------------------
void run_streams(Ctx& c, const Gradient& G) {
  const Layer& L = G.layers.front();
  const std::size_t d = L.g.size();
  const std::uint32_t n = c.opt.profile.stream_steps;  // even
  const std::uint64_t seed = c.opt.seed;
  Params params;
  ScalarRule rule = own_rule(reference_codec(), L.g, params, 0);
  std::vector<double> p(d);
  std::vector<std::int8_t> sgn(d);
  double sv2 = 0.0, sv = 0.0;
  for (std::size_t k = 0; k < d; ++k) {
    float a = std::fabs(L.g[k]);
    p[k] = keep_probability(a, rule.scale);
    sgn[k] = static_cast<std::int8_t>(L.g[k] > 0 ? 1 : (L.g[k] < 0 ? -1 : 0));
    sv += p[k] * (1 - p[k]);
    sv2 += p[k] * (1 - p[k]) * p[k] * (1 - p[k]);
  }
  // Keep masks b_k = [t_k != 0], centred with the keep probabilities of the scalar the
  // implementation reports (set from its first draw), so that a wrong scalar does not read as a
  // correlation: under H0 the products of two independent draws have mean 0, variance v_k^2.
  bool centred = false;
  auto centre = [&](float observed) {
    centred = true;
    double sc = observed > 0.0f ? kTwo32 / static_cast<double>(observed) : 0.0;
    sv = sv2 = 0.0;
    for (std::size_t k = 0; k < d; ++k) {
      float a = std::fabs(L.g[k]);
      p[k] = observed > 0.0f ? (a > observed ? 1.0 : keep_probability(a, sc)) : 0.0;
      sv += p[k] * (1 - p[k]);
      sv2 += p[k] * (1 - p[k]) * p[k] * (1 - p[k]);
    }
  };
  auto prod = [&](std::span<const std::int8_t> a, std::span<const std::int8_t> b) {
    double s = 0.0;
    for (std::size_t k = 0; k < d; ++k) s += ((a[k] != 0) - p[k]) * ((b[k] != 0) - p[k]);
    return s;
  };
  double S[3] = {0, 0, 0};
  std::uint32_t chunk = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(c.sampler.max_request_elements() / d, 2, n));
  chunk -= chunk % 2;
  for (std::uint32_t j0 = 0; j0 < n; j0 += chunk) {
    std::uint32_t cnt = std::min(chunk, n - j0);
    Draws w0 = c.sampler.draw({L.g, params, {seed, 0, 0, j0}, cnt, std::nullopt});
    if (!centred) centre(w0.scalars[0]);
    // pairs of consecutive steps (2i, 2i+1): disjoint, so the pair products are independent
    for (std::uint32_t j = 0; j + 1 < cnt; j += 2) S[0] += prod(w0.row(j), w0.row(j + 1));
    // worker 1 and tensor 1 at steps j0 .. j0 + cnt/2, paired with worker 0 tensor 0 at the same steps
    std::uint32_t half = cnt / 2;
    Draws w1 = c.sampler.draw({L.g, params, {seed, 1, 0, j0}, half, std::nullopt});
    Draws t1 = c.sampler.draw({L.g, params, {seed, 0, 1, j0}, half, std::nullopt});
    for (std::uint32_t j = 0; j < half; ++j) {
      S[1] += prod(w0.row(j), w1.row(j));
      S[2] += prod(w0.row(j), t1.row(j));
    }
    c.progress.add(2.0 * cnt * d, "streams");
  }
  const char* names[3] = {"steps k, k+1", "workers 0, 1", "tensors 0, 1"};
  double pairs = n / 2;
  for (int i = 0; i < 3; ++i) {
    Row r = stat_row(c, "streams", G.family);
    double V = pairs * sv2;
    auto o = bernstein_decide(S[i], V, 1.0, c.alpha, c.opt.profile.beta);
    double E = pairs * sv;  // E[S] = rho * pairs * sum v under a common correlation rho
    r.statistic = strf("%s: corr %.4f", names[i], E > 0 ? S[i] / E : 0.0);
    r.threshold = strf("|.| <= %.3g", E > 0 ? o.threshold / E : 0.0);
    r.pvalue = strf("p <= %.2g", o.pvalue);
    r.power = strf("corr >= %.3g", E > 0 ? o.detectable / E : 0.0);
    r.pass = o.pass;
    r.detail = strf("%s: sum over %.0f pairs of draws and %zu coordinates of (b_k - p_k)(b'_k - p_k), b the keep "
                    "masks (independent terms in [-1,1]); catches a reused stream", names[i], pairs, d);
    mark_rejected(r);
    c.rows.push_back(r);
  }
}

// ---- aggregate: N workers sharing one scalar --------------------------------------------------------
void run_aggregate(Ctx& c, std::size_t d) {
  const std::uint32_t N = c.opt.profile.agg_workers, n = c.opt.profile.agg_steps;
  const std::uint64_t seed = c.opt.seed;
  const Codec& ref = reference_codec();
  Params params;
  std::vector<std::vector<float>> g(N);
  std::vector<float> own(N);
  for (std::uint32_t w = 0; w < N; ++w) {
    g[w] = make_gradient("gaussian", d, seed + 1000 + w).layers[0].g;
    float scale = 0.5f + static_cast<float>(w % 4) * 0.5f;  // workers differ: 0.5, 1, 1.5, 2
    for (auto& x : g[w]) x *= scale;
    own[w] = tensor_scalar(ref, g[w], params, 0);
  }
  float s = shared_scalar(own);
  ScalarRule rule = make_rule(s, s);
  std::vector<double> p(static_cast<std::size_t>(N) * d);
  std::vector<std::int8_t> sgn(p.size());
  double Vpool = 0.0, Vvar = 0.0, Evar = 0.0, identity = 0.0;
  for (std::uint32_t w = 0; w < N; ++w) {
    double l1 = 0, l2 = 0;
    for (std::size_t k = 0; k < d; ++k) {
      float a = std::fabs(g[w][k]);
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
  double Spool = 0.0, Svar = 0.0;
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
      payload_msg = strf("tg::aggregate of %u encode_with_scalar payloads equals the sum of the trits", N);
      for (std::size_t k = 0; k < d && payload_ok; ++k) {
        int sum = 0;
        for (std::uint32_t w = 0; w < N; ++w) sum += dw[w].row(0)[k];
        if (agg.sums[k] != sum || agg.scalar != s) {
          payload_ok = false;
          payload_msg = strf("element %zu: aggregate sum %d, trits sum %d", k, agg.sums[k], sum);
        }
      }
    }
    c.progress.add(static_cast<double>(cnt) * d * N, "aggregate");
  }
  Svar -= static_cast<double>(n) * Evar;
  Row st;
  st.check = "aggregate.structure";
  st.family = "gaussian x" + std::to_string(N);
  st.kind = "exact";
  st.statistic = strf("%llu violations", static_cast<unsigned long long>(bad));
  st.threshold = "0";
  st.pvalue = "-";
  st.power = "any violation";
  st.pass = bad == 0 && payload_ok;
  st.detail = bad ? msg : payload_msg;
  c.rows.push_back(st);
  c.rows.push_back(pooled_bias_row(c, "aggregate.unbiased-pooled", st.family, Spool, Vpool,
                                    static_cast<double>(n) * d * N,
                                    "E[mean of the workers' g~] = mean of the g_w with the shared scalar s = max_w s_w"));
  {
    Row r = stat_row(c, "aggregate.variance", st.family);
    auto o = bernstein_decide(Svar, Vvar, static_cast<double>(N) * N, c.alpha, c.opt.profile.beta);
    double E = static_cast<double>(n) * Evar;
    r.statistic = strf("ratio %.5f", 1.0 + Svar / E);
    r.threshold = strf("1 +- %.3g", o.threshold / E);
    r.pvalue = strf("p <= %.2g", o.pvalue);
    r.power = strf("rel. error >= %.3g", o.detectable / E);
    r.pass = o.pass;
    r.detail = strf("E||mean g~ - mean g||^2 = (1/N^2) sum_w (s ||g_w||_1 - ||g_w||_2^2) = %.6g", identity);
    mark_rejected(r);
    c.rows.push_back(r);
  }
}

// ---- cross-implementation byte equality (compare_samplers, below, does the work) ------------------
void run_cross(Ctx& c) {
  std::vector<std::pair<std::string, std::unique_ptr<Sampler>>> others;
  ExecOptions eo;
  if (c.sampler.name() == "reference") {
    others.emplace_back("optimized", make_sampler("optimized", eo));
    others.emplace_back("optimized-portable-1thread", make_codec_sampler(make_optimized_codec(1, true), "portable"));
    std::string why;
    if (cuda_usable(&why)) others.emplace_back("cuda", make_sampler("cuda", eo));
  } else {
    others.emplace_back("reference", make_sampler("reference", eo));
  }
  CompareOptions co;
  co.d = c.opt.profile.cross_d;
  co.seed = c.opt.seed;
  co.modes = {ClipMode::none, ClipMode::clip};
  co.shared_scalar = false;
  // External programs cost a process per request: layers 0, 1 and the last one of each family.
  co.all_layers = c.sampler.codec() != nullptr;
  co.stop_at_first = true;
  for (auto& [oname, other] : others) {
    CompareResult cr = compare_samplers(c.sampler, *other, co);
    c.progress.add(0.0, "cross");
    const CompareCase* diff = cr.first_difference();
    Row r;
    r.check = "cross";
    r.family = "vs " + oname;
    r.kind = "exact";
    r.threshold = "identical";
    r.pvalue = "-";
    r.power = "any differing bit";
    r.pass = diff == nullptr;
    r.statistic = diff ? "differs" : strf("%llu trits equal", static_cast<unsigned long long>(cr.trits()));
    r.detail = diff ? "vs " + oname + ": " + diff->family + "/" + diff->layer + " " + diff->mode + ": " + diff->difference
                    : strf("vs %s: every family, clip none and clip, 2 steps: trits and scalars identical%s%s",
                           oname.c_str(), co.all_layers ? "" : " (layers 0, 1 and last of multi-layer families)",
                           cr.payloads() ? strf("; %llu payloads (2bit, base3) byte-identical",
                                                static_cast<unsigned long long>(cr.payloads())).c_str()
                                         : "");
    c.rows.push_back(r);
  }
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
  double pred = 2.0 * normal_upper_tail(params.c);
  Row r;
  r.check = "clipping.bias";
  r.family = G.family;
  r.kind = "info";
  r.statistic = strf("|bias|/|g| %.4f, angle %.3f deg", ng > 0 ? std::sqrt(nb / ng) : 0.0,
                     nx > 0 && ng > 0 ? std::acos(std::min(1.0, dot / std::sqrt(nx * ng))) * 180.0 / M_PI : 0.0);
  r.threshold = "-";
  r.pvalue = "-";
  r.power = "-";
  r.detail = strf("fraction clipped %.5f; Gaussian prediction 2(1 - Phi(%g)) = %.5f%s", n ? double(clipped) / n : 0.0,
                  params.c, pred, G.family == "gaussian" ? "" : " (this family is not Gaussian)");
  r.statistic += strf(", clipped %.4f%% (Gaussian %.4f%%)", n ? 100.0 * clipped / n : 0.0, 100.0 * pred);
  c.rows.push_back(r);
}

// Serves draws the caller made: request (tensor i, step j0, cnt rows) -> rows j0 .. j0 + cnt - 1.
class GivenSampler : public Sampler {
 public:
  GivenSampler(std::span<const TensorSamples> tensors, std::uint64_t elements)
      : tensors_(tensors), elements_(elements) {}
  std::string name() const override { return "samples"; }
  std::uint64_t max_request_elements() const override { return elements_; }
  Draws draw(const DrawRequest& r) override {
    const TensorSamples& t = tensors_[r.key.tensor];
    const std::size_t d = t.g.size();
    Draws out;
    out.d = d;
    out.steps = r.steps;
    out.scalars.assign(t.scalars.begin() + r.key.step, t.scalars.begin() + r.key.step + r.steps);
    out.trits.assign(t.trits.begin() + static_cast<std::ptrdiff_t>(r.key.step * d),
                     t.trits.begin() + static_cast<std::ptrdiff_t>((r.key.step + r.steps) * d));
    out.defect = t.defect;
    return out;
  }

 private:
  std::span<const TensorSamples> tensors_;
  std::uint64_t elements_;
};

}  // namespace

Result check_samples(std::span<const TensorSamples> tensors, const SampleCheckOptions& options) {
  auto fail = [](const std::string& m) { throw Error(ErrorCode::invalid_argument, m); };
  validate(options.params);
  if (!(options.alpha_total > 0 && options.alpha_total < 1) || !(options.beta > 0 && options.beta < 1))
    fail("alpha and beta must be in (0, 1)");
  if (tensors.empty()) fail("no samples: give at least one tensor");
  const std::size_t steps = tensors[0].scalars.size();
  if (steps < 2) fail(strf("%zu draws: the checks need at least 2 (one row per draw)", steps));
  if (steps > std::numeric_limits<std::uint32_t>::max()) fail("too many draws");
  auto t0 = std::chrono::steady_clock::now();
  Gradient G;
  G.family = options.family;
  JobSpec job;
  std::uint64_t elements = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorSamples& t = tensors[i];
    const std::string name = tensors.size() == 1 ? "tensor" : strf("tensor %zu", i);
    if (t.g.empty()) fail(name + ": the gradient is empty");
    if (t.scalars.size() != steps)
      fail(strf("%s: %zu scalars, but tensor 0 has %zu draws", name.c_str(), t.scalars.size(), steps));
    if (t.trits.size() != steps * t.g.size())
      fail(strf("%s: %zu trits, expected %zu draws x %zu elements", name.c_str(), t.trits.size(), steps, t.g.size()));
    for (std::size_t k = 0; k < t.g.size(); ++k)
      if (!std::isfinite(t.g[k])) throw NonFiniteError(static_cast<std::uint32_t>(i), k, t.g[k]);
    for (std::size_t j = 0; j < steps; ++j)
      if (!std::isfinite(t.scalars[j]) || t.scalars[j] < 0.0f)
        fail(strf("%s: scalar of draw %zu is %g, not a finite value >= 0", name.c_str(), j,
                  static_cast<double>(t.scalars[j])));
    if (t.scalar && !(std::isfinite(*t.scalar) && *t.scalar >= 0.0f))
      fail(name + ": the shared scalar must be finite and >= 0");
    G.layers.push_back({name, std::vector<float>(t.g.begin(), t.g.end())});
    job.given_scalars.push_back(t.scalar);
    elements += steps * t.g.size();
  }
  job.grad = std::move(G);
  job.params = options.params;
  job.independence = options.independence;
  job.steps = static_cast<std::uint32_t>(steps);
  job.fixed_samples = true;

  Result res;
  res.impl = "samples";
  res.options.profile.name = "samples";
  res.options.profile.d = job.grad.size();
  res.options.profile.steps = job.steps;
  res.options.profile.alpha_total = options.alpha_total;
  res.options.profile.beta = options.beta;
  res.options.seed = 0;
  res.decisions = 3 + (job.independence ? 2 : 0);
  res.alpha_each = options.alpha_total / static_cast<double>(res.decisions);
  GivenSampler sampler(tensors, elements);
  Progress progress(false, 0.0);
  Ctx c{sampler, res.options, res.alpha_each, res.rows, progress};
  run_job(c, job);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

Result run_battery(Sampler& sampler, const Options& options) {
  const Profile& P = options.profile;
  if (P.d < 16 || P.steps < 2 || P.steps % 2 || P.stream_steps < 2 || P.stream_steps % 2 || P.agg_workers < 1 ||
      P.agg_steps < 1)
    throw Error(ErrorCode::invalid_argument, "profile sizes out of range");
  if (!(P.alpha_total > 0 && P.alpha_total < 1) || !(P.beta > 0 && P.beta < 1))
    throw Error(ErrorCode::invalid_argument, "alpha and beta must be in (0, 1)");
  for (const auto& s : options.skip)
    if (std::find(check_names().begin(), check_names().end(), s) == check_names().end())
      throw Error(ErrorCode::invalid_argument, "unknown check '" + s + "' in --skip");
  auto t0 = std::chrono::steady_clock::now();
  Result res;
  res.impl = sampler.name();
  res.options = options;
  auto on = [&](const char* c) { return options.skip.count(c) == 0; };
  // Plan: the jobs and the number of statistical decisions each makes.
  std::vector<JobSpec> jobs;
  const bool main_on = on("structure") || on("unbiased") || on("variance") || on("independence");
  if (main_on)
    for (const auto& f : family_names()) {
      JobSpec j;
      j.grad = make_gradient(f, P.d, options.seed);
      j.steps = P.steps;
      j.independence = on("independence") && (f == "gaussian" || f == "laplace" || f == "lenet");
      jobs.push_back(std::move(j));
    }
  std::size_t main_jobs = jobs.size();
  if (on("clipping"))
    for (const char* f : {"gaussian", "student_t", "lenet"}) {
      JobSpec j;
      j.check = "clipping";
      j.grad = make_gradient(f, P.d, options.seed + 1);
      j.params.clip = ClipMode::clip;
      j.steps = P.steps;
      jobs.push_back(std::move(j));
    }
  std::size_t clip_end = jobs.size();
  if (on("clipping")) {
    JobSpec j;
    j.check = "clipping";
    j.grad = make_gradient("laplace", P.d, options.seed + 2);
    j.params.clip = ClipMode::saturate;
    j.steps = P.steps;
    jobs.push_back(std::move(j));
  }
  if (on("layerwise"))
    for (const char* f : {"multilayer", "lenet"}) {
      JobSpec j;
      j.check = "layerwise";
      j.grad = make_gradient(f, P.d, options.seed);  // same gradient as the main (per-tensor) job
      j.global_scalar = true;
      j.steps = P.steps;
      jobs.push_back(std::move(j));
    }
  std::size_t decisions = 0;
  for (const auto& j : jobs) decisions += 3 + (j.independence ? 2 : 0);
  if (main_jobs) decisions += 1;  // the all-family pooled test
  if (on("streams")) decisions += 3;
  if (on("aggregate")) decisions += 2;
  res.decisions = decisions;
  res.alpha_each = decisions ? P.alpha_total / static_cast<double>(decisions) : P.alpha_total;
  double total_units = 0.0;
  for (const auto& j : jobs) total_units += static_cast<double>(j.steps) * static_cast<double>(j.grad.size());
  if (on("streams")) total_units += 2.0 * P.stream_steps * P.d;
  if (on("aggregate")) total_units += static_cast<double>(P.agg_steps) * P.d * P.agg_workers;
  Progress progress(options.progress, total_units, options.poll);
  Ctx c{sampler, options, res.alpha_each, res.rows, progress};

  double pool_S = 0.0, pool_V = 0.0;
  std::vector<JobOut> outs;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    outs.push_back(run_job(c, jobs[i]));
    if (i < main_jobs) pool_S += outs.back().pooled_S, pool_V += outs.back().pooled_V;
    if (i >= main_jobs && i < clip_end) clipping_info(c, jobs[i].grad, jobs[i].params);
  }
  if (main_jobs) {
    double N = 0;
    for (std::size_t i = 0; i < main_jobs; ++i) N += static_cast<double>(jobs[i].steps) * jobs[i].grad.size();
    res.rows.push_back(pooled_bias_row(
        c, "unbiased-pooled", "all families", pool_S, pool_V, N,
        "the pooled statistic summed over every family (independent draws): small biases in every coordinate"));
  }
  // layer-wise vs global scalar: both identities are tested above; the ratio is reported here.
  for (std::size_t i = clip_end; i < jobs.size(); ++i) {
    if (!jobs[i].global_scalar) continue;
    for (std::size_t m = 0; m < main_jobs; ++m) {
      if (jobs[m].grad.family != jobs[i].grad.family) continue;
      Row r;
      r.check = "layerwise.ratio";
      r.family = jobs[i].grad.family;
      r.kind = "info";
      r.statistic = strf("layer-wise/global %.4g (observed %.4g)", outs[m].var_identity / outs[i].var_identity,
                         outs[m].var_observed / outs[i].var_observed);
      r.threshold = r.pvalue = r.power = kDash;
      r.detail = "variance with per-tensor scalars over variance with one global scalar (identities; each tested above)";
      res.rows.push_back(r);
    }
  }
  if (on("streams")) run_streams(c, make_gradient("gaussian", P.d, options.seed + 3));
  if (on("aggregate")) run_aggregate(c, P.d);
  if (on("cross")) run_cross(c);
  progress.finish();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

// ---- compare_samplers ------------------------------------------------------------------------------

bool CompareResult::identical() const { return first_difference() == nullptr; }
std::uint64_t CompareResult::trits() const {
  std::uint64_t t = 0;
  for (const auto& k : cases) t += k.trits;
  return t;
}
std::uint64_t CompareResult::payloads() const {
  std::uint64_t t = 0;
  for (const auto& k : cases) t += k.payloads;
  return t;
}
const CompareCase* CompareResult::first_difference() const {
  for (const auto& k : cases)
    if (!k.difference.empty()) return &k;
  return nullptr;
}

CompareResult compare_samplers(Sampler& a, Sampler& b, const CompareOptions& o) {
  if (o.d == 0 || o.steps == 0) throw Error(ErrorCode::invalid_argument, "compare: d and steps must be positive");
  if (o.modes.empty()) throw Error(ErrorCode::invalid_argument, "compare: no clipping mode to compare");
  auto t0 = std::chrono::steady_clock::now();
  CompareResult res;
  res.a = a.name();
  res.b = b.name();
  res.options = o;
  Progress progress(o.progress, static_cast<double>(family_names().size()));
  const Codec* ca = a.codec();
  const Codec* cb = b.codec();
  for (const auto& fam : family_names()) {
    Gradient G = make_gradient(fam, o.d, o.seed + 7);
    for (std::size_t li = 0; li < G.layers.size(); ++li) {
      if (!o.all_layers && li > 1 && li + 1 < G.layers.size()) continue;
      const auto& g = G.layers[li].g;
      const StreamKey key{o.seed ^ 0x9e3779b97f4a7c15ull, 3, static_cast<std::uint32_t>(li + 5), 11};
      std::vector<std::pair<ClipMode, bool>> runs;
      for (ClipMode m : o.modes) runs.emplace_back(m, false);
      if (o.shared_scalar) runs.emplace_back(o.modes.front(), true);
      for (auto [mode, shared] : runs) {
        Params params;
        params.clip = mode;
        std::optional<float> scalar;
        if (shared) scalar = 2.0f * tensor_scalar(reference_codec(), g, params, key.tensor);
        CompareCase k;
        k.family = fam;
        k.layer = G.layers[li].name;
        k.mode = std::string(to_string(mode)) + (shared ? "+shared" : "");
        Draws da = a.draw({g, params, key, o.steps, scalar});
        Draws db = b.draw({g, params, key, o.steps, scalar});
        k.trits = da.trits.size();
        if (da.scalars != db.scalars) {
          std::size_t j = 0;
          while (j + 1 < da.scalars.size() && j + 1 < db.scalars.size() && da.scalars[j] == db.scalars[j]) ++j;
          k.difference = strf("step %zu: scalar %.9g vs %.9g", key.step + j,
                              da.scalars.empty() ? 0.0 : static_cast<double>(da.scalars[j]),
                              db.scalars.empty() ? 0.0 : static_cast<double>(db.scalars[j]));
        } else if (da.trits != db.trits) {
          std::size_t e = 0;
          while (da.trits[e] == db.trits[e]) ++e;
          k.difference = strf("step %zu element %zu (g = %.9g): trit %d vs %d", key.step + e / g.size(), e % g.size(),
                              static_cast<double>(g[e % g.size()]), da.trits[e], db.trits[e]);
        } else if (!da.defect.empty() || !db.defect.empty()) {
          k.difference = "output not of the form {-s, 0, +s}: " + (da.defect.empty() ? db.defect : da.defect);
        }
        if (k.difference.empty() && ca && cb) {
          for (Packing pk : {Packing::two_bit, Packing::base3}) {
            Params pp = params;
            pp.packing = pk;
            auto pa = scalar ? encode_with_scalar(*ca, g, pp, key, *scalar) : encode(*ca, g, pp, key);
            auto pb = scalar ? encode_with_scalar(*cb, g, pp, key, *scalar) : encode(*cb, g, pp, key);
            if (pa != pb) {
              std::size_t j = 0;
              while (j < pa.size() && j < pb.size() && pa[j] == pb[j]) ++j;
              k.difference = strf("%s payload: byte %zu differs (%zu vs %zu bytes)", to_string(pk), j, pa.size(),
                                  pb.size());
              break;
            }
            ++k.payloads;
          }
        }
        bool differs = !k.difference.empty();
        res.cases.push_back(std::move(k));
        if (differs && o.stop_at_first) {
          res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          return res;
        }
      }
    }
    progress.add(1.0, "compare " + fam);
  }
  progress.finish();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::string format_compare(const CompareResult& r) {
  std::string out = "terngrad compare: " + r.a + " vs " + r.b + strf(" (seed %llu, %zu elements per family, %u steps per key)\n\n",
                                                                   static_cast<unsigned long long>(r.options.seed),
                                                                   r.options.d, r.options.steps);
  std::size_t wf = 6, wl = 5, wm = 4;
  for (const auto& k : r.cases) wf = std::max(wf, k.family.size()), wl = std::max(wl, k.layer.size()), wm = std::max(wm, k.mode.size());
  out += strf("%-*s  %-*s  %-*s  %10s  %8s  %s\n", static_cast<int>(wf), "family", static_cast<int>(wl), "layer",
              static_cast<int>(wm), "clip", "trits", "payloads", "verdict");
  std::size_t differ = 0;
  for (const auto& k : r.cases) {
    differ += !k.difference.empty();
    out += strf("%-*s  %-*s  %-*s  %10llu  %8u  %s\n", static_cast<int>(wf), k.family.c_str(), static_cast<int>(wl),
                k.layer.c_str(), static_cast<int>(wm), k.mode.c_str(), static_cast<unsigned long long>(k.trits),
                k.payloads, k.difference.empty() ? "identical" : ("DIFFERS: " + k.difference).c_str());
  }
  if (differ == 0)
    out += strf("\nverdict: IDENTICAL (%zu cases, %llu trits and scalars, %llu payloads byte for byte) in %.1f s\n",
                r.cases.size(), static_cast<unsigned long long>(r.trits()), static_cast<unsigned long long>(r.payloads()),
                r.seconds);
  else
    out += strf("\nverdict: DIFFERENT (%zu of %zu cases differ) in %.1f s\n", differ, r.cases.size(), r.seconds);
  return out;
}

}  // namespace tg::verify
