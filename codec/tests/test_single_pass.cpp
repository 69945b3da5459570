// terngrad-bench: exactness of the optimized codec's fewer-pass encodes against the reference, at inputs
// chosen to stress them:
//  * the single-pass encode (decisions with the running maximum, candidates re-decided once the scalar
//    is known): all-equal magnitudes, the maximum at the last element, a maximum rising through the
//    whole tensor (candidates outgrow the buffer: the redo path), denormals, zeros, the maximum in
//    another thread's part;
//  * the fused clipping statistics (clip bound pinned from shifted sums, canonical sigma pass
//    otherwise): a large offset (bound not pinned: the fallback), tiny and zero variance, huge dynamic
//    range; the same statistics through tensor_stats, and encode_with_scalar with them.
// Each codec is made with a small per-thread minimum so that 1, 2 and 3 parts all run at these sizes,
// and takes the single pass at every size.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels.hpp"
#include "test_util.hpp"
#include "tg/codec.hpp"

namespace {

struct Case {
  std::string name;
  std::vector<float> g;
};

std::vector<float> random_signs(std::size_t n, float magnitude, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> g(n);
  for (auto& x : g) x = (rng() & 1) ? -magnitude : magnitude;
  return g;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (std::size_t n : {std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{65}, std::size_t{65537},
                        std::size_t{200003}}) {
    const std::string at = " n=" + std::to_string(n);
    out.push_back({"all equal magnitudes" + at, random_signs(n, 0.75f, n)});
    auto last = tg::test::gaussian(n, n + 1);
    last[n - 1] = 1000.0f;  // every earlier candidate was decided with a smaller maximum
    out.push_back({"max at the last element" + at, last});
    std::vector<float> rising(n);  // the maximum rises at every element: nearly all are candidates
    for (std::size_t k = 0; k < n; ++k) rising[k] = (k % 2 ? -1.0f : 1.0f) * static_cast<float>(k + 1);
    out.push_back({"max rising linearly" + at, rising});
    std::vector<float> geometric(n);
    for (std::size_t k = 0; k < n; ++k) geometric[k] = std::ldexp(1.0f + 0.5f * std::sin(float(k)), int(k % 100) - 50 + int(k / 8192));
    out.push_back({"max rising geometrically with noise" + at, geometric});
    auto denormal = tg::test::gaussian(n, n + 2);
    for (auto& x : denormal) x *= 1e-40f;  // subnormal floats (and some zeros)
    out.push_back({"denormals" + at, denormal});
    std::vector<float> zeros(n, 0.0f);
    out.push_back({"zeros" + at, zeros});
    zeros[n / 2] = -0.0f;
    zeros[n - 1] = 3e-45f;
    out.push_back({"zeros, -0 and one denormal last" + at, zeros});
    auto offset = tg::test::gaussian(n, n + 3);
    for (auto& x : offset) x = 1000.0f + 1e-3f * x;  // mean >> sigma: the shifted sums cancel
    out.push_back({"large offset, small sigma" + at, offset});
    auto outlier = tg::test::gaussian(n, n + 6, 1e-3f);
    outlier[0] = 1000.0f;  // the shift of the sums is g[0]: far from the mean, their bound is loose (fallback)
    out.push_back({"first element an outlier" + at, outlier});
    auto range = tg::test::gaussian(n, n + 4);
    for (std::size_t k = 0; k < n; ++k) range[k] *= std::ldexp(1.0f, int(k % 120) - 60);
    out.push_back({"huge dynamic range" + at, range});
    out.push_back({"awkward" + at, tg::test::awkward(n, n + 5)});
  }
  // The maximum in the second of two parts, after part one settled on a smaller one.
  auto split = tg::test::gaussian(300000, 11);
  split[250000] = 40.0f;
  out.push_back({"max in a later part", split});
  return out;
}

TEST(FewerPassEncode, SameBytesAsReferenceAtAdversarialInputs) {
  std::vector<tg::Params> params;
  for (auto clip : {tg::ClipMode::none, tg::ClipMode::clip, tg::ClipMode::saturate})
    for (double c : {2.5, 0.5}) {
      tg::Params p;
      p.clip = clip;
      p.c = c;
      params.push_back(p);
    }
  const tg::StreamKey key{0x1234567890abcdefull, 2, 5, 77};
  for (const Case& c : cases())
    for (const auto& p : params) {
      auto want = tg::encode(tg::reference_codec(), c.g, p, key);
      for (const auto& set : tg::cpu::compiled_kernel_sets()) {
        if (!set.cpu_runs()) continue;
        for (unsigned threads : {1u, 2u, 3u}) {
          auto codec = tg::cpu::make_optimized_codec_with(threads, set.kernels(), 20480, 0);
          ASSERT_EQ(tg::encode(*codec, c.g, p, key), want)
              << set.name << " threads=" << threads << " " << c.name << " clip=" << tg::to_string(p.clip)
              << " c=" << p.c;
        }
    }
  }
}

// tensor_stats (Codec::clip_stats: the fused one-pass statistics on the optimized codec) gives the
// reference's max |g|, clip bound and scalar at the same adversarial inputs, and encode_with_scalar
// with those statistics gives the reference's encode_with_scalar bytes, for a shared scalar equal to the
// worker's own and above it (a larger worker's), at 1 and 3 threads.
TEST(FewerPassEncode, TensorStatsAndEncodeWithThemMatchReference) {
  const tg::Codec& ref = tg::reference_codec();
  const tg::StreamKey key{0x0badc0ffee0ddf00ull, 1, 4, 9};
  for (const Case& c : cases())
    for (auto clip : {tg::ClipMode::none, tg::ClipMode::clip, tg::ClipMode::saturate})
      for (double cf : {2.5, 0.5}) {
        tg::Params p;
        p.clip = clip;
        p.c = cf;
        const float want_max = ref.max_abs(c.g, 0);
        const float want_bound = tg::clip_bound(ref, c.g, p);
        const float want_scalar = tg::tensor_scalar(ref, c.g, p, 4);
        for (float shared : {want_scalar, want_scalar * 1.75f + 1e-30f}) {
          auto want = tg::encode_with_scalar(ref, c.g, p, key, shared);
          for (const auto& set : tg::cpu::compiled_kernel_sets()) {
            if (!set.cpu_runs()) continue;
            for (unsigned threads : {1u, 3u}) {
              auto codec = tg::cpu::make_optimized_codec_with(threads, set.kernels(), 20480, 0);
              const std::string at = std::string(set.name) + " threads=" + std::to_string(threads) + " " + c.name +
                                     " clip=" + tg::to_string(clip) + " c=" + std::to_string(cf);
              tg::TensorStats st = tg::tensor_stats(*codec, c.g, p, 4);
              ASSERT_EQ(st.count, c.g.size()) << at;
              ASSERT_EQ(st.max_abs, want_max) << at;
              ASSERT_EQ(st.bound, want_bound) << at;
              ASSERT_EQ(st.scalar, want_scalar) << at;
              ASSERT_EQ(tg::tensor_scalar(*codec, c.g, p, 4), want_scalar) << at;
              ASSERT_EQ(tg::encode_with_scalar(*codec, c.g, p, key, shared, st), want) << at << " shared=" << shared;
            }
          }
        }
      }
}

// Many streams over one gaussian tensor: the candidates each stream drops differ, so the re-check's
// walk over the codes meets drops in every position of its 32-code words and across its batches.
TEST(FewerPassEncode, SameBytesAsReferenceOverManySteps) {
  auto g = tg::test::gaussian(150001, 99);
  g[149000] = 9.0f;  // the maximum late: most candidates are re-decided
  for (const auto& set : tg::cpu::compiled_kernel_sets()) {
    if (!set.cpu_runs()) continue;
    auto codec = tg::cpu::make_optimized_codec_with(2, set.kernels(), 20480, 0);
    for (std::uint32_t step = 0; step < 20; ++step) {
      tg::StreamKey key{42, 0, 1, step};
      ASSERT_EQ(tg::encode(*codec, g, {}, key), tg::encode(tg::reference_codec(), g, {}, key))
          << set.name << " step=" << step;
    }
  }
}

// A non-finite value stops the single pass and the fused statistics pass with the same error as the
// default path: the first bad index, even when a later part also holds one.
TEST(FewerPassEncode, NonFiniteNamesTheFirstBadIndex) {
  auto g = tg::test::gaussian(100000, 5);
  g[70001] = std::numeric_limits<float>::quiet_NaN();
  g[30007] = -std::numeric_limits<float>::infinity();
  for (const auto& set : tg::cpu::compiled_kernel_sets()) {
    if (!set.cpu_runs()) continue;
    auto codec = tg::cpu::make_optimized_codec_with(3, set.kernels(), 20480, 0);
    for (auto clip : {tg::ClipMode::none, tg::ClipMode::clip}) {
      tg::Params p;
      p.clip = clip;
      try {
        tg::encode(*codec, g, p, {1, 0, 9, 0});
        ADD_FAILURE() << set.name << ": no error";
      } catch (const tg::NonFiniteError& e) {
        EXPECT_EQ(e.index(), 30007u) << set.name;
        EXPECT_EQ(e.tensor(), 9u) << set.name;
      }
      try {
        tg::tensor_stats(*codec, g, p, 9);
        ADD_FAILURE() << set.name << ": tensor_stats gave no error";
      } catch (const tg::NonFiniteError& e) {
        EXPECT_EQ(e.index(), 30007u) << set.name;
        EXPECT_EQ(e.tensor(), 9u) << set.name;
      }
    }
  }
}

}  // namespace

// A codec on both sides of its single-pass threshold (the two passes below it, the single pass from it
// on; the same comparison as the default kSinglePassFrom, at a size a unit test can afford), every
// kernel set, 1 and 2 threads: the same bytes as the reference. The maximum sits late, so the single
// pass has candidates to re-decide.
TEST(FewerPassEncode, SameBytesAsReferenceOnBothSidesOfTheThreshold) {
  const std::size_t from = 3 * 20480;
  for (std::size_t n : {from - 4, from, from + 5}) {
    auto g = tg::test::gaussian(n, n);
    g[n - n / 5] = 7.5f;
    const tg::StreamKey key{7, 0, 3, 11};
    auto want = tg::encode(tg::reference_codec(), g, {}, key);
    for (const auto& set : tg::cpu::compiled_kernel_sets()) {
      if (!set.cpu_runs()) continue;
      for (unsigned threads : {1u, 2u}) {
        auto codec = tg::cpu::make_optimized_codec_with(threads, set.kernels(), 20480, from);
        ASSERT_EQ(tg::encode(*codec, g, {}, key), want) << codec->name() << " n=" << n;
      }
    }
  }
}
