// terngrad-bench: tests of the trainer's live check (no LibTorch): it passes on the real codec over
// the exchange's shared scalars, fails at once (stderr, CSV, LiveCheckFailed with stop) on a broken
// encoder, spends its alpha budget as stated, refuses bad options with a message naming them; and the
// dump of one step's exchange holds the bytes the exchange sent. Run: ctest -R tg_train_live_test
//
// False-fail rate of PassesOnTheRealCodec: each run of the checker fails with probability at most its
// alpha_total (1e-3) for a correct codec; the draws are seeded, so the outcome is fixed for this build.
// Power of CatchesDeterministicRounding: deterministic rounding changes every coordinate's expectation
// (E[q] = s*round(g/s) instead of g): the pooled unbiasedness test on 32 x 50000 trits rejects it with
// probability >= 1 - 1e-3 at any effect above the row's stated power (the rows print it).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <tuple>
#include <sstream>

#include "scratch_dir.hpp"
#include "tg/train/live_check.hpp"

using namespace tg::train;
namespace fs = std::filesystem;

namespace {

const std::vector<LayerInfo> kLayers = {{"conv.weight", 50000}, {"fc.weight", 3000}, {"fc.bias", 100}};

ExchangeOptions options() {
  ExchangeOptions o;
  o.codec = GradCodec::terngrad;
  o.params.float_below = 1000;  // fc.bias travels as float32
  o.seed = 7;
  return o;
}

struct Step {
  std::vector<std::vector<std::vector<float>>> grads;  // [worker][tensor]
  std::vector<std::vector<std::span<const float>>> spans;
  StepStats stats;
};

// Two workers' gradients (heavy-tailed, so that many coordinates sit strictly between levels) through
// the real exchange: stats holds its shared scalars.
Step exchange_step(GradientExchange& x, std::uint32_t step, bool keep = false) {
  Step s;
  std::mt19937_64 rng(1000 + step);
  std::student_t_distribution<float> t(3.0f);
  for (int w = 0; w < 2; ++w) {
    s.grads.emplace_back();
    for (const auto& l : kLayers) {
      std::vector<float> v(l.numel);
      for (auto& e : v) e = 1e-3f * t(rng);
      s.grads.back().push_back(std::move(v));
    }
  }
  for (const auto& w : s.grads) {
    s.spans.emplace_back();
    for (const auto& v : w) s.spans.back().emplace_back(v);
  }
  s.stats.keep_buffers = keep;
  x.simulate(s.spans, {1.0f, 1.0f}, step, &s.stats);
  return s;
}

fs::path temp_dir(const std::string& name) { return tg::test::scratch_dir("tg_train_live_", name); }

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

LiveCheckConfig every(long k) {
  LiveCheckConfig c;
  c.every = k;
  c.draws = 32;
  c.alpha_total = 1e-3;
  return c;
}

}  // namespace

TEST(LiveCheck, PassesOnTheRealCodec) {
  auto codec = make_exchange_codec("");
  GradientExchange x(kLayers, options(), codec);
  fs::path dir = temp_dir("pass");
  LiveCheckConfig cfg = every(10);
  cfg.layers = "all";
  LiveChecker live(cfg, x, options(), codec, 25, dir.string());
  EXPECT_EQ(live.planned_checks(), 3);  // steps 0, 10, 20 of 25
  EXPECT_EQ(live.tensors(), (std::vector<std::size_t>{0, 1}));
  EXPECT_DOUBLE_EQ(live.alpha_per_tensor(), 1e-3 / 3 / 2);
  EXPECT_NE(live.plan().find("over 3 planned checks"), std::string::npos) << live.plan();
  for (std::uint32_t step = 0; step < 25; ++step) {
    Step s = exchange_step(x, step);
    EXPECT_TRUE(live.after_exchange(step, s.spans[0], s.stats)) << "step " << step;
  }
  EXPECT_EQ(live.checks_run(), 3);
  EXPECT_EQ(live.checks_failed(), 0);
  std::set<std::string> checks;
  double alpha_sum = 0.0;
  for (const auto& r : live.rows()) {
    EXPECT_TRUE(r.pass) << r.step << " " << r.layer << " " << r.check << " " << r.detail;
    EXPECT_TRUE(r.step == 0 || r.step == 10 || r.step == 20);
    checks.insert(r.check);
    alpha_sum += r.alpha;
  }
  // the bins of p (pooled and drift) where the layer's size and draws give them the power (bin_planned)
  EXPECT_EQ(checks, (std::set<std::string>{"structure", "unbiased", "unbiased-dispersion", "unbiased-pooled",
                                              "unbiased-drift", "unbiased-by-p", "unbiased-drift-by-p", "variance",
                                              "independence", "sure-keeps", "near-drops"}));
  EXPECT_NEAR(alpha_sum, 1e-3, 1e-12);  // the whole budget, spent over the planned checks, no more
  std::string csv = read_file(dir / "live_checks.csv");
  EXPECT_EQ(csv.rfind(live_check_csv_header(), 0), 0u);
  EXPECT_EQ(static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')), 1 + live.rows().size());
  EXPECT_EQ(csv.find(",fail,"), std::string::npos);
}

TEST(LiveCheck, CatchesDeterministicRounding) {
  auto codec = make_exchange_codec("deterministic");  // the battery's mutant: keep iff p > 1/2
  GradientExchange x(kLayers, options(), codec);
  fs::path dir = temp_dir("broken");
  LiveChecker live(every(5), x, options(), codec, 10, dir.string());
  EXPECT_EQ(live.tensors(), (std::vector<std::size_t>{0}));  // largest: conv.weight
  Step s = exchange_step(x, 5);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(live.after_exchange(5, s.spans[0], s.stats));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("live check FAILED at step 5, layer conv.weight: "), std::string::npos) << err;
  EXPECT_NE(err.find("unbiased"), std::string::npos) << err;
  EXPECT_EQ(live.checks_failed(), 1);
  EXPECT_NE(read_file(dir / "live_checks.csv").find("5,conv.weight,unbiased,stat,"), std::string::npos);

  LiveCheckConfig stop = every(5);
  stop.fail = "stop";
  LiveChecker stopper(stop, x, options(), codec, 10, dir.string());
  testing::internal::CaptureStderr();
  try {
    stopper.after_exchange(5, s.spans[0], s.stats);
    ADD_FAILURE() << "no LiveCheckFailed";
  } catch (const LiveCheckFailed& e) {
    EXPECT_NE(std::string(e.what()).find("step 5, layer conv.weight"), std::string::npos) << e.what();
  }
  testing::internal::GetCapturedStderr();
}

TEST(LiveCheck, OnlyDueStepsAndOptionsChecked) {
  auto codec = make_exchange_codec("");
  GradientExchange x(kLayers, options(), codec);
  LiveChecker off(LiveCheckConfig{}, x, options(), codec, 100, "");
  EXPECT_FALSE(off.enabled());
  LiveCheckConfig cfg = every(4);
  cfg.layers = "fc.weight,0";
  LiveChecker live(cfg, x, options(), codec, 9, "");
  EXPECT_EQ(live.tensors(), (std::vector<std::size_t>{1, 0}));
  EXPECT_EQ(live.planned_checks(), 3);  // 0, 4, 8
  Step s = exchange_step(x, 3);
  EXPECT_TRUE(live.after_exchange(3, s.spans[0], s.stats));
  EXPECT_TRUE(live.rows().empty());
  EXPECT_EQ(live.checks_run(), 0);

  auto refused = [&](LiveCheckConfig c, ExchangeOptions o, const std::string& needle) {
    try {
      GradientExchange xx(kLayers, o, codec);
      LiveChecker l(c, xx, o, codec, 100, "");
      ADD_FAILURE() << "accepted; expected an error naming " << needle;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  LiveCheckConfig bad = every(10);
  bad.layers = "nosuch";
  refused(bad, options(), "no tensor 'nosuch'");
  bad.layers = "fc.bias";
  refused(bad, options(), "fc.bias travels as float32");
  bad.layers = "7";
  refused(bad, options(), "no tensor '7'");
  bad = every(10);
  bad.draws = 1;
  refused(bad, options(), "--live-check-draws");
  bad = every(10);
  bad.alpha_total = 1.0;
  refused(bad, options(), "--live-check-alpha");
  bad = every(10);
  bad.fail = "later";
  refused(bad, options(), "--live-check-fail");
  ExchangeOptions fl = options();
  fl.codec = GradCodec::float32;
  refused(every(10), fl, "--codec terngrad");
}

TEST(ExchangeDump, HoldsTheBytesTheExchangeSent) {
  auto codec = make_exchange_codec("");
  const ExchangeOptions o = options();
  GradientExchange x(kLayers, o, codec);
  Step s = exchange_step(x, 12, /*keep=*/true);
  ASSERT_EQ(s.stats.buffers.size(), 2u);
  fs::path dir = temp_dir("dump");
  dump_exchange(dir.string(), 12, kLayers, o, 0, s.spans, s.stats);
  for (std::uint32_t w = 0; w < 2; ++w)
    for (std::uint32_t t = 0; t < kLayers.size(); ++t) {
      // What the exchange's rule says worker w sends for tensor t at step 12, from the codec's API.
      tg::StreamKey key{o.seed, w, t, 12};
      std::vector<std::uint8_t> expect;
      if (t < 2) {
        float shared = std::max(tg::tensor_scalar(*codec, s.spans[0][t], o.params, t),
                                tg::tensor_scalar(*codec, s.spans[1][t], o.params, t));
        expect = tg::encode_with_scalar(*codec, s.spans[w][t], o.params, key, shared);
      } else {
        tg::Params p = o.params;
        p.float_below = std::numeric_limits<std::uint64_t>::max();
        expect = tg::encode(*codec, s.spans[w][t], p, key);
      }
      std::string got = read_file(dir / ("payload-w" + std::to_string(w) + "-t" + std::to_string(t) + ".bin"));
      ASSERT_EQ(got.size(), expect.size()) << w << " " << t;
      EXPECT_EQ(0, std::memcmp(got.data(), expect.data(), got.size())) << "worker " << w << " tensor " << t;
      std::string g = read_file(dir / ("grad-w" + std::to_string(w) + "-t" + std::to_string(t) + ".f32"));
      ASSERT_EQ(g.size(), 4 * kLayers[t].numel);
      EXPECT_EQ(0, std::memcmp(g.data(), s.grads[w][t].data(), g.size()));
    }
  EXPECT_NE(read_file(dir / "dump.json").find("\"conv.weight\""), std::string::npos);
}

TEST(LiveCheck, ResumedRunKeepsEarlierRowsAndDrawsTheSameKeys) {
  auto codec = make_exchange_codec("");
  GradientExchange x(kLayers, options(), codec);
  fs::path full = temp_dir("resume-full"), part = temp_dir("resume-part");
  LiveChecker a(every(10), x, options(), codec, 25, full.string());
  for (std::uint32_t step = 0; step < 25; ++step) {
    Step s = exchange_step(x, step);
    a.after_exchange(step, s.spans[0], s.stats);
  }
  // The interrupted run wrote the rows of steps 0 and 10; its resumption starts at step 15.
  fs::copy_file(full / "live_checks.csv", part / "live_checks.csv");
  LiveChecker b(every(10), x, options(), codec, 25, part.string(), /*start_step=*/15);
  for (std::uint32_t step = 15; step < 25; ++step) {
    Step s = exchange_step(x, step);
    b.after_exchange(step, s.spans[0], s.stats);
  }
  EXPECT_EQ(b.checks_run(), 1);
  // The earlier rows verbatim, then the new check's rows equal the uninterrupted run's (statistics
  // included: the live keys depend on the step only); only the timings may differ.
  std::string a_csv = read_file(full / "live_checks.csv"), b_csv = read_file(part / "live_checks.csv");
  std::size_t first20 = a_csv.find("\n20,");
  ASSERT_NE(first20, std::string::npos);
  EXPECT_EQ(b_csv.substr(0, first20 + 1), a_csv.substr(0, first20 + 1));
  std::vector<LiveCheckRow> a20;
  for (const auto& r : a.rows())
    if (r.step == 20) a20.push_back(r);
  ASSERT_EQ(b.rows().size(), a20.size());
  for (std::size_t k = 0; k < a20.size(); ++k) {
    const LiveCheckRow &u = a20[k], &v = b.rows()[k];
    EXPECT_EQ(std::tie(u.step, u.layer, u.check, u.statistic, u.p, u.pass, u.detail),
              std::tie(v.step, v.layer, v.check, v.statistic, v.p, v.pass, v.detail));
  }
}
