// terngrad-bench: `terngrad compare` and the battery's cross check: two implementations bit for bit
// (scalars, trits, and both payload packings where both are codecs of this project).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "checks/common.hpp"
#include "tg/verify/keys.hpp"

namespace tg::verify {

using checks::Progress;
using checks::sign_of;

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
  for (std::size_t i = 0; i < o.modes.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (o.modes[i] == o.modes[j])
        throw Error(ErrorCode::invalid_argument,
                    std::string("compare: clipping mode '") + to_string(o.modes[i]) + "' listed twice (list each once)");
  auto t0 = std::chrono::steady_clock::now();
  CompareResult res;
  res.a = a.name();
  res.b = b.name();
  res.options = o;
  Progress progress(o.progress, static_cast<double>(family_names().size()));
  const Codec* ca = a.codec();
  const Codec* cb = b.codec();
  // One request of each implementation under `key` (and the payloads where both are codecs): into k.
  auto compare_one = [&](const std::vector<float>& g, const StreamKey& key, ClipMode mode, bool shared,
                         CompareCase& k) {
    Params params;
    params.clip = mode;
    std::optional<float> scalar;
    if (shared) scalar = 2.0f * tensor_scalar(reference_codec(), g, params, key.tensor);
    Draws da = a.draw({g, params, key, o.steps, scalar});
    Draws db = b.draw({g, params, key, o.steps, scalar});
    k.trits = da.trits.size();
    // A float32 sigma: every scalar of A within the tolerance of B's (clipping, own scalar). Then A's trits
    // are judged against the spec stream under A's own scalar (rule make_rule(s, s): under clip and
    // saturate the scalar is the cap), and the payloads, whose headers carry the scalar, are not compared.
    bool tolerated = false;
    if (da.scalars != db.scalars && o.float32_sigma && mode != ClipMode::none && !shared &&
        da.scalars.size() == db.scalars.size() && da.trits.size() == db.trits.size()) {
      tolerated = true;
      const ClipWindow w = clip_scalar_window(g, params);
      for (std::size_t j = 0; j < da.scalars.size() && tolerated; ++j) {
        const float s = da.scalars[j];
        const std::uint64_t u = ulp_distance(s, db.scalars[j]);
        tolerated = s > 0.0f && db.scalars[j] == w.spec && w.contains(s);
        k.scalar_ulps = std::max(k.scalar_ulps, u);
      }
      if (tolerated) {
        for (std::size_t j = 0; j < da.scalars.size(); ++j) {
          const StreamKey kj{key.seed, key.worker, key.tensor, key.step + static_cast<std::uint32_t>(j)};
          std::span<std::int8_t> row(db.trits.data() + j * g.size(), g.size());
          reference_codec().ternarize(g, make_rule(da.scalars[j], da.scalars[j]), kj, row);
        }
        db.scalars = da.scalars;  // B's draws, re-made under A's scalars, are what A must equal
      } else {
        k.scalar_ulps = 0;
      }
    }
    // A given scalar under clipping, A with a float32 sigma: A clamps at its own bound, which its draws
    // do not show and which lies in the window of clip bounds. A keep is monotone in the bound, so A's
    // trits must lie between the spec stream's under the window's lowest and highest bound (with g's
    // signs); B must be the spec's, under its exact bound.
    if (shared && o.float32_sigma && mode != ClipMode::none && da.scalars == db.scalars && da.trits != db.trits &&
        da.trits.size() == db.trits.size()) {
      const ClipWindow w = clip_bound_window(g, params);
      std::vector<std::int8_t> lo(g.size()), hi(g.size());
      bool inside = true;
      for (std::size_t j = 0; j < da.scalars.size() && inside; ++j) {
        const StreamKey kj{key.seed, key.worker, key.tensor, key.step + static_cast<std::uint32_t>(j)};
        reference_codec().ternarize(g, make_rule(da.scalars[j], w.lo), kj, lo);
        reference_codec().ternarize(g, make_rule(da.scalars[j], w.hi), kj, hi);
        for (std::size_t e = 0; e < g.size() && inside; ++e) {
          const int t = da.trits[j * g.size() + e];
          inside = (t == 0 || t == sign_of(g[e])) && (t != 0 || lo[e] == 0) && (t == 0 || hi[e] != 0);
        }
      }
      if (inside) {
        tolerated = k.bound_window = true;
        db.trits = da.trits;  // what A must equal: it lies between the spec's draws at both ends
      }
    }
    // the request as the protocol gives it: its key (at the step named), and the shared scalar where there is one
    auto key_at = [&](std::size_t step) {
      return strf("key (seed %llu, worker %u, tensor %u, step %zu%s)", static_cast<unsigned long long>(key.seed),
                  key.worker, key.tensor, step,
                  scalar ? strf(", shared scalar %.9g", static_cast<double>(*scalar)).c_str() : "");
    };
    // Outputs not of the form {-s, 0, +s} first: the scalar and the trits are read from them.
    if (!da.defect.empty() || !db.defect.empty()) {
      k.difference = key_at(key.step) + ": output not of the form {-s, 0, +s} (" + (da.defect.empty() ? "B" : "A") +
                     "): " + (da.defect.empty() ? db.defect : da.defect);
    } else if (da.scalars != db.scalars) {
      std::size_t j = 0;
      while (j + 1 < da.scalars.size() && j + 1 < db.scalars.size() && da.scalars[j] == db.scalars[j]) ++j;
      k.difference = strf("%s: scalar %.9g vs %.9g", key_at(key.step + j).c_str(),
                          da.scalars.empty() ? 0.0 : static_cast<double>(da.scalars[j]),
                          db.scalars.empty() ? 0.0 : static_cast<double>(db.scalars[j]));
    } else if (da.trits != db.trits) {
      std::size_t e = 0;
      while (da.trits[e] == db.trits[e]) ++e;
      k.difference = strf("%s element %zu (g = %.9g): trit %d vs %d", key_at(key.step + e / g.size()).c_str(),
                          e % g.size(), static_cast<double>(g[e % g.size()]), da.trits[e], db.trits[e]);
    }
    if (k.difference.empty() && ca && cb && !tolerated) {
      for (Packing pk : {Packing::two_bit, Packing::base3}) {
        Params pp = params;
        pp.packing = pk;
        auto pa = scalar ? encode_with_scalar(*ca, g, pp, key, *scalar) : encode(*ca, g, pp, key);
        auto pb = scalar ? encode_with_scalar(*cb, g, pp, key, *scalar) : encode(*cb, g, pp, key);
        if (pa != pb) {
          std::size_t j = 0;
          while (j < pa.size() && j < pb.size() && pa[j] == pb[j]) ++j;
          k.difference =
              strf("%s payload: byte %zu differs (%zu vs %zu bytes)", to_string(pk), j, pa.size(), pb.size());
          break;
        }
        ++k.payloads;
      }
    }
  };
  for (const auto& fam : family_names()) {
    Gradient G = make_gradient(fam, o.d, derive_seed(o.seed, KeyPurpose::gradient, static_cast<std::uint32_t>(GradientVariant::compare)));
    for (std::size_t li = 0; li < G.layers.size(); ++li) {
      if (!o.all_layers && li > 1 && li + 1 < G.layers.size()) continue;
      const auto& g = G.layers[li].g;
      // worker, tensor and step away from 0, so that a codec ignoring one of them still differs
      const StreamKey key{derive_seed(o.seed, KeyPurpose::compare, 0), 3, static_cast<std::uint32_t>(li + 5), 11};
      std::vector<std::pair<ClipMode, bool>> runs;
      for (ClipMode m : o.modes) runs.emplace_back(m, false);
      if (o.shared_scalar)
        for (ClipMode m : o.modes) runs.emplace_back(m, true);  // under clipping each clamps at its own bound
      for (auto [mode, shared] : runs) {
        CompareCase k;
        k.family = fam;
        k.layer = G.layers[li].name;
        k.mode = std::string(to_string(mode)) + (shared ? "+shared" : "");
        compare_one(g, key, mode, shared, k);
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
  // Keys away from the families' one key: worker and tensor ids and steps at byte, 16-bit, 24-bit and 32-bit edges,
  // and seeds that differ in one word, on one small gradient in the first mode. A codec that cuts, wraps or mixes up
  // a field of the key agrees on the families' key and differs here. One case; its difference names the key.
  if (o.keys) {
    const std::size_t dk = std::min<std::size_t>(o.d, 1031);
    const Gradient G = make_gradient("gaussian", dk, derive_seed(o.seed, KeyPurpose::gradient, static_cast<std::uint32_t>(GradientVariant::compare)));
    const std::uint64_t seed = derive_seed(o.seed, KeyPurpose::compare, 0);
    std::vector<StreamKey> keys = {{seed, 0, 0, 0}, {seed ^ 1u, 0, 0, 0}, {seed ^ (std::uint64_t{1} << 32), 0, 0, 0}};
    for (std::uint32_t e : {1u, 255u, 256u, 65535u, 65536u, 16777216u, 2147483648u, 4294967295u}) {
      keys.push_back({seed, e, 0, 0});
      keys.push_back({seed, 0, e, 0});
      keys.push_back({seed, 0, 0, std::min<std::uint32_t>(e, 4294967295u - (o.steps - 1))});
    }
    CompareCase k;
    k.family = "keys";
    k.layer = strf("%zu keys", keys.size());
    k.mode = to_string(o.modes.front());
    for (const StreamKey& key : keys) {
      CompareCase one;
      compare_one(G.layers[0].g, key, o.modes.front(), false, one);
      k.trits += one.trits, k.payloads += one.payloads, k.scalar_ulps = std::max(k.scalar_ulps, one.scalar_ulps);
      if (!one.difference.empty()) {
        k.difference = one.difference;
        break;
      }
    }
    res.cases.push_back(std::move(k));
  }
  progress.finish();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::string format_compare(const CompareResult& r) {
  std::string out = "terngrad compare: " + r.a + " vs " + r.b + strf(" (seed %llu, %zu elements per family, %u draws per key)\n\n",
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
