// terngrad-bench: the battery's runner (tg/verify/battery.hpp): profiles, the plan of a run (its
// jobs, their stream keys from tg/verify/keys.hpp, and the statistical decisions that share
// alpha_total), and check_samples on draws made elsewhere. The checks are in verify/src/checks/.
#include "tg/verify/battery.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <tuple>

#include "checks/common.hpp"
#include "tg/verify/keys.hpp"

namespace tg::verify {

using namespace checks;

Profile profile_named(const std::string& name) {
  Profile p;
  p.name = name;
  if (name == "quick") {
    p.d = 1 << 13, p.steps = 128, p.stream_steps = 256, p.agg_workers = 4, p.agg_steps = 128, p.cross_d = 4099;
  } else if (name == "ci") {
    p.d = 1 << 16, p.steps = 1024, p.stream_steps = 1024, p.agg_workers = 4, p.agg_steps = 1024, p.cross_d = 65537;
    p.large_d = (std::size_t{1} << 22) + 3, p.probe_large_d = kLargeProbeElements;
  } else if (name == "full") {
    p.d = 1 << 18, p.steps = 4096, p.stream_steps = 4096, p.agg_workers = 8, p.agg_steps = 4096, p.cross_d = 1 << 20;
    p.large_d = (std::size_t{1} << 22) + 3, p.probe_large_d = kLargeProbeElements;
    p.alpha_total = 1e-9;
  } else {
    throw Error(ErrorCode::invalid_argument, "unknown profile '" + name + "' (expected quick, ci or full)");
  }
  return p;
}

const std::vector<std::string>& check_names() {
  static const std::vector<std::string> names = {"structure", "unbiased",  "variance",  "independence",
                                                 "streams",   "collision", "clipping",  "layerwise",
                                                 "aggregate", "cross"};
  return names;
}

const std::vector<std::string>& capability_names() {
  static const std::vector<std::string> names = {"none", "clip", "saturate", "shared-scalar", "spec-stream"};
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
    if (!r.pass && std::find(out.begin(), out.end(), r.check) == out.end()) out.push_back(r.check);
  return out;
}

namespace {

// The rows a run printed must be exactly the decisions it planned (and split alpha over).
void check_plan(const std::vector<std::string>& plan, const std::vector<Row>& rows) {
  std::vector<std::string> made;
  for (const auto& r : rows)
    if (r.kind == "stat") made.push_back(r.id);
  if (made == plan) return;
  std::size_t i = 0;
  while (i < made.size() && i < plan.size() && made[i] == plan[i]) ++i;
  throw std::logic_error("battery: statistical row " + std::to_string(i) + " is '" +
                         (i < made.size() ? made[i] : "(none)") + "' but the plan says '" +
                         (i < plan.size() ? plan[i] : "(none)") + "'");
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
  job.p_bins = true;  // the bins of p that this gradient and number of draws give the power to test (bin_planned)
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
  std::vector<std::string> plan = plan_job(job);
  plan.push_back(sure_keeps_id());
  plan.push_back(near_drops_id());
  res.decisions = plan.size();
  res.alpha_each = res.decisions ? options.alpha_total / static_cast<double>(res.decisions) : options.alpha_total;
  GivenSampler sampler(tensors, elements);
  Progress progress(false, 0.0);
  Ctx c{sampler, res.options, res.alpha_each, res.rows, progress};
  const JobOut out = run_job(c, job);
  res.rows.push_back(sure_keeps_row(c, {out}));
  res.rows.push_back(near_drops_row(c, {out}));
  check_plan(plan, res.rows);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::uint32_t large_steps(const Profile& p) {
  // steps / 32 draws of 2^20 + 3 elements, as many element-draws on a larger tensor (at least 8 draws)
  const double scale = static_cast<double>(kLargeElements) / static_cast<double>(std::max<std::size_t>(p.large_d, 1));
  return std::max<std::uint32_t>(8, static_cast<std::uint32_t>(p.steps / 32 * std::min(1.0, scale)));
}

Result run_battery(Sampler& sampler, const Options& options) {
  const Profile& P = options.profile;
  if (P.d < 16 || P.large_d < 16 || P.steps < 2 || P.steps % 2 || P.stream_steps < 2 || P.stream_steps % 2 || P.agg_workers < 1 ||
      P.agg_steps < 1)
    throw Error(ErrorCode::invalid_argument, "profile sizes out of range");
  if (!(P.alpha_total > 0 && P.alpha_total < 1) || !(P.beta > 0 && P.beta < 1))
    throw Error(ErrorCode::invalid_argument, "alpha and beta must be in (0, 1)");
  for (const auto& s : options.skip)
    if (std::find(check_names().begin(), check_names().end(), s) == check_names().end())
      throw Error(ErrorCode::invalid_argument, "unknown check '" + s + "' in --skip");
  for (const auto& s : options.supports)
    if (std::find(capability_names().begin(), capability_names().end(), s) == capability_names().end())
      throw Error(ErrorCode::invalid_argument, "unknown capability '" + s + "' in --supports (known: none, clip, "
                                               "saturate, shared-scalar, spec-stream)");
  if (!supports(options, "none") && !supports(options, "clip") && !supports(options, "saturate"))
    throw Error(ErrorCode::invalid_argument, "--supports names no clipping mode (none, clip or saturate): the battery "
                                             "cannot ask this implementation for anything");
  // Why a check does not run: --skip, or a capability the implementation lacks.
  auto why_not = [&](const std::string& check) -> std::string {
    if (options.skip.count(check)) return "left out by --skip " + check;
    if ((check == "layerwise" || check == "aggregate") && !supports(options, "shared-scalar"))
      return "the implementation does not take a shared scalar (--supports without shared-scalar)";
    if (check == "cross" && !options.reproducible)
      return "the implementation draws fresh randomness on every call (--unseeded): bytes cannot match";
    if (check == "cross" && !supports(options, "spec-stream"))
      return "the implementation has its own random stream (--supports without spec-stream): bytes cannot match";
    if (check == "clipping" && !supports(options, "clip") && !supports(options, "saturate"))
      return "the implementation does not clip (--supports without clip or saturate)";
    return "";
  };
  if (std::all_of(check_names().begin(), check_names().end(), [&](const std::string& c) { return !why_not(c).empty(); }))
    throw Error(ErrorCode::invalid_argument, "every check is left out (--skip, --supports): nothing would be verified");
  auto t0 = std::chrono::steady_clock::now();
  Result res;
  res.impl = sampler.name();
  res.options = options;
  auto on = [&](const char* c) { return why_not(c).empty(); };
  const Params base = base_params(options);
  auto gradient = [&](const std::string& family, GradientVariant v) {
    return make_gradient(family, P.d, derive_seed(options.seed, KeyPurpose::gradient, static_cast<std::uint32_t>(v)));
  };
  auto among = [](const std::string& f, std::initializer_list<const char*> set) {
    return std::any_of(set.begin(), set.end(), [&](const char* s) { return f == s; });
  };
  // Plan: the jobs (each with its own stream seed, so their statistics are independent) and the
  // statistical decisions each makes.
  std::vector<JobSpec> jobs;
  const bool main_on = on("structure") || on("unbiased") || on("variance") || on("independence");
  if (main_on)
    for (const auto& f : family_names()) {
      JobSpec j;
      j.grad = gradient(f, GradientVariant::plain);
      j.params = base;  // clipping off, or the implementation's only mode
      j.steps = P.steps;
      j.independence = on("independence") && among(f, {"gaussian", "laplace", "lenet"});
      j.p_bins = on("unbiased") && f == "pladder";  // its bins hold fixed shares of the elements (families.hpp)
      jobs.push_back(std::move(j));
    }
  const std::size_t main_jobs = jobs.size();
  if (on("clipping") && supports(options, "clip")) {
    for (const char* f : {"gaussian", "student_t", "lenet", "tiny", "huge"}) {
      JobSpec j;
      j.check = "clipping";
      j.grad = gradient(f, GradientVariant::clip);
      j.params.clip = ClipMode::clip;
      j.steps = P.steps;
      jobs.push_back(std::move(j));
    }
  }
  if (on("clipping") && supports(options, "saturate")) {
    JobSpec j;
    j.check = "clipping";
    j.grad = gradient("laplace", GradientVariant::saturate);
    j.params.clip = ClipMode::saturate;
    j.steps = P.steps;
    jobs.push_back(std::move(j));
  }
  const std::size_t clip_end = jobs.size();
  // layerwise: one global scalar over the layers of multilayer and lenet, the main jobs' gradients
  const char* const layerwise_families[2] = {"multilayer", "lenet"};
  auto add_layerwise_job = [&](const std::string& check, const char* f, const Params& params) {
    JobSpec j;
    j.check = check;
    j.grad = gradient(f, GradientVariant::plain);
    j.params = params;
    j.global_scalar = true;
    j.steps = P.steps;
    jobs.push_back(std::move(j));
  };
  if (on("layerwise"))
    for (const char* f : layerwise_families) add_layerwise_job("layerwise", f, base);
  const std::size_t layerwise_end = jobs.size();
  // A shared scalar together with clipping: each worker (tensor) clamps at its own bound below the shared
  // scalar. Layerwise runs once more in each clipping mode the implementation has besides its base mode
  // (rows layerwise.clip.*, layerwise.saturate.*), so a codec that handles a given scalar in one mode only is
  // asked in the other too; aggregate likewise (aggregate.clip.*, aggregate.saturate.*).
  const std::vector<Params> shared_modes = shared_clip_modes(options);
  if (on("layerwise"))
    for (const Params& p : shared_modes)
      for (const char* f : layerwise_families) add_layerwise_job(std::string("layerwise.") + to_string(p.clip), f, p);
  // large: one tensor of P.large_d (2^20 + 3 at quick, 2^22 + 3 at ci and full) in pladder's layout, with few
  // draws, in the base mode. Bugs that begin above a size (a counter that wraps, per-thread chunks that restart
  // the stream, a scalar per bucket, a second code path with shorter uniforms) stay out of every family (2^13 to
  // 2^18 elements); pladder's layout gives it the bins of p and the near drops, where short uniforms show.
  // Last in the plan, so that the other jobs keep their stream seeds; pooled with the families.
  std::optional<std::size_t> large_job;
  if (main_on) {
    JobSpec j;
    j.grad = large_gradient(P.large_d, derive_seed(options.seed, KeyPurpose::gradient,
                                                   static_cast<std::uint32_t>(GradientVariant::large)));
    j.params = base;
    j.p_bins = on("unbiased");
    j.steps = large_steps(P);
    large_job = jobs.size();
    jobs.push_back(std::move(j));
  }
  // --skip structure / unbiased / variance leaves those rows out of every job, the clipping and layerwise
  // ones (clipping.unbiased, layerwise.structure, ...) included.
  for (auto& j : jobs) {
    j.structure = on("structure");
    j.unbiased = on("unbiased");
    j.variance = on("variance");
  }
  for (std::size_t i = 0; i < jobs.size(); ++i)
    jobs[i].stream_seed = derive_seed(options.seed, KeyPurpose::job, static_cast<std::uint32_t>(i));
  std::vector<std::string> plan;
  for (const auto& j : jobs) {
    auto ids = plan_job(j);
    plan.insert(plan.end(), ids.begin(), ids.end());
  }
  if (main_jobs && on("unbiased"))
    for (const char* row : {"unbiased-pooled", "unbiased-drift"}) plan.push_back(row_id(row, "all families"));
  if (!jobs.empty() && on("structure"))
    for (const std::string& id : {sure_keeps_id(), near_drops_id()}) plan.push_back(id);
  const Gradient streams_grad = gradient("gaussian", GradientVariant::streams);
  if (on("streams"))
    for (auto& id : plan_streams(streams_grad.family)) plan.push_back(id);
  if (on("collision"))
    for (auto& id : plan_collision()) plan.push_back(id);
  if (on("aggregate"))
    for (auto& id : plan_aggregate(options, base)) plan.push_back(id);
  if (on("aggregate"))
    for (const Params& p : shared_modes)
      for (auto& id : plan_aggregate(options, p)) plan.push_back(id);
  res.decisions = plan.size();
  res.alpha_each = plan.empty() ? P.alpha_total : P.alpha_total / static_cast<double>(plan.size());
  double total_units = 0.0;
  for (const auto& j : jobs) total_units += static_cast<double>(j.steps) * static_cast<double>(j.grad.size());
  if (on("streams")) total_units += 3.0 * P.stream_steps * P.d;
  if (on("structure")) {
    const double modes_n = supports(options, "none") + supports(options, "clip") + supports(options, "saturate");
    total_units += 9.0 * P.d + static_cast<double>(checks::tails_elements()) * modes_n +
                   static_cast<double>(P.large_d) * (supports(options, "clip") + supports(options, "saturate"));
    if (supports(options, "spec-stream") && options.reproducible)
      total_units += static_cast<double>(checks::extreme_elements()) * modes_n;
  }
  if (on("collision"))
    total_units += static_cast<double>(collision_streams()) * P.d * static_cast<double>(collision_passes(options)) + 4.0 * static_cast<double>(P.large_d) + (P.probe_large_d > P.large_d ? static_cast<double>(P.probe_large_d) : 0.0) + static_cast<double>(P.steps) * static_cast<double>(checks::small_probe_elements()) +
                   (static_cast<double>(long_probe_steps(P, P.d)) + 2.0 * static_cast<double>(id_ladder(id_ladder_base(P, P.d)).size())) *
                       static_cast<double>(std::min<std::size_t>(P.d, kLongProbeElements));
  if (on("aggregate")) total_units += (1.0 + static_cast<double>(shared_modes.size())) * P.agg_steps * P.d * P.agg_workers;
  Progress progress(options.progress, total_units, options.poll);
  Ctx c{sampler, options, res.alpha_each, res.rows, progress};

  double pool_S = 0.0, pool_D = 0.0, pool_V = 0.0, pool_N = 0.0;
  std::vector<JobOut> outs;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    outs.push_back(run_job(c, jobs[i]));
    if (i < main_jobs || i == large_job) {
      pool_S += outs.back().pooled_S, pool_D += outs.back().drift_S, pool_V += outs.back().pooled_V;
      pool_N += static_cast<double>(jobs[i].steps) * static_cast<double>(jobs[i].grad.size());
    }
    if (i >= main_jobs && i < clip_end) clipping_info(c, jobs[i].grad, jobs[i].params);
  }
  if (main_jobs && on("unbiased")) {
    // The partial sums over every family's coordinates in p order (ties by family, then by the family's own
    // order): the families' terms are independent, so under H0 these are a martingale as within one family.
    std::vector<std::tuple<double, std::size_t, std::size_t>> order;  // (p, job, index in the job's terms)
    for (std::size_t i = 0; i < jobs.size(); ++i)
      if (i < main_jobs || i == large_job)
        for (std::size_t k = 0; k < outs[i].terms.size(); ++k) order.emplace_back(outs[i].terms[k].p, i, k);
    std::sort(order.begin(), order.end());
    checks::PartialWalk walk_bias, walk_drift;
    for (const auto& [p, i, k] : order) {
      walk_bias.add(outs[i].terms[k].bias, p);
      walk_drift.add(outs[i].terms[k].drift, p);
    }
    const bool walked = !order.empty();
    res.rows.push_back(pooled_bias_row(c, "unbiased-pooled", "all families", pool_S, pool_V, pool_N,
                                       "the pooled statistic summed over every family, and its partial sums in p order; "
                                       "each family draws from its own stream seed, so the sums are independent and "
                                       "their variances add",
                                       Pooled::bias, walked ? &walk_bias.peak : nullptr));
    res.rows.push_back(pooled_bias_row(c, "unbiased-drift", "all families", pool_D, pool_V, pool_N,
                                       "the drift statistic summed over every family, and its partial sums in p order "
                                       "(independent sums, variances add)",
                                       Pooled::drift, walked ? &walk_drift.peak : nullptr));
  }
  if (!jobs.empty() && on("structure")) {
    res.rows.push_back(sure_keeps_row(c, outs));
    res.rows.push_back(near_drops_row(c, outs));
  }
  // layer-wise vs global scalar: both identities are tested above; the ratio is reported here.
  for (std::size_t i = clip_end; i < layerwise_end; ++i) {
    for (std::size_t m = 0; m < main_jobs; ++m) {
      if (jobs[m].grad.family != jobs[i].grad.family) continue;
      Row r = info_row("layerwise.ratio", jobs[i].grad.family);
      r.statistic = strf("layer-wise/global %.4g (observed %.4g)", outs[m].var_identity / outs[i].var_identity,
                         outs[m].var_observed / outs[i].var_observed);
      r.detail = "variance with per-tensor scalars over variance with one global scalar (identities; each tested above)";
      res.rows.push_back(r);
    }
  }
  if (on("structure")) run_fresh_gradient(c, P.d);
  if (on("structure")) run_tails(c);
  if (on("structure") && supports(options, "spec-stream") && options.reproducible) run_extreme_uniforms(c);
  if (on("streams")) run_streams(c, streams_grad, derive_seed(options.seed, KeyPurpose::streams, 0));
  if (on("collision")) run_collision(c, P.d, derive_seed(options.seed, KeyPurpose::collision, 0));
  if (on("aggregate")) run_aggregate(c, P.d, base);
  if (on("aggregate"))
    for (const Params& p : shared_modes) run_aggregate(c, P.d, p);
  if (on("cross")) run_cross(c);
  progress.finish();
  check_plan(plan, res.rows);
  for (const auto& name : check_names())  // what was not checked, and why
    if (!on(name.c_str())) {
      Row r = info_row(name, "-", "skipped");
      r.kind = "skipped";
      r.statistic = "not run";
      r.detail = why_not(name);
      res.rows.push_back(r);
    }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace tg::verify
