// terngrad-bench: the fresh-gradient check (part of structure): under one stream key (seed, worker,
// tensor), as in training, the gradient changes from step to step. An implementation that keeps state
// between calls (a scalar, a clip bound or a residual cached per key) returns the old gradient's
// scalar; every other check sends one gradient per key and cannot see it.
#include <algorithm>
#include <cmath>

#include "checks/common.hpp"
#include "tg/verify/keys.hpp"

namespace tg::verify::checks {

void run_fresh_gradient(Ctx& c, std::size_t d) {
  const Codec& ref = reference_codec();
  const std::uint64_t seed = derive_seed(c.opt.seed, KeyPurpose::fresh, 0);
  // A and B: different families and scales, so their scalars differ in every mode.
  const std::vector<float> a = make_gradient("gaussian", d, derive_seed(c.opt.seed, KeyPurpose::gradient,
                                                                         static_cast<std::uint32_t>(GradientVariant::fresh)))
                                   .layers[0].g;
  std::vector<float> b = make_gradient("student_t", d, derive_seed(c.opt.seed, KeyPurpose::gradient,
                                                                   static_cast<std::uint32_t>(GradientVariant::fresh) + 1))
                             .layers[0].g;
  for (float& x : b) x *= 3.0f;
  std::vector<ClipMode> modes;
  for (ClipMode m : {ClipMode::none, ClipMode::clip, ClipMode::saturate})
    if (supports(c.opt, to_string(m))) modes.push_back(m);
  std::string msg, modes_text;
  std::uint64_t bad = 0;
  for (ClipMode m : modes) {
    Params params;
    params.clip = m;
    modes_text += (modes_text.empty() ? "" : ", ") + std::string(to_string(m));
    // steps 0, 1, 2 of one key with A, B, A: each scalar must be its own gradient's
    const std::vector<float>* seq[3] = {&a, &b, &a};
    for (std::uint32_t step = 0; step < 3; ++step) {
      const std::vector<float>& g = *seq[step];
      Draws dr = c.sampler.draw({g, params, {seed, 0, 0, step}, 1, std::nullopt});
      if (dr.d != g.size() || dr.steps != 1 || dr.scalars.size() != 1 || dr.trits.size() != g.size())
        throw Error(ErrorCode::invalid_argument, "implementation returned draws of the wrong size");
      const float spec = tensor_scalar(ref, g, params, 0), got = dr.scalars[0];
      const bool ok = got == spec || clip_scalar_window(g, params).contains(got);
      if (!ok && bad++ == 0)
        msg = strf("clip %s, step %u (gradient %s of A, B, A under one key): scalar %.9g, but this gradient's is %.9g%s",
                   to_string(m), step, step == 1 ? "B" : "A", static_cast<double>(got), static_cast<double>(spec),
                   step > 0 ? " (state kept from an earlier call?)" : "");
      for (std::size_t k = 0; k < g.size() && ok; ++k) {
        const int t = dr.trits[k];
        if ((t != 0 && t != sign_of(g[k])) && bad++ == 0)
          msg = strf("clip %s, step %u: element %zu has sign %d, its gradient %.9g", to_string(m), step, k, t,
                     static_cast<double>(g[k]));
      }
    }
  }
  c.progress.add(3.0 * static_cast<double>(modes.size()) * static_cast<double>(d), "structure");
  c.rows.push_back(violations_row("structure", "fresh gradients", bad, "any state kept between calls", msg,
                                  strf("steps 0, 1, 2 of one key with gradients A (gaussian), B (student_t x 3), A, "
                                       "clip %s: each scalar is its own gradient's, each sign its own element's",
                                       modes_text.c_str())));
}

}  // namespace tg::verify::checks
