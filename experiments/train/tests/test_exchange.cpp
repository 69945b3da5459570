// terngrad-bench: tests of the data-parallel TernGrad exchange (no LibTorch): shared scalars, exact
// aggregation, float tensors, bytes, sparsity, unbiasedness, and rank-by-rank exchange through an
// in-process transport giving the same bits as the simulation, for every codec (float allgather and
// allreduce, TernGrad, QSGD, EF-SignSGD); QSGD's unbiasedness and SignSGD-EF's residual identity; the
// uplink/downlink byte formulas. Run: ctest -R tg_train_core_test
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "tg/train/baselines.hpp"
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
  // In the order of a ring reduce-scatter, not in rank order: element k lies in chunk c = k N / size,
  // whose sum starts at rank (c + 1) % N and walks the ring, so for N > 2 most chunks are summed in
  // an order other than the simulation's.
  void allreduce_sum(std::span<float> v) override {
    s_.floats[rank_].assign(v.begin(), v.end());
    s_.sync.arrive_and_wait();
    const int n = s_.world;
    for (std::size_t k = 0; k < v.size(); ++k) {
      int c = static_cast<int>(k * static_cast<std::size_t>(n) / v.size());
      float sum = s_.floats[(c + 1) % n][k];
      for (int j = 2; j <= n; ++j) sum += s_.floats[(c + j) % n][k];
      v[k] = sum;
    }
    s_.sync.arrive_and_wait();
  }
  void barrier() override { s_.sync.arrive_and_wait(); }

 private:
  Shared& s_;
  int rank_;
};

const std::vector<LayerInfo> kLayers = {{"conv.weight", 500}, {"conv.bias", 20}, {"fc.weight", 4003}, {"fc.bias", 10}};

}  // namespace

// Float with allreduce: the float32 sum in worker order (what a 2-rank allreduce gives in any order)
// divided by N in float32; 4 bytes per element, no header; the loss is the mean only.
TEST(Exchange, FloatAllreduceSumsInFloat) {
  ExchangeOptions o;
  o.codec = GradCodec::float32;  // float_exchange defaults to allreduce
  GradientExchange x(kLayers, o, tg::make_optimized_codec(1));
  auto g = random_grads(3, kLayers, 5);
  StepStats st;
  auto avg = x.simulate(spans(g), {1.0f, 2.0f, 4.5f}, 0, &st);
  for (std::size_t t = 0; t < kLayers.size(); ++t) {
    EXPECT_EQ(st.layers[t].payload_bytes, 4 * kLayers[t].numel);
    for (std::size_t k = 0; k < kLayers[t].numel; ++k) {
      float sum = g[0][t][k];
      sum += g[1][t][k];
      sum += g[2][t][k];
      ASSERT_EQ(avg[t][k], sum / 3.0f) << "tensor " << t << " element " << k;
    }
  }
  EXPECT_TRUE(st.worker_losses.empty());
  EXPECT_EQ(st.loss, 2.5);
}

TEST(Exchange, FloatCodecAveragesExactly) {
  ExchangeOptions o;
  o.codec = GradCodec::float32;
  o.float_exchange = FloatExchange::allgather;
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

// Without scalar sharing each worker encodes with its own scalar (max |g_w| without clipping): the
// expected mean is computed here from independent tg::encode calls under the exchange's keys
// (seed, worker, tensor, step), decoded and summed in worker order in double, divided by N.
TEST(Exchange, OwnScalarsDecodeEachWorkerWithItsOwnScalar) {
  ExchangeOptions o;  // terngrad, no clipping, layer-wise, 2bit
  o.seed = 77;
  o.shared_scalar = false;
  std::shared_ptr<const tg::Codec> codec = tg::make_optimized_codec(1);
  GradientExchange x(kLayers, o, codec);
  const int N = 3;
  const std::uint32_t step = 12;
  auto g = random_grads(N, kLayers, 6);
  StepStats st;
  auto avg = x.simulate(spans(g), {0, 0, 0}, step, &st);
  for (std::size_t t = 0; t < kLayers.size(); ++t) {
    std::vector<double> sum(kLayers[t].numel, 0.0);
    float largest = 0.0f;
    bool scalars_differ = false;
    float first = 0.0f;
    for (int w = 0; w < N; ++w) {
      tg::StreamKey key{o.seed, static_cast<std::uint32_t>(w), static_cast<std::uint32_t>(t), step};
      tg::Decoded d = tg::decode(*codec, tg::encode(*codec, g[w][t], o.params, key));
      float own = 0.0f;
      for (float v : g[w][t]) own = std::max(own, std::fabs(v));
      EXPECT_EQ(d.header.scalar, own) << "worker " << w << " tensor " << t;
      if (w == 0) first = own;
      scalars_differ |= own != first;
      largest = std::max(largest, own);
      for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += d.values[k];
    }
    EXPECT_TRUE(scalars_differ) << t;  // random_grads scales worker w by w + 1
    EXPECT_EQ(st.layers[t].scalar, largest);
    for (std::size_t k = 0; k < sum.size(); ++k)
      ASSERT_EQ(avg[t][k], static_cast<float>(sum[k] / N)) << t << " " << k;
  }
  // no scalar allreduce: only the allgather of the payloads goes over the wire
  ExchangeOptions shared = o;
  shared.shared_scalar = true;
  WireBytes own_bytes = x.step_bytes(N), shared_bytes = GradientExchange(kLayers, shared, codec).step_bytes(N);
  EXPECT_EQ(shared_bytes.uplink - own_bytes.uplink, ring_allreduce_bytes(4 * kLayers.size(), N).uplink);
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

// Every codec, 3 steps (EF-SignSGD carries its residuals from step to step): each rank, with its own
// exchange object as in a real run, gets the simulation's bits, and both count the same bytes.
// Float with allreduce is bit-exact for 2 ranks only (a + b == b + a); more ranks: next test.
TEST(Exchange, RanksThroughATransportGiveTheSimulationsBits) {
  struct Case {
    GradCodec codec;
    FloatExchange how;
    int ranks;
    bool shared_scalar = true;
  };
  for (Case c : {Case{GradCodec::float32, FloatExchange::allgather, 4}, Case{GradCodec::float32, FloatExchange::allreduce, 2},
                 Case{GradCodec::terngrad, FloatExchange::allreduce, 4}, Case{GradCodec::qsgd, FloatExchange::allreduce, 4},
                 Case{GradCodec::signsgd_ef, FloatExchange::allreduce, 4},
                 Case{GradCodec::terngrad, FloatExchange::allreduce, 3, /*shared_scalar=*/false}}) {
    ExchangeOptions o;
    o.codec = c.codec;
    o.float_exchange = c.how;
    o.params.clip = tg::ClipMode::saturate;
    o.params.float_below = 15;
    o.qsgd_levels = 3;
    o.seed = 99;
    o.shared_scalar = c.shared_scalar;
    const int N = c.ranks;
    std::string what = std::string(to_string(c.codec)) + "/" + to_string(c.how) + " on " + std::to_string(N) + " ranks" +
                       (c.shared_scalar ? "" : ", own scalars");
    GradientExchange sim(kLayers, o, tg::make_optimized_codec(1));
    std::vector<GradientExchange> per_rank(N, GradientExchange(kLayers, o, tg::make_optimized_codec(1)));
    std::vector<float> losses = {0.5f, 0.25f, 0.125f, 2.0f};
    losses.resize(N);
    for (std::uint32_t step = 41; step < 44; ++step) {
      auto g = random_grads(N, kLayers, 8 + step);
      StepStats sim_stats;
      auto expected = sim.simulate(spans(g), losses, step, &sim_stats);
      ThreadTransport::Shared shared(N);
      std::vector<std::vector<std::vector<float>>> got(N);
      std::vector<StepStats> stats(N);
      std::vector<std::thread> threads;
      for (int r = 0; r < N; ++r)
        threads.emplace_back([&, r] {
          ThreadTransport t(shared, r);
          got[r] = per_rank[r].exchange(spans(g)[r], losses[r], t, step, &stats[r]);
        });
      for (auto& t : threads) t.join();
      EXPECT_EQ(sim_stats.wire.uplink, sim.step_bytes(N).uplink) << what;
      EXPECT_EQ(sim_stats.wire.downlink, sim.step_bytes(N).downlink) << what;
      for (int r = 0; r < N; ++r) {
        if (c.how == FloatExchange::allgather || c.codec != GradCodec::float32) {
          EXPECT_EQ(stats[r].worker_losses, losses);
        }
        EXPECT_EQ(stats[r].loss, sim_stats.loss) << what;
        EXPECT_EQ(stats[r].wire.uplink, sim_stats.wire.uplink) << what;
        EXPECT_EQ(stats[r].wire.downlink, sim_stats.wire.downlink) << what;
        EXPECT_GE(stats[r].comm_s, stats[r].wait_s);
        for (std::size_t t = 0; t < kLayers.size(); ++t) {
          EXPECT_EQ(stats[r].layers[t].scalar, sim_stats.layers[t].scalar);
          ASSERT_EQ(got[r][t].size(), expected[t].size());
          EXPECT_EQ(0, std::memcmp(got[r][t].data(), expected[t].data(), 4 * expected[t].size()))
              << "rank " << r << " tensor " << t << " step " << step << " " << what;
        }
      }
    }
  }
}

// Float allreduce on 4 ranks: the transport sums in ring order, the simulation in rank order. Any
// summation order of N float32 terms is within gamma_{N-1} sum|x_i| of the exact sum
// (gamma_m = m u / (1 - m u), u = 2^-24; Higham, Accuracy and Stability, Thm 4.4), so two orders differ
// by at most 2 gamma_{N-1} sum|x_i|; dividing by N = 4 is exact. The check is a proven bound, not a
// tuned tolerance: it cannot fail for a correct sum, and fails for a sum that drops or repeats a rank
// (off by |x_i|, far above 6 u sum|x_i|). The test also shows the orders do differ (not all equal).
TEST(Exchange, FloatAllreduceOnFourRanksIsWithinTheSummationBound) {
  ExchangeOptions o;
  o.codec = GradCodec::float32;
  o.float_exchange = FloatExchange::allreduce;
  const int N = 4;
  GradientExchange sim(kLayers, o, tg::make_optimized_codec(1));
  auto g = random_grads(N, kLayers, 12);
  std::vector<float> losses = {1.0f, 2.0f, 3.0f, 4.0f};
  StepStats sim_stats;
  auto expected = sim.simulate(spans(g), losses, 0, &sim_stats);
  ThreadTransport::Shared shared(N);
  std::vector<std::vector<std::vector<float>>> got(N);
  std::vector<std::thread> threads;
  for (int r = 0; r < N; ++r)
    threads.emplace_back([&, r] {
      ThreadTransport t(shared, r);
      GradientExchange mine(kLayers, o, tg::make_optimized_codec(1));
      got[r] = mine.exchange(spans(g)[r], losses[r], t, 0, nullptr);
    });
  for (auto& t : threads) t.join();
  const double u = std::ldexp(1.0, -24), gamma = (N - 1) * u / (1 - (N - 1) * u);
  std::size_t differ = 0;
  for (std::size_t t = 0; t < kLayers.size(); ++t)
    for (std::size_t k = 0; k < kLayers[t].numel; ++k) {
      double abs_sum = 0.0;
      for (int w = 0; w < N; ++w) abs_sum += std::fabs(g[w][t][k]);
      double bound = 2 * gamma * abs_sum / N;
      for (int r = 0; r < N; ++r) ASSERT_LE(std::fabs(static_cast<double>(got[r][t][k]) - expected[t][k]), bound) << t << " " << k;
      differ += got[0][t][k] != expected[t][k];
    }
  EXPECT_GT(differ, 0u) << "the ring order never changed a bit: the test transport does not exercise the bound";
  std::printf("float allreduce, 4 ranks: %zu of %zu elements differ from the simulation in the last bits\n", differ,
              std::size_t{500 + 20 + 4003 + 10});
}

// The bytes one worker sends and receives, from the formulas of the docs (independent of the code's
// own payload sizes): TernGrad 32-byte header + ceil(n/4) per tensor plus a ring allreduce of one
// float per tensor; QSGD 4 + ceil(n (1 + ceil(log2(s+1))) / 8); sign 4 + ceil(n / 8); float allgather
// 32 + 4n; float allreduce 2 (N-1)/N of 4 (sum n + 1) each way. Every buffer carries a 4-byte loss.
TEST(Exchange, UplinkAndDownlinkBytesFollowTheFormulas) {
  EXPECT_EQ(allgather_bytes(100, 4).uplink, 100u);
  EXPECT_EQ(allgather_bytes(100, 4).downlink, 300u);
  EXPECT_EQ(allgather_bytes(100, 1).downlink, 0u);
  EXPECT_EQ(ring_allreduce_bytes(1000, 4).uplink, 1500u);
  EXPECT_EQ(ring_allreduce_bytes(1000, 4).downlink, 1500u);
  EXPECT_EQ(ring_allreduce_bytes(1000, 2).uplink, 1000u);
  EXPECT_EQ(ring_allreduce_bytes(1000, 3).uplink, 1333u);  // 4000/3 rounded down
  EXPECT_EQ(ring_allreduce_bytes(1000, 1).uplink, 0u);
  const std::uint64_t n[] = {500, 20, 4003, 10}, total_n = 4533;
  const int N = 4;
  auto bytes_of = [&](GradCodec codec, FloatExchange how, int levels) {
    ExchangeOptions o;
    o.codec = codec;
    o.float_exchange = how;
    o.qsgd_levels = levels;
    return GradientExchange(kLayers, o, tg::make_optimized_codec(1)).step_bytes(N);
  };
  std::uint64_t tern = 4, q4 = 4, q1 = 4, q255 = 4, sign = 4, flt = 4;
  for (std::uint64_t m : n) {
    tern += 32 + (m + 3) / 4;
    const std::uint64_t norms = 4 * ((m + 511) / 512);  // default bucket: 512 elements per norm
    q4 += norms + (m * 4 + 7) / 8;    // s = 4: 1 + 3 bits
    q1 += norms + (m * 2 + 7) / 8;    // s = 1: 1 + 1 bits
    q255 += norms + (m * 9 + 7) / 8;  // s = 255: 1 + 8 bits
    sign += 4 + (m + 7) / 8;
    flt += 32 + 4 * m;
  }
  WireBytes t = bytes_of(GradCodec::terngrad, FloatExchange::allreduce, 4);
  EXPECT_EQ(t.uplink, tern + 2 * 3 * 16 / 4);
  EXPECT_EQ(t.downlink, 3 * tern + 2 * 3 * 16 / 4);
  EXPECT_EQ(bytes_of(GradCodec::qsgd, FloatExchange::allreduce, 4).uplink, q4);
  EXPECT_EQ(bytes_of(GradCodec::qsgd, FloatExchange::allreduce, 1).uplink, q1);
  EXPECT_EQ(bytes_of(GradCodec::qsgd, FloatExchange::allreduce, 255).downlink, 3 * q255);
  EXPECT_EQ(bytes_of(GradCodec::signsgd_ef, FloatExchange::allreduce, 4).uplink, sign);
  EXPECT_EQ(bytes_of(GradCodec::float32, FloatExchange::allgather, 4).downlink, 3 * flt);
  WireBytes f = bytes_of(GradCodec::float32, FloatExchange::allreduce, 4);
  EXPECT_EQ(f.uplink, 2 * 3 * 4 * (total_n + 1) / 4);
  EXPECT_EQ(f.downlink, f.uplink);
  EXPECT_EQ(qsgd_bits_per_element(1), 2);
  EXPECT_EQ(qsgd_bits_per_element(3), 3);
  EXPECT_EQ(qsgd_bits_per_element(4), 4);
  EXPECT_EQ(qsgd_bits_per_element(7), 4);
  EXPECT_EQ(qsgd_bits_per_element(8), 5);
  EXPECT_EQ(qsgd_bits_per_element(256), 10);
  EXPECT_THROW(qsgd_bits_per_element(0), std::invalid_argument);
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

// QSGD's levels: when s |g_k| / ||g_b||_2 is an integer for every k (g_b: k's bucket) the encoding is
// deterministic and decodes to g exactly. One bucket: g = (3, -4, 0, 0) has norm 5; s = 5 gives levels
// 3, 4, 0, 0. Buckets of 2: (3, -4 | 0, 5 | 1) has norms 5, 5, 1; s = 5 gives levels 3, 4, 0, 5, 5.
TEST(Qsgd, IntegerLevelsDecodeExactly) {
  const std::vector<float> g = {3.0f, -4.0f, 0.0f, 0.0f};
  std::vector<std::uint8_t> p(qsgd_payload_bytes(4, 5, 0));
  EXPECT_EQ(p.size(), 4u + 2u);  // 4 x (1 + 3) bits = 2 bytes
  std::vector<float> out(4);
  for (std::uint32_t step = 0; step < 20; ++step) {
    qsgd_encode(g, 5, 0, {7, 0, kQsgdTensorBase, step}, 0, p);
    qsgd_decode(p, 5, 0, out);
    EXPECT_EQ(out, g) << "step " << step;
  }
  p[4] = 0x07;  // element 0: level 7 > s = 5
  EXPECT_THROW(qsgd_decode(p, 5, 0, out), std::runtime_error);
  std::vector<float> bad = {1.0f, std::nanf("")};
  std::vector<std::uint8_t> q(qsgd_payload_bytes(2, 5, 0));
  EXPECT_THROW(qsgd_encode(bad, 5, 0, {}, 3, q), tg::NonFiniteError);

  const std::vector<float> h = {3.0f, -4.0f, 0.0f, 5.0f, 1.0f};
  std::vector<std::uint8_t> pb(qsgd_payload_bytes(5, 5, 2));
  EXPECT_EQ(pb.size(), 3u * 4u + 3u);  // 3 norms + 5 x 4 bits rounded up to 3 bytes
  std::vector<float> outb(5);
  for (std::uint32_t step = 0; step < 20; ++step) {
    qsgd_encode(h, 5, 2, {7, 0, kQsgdTensorBase, step}, 0, pb);
    qsgd_decode(pb, 5, 2, outb);
    EXPECT_EQ(outb, h) << "step " << step;
  }
  std::vector<std::uint8_t> bad_norm = pb;
  bad_norm[8 + 3] = 0xff;  // the third norm's top byte: a negative NaN
  EXPECT_THROW(qsgd_decode(bad_norm, 5, 2, outb), std::runtime_error);
  EXPECT_THROW(qsgd_decode(pb, 5, 0, outb), std::runtime_error);  // read with the wrong bucket size: wrong length
  EXPECT_THROW(qsgd_payload_bytes(5, 5, kQsgdMaxBucket + 1), std::invalid_argument);
}

// A bucket at least as large as the tensor is one bucket: the same bytes as bucket 0 for the same key.
TEST(Qsgd, BucketCoveringTheTensorEqualsOneBucket) {
  std::vector<float> g(37);
  for (int k = 0; k < 37; ++k) g[k] = static_cast<float>(((k * 13) % 11) - 5) / 3.0f;
  for (std::uint64_t d : {std::uint64_t{37}, std::uint64_t{64}}) {
    std::vector<std::uint8_t> a(qsgd_payload_bytes(37, 4, 0)), b(qsgd_payload_bytes(37, 4, d));
    qsgd_encode(g, 4, 0, {9, 1, kQsgdTensorBase + 1, 3}, 1, a);
    qsgd_encode(g, 4, d, {9, 1, kQsgdTensorBase + 1, 3}, 1, b);
    EXPECT_EQ(a, b) << "bucket " << d;
  }
}

// Unbiasedness of QSGD, one bucket and buckets of 16: per element the decoded value X takes one of two
// neighbouring levels norm_b * l / s and norm_b * (l+1) / s (norm_b: the L2 norm of k's bucket), so
// |X - E X| <= delta_k = norm_b / s and Var X <= delta_k^2 / 4. Over T = 4000 steps, Bernstein's
// inequality with eps = 0.06 delta_k gives
// P(|mean - g_k| >= eps) <= 2 exp(-T eps^2 / (2 Var + 2/3 delta_k eps)) = 2 exp(-26.7) = 5e-12 per element,
// so the false-fail probability over the 2 x 64 elements is below 7e-10 (the 2^-32 threshold resolution
// and float32 rounding of the decoded value move E X by under 1e-6 delta_k). Expected values are g_k,
// the input; delta_k is computed here from g, not by the code under test. Power: rounding down instead
// of stochastically (bias (r - floor r) delta_k, r = s |g_k| / norm_b) or rounding to nearest is off by
// more than 0.06 delta_k on every element whose fractional level lies in [0.06, 0.94] (most of the 64
// here), so it fails with probability > 1 - 7e-10; so does a norm taken over the wrong elements (levels
// of the wrong size decode to the wrong mean).
TEST(Qsgd, IsUnbiased) {
  const int s = 4, n = 64, T = 4000;
  std::vector<float> g(n);
  for (int k = 0; k < n; ++k) g[k] = static_cast<float>(((k * 37) % 29) - 14) / 7.0f;
  for (std::uint64_t d : {std::uint64_t{0}, std::uint64_t{16}}) {
    std::vector<double> delta(n);
    const int width = d == 0 ? n : static_cast<int>(d);
    for (int b = 0; b < n; b += width) {
      double sumsq = 0.0;
      for (int k = b; k < b + width; ++k) sumsq += static_cast<double>(g[k]) * g[k];
      for (int k = b; k < b + width; ++k) delta[k] = std::sqrt(sumsq) / s;
    }
    std::vector<double> mean(n, 0.0);
    std::vector<std::uint8_t> p(qsgd_payload_bytes(n, s, d));
    std::vector<float> out(n);
    for (int step = 0; step < T; ++step) {
      qsgd_encode(g, s, d, {20171204, 1, kQsgdTensorBase + 2, static_cast<std::uint32_t>(step)}, 2, p);
      qsgd_decode(p, s, d, out);
      for (int k = 0; k < n; ++k) mean[k] += out[k];
    }
    for (int k = 0; k < n; ++k)
      EXPECT_NEAR(mean[k] / T, g[k], 0.06 * delta[k]) << "bucket " << d << ", element " << k;
  }
}

// EF-SignSGD: the residual identity e_{t+1} = (g + e_t) - decoded holds exactly (float32), with
// decoded what the receiver decodes; the decoded magnitude is ||g + e_t||_1 / n (double, then float32).
// Deterministic: equalities, not statistics.
TEST(SignSgdEf, ResidualIdentityIsExact) {
  const std::vector<LayerInfo> layer = {{"w", 37}};
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> e(37, 0.0f), out(37);
  std::vector<std::uint8_t> p(sign_payload_bytes(37));
  EXPECT_EQ(p.size(), 4u + 5u);
  for (int step = 0; step < 10; ++step) {
    std::vector<float> g(37);
    for (auto& v : g) v = nd(rng);
    std::vector<float> before = e;
    signsgd_ef_encode(g, e, 0, p);
    sign_decode(p, out);
    double l1 = 0.0;
    for (int k = 0; k < 37; ++k) l1 += std::fabs(static_cast<double>(g[k] + before[k]));
    const auto scale = static_cast<float>(l1 / 37.0);
    for (int k = 0; k < 37; ++k) {
      float pk = g[k] + before[k];
      ASSERT_EQ(std::fabs(out[k]), scale) << step << " " << k;
      ASSERT_EQ(out[k] < 0.0f, pk < 0.0f) << step << " " << k;
      float expect = pk - out[k];
      ASSERT_EQ(0, std::memcmp(&e[k], &expect, 4)) << "residual identity, step " << step << " element " << k;
    }
  }
  // Through the exchange: each simulated worker keeps its own residual.
  ExchangeOptions o;
  o.codec = GradCodec::signsgd_ef;
  GradientExchange x(layer, o, tg::make_optimized_codec(1));
  auto g = random_grads(2, layer, 4);
  EXPECT_TRUE(x.residual(0, 0).empty());
  x.simulate(spans(g), {0, 0}, 0, nullptr);
  for (int w = 0; w < 2; ++w) {
    std::vector<float> zero(37, 0.0f), r = zero;
    std::vector<std::uint8_t> q(sign_payload_bytes(37));
    signsgd_ef_encode(g[w][0], r, 0, q);
    ASSERT_EQ(x.residual(w, 0).size(), 37u);
    EXPECT_EQ(0, std::memcmp(x.residual(w, 0).data(), r.data(), 4 * 37)) << "worker " << w;
  }
}
