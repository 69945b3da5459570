// terngrad-bench: the cross check: the implementation under test against the reference (or the
// reference against every other built implementation), bit for bit, through compare_samplers.
#include <algorithm>

#include "checks/common.hpp"

namespace tg::verify::checks {

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
  co.modes.clear();
  for (ClipMode m : {ClipMode::none, ClipMode::clip, ClipMode::saturate})
    if (supports(c.opt, to_string(m))) co.modes.push_back(m);
  co.shared_scalar = supports(c.opt, "shared-scalar");  // in each mode: under clipping each clamps at its own bound
  // The project's own codecs must agree bit for bit, scalars too. Any other implementation that draws the
  // spec's stream may compute sigma in float32 (the battery's clip-bound tolerance): its trits must then be
  // the spec stream's under its own scalar.
  const std::string& self = c.sampler.name();
  const bool ours = self == "reference" || self == "optimized" || self == "cuda";
  co.float32_sigma = !ours;
  // External programs cost a process per request: layers 0, 1 and the last one of each family.
  co.all_layers = c.sampler.codec() != nullptr;
  // and no key case (27 more processes): the collision check draws keys at the same edges
  co.keys = c.sampler.name().rfind("exec:", 0) != 0;
  co.stop_at_first = true;
  std::string modes;
  for (ClipMode m : co.modes) modes += std::string(modes.empty() ? "" : " and ") + to_string(m);
  for (auto& [oname, other] : others) {
    CompareResult cr = compare_samplers(c.sampler, *other, co);
    c.progress.add(0.0, "cross");
    const CompareCase* diff = cr.first_difference();
    std::uint64_t ulps = 0, windowed = 0;
    for (const auto& k : cr.cases) ulps = std::max(ulps, k.scalar_ulps), windowed += k.bound_window;
    Row r = exact_row("cross", "vs " + oname);
    r.threshold = "identical";
    r.power = "any differing bit";
    r.pass = diff == nullptr;
    r.statistic = diff ? "differs" : strf("%llu trits equal", static_cast<unsigned long long>(cr.trits()));
    const std::string agree =
        ulps ? strf("trits identical; scalars identical, or under clipping up to %llu float32 ulps from %s's (tolerance "
                    "clip_bound_ulps(d), %u at %zu elements), where the trits are the spec stream's under the "
                    "implementation's own scalar",
                    static_cast<unsigned long long>(ulps), oname.c_str(), clip_bound_ulps(co.d), co.d)
             : std::string("trits and scalars identical");
    r.detail = diff ? "vs " + oname + ": " + diff->family + "/" + diff->layer + " " + diff->mode + ": " + diff->difference
                    : strf("vs %s: every family, clip %s%s, 2 steps: %s%s%s%s", oname.c_str(), modes.c_str(),
                           co.shared_scalar ? ", each also with a shared scalar" : "", agree.c_str(),
                           windowed ? strf("; under a shared scalar with clipping, %llu cases within the window of clip "
                                           "bounds (a float32 sigma's)", static_cast<unsigned long long>(windowed)).c_str()
                                    : "",
                           co.all_layers ? "" : " (layers 0, 1 and last of multi-layer families)",
                           cr.payloads() ? strf("; %llu payloads (2bit, base3) byte-identical",
                                                static_cast<unsigned long long>(cr.payloads())).c_str()
                                         : "");
    c.rows.push_back(r);
  }
}

}  // namespace tg::verify::checks
