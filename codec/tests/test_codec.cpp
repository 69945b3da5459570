// terngrad-bench: codec unit tests: every CPU implementation against the reference (edge sizes,
// unaligned pointers, thread counts, clipping modes, packings), the deterministic facts, errors,
// shared scalars, layer-wise encoding, aggregation, and a loose Monte-Carlo smoke test.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include <sys/wait.h>
#include <unistd.h>

#include "kernels.hpp"
#include "test_util.hpp"
#include "tg/codec.hpp"

namespace {

// Edge sizes of every kernel set compiled in (test_kernels.cpp walks each set at its own sizes; here
// every codec of the table, threaded ones included, meets all of them), and of base3's 5 per byte.
std::vector<std::size_t> all_edge_sizes() {
  std::vector<std::size_t> out;
  for (const auto& set : tg::cpu::compiled_kernel_sets())
    for (std::size_t n : tg::test::edge_sizes({set.width, 5})) out.push_back(n);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

using tg::test::all_params;

TEST(CrossImplementation, SameBytesAtEdgeSizesForEveryParameter) {
  auto table = tg::cpu_codecs(3);
  ASSERT_GE(table.size(), 3u);
  for (std::size_t n : all_edge_sizes()) {
    auto g = tg::test::awkward(n, n + 1);
    for (const auto& p : all_params()) {
      tg::StreamKey key{0xfeedbeefcafef00dull + n, 3, 17, 123456};
      auto want = tg::encode(*table[0].codec, g, p, key);
      for (std::size_t i = 1; i < table.size(); ++i)
        ASSERT_EQ(tg::encode(*table[i].codec, g, p, key), want)
            << table[i].name << " n=" << n << " clip=" << tg::to_string(p.clip) << " packing="
            << tg::to_string(p.packing);
    }
  }
}

// Threads split tensors of at least ~1M elements per thread: 4100003 elements give up to 4 parts.
TEST(CrossImplementation, SameBytesAtAnyThreadCount) {
  auto g = tg::test::awkward(4100003, 77);
  tg::Params p;
  p.clip = tg::ClipMode::clip;
  tg::StreamKey key{9, 1, 2, 3};
  auto want = tg::encode(tg::reference_codec(), g, p, key);
  for (unsigned t : {1u, 2u, 3u, 4u, 8u}) {
    for (bool portable : {false, true}) {
      auto codec = tg::make_optimized_codec(t, portable);
      EXPECT_EQ(codec->max_abs(g, 0), 50.0f);
      EXPECT_EQ(tg::encode(*codec, g, p, key), want) << codec->name();
      auto dref = tg::decode(tg::reference_codec(), want);
      auto dopt = tg::decode(*codec, want);
      EXPECT_EQ(std::memcmp(dref.values.data(), dopt.values.data(), 4 * dref.values.size()), 0)
          << codec->name();
    }
  }
}

// A process forked after the codec's worker threads started (Python's multiprocessing with fork, say) has
// none of them: its encodes must start threads of their own and not wait for the parent's workers. The
// child's encode is bounded by an alarm, so a wait that never ends fails the test instead of hanging it.
TEST(CrossImplementation, ForkedChildEncodesWithoutTheParentsWorkers) {
  auto g = tg::test::awkward(250007, 5);
  const tg::StreamKey key{4, 0, 1, 2};
  const auto want = tg::encode(tg::reference_codec(), g, {}, key);
  for (const auto& set : tg::cpu::compiled_kernel_sets()) {
    if (!set.cpu_runs()) continue;
    auto codec = tg::cpu::make_optimized_codec_with(3, set.kernels(), 20480, std::size_t(-1));
    ASSERT_EQ(tg::encode(*codec, g, {}, key), want) << set.name;  // the workers now exist
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::alarm(20);
      int rc = 0;
      for (int r = 0; r < 3; ++r) rc |= tg::encode(*codec, g, {}, key) != want;
      codec.reset();  // the pool's destructor must not wait for workers that are not there either
      ::_exit(rc);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status)) << set.name << ": the child was killed by signal "
                                   << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << " (SIGALRM = 14: it hung)";
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0) << set.name << ": the child's bytes differ";
    EXPECT_EQ(tg::encode(*codec, g, {}, key), want) << set.name;  // and the parent's workers still serve
  }
}

// A tensor between the two thread thresholds (2 parts from 409,600 elements while the workers sleep, from
// 51,200 while they poll after a call) runs on the calling thread until the workers it woke poll, then in two
// parts: the same bytes either way, for every packing and clipping mode. The loop ends once three calls took
// the polling threshold (or after 20 s, which fails: the workers never polled in time).
TEST(CrossImplementation, CallsBetweenTheThreadThresholdsGiveTheSameBytes) {
  auto codec = tg::make_optimized_codec(2);
  ASSERT_EQ(tg::cpu::default_min_per_thread(), 204800u) << "the sizes below assume this threshold";
  auto g = tg::test::awkward(100003, 5);
  std::vector<std::vector<std::uint8_t>> want;
  const auto params = all_params();
  tg::StreamKey key{5, 1, 2, 3};
  for (const auto& p : params) want.push_back(tg::encode(tg::reference_codec(), g, p, key));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::size_t calls = 0;
  while (tg::cpu::polled_parallel_calls(*codec) < 3 && std::chrono::steady_clock::now() < deadline) {
    const std::size_t i = calls++ % params.size();
    ASSERT_EQ(tg::encode(*codec, g, params[i], key), want[i]) << "call " << calls;
  }
  EXPECT_GE(tg::cpu::polled_parallel_calls(*codec), 3u) << "after " << calls << " calls";
  EXPECT_EQ(tg::cpu::polled_parallel_calls(tg::reference_codec()), 0u);
}

TEST(CrossImplementation, MomentsAreBitIdentical) {
  for (std::size_t n : {1ul, 2047ul, 2048ul, 2049ul, 100000ul, 1000003ul}) {
    auto g = tg::test::gaussian(n, n, 3.0f);
    for (auto& x : g) x += 1000.0f;  // a large mean: the two-pass sigma must not cancel
    tg::Moments want = tg::reference_codec().moments(g);
    for (const auto& entry : tg::cpu_codecs(4)) {
      tg::Moments got = entry.codec->moments(g);
      EXPECT_EQ(std::memcmp(&got.mean, &want.mean, 8), 0) << entry.name << " n=" << n << std::hexfloat
                                                           << " " << got.mean << " vs " << want.mean;
      EXPECT_EQ(std::memcmp(&got.sigma, &want.sigma, 8), 0) << entry.name << " n=" << n;
    }
    if (n > 1000) {
      EXPECT_NEAR(want.sigma, 3.0, 0.1);
    }
  }
}

// Inputs that start off any SIMD boundary (float offsets 1..7 from a 32-byte boundary), and trit
// and body buffers at odd byte offsets. (A float* off its 4-byte alignment is undefined in C++.)
TEST(CrossImplementation, UnalignedPointers) {
  auto g = tg::test::awkward(4099, 5);
  for (std::size_t offset = 1; offset < 8; ++offset) {
    std::vector<float> storage(g.size() + 8);
    std::copy(g.begin(), g.end(), storage.begin() + offset);
    std::span<const float> shifted(storage.data() + offset, g.size());
    for (const auto& entry : tg::cpu_codecs(2)) {
      tg::ScalarRule rule = tg::own_rule(*entry.codec, shifted, {}, 3);
      std::vector<std::int8_t> trits_raw(g.size() + 8, 0x5a);
      std::span<std::int8_t> trits(trits_raw.data() + offset, g.size());
      entry.codec->ternarize(shifted, rule, {1, 2, 3, 4}, trits);
      std::vector<std::int8_t> ref(g.size());
      tg::reference_codec().ternarize(g, rule, {1, 2, 3, 4}, ref);
      EXPECT_TRUE(std::equal(ref.begin(), ref.end(), trits.begin())) << entry.name << " offset " << offset;
      for (auto packing : {tg::Packing::two_bit, tg::Packing::base3}) {
        std::size_t nb = tg::body_bytes(packing, g.size());
        std::vector<std::uint8_t> body_raw(nb + 8, 0xCA), ref_body(nb, 0xCA);
        std::span<std::uint8_t> body(body_raw.data() + offset, nb);
        entry.codec->encode_body(shifted, rule, {1, 2, 3, 4}, packing, body);
        tg::reference_codec().encode_body(g, rule, {1, 2, 3, 4}, packing, ref_body);
        EXPECT_TRUE(std::equal(ref_body.begin(), ref_body.end(), body.begin())) << entry.name;
        EXPECT_EQ(body_raw[offset - 1], 0xCA) << "wrote before the body";
        EXPECT_EQ(body_raw[offset + nb], 0xCA) << "wrote past the body";
      }
    }
  }
}

TEST(Codec, DeterministicFacts) {
  auto g = tg::test::awkward(5003, 9);
  for (const auto& entry : tg::cpu_codecs(2))
    for (std::uint32_t step = 0; step < 20; ++step) {
      std::vector<std::int8_t> t(g.size());
      float s = tg::ternarize(*entry.codec, g, {}, {1, 0, 0, step}, t);
      ASSERT_EQ(s, 50.0f);
      for (std::size_t k = 0; k < g.size(); ++k) {
        if (g[k] == 0.0f) { ASSERT_EQ(t[k], 0) << "zero kept at " << k; }
        if (std::fabs(g[k]) == s) { ASSERT_EQ(t[k], g[k] > 0 ? 1 : -1) << "max dropped at " << k; }
        if (t[k] != 0) { ASSERT_EQ(t[k] > 0, g[k] > 0) << "sign flipped at " << k; }
      }
    }
}

TEST(Codec, AllZeroTensorGivesZeroScalarAndZeros) {
  std::vector<float> g(1000, 0.0f);
  g[3] = -0.0f;
  for (const auto& entry : tg::cpu_codecs(2))
    for (const auto& p : all_params()) {
      auto d = tg::decode(*entry.codec, tg::encode(*entry.codec, g, p, {}));
      EXPECT_EQ(d.header.scalar, 0.0f);
      for (float v : d.values) ASSERT_EQ(v, 0.0f);
      for (float v : d.values) ASSERT_FALSE(std::isnan(v));
    }
}

TEST(Codec, NonFiniteInputIsATypedErrorNamingTensorAndIndex) {
  for (const auto& entry : tg::cpu_codecs(3)) {
    for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      // 2500000 elements: the threaded codec splits them in two; bad values in either part
      for (std::size_t where : {0ul, 6ul, 200000ul, 1500000ul, 2499999ul}) {
        auto g = tg::test::gaussian(2500000, 1);
        g[where] = bad;
        g[2499999] = bad;  // a later bad value must not be the one reported
        try {
          tg::encode(*entry.codec, g, {}, {0, 0, 42, 0});
          ADD_FAILURE() << entry.name << " accepted a non-finite value";
        } catch (const tg::NonFiniteError& e) {
          EXPECT_EQ(e.code(), tg::ErrorCode::non_finite);
          EXPECT_EQ(e.tensor(), 42u);
          EXPECT_EQ(e.index(), where) << entry.name;
          EXPECT_NE(std::string(e.what()).find("tensor 42"), std::string::npos) << e.what();
        }
      }
    }
  }
}

TEST(Codec, InvalidParametersAreRejected) {
  auto g = tg::test::gaussian(10, 1);
  tg::Params p;
  for (double c : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    p.c = c;
    EXPECT_THROW(tg::encode(tg::reference_codec(), g, p, {}), tg::Error);
  }
  p = {};
  p.packing = tg::Packing::float32;
  EXPECT_THROW(tg::encode(tg::reference_codec(), g, p, {}), tg::Error);
  EXPECT_THROW(tg::parse_clip_mode("clamp"), tg::Error);
  EXPECT_THROW(tg::parse_packing("3bit"), tg::Error);
  EXPECT_THROW(tg::encode_with_scalar(tg::reference_codec(), g, {}, {}, -1.0f), tg::Error);
}

TEST(Codec, ClippingScalarIsCSigma) {
  auto g = tg::test::gaussian(100000, 3);
  g[10] = 100.0f;
  tg::Params p;
  p.clip = tg::ClipMode::clip;
  tg::Moments m = tg::reference_codec().moments(g);
  float s = tg::tensor_scalar(tg::reference_codec(), g, p, 0);
  EXPECT_EQ(s, static_cast<float>(2.5 * m.sigma));
  p.clip = tg::ClipMode::saturate;
  EXPECT_EQ(tg::tensor_scalar(tg::reference_codec(), g, p, 0), s);
  p.clip = tg::ClipMode::none;
  EXPECT_EQ(tg::tensor_scalar(tg::reference_codec(), g, p, 0), 100.0f);
}

// encode_with_scalar with the worker's tensor_stats: the same bytes as without (float32 tensors below
// float_below included), and statistics of another tensor size, clipping mode or c are refused.
TEST(Codec, EncodeWithScalarReusesTensorStats) {
  auto g = tg::test::gaussian(5000, 21);
  for (const auto& entry : tg::cpu_codecs(2)) {
    for (const auto& p : all_params()) {
      tg::TensorStats st = tg::tensor_stats(*entry.codec, g, p, 3);
      EXPECT_EQ(st.scalar, tg::tensor_scalar(tg::reference_codec(), g, p, 3)) << entry.name;
      for (std::uint64_t float_below : {std::uint64_t{0}, std::uint64_t{6000}}) {
        tg::Params q = p;
        q.float_below = float_below;
        tg::StreamKey key{7, 1, 3, 2};
        EXPECT_EQ(tg::encode_with_scalar(*entry.codec, g, q, key, 2.0f * st.scalar, st),
                  tg::encode_with_scalar(tg::reference_codec(), g, q, key, 2.0f * st.scalar))
            << entry.name << " clip=" << tg::to_string(p.clip) << " float_below=" << float_below;
      }
    }
  }
  tg::Params clip;
  clip.clip = tg::ClipMode::clip;
  const tg::Codec& ref = tg::reference_codec();
  tg::TensorStats st = tg::tensor_stats(ref, g, clip, 0);
  auto expect_refused = [&](std::span<const float> x, const tg::Params& p, float s, const char* what) {
    try {
      tg::encode_with_scalar(ref, x, p, {}, s, st);
      ADD_FAILURE() << what << ": accepted";
    } catch (const tg::Error& e) {
      EXPECT_EQ(e.code(), tg::ErrorCode::invalid_argument) << what;
      EXPECT_NE(std::string(e.what()).find("tensor_stats"), std::string::npos) << what << ": " << e.what();
    }
  };
  expect_refused(std::span<const float>(g).first(4999), clip, st.scalar, "another size");
  tg::Params other = clip;
  other.clip = tg::ClipMode::none;
  expect_refused(g, other, st.scalar, "another clipping mode");
  other = clip;
  other.c = 3.0;
  expect_refused(g, other, st.scalar, "another c");
  EXPECT_THROW(tg::encode_with_scalar(ref, g, clip, {}, -1.0f, st), tg::Error);
  // saturate and clip give the same bytes, but statistics name their mode: refused too.
  other = clip;
  other.clip = tg::ClipMode::saturate;
  expect_refused(g, other, st.scalar, "saturate for clip");
}

// encode_into and encode_with_scalar_into write every byte of the payload: a reused buffer full of other
// bytes, of the same size (overwritten, not cleared), larger or smaller, gives what encode returns, for every
// codec, packing and clipping mode, with threads, and on the single pass (a threshold of 0 sends every
// unclipped 2bit tensor there). An encode that throws leaves the buffer empty.
TEST(Codec, EncodeIntoWritesEveryByteOfAReusedBuffer) {
  std::vector<tg::CodecEntry> codecs = tg::cpu_codecs(3);
  for (const auto& set : tg::cpu::compiled_kernel_sets())
    if (set.cpu_runs())
      codecs.push_back({std::string(set.name) + " single pass, 2 threads",
                        tg::cpu::make_optimized_codec_with(2, set.kernels(), 20480, 0)});
  for (std::size_t n : {std::size_t{1}, std::size_t{17}, std::size_t{1029}, std::size_t{70001}}) {
    auto g = tg::test::awkward(n, n + 5);
    for (const auto& p : all_params()) {
      tg::StreamKey key{31 + n, 2, 5, 8};
      auto want = tg::encode(tg::reference_codec(), g, p, key);
      tg::TensorStats st = tg::tensor_stats(tg::reference_codec(), g, p, key.tensor);
      auto want_shared = tg::encode_with_scalar(tg::reference_codec(), g, p, key, 1.5f * st.scalar);
      for (const auto& entry : codecs)
        for (std::size_t have : {std::size_t{0}, want.size() / 2, want.size(), want.size() + 100}) {
          std::vector<std::uint8_t> out(have, 0xA5), shared(have, 0x5A), shared_st(have, 0xFF);
          tg::encode_into(*entry.codec, g, p, key, out);
          tg::encode_with_scalar_into(*entry.codec, g, p, key, 1.5f * st.scalar, shared);
          tg::encode_with_scalar_into(*entry.codec, g, p, key, 1.5f * st.scalar, st, shared_st);
          const std::string what = entry.name + " n=" + std::to_string(n) + " clip=" + tg::to_string(p.clip) +
                                   " packing=" + tg::to_string(p.packing) + " buffer=" + std::to_string(have);
          ASSERT_EQ(out, want) << what;
          ASSERT_EQ(shared, want_shared) << what;
          ASSERT_EQ(shared_st, want_shared) << what;
        }
    }
  }
  // failures: a NaN near the end (the single pass meets it after writing most of the body), bad parameters
  auto g = tg::test::gaussian(70001, 3);
  g[69000] = std::nanf("");
  tg::Params bad_c;
  bad_c.clip = tg::ClipMode::clip;
  bad_c.c = -1.0;
  for (const auto& entry : codecs) {
    std::vector<std::uint8_t> out(17532, 0xA5);
    EXPECT_THROW(tg::encode_into(*entry.codec, g, {}, {}, out), tg::NonFiniteError) << entry.name;
    EXPECT_TRUE(out.empty()) << entry.name;
    out.assign(17532, 0xA5);
    EXPECT_THROW(tg::encode_with_scalar_into(*entry.codec, g, {}, {}, 1.0f, out), tg::NonFiniteError) << entry.name;
    EXPECT_TRUE(out.empty()) << entry.name;
    out.assign(17532, 0xA5);
    EXPECT_THROW(tg::encode_into(*entry.codec, std::span<const float>(g).first(1000), bad_c, {}, out), tg::Error)
        << entry.name;
    EXPECT_TRUE(out.empty()) << entry.name;
  }
}

TEST(Codec, SharedScalarAndExactAggregation) {
  const int workers = 5;
  std::vector<std::vector<float>> grads;
  std::vector<float> scalars;
  for (int w = 0; w < workers; ++w) {
    grads.push_back(tg::test::gaussian(1001, 100 + w, 1.0f + w));
    scalars.push_back(tg::tensor_scalar(tg::reference_codec(), grads.back(), {}, 7));
  }
  float s = tg::shared_scalar(scalars);
  EXPECT_EQ(s, *std::max_element(scalars.begin(), scalars.end()));
  for (const auto& entry : tg::cpu_codecs(2)) {
    std::vector<std::vector<std::uint8_t>> payloads;
    for (int w = 0; w < workers; ++w)
      payloads.push_back(tg::encode_with_scalar(*entry.codec, grads[w], {}, {5, std::uint32_t(w), 7, 1}, s));
    std::vector<std::span<const std::uint8_t>> views(payloads.begin(), payloads.end());
    tg::Aggregate agg = tg::aggregate(*entry.codec, views);
    EXPECT_EQ(agg.workers, 5u);
    std::vector<double> mean(1001, 0.0);
    std::vector<int> sums(1001, 0);
    for (auto& pl : payloads) {
      auto t = tg::decode_trits(tg::reference_codec(), pl);
      for (std::size_t k = 0; k < t.size(); ++k) sums[k] += t[k];
    }
    for (std::size_t k = 0; k < 1001; ++k) {
      ASSERT_EQ(agg.sums[k], sums[k]);
      ASSERT_LE(std::abs(agg.sums[k]), workers);
      ASSERT_EQ(agg.mean[k], static_cast<float>(double(s) * sums[k] / workers));
    }
  }
  // payloads with different scalars cannot be aggregated exactly
  auto a = tg::encode(tg::reference_codec(), grads[0], {}, {0, 0, 7, 0});
  auto b = tg::encode(tg::reference_codec(), grads[1], {}, {0, 1, 7, 0});
  // payloads that do not match are refused naming the field that differs and the fix for it
  const std::vector<float> shorter(grads[0].begin(), grads[0].begin() + 500);
  auto c = tg::encode(tg::reference_codec(), shorter, {}, {0, 1, 7, 0});
  auto other_tensor = tg::encode(tg::reference_codec(), grads[0], {}, {0, 1, 8, 0});
  for (const auto& [second, want] : {std::pair<const std::vector<std::uint8_t>*, std::string>{&b, "shared scalar"},
                                     {&c, "500 elements"},
                                     {&other_tensor, "different tensors"}}) {
    std::vector<std::span<const std::uint8_t>> views = {a, *second};
    try {
      tg::aggregate(tg::reference_codec(), views);
      ADD_FAILURE() << "aggregated mismatched payloads: " << want;
    } catch (const tg::Error& e) {
      EXPECT_EQ(e.code(), tg::ErrorCode::scalar_mismatch);
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      if (second != &b) EXPECT_EQ(std::string(e.what()).find("shared scalar"), std::string::npos) << e.what();
    }
  }
}

TEST(Codec, LayerwiseEqualsIndependentEncodes) {
  std::vector<std::vector<float>> layers = {tg::test::gaussian(500, 1, 0.01f), tg::test::gaussian(17, 2, 1.0f),
                                            tg::test::gaussian(3000, 3, 100.0f)};
  std::vector<std::span<const float>> views(layers.begin(), layers.end());
  tg::StreamKey key{11, 2, 10, 5};
  auto payloads = tg::encode_layers(tg::reference_codec(), views, {}, key);
  ASSERT_EQ(payloads.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    tg::StreamKey k = key;
    k.tensor = 10 + static_cast<std::uint32_t>(i);
    EXPECT_EQ(payloads[i], tg::encode(tg::reference_codec(), layers[i], {}, k));
    float m = 0.0f;
    for (float x : layers[i]) m = std::max(m, std::fabs(x));
    EXPECT_EQ(tg::decode(tg::reference_codec(), payloads[i]).header.scalar, m);
  }
}

// Loose Monte-Carlo smoke test of E[g~] = g and of the variance identity (the battery does the real
// statistics). 4000 draws of 64 coordinates; |mean - g_k| per coordinate has sd <= s/(2 sqrt(4000))
// = 0.0079 s; the bound 8 sd gives a false-fail probability below 64 * 2 * Phi(-8) ~ 1e-13.
TEST(Codec, MonteCarloSmoke) {
  auto g = tg::test::gaussian(64, 21);
  float s = 0;
  for (float x : g) s = std::max(s, std::fabs(x));
  const int draws = 4000;
  std::vector<double> mean(64, 0.0);
  double sq = 0.0;
  std::vector<std::int8_t> t(64);
  for (int d = 0; d < draws; ++d) {
    tg::ternarize(tg::reference_codec(), g, {}, {3, 0, 0, static_cast<std::uint32_t>(d)}, t);
    for (int k = 0; k < 64; ++k) {
      double v = s * t[k];
      mean[k] += v / draws;
      sq += (v - g[k]) * (v - g[k]) / draws;
    }
  }
  for (int k = 0; k < 64; ++k) EXPECT_NEAR(mean[k], g[k], 8 * 0.5 * s / std::sqrt(draws)) << k;
  double want = tg::variance_identity(g);
  // Var of one draw's squared error <= 64 s^4 / 4; sd of the mean over 4000 draws <= 0.063 s^2.
  EXPECT_NEAR(sq, want, 8 * 0.063 * s * s);
}

}  // namespace
