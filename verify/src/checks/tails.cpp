// terngrad-bench: the tails check (part of structure): the scalar is max|g| over every element. A SIMD
// reduction without its remainder loop, an off-by-one bound or a first element left out gives another
// scalar only where the maximum sits in the part it skips; the families, random, put it there at some
// seeds only. Here the unique maximum is planted at the last element, at the first, and negated at the
// last, on sizes with every remainder modulo 16 and around powers of two, in every mode the codec has.
// Light-tailed data (uniform in (-1, 1), maximum 1.25 < 2.5 sigma on all but the smallest sizes) so that
// under clip and saturate the scalar is max|g| too, not c sigma (a saturate mode without the min fails).
#include <algorithm>
#include <cmath>

#include "checks/common.hpp"
#include "tg/verify/families.hpp"
#include "tg/verify/keys.hpp"

namespace tg::verify::checks {

const std::vector<std::size_t>& tail_sizes() {
  static const std::vector<std::size_t> sizes = [] {
    std::vector<std::size_t> s = {1, 2, 3, 5, 7, 8, 9};
    for (std::size_t r = 1; r < 16; ++r) s.push_back(64 + r);  // every remainder mod 16 (and mod 8, 4, 2)
    for (std::size_t p : {127u, 129u, 255u, 257u, 1023u, 1025u, 4095u, 4097u, 65535u, 65599u}) s.push_back(p);
    return s;
  }();
  return sizes;
}

namespace {
struct ClipBoundCase {
  std::size_t d;
  double c;
  double mean;  // the data: mean + uniform in [-1, 1) (a spike of 8 at the middle where mean is 0)
};
const std::vector<ClipBoundCase>& clip_bound_cases() {
  static const std::vector<ClipBoundCase> cases = {
      {1023, 1.5, 0.0}, {4097, 4.0, 0.0}, {1023, 2.5, 1000.0}, {4097, 2.5, -1000.0}, {65599, 1.5, 1000.0}};
  return cases;
}
// What a wrong scalar of one draw is read as, and whether the reading names it (a rule of sigma, a specific scalar,
// or values clipped under the scalar max|g|, which one draw shows where it left out an element at max|g|) rather
// than asking.
struct ScalarReading {
  std::string text;
  bool named = false;
};
ScalarReading read_scalar(std::span<const float> g, const Params& params, float got, float spec, const Draws& dr) {
  std::string h = specific_scalar_hint(g, got, spec, true);
  if (!h.empty()) return {h, true};
  // a maximum over a prefix: the cases with max|g| at the last element show it (checked before the other places)
  if (h = partial_max_hint(g, got); !h.empty()) return {"; " + h, true};
  if (params.clip != ClipMode::none && dr.d == g.size() && !dr.trits.empty()) {
    float max_abs = 0.0f;
    for (float x : g) max_abs = std::max(max_abs, std::fabs(x));
    std::vector<std::uint32_t> kept(g.size());
    for (std::size_t k = 0; k < g.size(); ++k) kept[k] = dr.trits[k] != 0 ? 1u : 0u;
    h = clipped_values_hint(g, got, max_abs, spec, kept.data(), 1);
    if (!h.empty()) return {h, true};
  }
  h = sigma_rule_hint(g, params, got);
  return {h, h.starts_with("; it is ")};
}
}  // namespace

void run_tails(Ctx& c) {
  const std::uint64_t seed = derive_seed(c.opt.seed, KeyPurpose::tails, 0);
  const std::vector<ClipMode> modes = supported_modes(c.opt);
  const char* where[3] = {"last", "first", "last, negative"};
  std::string msg, diagnosed;  // the first violation; the first with a diagnosis, where the first has none
  std::uint64_t bad = 0, draws = 0, elements = 0;
  bool first_named = false;  // the first violation's reading names the scalar
  auto wrong_scalar = [&](const std::string& what, const ScalarReading& hint) {
    if (bad++ == 0) {
      msg = what + hint.text;
      first_named = hint.named;
    } else if (hint.named && diagnosed.empty() && !first_named) {
      diagnosed = what + hint.text;
    }
  };
  for (std::size_t si = 0; si < tail_sizes().size(); ++si) {
    const std::size_t d = tail_sizes()[si];
    std::vector<float> base(d);
    for (std::size_t k = 0; k < d; ++k) {
      const std::uint64_t w = derive_seed(seed, KeyPurpose::gradient, static_cast<std::uint32_t>(si * 1000003u + k));
      base[k] = static_cast<float>(derived_uniform(w) * 2.0 - 1.0);  // uniform in [-1, 1)
    }
    for (int place = 0; place < 3; ++place) {
      std::vector<float> g = base;
      g[place == 1 ? 0 : d - 1] = place == 2 ? -1.25f : 1.25f;
      for (ClipMode m : modes) {
        Params params;
        params.clip = m;
        const StreamKey key{seed, 0, static_cast<std::uint32_t>(si), static_cast<std::uint32_t>(3 * place)};
        Draws dr = draw_one(c, g, params, key);
        ++draws, elements += d;
        if (count_defect(dr, strf("clip %s, %zu elements", to_string(m), d), bad, msg)) continue;
        const ClipWindow w = clip_scalar_window(g, params);
        const float got = dr.scalars[0];
        if (!w.contains(got)) {
          wrong_scalar(strf("clip %s, %zu elements, maximum |g| = 1.25 at the %s element: scalar %.9g, the spec's %.9g%s",
                            to_string(m), d, where[place], static_cast<double>(got), static_cast<double>(w.spec),
                            m == ClipMode::none ? "" : " (the clip bound's window allows a float32 sigma)"),
                       read_scalar(g, params, got, w.spec, dr));
          continue;
        }
        count_wrong_signs(dr, g, strf("clip %s, %zu elements", to_string(m), d), bad, msg);
      }
    }
  }
  // The clip bound itself, where it is the scalar: float(c sigma) with clipping factors other than the
  // battery's 2.5 (a codec that ignores c, or reads another option for it), and on tensors whose mean
  // dwarfs sigma (|mean| / sigma about 1700: a float32 sigma from one pass, E[g^2] - E[g]^2, loses it to
  // cancellation; the window allows the two-pass and Welford forms, clip_bound_window). Every element
  // clips on the latter (every keep probability 1; a float32 keep rule may miss one, so only signs are checked).
  std::uint32_t bound_draws = 0;
  for (std::size_t ci = 0; ci < clip_bound_cases().size(); ++ci) {
    const ClipBoundCase& cb = clip_bound_cases()[ci];
    std::vector<float> g(cb.d);
    for (std::size_t k = 0; k < cb.d; ++k) {
      const std::uint64_t w = derive_seed(seed, KeyPurpose::gradient, static_cast<std::uint32_t>(0x40000000u + ci * 1000003u + k));
      g[k] = static_cast<float>(cb.mean + derived_uniform(w) * 2.0 - 1.0);  // mean + uniform in [-1, 1)
    }
    if (cb.mean == 0.0) g[cb.d / 2] = 8.0f;  // max|g| above c sigma for every c here: the scalar is the bound
    for (ClipMode m : modes) {
      if (m == ClipMode::none) continue;
      Params params;
      params.clip = m;
      params.c = cb.c;
      const StreamKey key{seed, 1, static_cast<std::uint32_t>(ci), 0};
      Draws dr = draw_one(c, g, params, key);
      ++draws, ++bound_draws, elements += cb.d;
      if (count_defect(dr, strf("clip %s, c = %g, %zu elements of mean %g", to_string(m), cb.c, cb.d, cb.mean), bad, msg))
        continue;
      const ClipWindow w = clip_scalar_window(g, params);
      const float got = dr.scalars[0];
      if (!w.contains(got)) {
        const ScalarReading hint = read_scalar(g, params, got, w.spec, dr);
        wrong_scalar(strf("clip %s, c = %g, %zu elements of mean %g: scalar %.9g, the spec's c sigma %.9g (window %.9g .. "
                          "%.9g)%s",
                          to_string(m), cb.c, cb.d, cb.mean, static_cast<double>(got), static_cast<double>(w.spec),
                          static_cast<double>(w.lo), static_cast<double>(w.hi),
                          hint.named ? ""
                          : cb.mean != 0.0
                              ? ": a float32 sigma that loses the mean's digits (one pass, E[g^2] - E[g]^2)?"
                              : (std::fabs(static_cast<double>(got) / static_cast<double>(w.spec) * cb.c - 2.5) < 1e-3
                                     ? ": c = 2.5 used instead of c?"
                                     : "")),
                     hint);
        continue;
      }
      count_wrong_signs(dr, g, strf("clip %s, c = %g, %zu elements of mean %g", to_string(m), cb.c, cb.d, cb.mean), bad,
                        msg);
    }
  }
  // The clip bound at the large job's size (P.large_d: 2^20 + 3 at quick, 2^22 + 3 at ci and full), which the
  // large job itself draws only in the base mode: a sigma from a strided subsample, or from the first 2^20
  // elements only (a reduction with a capped grid), or any bug that begins above the families' sizes on the
  // clipping path. Gaussian, with the second half 3 times the first, so that a partial or strided reduction
  // is far off (a strided subsample of 2^16 is off by about 0.3%, the first 2^20 of 2^22 + 3 by about 30%).
  std::uint32_t large_draws = 0;
  const std::size_t large_d = c.opt.profile.large_d;
  if (std::any_of(modes.begin(), modes.end(), [](ClipMode m) { return m != ClipMode::none; })) {
    std::vector<float> g = make_gradient("gaussian", large_d, derive_seed(seed, KeyPurpose::gradient, 0x7fffffffu)).layers[0].g;
    for (std::size_t k = large_d / 2; k < large_d; ++k) g[k] *= 3.0f;
    for (ClipMode m : modes) {
      if (m == ClipMode::none) continue;
      Params params;
      params.clip = m;
      const StreamKey key{seed, 2, 0, static_cast<std::uint32_t>(m)};
      Draws dr = draw_one(c, g, params, key);
      ++draws, ++large_draws, elements += large_d;
      if (count_defect(dr, strf("clip %s, %zu elements", to_string(m), large_d), bad, msg)) continue;
      const ClipWindow w = clip_scalar_window(g, params);
      const float got = dr.scalars[0];
      if (!w.contains(got)) {
        const ScalarReading hint = read_scalar(g, params, got, w.spec, dr);
        wrong_scalar(strf("clip %s, %zu elements (gaussian, the second half 3 times the first): scalar %.9g, the spec's "
                          "%.9g (window %.9g .. %.9g)%s",
                          to_string(m), large_d, static_cast<double>(got), static_cast<double>(w.spec),
                          static_cast<double>(w.lo), static_cast<double>(w.hi),
                          hint.named ? ""
                                                        : ": a sigma or maximum over part of the tensor, or a float32 sigma whose "
                                                          "running sums lost digits (the window allows pairwise, blocked and "
                                                          "Welford sums)?"),
                     hint);
        continue;
      }
      count_wrong_signs(dr, g, strf("clip %s, %zu elements", to_string(m), large_d), bad, msg);
    }
  }
  if (!diagnosed.empty()) msg += "; also " + diagnosed;
  c.progress.add(static_cast<double>(elements), "structure");
  c.rows.push_back(violations_row(
      "structure", "tails", bad, "any scalar not the spec's, any sign not its element's", msg,
      strf("%llu draws: %zu sizes (1..65599, every remainder mod 16), the unique maximum at the last element, the "
           "first, and negated at the last, in each mode: every scalar the spec's%s, every sign its element's",
           static_cast<unsigned long long>(draws), tail_sizes().size(),
           modes.size() > 1 || modes[0] != ClipMode::none ? " (under clipping within the window)" : "") +
          (bound_draws ? strf("; %u draws where the scalar is the clip bound c sigma: c = 1.5 and 4 with a spike, and "
                              "mean +-1000 against sigma 0.58 (every element clipped)",
                              bound_draws)
                       : std::string()) +
          (large_draws ? strf("; %u draws of %zu elements under clipping (the second half 3 times the first)", large_draws,
                              large_d)
                       : std::string())));
}

std::uint64_t tails_elements() {
  std::uint64_t n = 0;
  for (std::size_t d : tail_sizes()) n += 3 * d;
  for (const auto& cb : clip_bound_cases()) n += cb.d;  // per clipping mode: an estimate
  return n;
}

}  // namespace tg::verify::checks
