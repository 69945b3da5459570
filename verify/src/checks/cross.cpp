// terngrad-bench: the cross check: the implementation under test against the reference (or the
// reference against every other built implementation), bit for bit, through compare_samplers.
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
  for (ClipMode m : {ClipMode::none, ClipMode::clip})
    if (supports(c.opt, to_string(m))) co.modes.push_back(m);
  if (co.modes.empty()) co.modes = {ClipMode::saturate};
  co.shared_scalar = false;
  // External programs cost a process per request: layers 0, 1 and the last one of each family.
  co.all_layers = c.sampler.codec() != nullptr;
  co.stop_at_first = true;
  std::string modes;
  for (ClipMode m : co.modes) modes += std::string(modes.empty() ? "" : " and ") + to_string(m);
  for (auto& [oname, other] : others) {
    CompareResult cr = compare_samplers(c.sampler, *other, co);
    c.progress.add(0.0, "cross");
    const CompareCase* diff = cr.first_difference();
    Row r = exact_row("cross", "vs " + oname);
    r.threshold = "identical";
    r.power = "any differing bit";
    r.pass = diff == nullptr;
    r.statistic = diff ? "differs" : strf("%llu trits equal", static_cast<unsigned long long>(cr.trits()));
    r.detail = diff ? "vs " + oname + ": " + diff->family + "/" + diff->layer + " " + diff->mode + ": " + diff->difference
                    : strf("vs %s: every family, clip %s, 2 steps: trits and scalars identical%s%s",
                           oname.c_str(), modes.c_str(), co.all_layers ? "" : " (layers 0, 1 and last of multi-layer families)",
                           cr.payloads() ? strf("; %llu payloads (2bit, base3) byte-identical",
                                                static_cast<unsigned long long>(cr.payloads())).c_str()
                                         : "");
    c.rows.push_back(r);
  }
}

}  // namespace tg::verify::checks
