// terngrad-bench: the extreme-uniforms check (part of structure). Two keys of the spec's stream where one
// element's 32-bit word is at an end of its range, found by scanning the stream once (seeds upward from
// 0x7465726e67726164, worker 0, tensor 0, step 0, elements 0..4095) and checked at every run:
//  - word 0x00000000 (element 974): every form of the uniform is 0 there, so a keep rule "u <= p" keeps an
//    element of g = 0 (p = 0); the spec's "u < p" never does;
//  - word 0xffffff3b (element 3552): a 24-bit uniform (word >> 8) 2^-24 and the float32 nearest to word 2^-32 are
//    both 1 - 2^-24 there, so a stochastic rounding floor(p + u) done in float32 rounds 1 + (1 - 2^-24) up to 2
//    at p = 1 and outputs 2s: a value outside {-s, 0, +s}.
// Each happens about once in 2^24 (2^32) element-draws otherwise, so the families see the first about 4 times at ci
// and almost never at quick, and the second practically never; planted, both are seen at every profile. The
// probes speak only to codecs that draw the spec's stream (--supports spec-stream); for others they are two
// ordinary draws, so the row is left out with cross (and for --unseeded codecs).
#include <cmath>
#include <stdexcept>

#include "checks/common.hpp"
#include "tg/philox.hpp"
#include "tg/verify/keys.hpp"

namespace tg::verify::checks {

namespace {
struct Planted {
  std::uint64_t seed;
  std::uint32_t element;
  std::uint32_t word;
  float value;  // g at that element
  const char* what;
};
// g = 0 where the uniform is 0; g = 1, the unique maximum (p = 1; under clipping at or above the bound), where
// it is 1 - 2^-24
constexpr Planted kPlanted[2] = {{0x7465726e67b57e14ull, 974, 0x00000000u, 0.0f, "uniform 0 at an element of g = 0"},
                                 {0x7465726e6772891aull, 3552, 0xffffff3bu, 1.0f,
                                  "uniform 1 - 2^-24 (word 0xffffff3b) at the maximum, p = 1"}};
constexpr std::size_t kPlantedElements = 4096;
}  // namespace

std::uint64_t extreme_elements() { return 2 * kPlantedElements; }

void run_extreme_uniforms(Ctx& c) {
  const std::vector<ClipMode> modes = supported_modes(c.opt);
  std::string msg, modes_text;
  std::uint64_t bad = 0, draws = 0;
  for (ClipMode m : modes) modes_text += (modes_text.empty() ? "" : ", ") + std::string(to_string(m));
  for (std::size_t pi = 0; pi < 2; ++pi) {
    const Planted& pl = kPlanted[pi];
    const StreamKey key{pl.seed, 0, 0, 0};
    if (philox_block(key, pl.element / 4).v[pl.element % 4] != pl.word)
      throw std::logic_error("extreme uniforms: the planted word of the spec's stream is not where it was found");
    std::vector<float> g(kPlantedElements);
    for (std::size_t k = 0; k < g.size(); ++k)  // uniform in [-1/2, 1/2), fixed
      g[k] = static_cast<float>(derived_uniform(derive_seed(pl.seed, KeyPurpose::gradient, static_cast<std::uint32_t>(k))) - 0.5);
    g[pl.element] = pl.value;
    for (ClipMode m : modes) {
      Params params;
      params.clip = m;
      Draws dr = draw_one(c, g, params, key);
      ++draws;
      const std::string what = strf("clip %s, %s (element %u of %zu)", to_string(m), pl.what, pl.element, g.size());
      // the scalar is the other rows' question (tails, clipping.structure): a wrong clip rule is not a uniform's bug
      if (count_defect(dr, what, bad, msg)) continue;
      count_wrong_signs(dr, g, what, bad, msg);
    }
  }
  c.progress.add(static_cast<double>(extreme_elements() * modes.size()), "structure");
  c.rows.push_back(violations_row(
      "structure", "extreme uniforms", bad, "any value not in {-s, 0, +s}, any g = 0 kept, any sign not its element's",
      msg,
      strf("%llu draws, clip %s, at keys of the spec's stream where an element's word is 0 (there g = 0: a keep rule "
           "u <= p keeps it) and 0xffffff3b (there the maximum, p = 1: floor(p + u) in float32 gives 2): every value in "
           "{-s, 0, +s}, every sign its element's",
           static_cast<unsigned long long>(draws), modes_text.c_str())));
}

}  // namespace tg::verify::checks
