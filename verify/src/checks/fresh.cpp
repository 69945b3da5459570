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
  const std::uint64_t seed = derive_seed(c.opt.seed, KeyPurpose::fresh, 0),
                      seed_a = derive_seed(c.opt.seed, KeyPurpose::fresh, 1),
                      seed_b = derive_seed(c.opt.seed, KeyPurpose::fresh, 2);
  // A and B: different families and scales, so their scalars differ in every mode.
  const std::vector<float> a = make_gradient("gaussian", d, derive_seed(c.opt.seed, KeyPurpose::gradient,
                                                                         static_cast<std::uint32_t>(GradientVariant::fresh)))
                                   .layers[0].g;
  std::vector<float> b = make_gradient("student_t", d, derive_seed(c.opt.seed, KeyPurpose::gradient,
                                                                   static_cast<std::uint32_t>(GradientVariant::fresh) + 1))
                             .layers[0].g;
  for (float& x : b) x *= 3.0f;
  const std::vector<ClipMode> modes = supported_modes(c.opt);
  std::string msg, modes_text, off_spec;
  std::uint64_t bad = 0;
  for (ClipMode m : modes) {
    Params params;
    params.clip = m;
    modes_text += (modes_text.empty() ? "" : ", ") + std::string(to_string(m));
    // The codec's own answer for each gradient: one call under a key that shares no field (seed, worker,
    // tensor, step) with the sequence's key or the other answer's, so that a cache kept per any of them (or any
    // set of them) holds nothing of A's there. A codec without state gives each gradient that answer at every
    // call; whether the answer is the spec's is the other structure rows' question (clipping.structure, tails),
    // not this row's.
    const std::vector<float>* grads[2] = {&a, &b};
    const std::uint32_t mi = static_cast<std::uint32_t>(m);
    Draws own[2] = {draw_one(c, a, params, {seed_a, 1, 1 + 2 * mi, 7}), draw_one(c, b, params, {seed_b, 2, 2 + 2 * mi, 11})};
    const ClipWindow win[2] = {clip_scalar_window(a, params), clip_scalar_window(b, params)};
    for (int i = 0; i < 2; ++i)
      count_defect(own[i], strf("clip %s, gradient %s under a key of its own", to_string(m), i ? "B" : "A"), bad, msg);
    for (int i = 0; i < 2; ++i) {
      const ClipWindow& w = win[i];
      if (off_spec.empty() && !w.contains(own[i].scalars[0]))
        off_spec = strf("; under a key of its own the scalar is already not the spec's (clip %s, gradient %s: %.9g, the "
                        "spec's %.9g), which the rows clipping.structure and tails judge",
                        to_string(m), i ? "B" : "A", static_cast<double>(own[i].scalars[0]), static_cast<double>(w.spec));
    }
    // steps 0, 1, 2 of one key with A, B, A: each call's scalar and signs are its gradient's own answer's
    const int seq[3] = {0, 1, 0};
    for (std::uint32_t step = 0; step < 3; ++step) {
      const int i = seq[step];
      const std::vector<float>& g = *grads[i];
      const Draws dr = draw_one(c, g, params, {seed, 0, 0, step});
      if (count_defect(dr, strf("clip %s, step %u (gradient %s of A, B, A under one key)", to_string(m), step, i ? "B" : "A"),
                       bad, msg))
        continue;
      const float got = dr.scalars[0], first = own[i].scalars[0];
      // A float32 sigma summed in another order at another call (atomics) may move the clip bound within its
      // window: a difference up to the window's width is not state.
      const ClipWindow& w = win[i];
      const bool same_scalar = got == first || (std::isnan(got) && std::isnan(first)) ||
                               (m != ClipMode::none && std::isfinite(got) && std::isfinite(first) &&
                                std::fabs(static_cast<double>(got) - static_cast<double>(first)) <=
                                    static_cast<double>(w.hi) - static_cast<double>(w.lo));
      if (!same_scalar) {
        if (bad++ == 0)
          msg = strf("clip %s, step %u (gradient %s of A, B, A under one key): scalar %.9g, but the same gradient's at "
                     "a key of its own is %.9g (the spec's %.9g)%s",
                     to_string(m), step, i ? "B" : "A", static_cast<double>(got), static_cast<double>(first),
                     static_cast<double>(w.spec), step > 0 ? ": state kept from an earlier call" : ": state kept from another key's calls");
        continue;
      }
      // signs: a wrong sign at the key's call where the gradient's own answer has none
      std::uint64_t own_wrong = 0;
      std::string unused;
      count_wrong_signs(own[i], g, "", own_wrong, unused);
      if (own_wrong == 0)
        count_wrong_signs(dr, g,
                          strf("clip %s, step %u (state kept from an earlier call: the gradient's call under a key of "
                               "its own has every sign right)",
                               to_string(m), step),
                          bad, msg);
    }
  }
  c.progress.add(5.0 * static_cast<double>(modes.size()) * static_cast<double>(d), "structure");
  c.rows.push_back(violations_row("structure", "fresh gradients", bad, "any state kept between calls", msg,
                                  strf("steps 0, 1, 2 of one key with gradients A (gaussian), B (student_t x 3), A, "
                                       "clip %s: each call gives its gradient the scalar (and signs) the same codec "
                                       "gives it under a key of its own (exactly; under clipping within the clip "
                                       "window's width)",
                                       modes_text.c_str()) +
                                      off_spec));
}

}  // namespace tg::verify::checks
