// terngrad-bench: battery-level tests: families, the defining defect of each mutant (so a mutant
// cannot silently become correct), reports, and option errors. The whole battery runs in ctest as
// verify_quick and verify_self_test_quick. Run: ctest -R tg_verify_tests
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "tg/verify/battery.hpp"
#include "tg/verify/families.hpp"

namespace tg::verify {
namespace {


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

// ---- compare_samplers: two implementations bit for bit ---------------------------------------------

TEST(Compare, ReferenceAndPortableAreIdenticalEverywhere) {
  auto ref = make_sampler("reference", {});
  auto portable = make_codec_sampler(make_optimized_codec(1, true), "portable");
  CompareOptions o;
  o.d = 300;
  CompareResult r = compare_samplers(*ref, *portable, o);
  EXPECT_TRUE(r.identical()) << format_compare(r);
  // every family, every layer, 3 clipping modes + the shared-scalar case
  std::size_t layers = 0;
  for (const auto& f : family_names()) layers += make_gradient(f, o.d, 1).layers.size();
  EXPECT_EQ(r.cases.size(), 4 * layers);
  EXPECT_EQ(r.payloads(), 2 * r.cases.size());  // 2bit and base3 per case
  std::uint64_t elements = 0;
  for (const auto& f : family_names()) elements += make_gradient(f, o.d, 1).size();
  EXPECT_EQ(r.trits(), 4 * 2 * elements);  // 4 cases x 2 steps per element
  EXPECT_NE(format_compare(r).find("verdict: IDENTICAL"), std::string::npos);
  auto doc = nlohmann::json::parse(format_compare_json(r));
  EXPECT_TRUE(doc["identical"].get<bool>());
  EXPECT_EQ(doc["cases"].size(), r.cases.size());
}

TEST(Compare, DifferencesAreNamedAndCanStopAtTheFirst) {
  auto ref = make_sampler("reference", {});
  CompareOptions o;
  o.d = 500;
  auto u8 = make_sampler("mutant:uniform8", {});
  CompareResult r = compare_samplers(*ref, *u8, o);
  ASSERT_FALSE(r.identical());
  EXPECT_NE(r.first_difference()->difference.find("trit"), std::string::npos) << r.first_difference()->difference;
  EXPECT_NE(format_compare(r).find("verdict: DIFFERENT"), std::string::npos);
  auto l2 = make_sampler("mutant:l2-scalar", {});
  o.stop_at_first = true;
  CompareResult first = compare_samplers(*ref, *l2, o);
  ASSERT_EQ(first.cases.size(), 1u);  // the very first case already differs, and the run stopped there
  EXPECT_NE(first.cases[0].difference.find("scalar"), std::string::npos) << first.cases[0].difference;
  o.modes.clear();
  EXPECT_THROW(compare_samplers(*ref, *l2, o), Error);
}

// ---- check_samples: the per-gradient checks on draws made elsewhere -----------------------------

struct Drawn {
  std::vector<float> g;
  Draws draws;
  TensorSamples view() const { return {g, draws.trits, draws.scalars, std::nullopt, draws.defect}; }
};

Drawn drawn(const std::string& impl, std::size_t d, std::uint32_t steps, std::uint64_t seed = 11,
            Params params = {}) {
  Drawn out;
  out.g = make_gradient("gaussian", d, seed).layers[0].g;
  out.draws = make_sampler(impl, {})->draw({out.g, params, {seed, 0, 0, 0}, steps, std::nullopt});
  return out;
}

bool failed(const Result& r, const std::string& check) {
  auto f = r.failed_checks();
  return std::find(f.begin(), f.end(), check) != f.end();
}

TEST(CheckSamples, ReferenceDrawsPassEveryCheck) {
  // Correct draws: each of the 5 decisions fails with probability <= 1e-6 / 5 (fixed seed here,
  // so the outcome is deterministic); the exact structure row cannot fail.
  Drawn x = drawn("reference", 4096, 128);
  TensorSamples t = x.view();
  Result r = check_samples({&t, 1}, {});
  EXPECT_TRUE(r.pass()) << format_table(r);
  EXPECT_EQ(r.decisions, 5u);
  EXPECT_DOUBLE_EQ(r.alpha_each, 1e-6 / 5);
  ASSERT_EQ(r.rows.size(), 6u);  // structure, unbiased, unbiased-pooled, variance, 2 x independence
  EXPECT_EQ(r.rows[0].check, "structure");
  EXPECT_EQ(r.rows[0].detail.find("same key"), std::string::npos);  // no re-draw was possible
  EXPECT_NE(format_table(r).find("samples given by the caller"), std::string::npos);
  SampleCheckOptions no_indep;
  no_indep.independence = false;
  EXPECT_EQ(check_samples({&t, 1}, no_indep).decisions, 3u);
}

TEST(CheckSamples, EachMutantFailsTheCheckThatTargetsIt) {
  // Same sizes as above; the rows' "detectable" column states the power.
  auto check = [](const std::string& impl) {
    Drawn x = drawn(impl, 4096, 128);
    TensorSamples t = x.view();
    return check_samples({&t, 1}, {});
  };
  EXPECT_TRUE(failed(check("mutant:sign-error"), "structure"));
  EXPECT_TRUE(failed(check("mutant:l2-scalar"), "structure"));  // the scalar is not the spec's
  EXPECT_TRUE(failed(check("mutant:deterministic"), "unbiased"));
  EXPECT_TRUE(failed(check("mutant:shared-uniform"), "independence"));
  Result ok = check("reference");
  EXPECT_TRUE(ok.pass());
}

TEST(CheckSamples, LayersWithASharedScalar) {
  // Two workers' layers drawn with one shared scalar: the spec rule is make_rule(shared, own clip).
  Params params;
  std::vector<float> a = make_gradient("gaussian", 2000, 3).layers[0].g, b = make_gradient("laplace", 3000, 4).layers[0].g;
  for (auto& v : b) v *= 0.01f;
  float shared = shared_scalar(std::vector<float>{tensor_scalar(reference_codec(), a, params, 0),
                                                  tensor_scalar(reference_codec(), b, params, 1)});
  auto s = make_sampler("reference", {});
  Draws da = s->draw({a, params, {5, 0, 0, 0}, 64, shared}), db = s->draw({b, params, {5, 0, 1, 0}, 64, shared});
  std::vector<TensorSamples> ts = {{a, da.trits, da.scalars, shared, {}}, {b, db.trits, db.scalars, shared, {}}};
  Result r = check_samples(ts, {});
  EXPECT_TRUE(r.pass()) << format_table(r);
  // Told the wrong shared scalar, the structure row fails.
  ts[1].scalar = shared * 2.0f;
  EXPECT_TRUE(failed(check_samples(ts, {}), "structure"));
}

TEST(CheckSamples, BadInputIsNamed) {
  Drawn x = drawn("reference", 100, 4);
  auto msg = [](std::vector<TensorSamples> ts, SampleCheckOptions o = {}) -> std::string {
    try {
      check_samples(ts, o);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  TensorSamples t = x.view();
  EXPECT_NE(msg({}).find("no samples"), std::string::npos);
  TensorSamples one = t;
  one.scalars = one.scalars.first(1);
  one.trits = one.trits.first(100);
  EXPECT_NE(msg({one}).find("at least 2"), std::string::npos);
  TensorSamples short_trits = t;
  short_trits.trits = short_trits.trits.first(399);
  EXPECT_NE(msg({short_trits}).find("399 trits, expected 4 draws x 100 elements"), std::string::npos);
  TensorSamples mismatch = t;
  mismatch.scalars = mismatch.scalars.first(3);
  EXPECT_NE(msg({t, mismatch}).find("tensor 1: 3 scalars"), std::string::npos);
  std::vector<float> g = x.g;
  g[7] = std::nanf("");
  TensorSamples nan_g = t;
  nan_g.g = g;
  EXPECT_THROW(check_samples({&nan_g, 1}, {}), NonFiniteError);
  std::vector<float> sc = x.draws.scalars;
  sc[2] = -1.0f;
  TensorSamples neg = t;
  neg.scalars = sc;
  EXPECT_NE(msg({neg}).find("scalar of draw 2 is -1"), std::string::npos);
  SampleCheckOptions bad;
  bad.alpha_total = 0.0;
  EXPECT_NE(msg({t}, bad).find("alpha"), std::string::npos);
  std::vector<float> empty;
  TensorSamples none{empty, {}, t.scalars, std::nullopt, {}};
  EXPECT_NE(msg({none}).find("empty"), std::string::npos);
}

TEST(DrawsFromValues, SignsScalarsAndDefects) {
  std::vector<float> v = {0.5f, -0.5f, 0.0f, 0.0f, 0.0f, 0.0f};
  Draws d = draws_from_values(v, 3, 2, std::nullopt, "out");
  EXPECT_EQ(d.trits, (std::vector<std::int8_t>{1, -1, 0, 0, 0, 0}));
  EXPECT_EQ(d.scalars, (std::vector<float>{0.5f, 0.0f}));  // an all-zero row has no scalar of its own
  EXPECT_TRUE(d.defect.empty());
  EXPECT_EQ(draws_from_values(v, 3, 2, 2.0f, "out").scalars[1], 2.0f);  // ... unless one was requested
  v[2] = 0.25f;
  EXPECT_EQ(draws_from_values(v, 3, 2, std::nullopt, "out").defect,
            "row 0 element 2 is 0.25, not in {-s, 0, +s} with s = 0.5");
  v[4] = INFINITY;
  EXPECT_THROW(draws_from_values(v, 3, 2, std::nullopt, "out"), Error);
  EXPECT_THROW(draws_from_values(v, 4, 2, std::nullopt, "out"), Error);
}

}  // namespace
}  // namespace tg::verify
