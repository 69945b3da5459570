// terngrad-bench: tests of the data-parallel TernGrad exchange (no LibTorch): shared scalars, exact
// aggregation, float tensors, bytes, sparsity, unbiasedness, and rank-by-rank exchange through an
// in-process transport giving the same bits as the simulation. Run: ctest -R tg_train_core_test
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "tg/train/exchange.hpp"

using namespace tg::train;

namespace {

std::vector<std::vector<std::vector<float>>> random_grads(int workers, const std::vector<LayerInfo>& layers,
                                                          std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<std::vector<std::vector<float>>> g(workers);
  for (int w = 0; w < workers; ++w)
    for (const auto& l : layers) {
      std::vector<float> v(l.numel);
      for (auto& x : v) x = n(rng) * static_cast<float>(w + 1);
      g[w].push_back(v);
    }
  return g;
}

std::vector<std::vector<std::span<const float>>> spans(const std::vector<std::vector<std::vector<float>>>& g) {
  std::vector<std::vector<std::span<const float>>> s;
  for (const auto& w : g) {
    s.emplace_back();
    for (const auto& t : w) s.back().emplace_back(t);
  }
  return s;
}

// Collectives among threads of this process, for exchange() without a network.
class ThreadTransport : public Transport {
 public:
  struct Shared {
    explicit Shared(int n) : world(n), sync(n), floats(n), bytes(n) {}
    int world;
    std::barrier<> sync;
    std::vector<std::vector<float>> floats;
    std::vector<std::vector<std::uint8_t>> bytes;
  };
  ThreadTransport(Shared& s, int rank) : s_(s), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return s_.world; }
  void allreduce_max(std::span<float> v) override {
    s_.floats[rank_].assign(v.begin(), v.end());
    s_.sync.arrive_and_wait();
    for (int r = 0; r < s_.world; ++r)
      for (std::size_t k = 0; k < v.size(); ++k) v[k] = std::max(v[k], s_.floats[r][k]);
    s_.sync.arrive_and_wait();
  }
  std::vector<std::vector<std::uint8_t>> allgather(std::span<const std::uint8_t> mine) override {
    s_.bytes[rank_].assign(mine.begin(), mine.end());
    s_.sync.arrive_and_wait();
    auto all = s_.bytes;
    s_.sync.arrive_and_wait();
    return all;
  }

 private:
  Shared& s_;
  int rank_;
};

const std::vector<LayerInfo> kLayers = {{"conv.weight", 500}, {"conv.bias", 20}, {"fc.weight", 4003}, {"fc.bias", 10}};

}  // namespace

TEST(Exchange, FloatCodecAveragesExactly) {
  ExchangeOptions o;
  o.codec = GradCodec::float32;
  GradientExchange x(kLayers, o, tg::make_optimized_codec(1));
  auto g = random_grads(3, kLayers, 5);
  StepStats st;
  auto avg = x.simulate(spans(g), {1.0f, 2.0f, 4.0f}, 0, &st);
  for (std::size_t t = 0; t < kLayers.size(); ++t) {
    EXPECT_FALSE(st.layers[t].ternary);
    EXPECT_EQ(st.layers[t].payload_bytes, 32 + 4 * kLayers[t].numel);
    for (std::size_t k = 0; k < kLayers[t].numel; ++k) {
      double mean = (static_cast<double>(g[0][t][k]) + g[1][t][k] + g[2][t][k]) / 3.0;
      ASSERT_EQ(avg[t][k], static_cast<float>(mean)) << "tensor " << t << " element " << k;
    }
  }
  EXPECT_EQ(st.worker_losses, (std::vector<float>{1.0f, 2.0f, 4.0f}));
}

TEST(Exchange, TernGradSharesTheMaxScalarAndAggregatesExactly) {
  ExchangeOptions o;  // terngrad, no clipping, layer-wise, 2bit
  o.seed = 77;
  GradientExchange x(kLayers, o, tg::make_optimized_codec(1));
  const int N = 3;
  auto g = random_grads(N, kLayers, 6);
  StepStats st;
  auto avg = x.simulate(spans(g), {0, 0, 0}, 12, &st);
  for (std::size_t t = 0; t < kLayers.size(); ++t) {
    float s = 0.0f;  // without clipping the scalar is max |g| over workers
    for (int w = 0; w < N; ++w)
      for (float v : g[w][t]) s = std::max(s, std::fabs(v));
    EXPECT_EQ(st.layers[t].scalar, s) << t;
    EXPECT_TRUE(st.layers[t].ternary);
    EXPECT_EQ(st.layers[t].payload_bytes, 32 + (kLayers[t].numel + 3) / 4);
    EXPECT_EQ(st.layers[t].float_bytes, 4 * kLayers[t].numel);
    for (std::size_t k = 0; k < kLayers[t].numel; ++k) {
      // mean = s * (integer in [-N, N]) / N, and its sign never contradicts all workers' signs.
      double m = static_cast<double>(avg[t][k]) * N / s;
      double r = std::round(m);
      ASSERT_NEAR(m, r, 1e-5) << t << " " << k;
      ASSERT_LE(std::fabs(r), N);
    }
    EXPECT_GT(st.layers[t].sparsity, 0.0);
    EXPECT_LT(st.layers[t].sparsity, 1.0);
  }
}

TEST(Exchange, NonLayerwiseUsesOneScalarAndSmallTensorsStayFloat) {
  ExchangeOptions o;
  o.layerwise = false;
  o.params.float_below = 100;   // the two bias tensors travel as float32
  o.params.packing = tg::Packing::base3;
  GradientExchange x(kLayers, o, tg::make_optimized_codec(1));
  auto g = random_grads(2, kLayers, 7);
  StepStats st;
  auto avg = x.simulate(spans(g), {0, 0}, 3, &st);
  float s = 0.0f;
  for (int w = 0; w < 2; ++w)
    for (std::size_t t : {0u, 2u})
      for (float v : g[w][t]) s = std::max(s, std::fabs(v));
  EXPECT_EQ(st.layers[0].scalar, s);
  EXPECT_EQ(st.layers[2].scalar, s);
  EXPECT_EQ(st.layers[0].payload_bytes, 32 + (500 + 4) / 5);
  EXPECT_EQ(st.layers[2].payload_bytes, 32 + (4003 + 4) / 5);
  for (std::size_t t : {1u, 3u}) {
    EXPECT_FALSE(st.layers[t].ternary);
    for (std::size_t k = 0; k < kLayers[t].numel; ++k)
      ASSERT_EQ(avg[t][k], static_cast<float>((static_cast<double>(g[0][t][k]) + g[1][t][k]) / 2.0));
  }
}

TEST(Exchange, LastLayerCanStayFloat) {
  ExchangeOptions o;
  o.quantize_last = false;
  o.last_layer_from = 2;  // fc.weight, fc.bias
  GradientExchange x(kLayers, o, tg::make_optimized_codec(1));
  EXPECT_TRUE(x.is_ternary(0));
  EXPECT_TRUE(x.is_ternary(1));
  EXPECT_FALSE(x.is_ternary(2));
  EXPECT_FALSE(x.is_ternary(3));
}

TEST(Exchange, CountsNonzeroTritsInBothPackings) {
  const std::uint8_t two_bit[] = {0b01100001, 0x00, 0b01010101};  // codes LSB first: 01,00,10,01 -> 3; 0; 4
  EXPECT_EQ(count_nonzero_trits(tg::Packing::two_bit, two_bit), 7u);
  const std::uint8_t base3[] = {1 + 2 * 3 + 0 * 9 + 1 * 27, 0, 242};  // digits 1,2,0,1,0 -> 3; 0; 2,2,2,2,2 -> 5
  EXPECT_EQ(count_nonzero_trits(tg::Packing::base3, base3), 8u);
}

TEST(Exchange, RanksThroughATransportGiveTheSimulationsBits) {
  for (auto codec : {GradCodec::float32, GradCodec::terngrad}) {
    ExchangeOptions o;
    o.codec = codec;
    o.params.clip = tg::ClipMode::saturate;
    o.params.float_below = 15;
    o.seed = 99;
    const int N = 4;
    GradientExchange x(kLayers, o, tg::make_optimized_codec(1));
    auto g = random_grads(N, kLayers, 8);
    std::vector<float> losses = {0.5f, 0.25f, 0.125f, 2.0f};
    StepStats sim_stats;
    auto expected = x.simulate(spans(g), losses, 41, &sim_stats);
    ThreadTransport::Shared shared(N);
    std::vector<std::vector<std::vector<float>>> got(N);
    std::vector<StepStats> stats(N);
    std::vector<std::thread> threads;
    for (int r = 0; r < N; ++r)
      threads.emplace_back([&, r] {
        ThreadTransport t(shared, r);
        got[r] = x.exchange(spans(g)[r], losses[r], t, 41, &stats[r]);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < N; ++r) {
      EXPECT_EQ(stats[r].worker_losses, losses);
      for (std::size_t t = 0; t < kLayers.size(); ++t) {
        EXPECT_EQ(stats[r].layers[t].scalar, sim_stats.layers[t].scalar);
        ASSERT_EQ(got[r][t].size(), expected[t].size());
        EXPECT_EQ(0, std::memcmp(got[r][t].data(), expected[t].data(), 4 * expected[t].size()))
            << "rank " << r << " tensor " << t << " codec " << to_string(codec);
      }
    }
  }
}

// Unbiasedness of the averaged gradient (no clipping): over T independent steps the mean of the
// exchanged gradient converges to the workers' mean gradient g_bar.
// Per element and step, X = s/N * sum_w t_w with t_w in {-1,0,1}; |X - g_bar| <= 2s and
// Var X = sum_w |g_w|(s - |g_w|) / N^2 <= s^2 / (4N). With s = 1 (gradients scaled so), N = 2,
// T = 4000 and tolerance eps = 0.034, Bernstein's inequality gives
// P(|mean - g_bar| >= eps) <= 2 exp(-T eps^2 / (2 Var + 2/3 * 2 s * eps)) = 2 exp(-15.7) = 3.1e-7
// per element, so the false-fail probability over the 64 elements is below 2.0e-5.
// Power: an exchange that returned the sum instead of the mean, or dropped one worker, would be
// off by at least |g_bar| >= 0.1 (3 eps) on every element with |g_bar| >= 0.1 (most of the 64), so it
// fails with probability > 1 - 2e-5.
TEST(Exchange, AveragedTernGradIsUnbiased) {
  const std::vector<LayerInfo> layer = {{"w", 64}};
  ExchangeOptions o;
  o.seed = 20171204;
  GradientExchange x(layer, o, tg::make_optimized_codec(1));
  std::vector<std::vector<std::vector<float>>> g(2, std::vector<std::vector<float>>(1, std::vector<float>(64)));
  for (int k = 0; k < 64; ++k) {
    g[0][0][k] = static_cast<float>((k % 17) - 8) / 8.0f;  // in [-1, 1], max exactly 1
    g[1][0][k] = static_cast<float>(((k * 7) % 13) - 6) / 8.0f;
  }
  const int T = 4000;
  std::vector<double> sum(64, 0.0);
  for (int step = 0; step < T; ++step) {
    auto avg = x.simulate(spans(g), {0, 0}, static_cast<std::uint32_t>(step), nullptr);
    for (int k = 0; k < 64; ++k) sum[k] += avg[0][k];
  }
  for (int k = 0; k < 64; ++k) {
    double g_bar = (static_cast<double>(g[0][0][k]) + g[1][0][k]) / 2.0;
    EXPECT_NEAR(sum[k] / T, g_bar, 0.034) << "element " << k << " seed " << o.seed;
  }
}

TEST(Exchange, RejectsMismatchedGradients) {
  ExchangeOptions o;
  GradientExchange x(kLayers, o, tg::make_optimized_codec(1));
  auto g = random_grads(2, kLayers, 9);
  g[1][2].pop_back();
  EXPECT_THROW(x.simulate(spans(g), {0, 0}, 0, nullptr), std::invalid_argument);
  auto h = random_grads(2, kLayers, 9);
  h[0][0][3] = std::nanf("");
  EXPECT_THROW(x.simulate(spans(h), {0, 0}, 0, nullptr), tg::NonFiniteError);
}
