// terngrad-bench: exactness of the optimized codec's fewer-pass encodes against the reference, at inputs
// chosen to stress them:
//  * the single-pass encode (running maximum seeded from a strided sample, decisions with it,
//    candidates not covered by their piece's guard stored and re-decided once the scalar is known,
//    pieces whose guard lies below the scalar encoded again): all-equal magnitudes, the maximum at the
//    first element (sampled) and at the last one (every piece unguarded: the redo path), a maximum
//    rising by more than the guard's factor several times, a maximum rising through the whole tensor
//    (candidates outgrow the buffer: the fallback), denormals, zeros, the maximum in another thread's
//    part, sizes off every multiple of 4, 16, 64 and of the sample stride;
//  * the fused clipping statistics (clip bound pinned from shifted sums, canonical sigma pass
//    otherwise): a large offset (bound not pinned: the fallback), tiny and zero variance, huge dynamic
//    range; the same statistics through tensor_stats, and encode_with_scalar with them.
// Each codec is made with a small per-thread minimum so that 1, 2 and 3 parts all run at these sizes,
// and takes the single pass at every size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <thread>
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
  for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{17}, std::size_t{63}, std::size_t{64},
                        std::size_t{65}, std::size_t{1029}, std::size_t{65537}, std::size_t{131075},
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
    // The maximum rises by a factor 3 (more than the guard's factor, 2) at four points that are not
    // piece boundaries: every piece before the last rise has a guard below the scalar.
    auto steps = tg::test::gaussian(n, n + 7);
    for (std::size_t k = 0; k < n; ++k) steps[k] *= std::pow(3.0f, static_cast<float>((5 * k) / n));
    out.push_back({"max rising by 3x four times" + at, steps});
    // The same, the rises 1.45x (inside the guard): later pieces are covered, their candidates re-decided.
    auto mild = tg::test::gaussian(n, n + 8);
    for (std::size_t k = 0; k < n; ++k) mild[k] *= std::pow(1.45f, static_cast<float>((5 * k) / n));
    out.push_back({"max rising by 1.45x four times" + at, mild});
    // The maximum at a sampled element (every 1024th) other than the first: the seed is the scalar.
    auto sampled = tg::test::gaussian(n, n + 9);
    sampled[(n - 1) / 1024 * 1024] = -25.0f;
    out.push_back({"max at the last sampled element" + at, sampled});
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

// Many streams over one gaussian tensor: the candidates each stream drops differ, so the re-check
// clears codes at every position of a byte and in every piece.
TEST(FewerPassEncode, SameBytesAsReferenceOverManySteps) {
  auto g = tg::test::gaussian(150001, 99);
  float rest = 0.0f;
  for (float x : g) rest = std::max(rest, std::fabs(x));
  // the maximum late and not sampled, 1.2x the rest: within the guard of the pieces whose running
  // maximum reached 1.2 rest / kGuard (2, optimized.cpp) at their start, so their stored candidates are
  // re-decided
  g[149000] = 1.2f * rest;
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

// The single pass's seed skips non-finite sampled values and the pass reports the first one: a NaN or
// an infinity at a sampled element (every 1024th), just before and just after one, and past the last
// sampled element, with a later bad value in another part and a large finite maximum before it; every
// kernel set, 1 and 3 parts. The error is the default path's: the first bad index.
TEST(FewerPassEncode, NonFiniteAroundSampledPositionsNamesTheFirst) {
  const std::size_t n = 70001;  // sampled: 0, 1024, ..., 69632
  const float bad_values[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()};
  for (std::size_t at : {std::size_t{0}, std::size_t{1023}, std::size_t{1024}, std::size_t{1025},
                         std::size_t{20480}, std::size_t{40961}, std::size_t{69632}, std::size_t{69633}, n - 1})
    for (float v : bad_values) {
      auto g = tg::test::gaussian(n, at);
      g[at] = v;
      if (at + 1 < n) g[n - 1] = std::numeric_limits<float>::quiet_NaN();  // a later one: not named
      if (at > 2048) g[2048] = 1e30f;                                        // a sampled maximum before it
      for (const auto& set : tg::cpu::compiled_kernel_sets()) {
        if (!set.cpu_runs()) continue;
        for (unsigned threads : {1u, 3u}) {
          auto codec = tg::cpu::make_optimized_codec_with(threads, set.kernels(), 20480, 0);
          try {
            tg::encode(*codec, g, {}, {1, 0, 9, 0});
            ADD_FAILURE() << set.name << " at=" << at << ": no error";
          } catch (const tg::NonFiniteError& e) {
            EXPECT_EQ(e.index(), at) << set.name << " threads=" << threads;
          }
        }
      }
    }
}

// The kernel contract of encode_2bit_running (kernels.hpp), element by element against the rules of
// tg/element.hpp: with the running maximum already at max |g| (so it never rises), the codes are those
// of make_rule(m, m), and the stored candidates are exactly those kept under m and not under the guard
// R, in element order, with their offsets from begin, uniforms and magnitudes; the state's count,
// settled and m. Every kernel set, guards below, at and above m (R = 0: every candidate stored), a
// range starting past 0 and sizes off the kernels' widths.
TEST(FewerPassEncode, RunningKernelStoresExactlyTheUnguardedCandidates) {
  const tg::StreamKey key{99, 1, 2, 3};
  for (std::size_t len : {std::size_t{1}, std::size_t{31}, std::size_t{64}, std::size_t{97}, std::size_t{5003}}) {
    const std::size_t begin = 148;  // a multiple of 4, not of 8, 32 or 64
    auto g = tg::test::gaussian(begin + len, len);
    float m = 0.0f;
    for (std::size_t k = begin; k < begin + len; ++k) m = std::max(m, std::fabs(g[k]));
    for (float guard : {0.0f, m, 1.5f * m, 2.0f * m}) {
      const tg::ScalarRule rule = tg::make_rule(m, m), at_guard = tg::make_rule(guard, guard);
      std::vector<std::uint32_t> want_pos, want_u;
      std::vector<float> want_a;
      std::vector<std::uint8_t> want_body((begin + len + 3) / 4, 0);
      std::size_t candidates = 0;
      for (std::size_t k = begin; k < begin + len; ++k) {
        const std::uint32_t u = tg::philox_block(key, static_cast<std::uint32_t>(k / 4)).v[k % 4];
        const int trit = tg::ternarize_element(g[k], rule, u);
        want_body[k / 4] = static_cast<std::uint8_t>(want_body[k / 4] | (tg::code_2bit(trit) << (2 * (k % 4))));
        candidates += trit != 0 ? 1 : 0;
        if (trit != 0 && !tg::keep(g[k], at_guard, u)) {
          want_pos.push_back(static_cast<std::uint32_t>(k - begin));
          want_u.push_back(u);
          want_a.push_back(std::fabs(g[k]));
        }
      }
      // the cases exercise what they name: R = 0 stores every candidate; at len 5003, R = 1.5 m stores
      // some candidates and not others
      if (guard == 0.0f) {
        ASSERT_EQ(want_pos.size(), candidates);
      }
      if (len == 5003 && guard == 1.5f * m) {
        ASSERT_TRUE(!want_pos.empty() && want_pos.size() < candidates);
      }
      for (const auto& set : tg::cpu::compiled_kernel_sets()) {
        if (!set.cpu_runs()) continue;
        const std::string at = std::string(set.name) + " len=" + std::to_string(len) + " guard/m=" +
                               std::to_string(m > 0 ? guard / m : 0.0f);
        const std::size_t cap = len + tg::cpu::kCandidateSlack + 5;
        std::vector<std::uint32_t> pos(cap, 0xdeadbeefu), us(cap);
        std::vector<float> as(cap);
        std::vector<std::uint8_t> body(want_body.size(), 0);
        tg::cpu::RunningPass st;
        st.m = m;
        st.count = 5;  // appends after what is there
        set.kernels()->encode_2bit_running(g.data(), begin, begin + len, guard, key, body.data(), pos.data(), us.data(),
                                           as.data(), &st);
        ASSERT_EQ(st.first_bad, tg::cpu::kNoBadIndex) << at;
        ASSERT_EQ(st.m, m) << at;
        ASSERT_EQ(st.settled, 0u) << at;
        ASSERT_EQ(st.count, 5 + want_pos.size()) << at;
        ASSERT_EQ(std::vector<std::uint8_t>(body.begin() + begin / 4, body.end()),
                  std::vector<std::uint8_t>(want_body.begin() + begin / 4, want_body.end()))
            << at;
        ASSERT_EQ(std::vector<std::uint32_t>(pos.begin() + 5, pos.begin() + 5 + want_pos.size()), want_pos) << at;
        ASSERT_EQ(std::vector<std::uint32_t>(us.begin() + 5, us.begin() + 5 + want_u.size()), want_u) << at;
        ASSERT_EQ(std::vector<float>(as.begin() + 5, as.begin() + 5 + want_a.size()), want_a) << at;
      }
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

namespace boundary {

// |g| whose product with scale lands next to u: one float below the last one with a*scale <= u (drop),
// that one (drop; a tie when a*scale == u exactly), and the next (keep). These are the decisions a kernel
// that computes the keep test in lower precision, or with another rounding, would get wrong.
float magnitude_at(std::uint32_t u, double scale, int which) {
  float a = static_cast<float>(static_cast<double>(u) / scale);
  const float inf = std::numeric_limits<float>::infinity();
  while (a > 0.0f && static_cast<double>(a) * scale > static_cast<double>(u)) a = std::nextafter(a, 0.0f);
  while (static_cast<double>(std::nextafter(a, inf)) * scale <= static_cast<double>(u)) a = std::nextafter(a, inf);
  if (which == 0) return a > 0.0f ? std::nextafter(a, 0.0f) : 0.0f;
  return which == 1 ? a : std::nextafter(a, inf);
}

// A tensor whose every element but the one holding the scalar s sits at the keep boundary of its own
// uniform under scalar s (the stream of `key`), cycling through the three cases above, random signs.
std::vector<float> at_boundary(std::size_t n, float s, std::size_t max_at, const tg::StreamKey& key) {
  const double scale = tg::kTwoPow32 / static_cast<double>(s);
  std::mt19937_64 rng(n);
  std::vector<float> g(n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint32_t u = tg::philox_block(key, static_cast<std::uint32_t>(k / 4)).v[k % 4];
    const float a = std::min(magnitude_at(u, scale, static_cast<int>(k % 3)), s);
    g[k] = (rng() & 1) ? -a : a;
  }
  g[max_at] = -s;
  return g;
}

}  // namespace boundary

// Every element at the edge of its keep decision (u against |g| * 2^32 / s, in double as tg::keep
// defines it), for scalars whose 2^32 / s is and is not a power of two, tiny and huge ones, with the
// maximum first (the single pass knows s from its seed) and last (every earlier decision made under a
// smaller running maximum, then re-decided or redone), through tg::encode on the single pass and on the
// two passes, and through encode_with_scalar with a shared scalar (the plain kernel): the bytes of the
// reference for every kernel set and 1 and 3 parts. The construction is checked too: about a third of the
// elements keep under the reference.
TEST(FewerPassEncode, DecisionsAtTheKeepBoundaryMatchReference) {
  const tg::StreamKey key{0x5eedf00dull, 3, 1, 12};
  for (float s : {1.0f, 0.7f, 3.3e-38f, 2.5e37f, 1e-30f})
    for (std::size_t n : {std::size_t{67}, std::size_t{70001}})
      for (std::size_t max_at : {std::size_t{0}, n - 1}) {
        auto g = boundary::at_boundary(n, s, max_at, key);
        auto want = tg::encode(tg::reference_codec(), g, {}, key);
        std::size_t kept = 0;
        for (float x : tg::decode(tg::reference_codec(), want).values) kept += x != 0.0f;
        EXPECT_GT(kept, n / 4) << "s=" << s << " n=" << n;
        EXPECT_LT(kept, n / 2) << "s=" << s << " n=" << n;
        // a shared scalar 1.5 s (above this worker's own maximum): a tensor at the boundaries under it
        auto gs = boundary::at_boundary(n, 1.5f * s, max_at, key);
        auto want_shared = tg::encode_with_scalar(tg::reference_codec(), gs, {}, key, 1.5f * s);
        for (const auto& set : tg::cpu::compiled_kernel_sets()) {
          if (!set.cpu_runs()) continue;
          for (unsigned threads : {1u, 3u})
            for (std::size_t single_from : {std::size_t{0}, std::size_t{1} << 40}) {
              auto codec = tg::cpu::make_optimized_codec_with(threads, set.kernels(), 20480, single_from);
              const std::string at = std::string(set.name) + " threads=" + std::to_string(threads) +
                                     (single_from ? " two passes" : " single pass") + " s=" + std::to_string(s) +
                                     " n=" + std::to_string(n) + " max_at=" + std::to_string(max_at);
              ASSERT_EQ(tg::encode(*codec, g, {}, key), want) << at;
              ASSERT_EQ(tg::encode_with_scalar(*codec, gs, {}, key, 1.5f * s), want_shared) << at;
            }
        }
      }
}

// The default codec's measured choice between the single pass and the two passes: the first tensors at or
// above the threshold alternate between the paths, the rest take the one chosen; every encode has the
// reference's bytes, before, during and after the choice, with 1 and 3 parts and several threads calling
// the same codec at once. Below the threshold nothing is measured.
TEST(FewerPassEncode, MeasuredPathChoiceKeepsTheBytes) {
  auto g = tg::test::gaussian(70001, 5);
  for (const auto& set : tg::cpu::compiled_kernel_sets()) {
    if (!set.cpu_runs() || !set.kernels()->encode_2bit_running) continue;
    for (unsigned threads : {1u, 3u}) {
      auto codec = tg::cpu::make_optimized_codec_with(threads, set.kernels(), 20480, 70001, true);
      std::vector<float> small(g.begin(), g.begin() + 70000);
      ASSERT_EQ(tg::encode(*codec, small, {}, {1, 0, 0, 0}), tg::encode(tg::reference_codec(), small, {}, {1, 0, 0, 0}));
      EXPECT_STREQ(tg::cpu::chosen_path(*codec), "measuring") << set.name;  // below the threshold: no trial
      for (std::uint32_t step = 0; step < 8; ++step) {
        ASSERT_EQ(tg::encode(*codec, g, {}, {1, 0, 0, step}), tg::encode(tg::reference_codec(), g, {}, {1, 0, 0, step}))
            << set.name << " threads=" << threads << " step=" << step;
        const std::string path = tg::cpu::chosen_path(*codec);
        if (step + 1 < 4) EXPECT_EQ(path, "measuring") << set.name << " step=" << step;
        else EXPECT_TRUE(path == "single pass" || path == "two passes") << set.name << " step=" << step << ": " << path;
      }
    }
    // concurrent callers while it measures
    auto codec = tg::cpu::make_optimized_codec_with(1, set.kernels(), 20480, 70001, true);
    std::vector<std::vector<std::uint8_t>> got(6);
    std::vector<std::thread> callers;
    for (std::uint32_t t = 0; t < 6; ++t)
      callers.emplace_back([&, t] { got[t] = tg::encode(*codec, g, {}, {2, 0, 0, t}); });
    for (auto& c : callers) c.join();
    for (std::uint32_t t = 0; t < 6; ++t)
      ASSERT_EQ(got[t], tg::encode(tg::reference_codec(), g, {}, {2, 0, 0, t})) << set.name << " caller " << t;
    EXPECT_STRNE(tg::cpu::chosen_path(*codec), "measuring") << set.name;
  }
  EXPECT_STREQ(tg::cpu::chosen_path(tg::reference_codec()), "not the optimized codec");
}

// Elements at the keep boundary of the single pass's guard: the running maximum is m from the start (the
// sampled first element), the last element is 2 m, so every piece's guard R = 2 m equals the final scalar
// and no piece is redone. Every element up to m sits at its keep boundary under 2 m (one float below,
// the tie, one above): each is kept under the running maximum m, so whether it is stored for the
// re-check rests on the guard test alone. A guard test that claims a keep it has not proved leaves a
// code that the final scalar drops. Every kernel set, 1 and 3 parts, the single pass forced.
TEST(FewerPassEncode, GuardBoundaryCandidatesAreReDecided) {
  const tg::StreamKey key{0x6a09e667f3bcc908ull, 7, 2, 3};
  for (float m : {0.75f, 1.0f, 3e-20f})
    for (std::size_t n : {std::size_t{70001}, std::size_t{200003}}) {
      const float s = 2.0f * m;
      const double scale = tg::kTwoPow32 / static_cast<double>(s);
      std::vector<float> g(n);
      std::mt19937_64 rng(n);
      for (std::size_t k = 1; k + 1 < n; ++k) {
        const std::uint32_t u = tg::philox_block(key, static_cast<std::uint32_t>(k / 4)).v[k % 4];
        const float a = std::min(boundary::magnitude_at(u, scale, static_cast<int>(k % 3)), m);
        g[k] = (rng() & 1) ? -a : a;
      }
      g[0] = m;
      g[n - 1] = -s;  // not a sampled position (one per 16384 elements)
      const auto want = tg::encode(tg::reference_codec(), g, {}, key);
      for (const auto& set : tg::cpu::compiled_kernel_sets()) {
        if (!set.cpu_runs()) continue;
        for (unsigned threads : {1u, 3u}) {
          auto codec = tg::cpu::make_optimized_codec_with(threads, set.kernels(), 20480, 0);
          ASSERT_EQ(tg::encode(*codec, g, {}, key), want)
              << set.name << " threads=" << threads << " m=" << m << " n=" << n;
        }
      }
    }
}

// A zero uniform against a magnitude whose product with 2^32 / s underflows in float: tg::keep keeps it
// (0 < |g| * scale in double) although every float product is 0. A float prefilter that reads u >= |g| * hi
// as "not kept" without u > 0 drops it. The stream below has u = 0 at element 3417 (found by a search
// over steps; the test checks it). The tensor's maximum (2.5e37, first or last) makes 2^32 / s ~ 1.7e-28,
// so the smallest subnormal times it is ~2.4e-73 in double and 0 in float. The same element at +0 is not
// kept (0 < 0 fails). Every kernel set, 1 and 3 parts, the single pass and the two passes, and a shared
// scalar through encode_with_scalar (the plain kernel, with and without a cap).
TEST(FewerPassEncode, ZeroUniformAgainstAnUnderflowingProductKeepsAsReference) {
  const tg::StreamKey key{0x5eedf00dull, 3, 1, 85531};
  const std::size_t at = 3417, n = 3500;
  ASSERT_EQ(tg::philox_block(key, static_cast<std::uint32_t>(at / 4)).v[at % 4], 0u);
  const float tiny = std::numeric_limits<float>::denorm_min();
  for (float value : {tiny, -tiny, 0.0f})
    for (std::size_t max_at : {std::size_t{0}, n - 1}) {
      std::vector<float> g = tg::test::gaussian(n, 9);
      g[max_at] = 2.5e37f;
      g[at] = value;
      const auto want = tg::encode(tg::reference_codec(), g, {}, key);
      const float got_at = tg::decode(tg::reference_codec(), want).values[at];
      // the construction: the reference keeps the subnormal (with its sign) and drops the zero
      if (value == 0.0f) ASSERT_EQ(got_at, 0.0f);
      else ASSERT_EQ(got_at, std::copysign(2.5e37f, value)) << value;
      const auto want_shared = tg::encode_with_scalar(tg::reference_codec(), g, {}, key, 3e37f);
      tg::Params clip;
      clip.clip = tg::ClipMode::clip;
      const auto want_clip = tg::encode(tg::reference_codec(), g, clip, key);
      for (const auto& set : tg::cpu::compiled_kernel_sets()) {
        if (!set.cpu_runs()) continue;
        for (unsigned threads : {1u, 3u})
          for (std::size_t single_from : {std::size_t{0}, std::size_t{1} << 40}) {
            auto codec = tg::cpu::make_optimized_codec_with(threads, set.kernels(), 1024, single_from);
            const std::string where = std::string(set.name) + " threads=" + std::to_string(threads) +
                                      (single_from ? " two passes" : " single pass") + " value=" +
                                      std::to_string(value) + " max_at=" + std::to_string(max_at);
            ASSERT_EQ(tg::encode(*codec, g, {}, key), want) << where;
            ASSERT_EQ(tg::encode_with_scalar(*codec, g, {}, key, 3e37f), want_shared) << where;
            ASSERT_EQ(tg::encode(*codec, g, clip, key), want_clip) << where;
          }
      }
    }
}
