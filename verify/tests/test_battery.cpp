// terngrad-bench: battery-level tests: families, the defining defect of each mutant (so a mutant
// cannot silently become correct), reports, and option errors. The whole battery runs in ctest as
// verify_quick and verify_self_test_quick. Run: ctest -R tg_verify_tests
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "tg/verify/battery.hpp"
#include "tg/verify/families.hpp"

namespace tg::verify {
namespace {

Draws draw(const std::string& impl, const std::vector<float>& g, std::uint32_t step, std::uint32_t steps = 1) {
  return make_sampler(impl, {})->draw({g, Params{}, {7, 0, 0, step}, steps, std::nullopt});
}

TEST(Families, SizesAndShapes) {
  for (const auto& f : family_names()) {
    Gradient g = make_gradient(f, 1000, 1);
    if (f == "lenet") {
      EXPECT_EQ(g.size(), 61706u);
      EXPECT_EQ(g.layers.size(), 10u);
    } else {
      EXPECT_EQ(g.size(), 1000u) << f;
    }
    for (const auto& l : g.layers)
      for (float x : l.g) ASSERT_TRUE(std::isfinite(x)) << f;
  }
  EXPECT_THROW(make_gradient("nope", 10, 1), Error);
  EXPECT_THROW(make_gradient("gaussian", 0, 1), Error);
}

TEST(Mutants, EachCarriesItsDefect) {
  std::vector<float> g(4096);
  for (std::size_t k = 0; k < g.size(); ++k) g[k] = std::sin(0.37 * k) * (k % 7 == 0 ? -1.0f : 1.0f);
  g[3000] = 4.0f;  // max in the second half
  Draws ref = draw("reference", g, 0);
  // deterministic: kept iff p > 1/2
  Draws d = draw("mutant:deterministic", g, 0);
  for (std::size_t k = 0; k < g.size(); ++k) ASSERT_EQ(d.trits[k] != 0, std::fabs(g[k]) / 4.0f > 0.5f) << k;
  // sign-only: every nonzero element kept
  d = draw("mutant:sign-only", g, 0);
  for (std::size_t k = 0; k < g.size(); ++k) ASSERT_EQ(d.trits[k] != 0, g[k] != 0.0f);
  // l2-scalar and partial-scalar change the scalar
  double l2 = 0;
  for (float x : g) l2 += double(x) * x;
  EXPECT_FLOAT_EQ(draw("mutant:l2-scalar", g, 0).scalars[0], static_cast<float>(std::sqrt(l2)));
  EXPECT_LT(draw("mutant:partial-scalar", g, 0).scalars[0], 4.0f);
  // sign-error: no negative outputs
  d = draw("mutant:sign-error", g, 0);
  for (auto t : d.trits) ASSERT_GE(t, 0);
  // step-reuse: step 5 equals step 0
  EXPECT_EQ(draw("mutant:step-reuse", g, 5).trits, draw("mutant:step-reuse", g, 0).trits);
  EXPECT_NE(draw("reference", g, 5).trits, ref.trits);
  // shared-uniform: in each block of 4 with equal magnitudes the decisions agree
  std::vector<float> flat(4096, 0.5f);
  flat[0] = 1.0f;
  d = draw("mutant:shared-uniform", flat, 3);
  for (std::size_t b = 4; b < flat.size(); b += 4)
    for (int q = 1; q < 4; ++q) ASSERT_EQ(d.trits[b + q], d.trits[b]);
  // uniform8: same as reference where the 8-bit truncation does not matter, differs somewhere
  EXPECT_NE(draw("mutant:uniform8", g, 0).trits, ref.trits);
}

TEST(Battery, ReportsAndOptionErrors) {
  Options o;
  o.profile = profile_named("quick");
  o.profile.d = 64;
  o.profile.steps = 8;
  o.profile.stream_steps = 8;
  o.profile.agg_steps = 4;
  o.profile.cross_d = 70;
  o.skip = {"layerwise", "clipping"};
  auto s = make_sampler("reference", {});
  Result r = run_battery(*s, o);
  EXPECT_GT(r.decisions, 0u);
  EXPECT_DOUBLE_EQ(r.alpha_each * r.decisions, o.profile.alpha_total);
  auto j = nlohmann::json::parse(format_json({r}));
  EXPECT_EQ(j["runs"][0]["rows"].size(), r.rows.size());
  std::string x = format_junit({r});
  EXPECT_NE(x.find("<testsuites"), std::string::npos);
  EXPECT_NE(format_table(r).find("alpha_total"), std::string::npos);
  o.skip = {"nonsense"};
  EXPECT_THROW(run_battery(*s, o), Error);
  EXPECT_THROW(profile_named("slow"), Error);
}

TEST(Battery, MutantFailsTheChecksThatTargetIt) {
  // At a tiny size the sign error is still an exact structure failure, and a reused stream fails
  // the streams check.
  Options o;
  o.profile = profile_named("quick");
  o.profile.d = 256;
  o.profile.steps = 32;
  o.profile.stream_steps = 32;
  o.profile.agg_steps = 8;
  o.skip = {"cross", "clipping", "layerwise"};
  auto s = make_sampler("mutant:sign-error", {});
  auto fails = run_battery(*s, o).failed_checks();
  EXPECT_NE(std::find(fails.begin(), fails.end(), "structure"), fails.end());
  auto r = make_sampler("mutant:step-reuse", {});
  fails = run_battery(*r, o).failed_checks();
  EXPECT_NE(std::find(fails.begin(), fails.end(), "streams"), fails.end());
}

}  // namespace
}  // namespace tg::verify
