// terngrad-bench: walks every kernel set compiled into the optimized CPU codec (portable, avx2, avx512;
// highway's per-target test loop). A set this CPU cannot run is skipped, naming the missing features.
// For each set: its own Philox4x32-10 generator against the published known answers, and each kernel
// against the reference codec at edge sizes derived from the set's width, every packing and clip mode.
//   build/cpu/tests/tg_codec_tests --gtest_filter='*KernelWalk*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "kernels.hpp"
#include "test_util.hpp"
#include "tg/codec.hpp"

namespace {
// memcmp with a zero length is still undefined behaviour on null pointers (empty vectors' data()).
bool bytes_equal(const void* a, const void* b, std::size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }
}  // namespace

namespace {

using tg::cpu::KernelSet;
using tg::cpu::kNoBadIndex;

constexpr std::uint8_t kPoison = 0xCA;  // pre-filled outputs: a kernel that writes nothing cannot pass
constexpr std::size_t kGuard = 64;      // poisoned elements past every output: nothing may be written there

TEST(KernelSets, TableIsWellFormed) {
  auto sets = tg::cpu::compiled_kernel_sets();
  ASSERT_GE(sets.size(), 1u);
  EXPECT_STREQ(sets[0].name, "portable");  // always compiled, always runs
  EXPECT_TRUE(sets[0].cpu_runs());
  std::set<std::string> names;
  for (std::size_t i = 0; i < sets.size(); ++i) {
    EXPECT_TRUE(names.insert(sets[i].name).second) << sets[i].name;
    EXPECT_EQ(sets[i].width % 4, 0u) << sets[i].name << ": whole Philox blocks per iteration";
    if (i > 0) {
      EXPECT_GT(sets[i].width, sets[i - 1].width) << "sets come in increasing width";
    }
    if (sets[i].cpu_runs()) {
      EXPECT_STREQ(sets[i].kernels()->name, sets[i].name);
    }
  }
}

class KernelWalk : public ::testing::TestWithParam<std::size_t> {
 protected:
  void SetUp() override {
    if (!set().cpu_runs())
      GTEST_SKIP() << "this CPU lacks " << set().needs << ": kernel set " << set().name << " not run";
    k_ = set().kernels();
  }
  const KernelSet& set() const { return tg::cpu::compiled_kernel_sets()[GetParam()]; }
  const tg::cpu::Kernels* k_ = nullptr;
};

// The stream key and block index under which philox_block computes exactly the raw Philox4x32-10 of
// a known-answer line: counter = {block, step, tensor, worker}, key = {seed lo, seed hi} (tg/philox.hpp).
tg::StreamKey key_of(const tg::test::PhiloxKat& kat) {
  return {kat.key[0] | (std::uint64_t{kat.key[1]} << 32), kat.counter.v[3], kat.counter.v[2], kat.counter.v[1]};
}

// Each known answer in every lane of the set's generator (the block is lane l of a run starting l
// blocks earlier; the counter wraps mod 2^32), and every other lane equal to tg::philox_block.
TEST_P(KernelWalk, PhiloxPublishedKnownAnswersInEveryLane) {
  auto kats = tg::test::read_philox_kat();
  ASSERT_EQ(kats.size(), 3u);
  const std::size_t lanes = 2 * set().width / 4;  // two iterations' worth of blocks
  for (std::size_t i = 0; i < kats.size(); ++i) {
    tg::StreamKey key = key_of(kats[i]);
    for (std::size_t lane = 0; lane < lanes; ++lane) {
      std::uint32_t first = kats[i].counter.v[0] - static_cast<std::uint32_t>(lane);
      std::vector<tg::PhiloxBlock> out(lane + 1 + kGuard);
      for (auto& b : out) b.v[0] = b.v[1] = b.v[2] = b.v[3] = 0xCACACACAu;
      k_->philox_blocks(key, first, lane + 1, out.data());
      for (int j = 0; j < 4; ++j)
        ASSERT_EQ(out[lane].v[j], kats[i].want.v[j]) << "vector " << i << " lane " << lane << " word " << j;
      for (std::size_t l = 0; l < lane; ++l) {
        tg::PhiloxBlock want = tg::philox_block(key, first + static_cast<std::uint32_t>(l));
        for (int j = 0; j < 4; ++j) ASSERT_EQ(out[l].v[j], want.v[j]) << "vector " << i << " lane " << l;
      }
      for (std::size_t l = lane + 1; l < out.size(); ++l) ASSERT_EQ(out[l].v[0], 0xCACACACAu) << "wrote past lane " << lane;
    }
  }
}

// The public bulk generator (tg::philox_blocks, the widest set this CPU runs): every count from 0 to
// 70 blocks, starting anywhere including just before the counter wraps, equals philox_block and writes
// nothing past count.
TEST(PhiloxBlocks, PublicGeneratorEqualsPhiloxBlock) {
  const tg::StreamKey key{0x0123456789abcdefULL, 3, 0x51000007u, 11};
  for (std::uint32_t first : {0u, 5u, 1000u, 0xFFFFFFFAu}) {
    for (std::size_t count = 0; count <= 70; ++count) {
      std::vector<tg::PhiloxBlock> out(count + kGuard);
      for (auto& b : out) b.v[0] = b.v[1] = b.v[2] = b.v[3] = 0xCACACACAu;
      tg::philox_blocks(key, first, count, out.data());
      for (std::size_t l = 0; l < count; ++l) {
        tg::PhiloxBlock want = tg::philox_block(key, first + static_cast<std::uint32_t>(l));
        for (int j = 0; j < 4; ++j) ASSERT_EQ(out[l].v[j], want.v[j]) << "first " << first << " count " << count << " block " << l;
      }
      for (std::size_t l = count; l < out.size(); ++l) ASSERT_EQ(out[l].v[0], 0xCACACACAu) << "wrote past count " << count;
    }
  }
}

std::string describe(const KernelSet& set, std::size_t n, const tg::Params& p) {
  return std::string(set.name) + " n=" + std::to_string(n) + " clip=" + tg::to_string(p.clip) +
         " packing=" + tg::to_string(p.packing);
}

template <typename T>
bool untouched(const std::vector<T>& buf, std::size_t from) {
  std::vector<std::uint8_t> poison((buf.size() - from) * sizeof(T), kPoison);
  return bytes_equal(buf.data() + from, poison.data(), poison.size());
}

// Payloads through the optimized codec built on this set alone, and each range kernel called directly
// on [0, n), against the reference: same bytes, nothing written past the output.
TEST_P(KernelWalk, SameResultsAsReferenceAtEdgeSizesOfItsWidth) {
  const tg::Codec& ref = tg::reference_codec();
  auto codec = tg::make_optimized_codec_isa(1, set().isa);
  for (std::size_t n : tg::test::edge_sizes(set().width)) {
    auto g = tg::test::awkward(n, 1000 + n);
    std::size_t first_bad = 0;
    ASSERT_EQ(k_->max_abs(g.data(), 0, n, &first_bad), ref.max_abs(g, 0)) << set().name << " n=" << n;
    ASSERT_EQ(first_bad, kNoBadIndex);
    tg::Moments mr = ref.moments(g), mo = codec->moments(g);  // one thread: chunk_totals over every chunk
    ASSERT_EQ(std::memcmp(&mr, &mo, sizeof mr), 0) << set().name << " n=" << n << std::hexfloat << " mean "
                                                   << mo.mean << " vs " << mr.mean << ", sigma " << mo.sigma
                                                   << " vs " << mr.sigma;
    for (const auto& p : tg::test::all_params()) {
      tg::StreamKey key{0x0123456789abcdefull + n, 5, 17, 99};
      auto want = tg::encode(ref, g, p, key);
      ASSERT_EQ(tg::encode(*codec, g, p, key), want) << describe(set(), n, p);
      auto dref = tg::decode(ref, want), dopt = tg::decode(*codec, want);
      ASSERT_EQ(dref.values.size(), dopt.values.size()) << describe(set(), n, p);
      ASSERT_TRUE(bytes_equal(dref.values.data(), dopt.values.data(), 4 * n)) << describe(set(), n, p);
      ASSERT_EQ(tg::decode_trits(*codec, want), tg::decode_trits(ref, want)) << describe(set(), n, p);

      tg::ScalarRule rule = tg::own_rule(ref, g, p, key.tensor);
      std::vector<std::int8_t> trits_ref(n);
      ref.ternarize(g, rule, key, trits_ref);
      std::vector<std::int8_t> trits(n + kGuard, static_cast<std::int8_t>(kPoison));
      k_->ternarize(g.data(), 0, n, rule, key, trits.data());
      ASSERT_TRUE(std::equal(trits_ref.begin(), trits_ref.end(), trits.begin())) << "ternarize " << describe(set(), n, p);
      ASSERT_TRUE(untouched(trits, n)) << "ternarize wrote past element n: " << describe(set(), n, p);

      std::size_t nb = tg::body_bytes(p.packing, n);
      std::vector<std::uint8_t> body_ref(nb);
      ref.encode_body(g, rule, key, p.packing, body_ref);
      std::vector<std::uint8_t> body(nb + kGuard, kPoison);
      (p.packing == tg::Packing::two_bit ? k_->encode_2bit : k_->encode_base3)(g.data(), 0, n, rule, key, body.data());
      ASSERT_TRUE(std::equal(body_ref.begin(), body_ref.end(), body.begin())) << "encode " << describe(set(), n, p);
      ASSERT_TRUE(untouched(body, nb)) << "encode wrote past the body: " << describe(set(), n, p);
      if (p.packing == tg::Packing::two_bit && k_->encode_2bit_stream) {  // the same bytes, streamed
        std::vector<std::uint8_t> streamed(nb + kGuard, kPoison);
        k_->encode_2bit_stream(g.data(), 0, n, rule, key, streamed.data());
        ASSERT_TRUE(std::equal(body_ref.begin(), body_ref.end(), streamed.begin())) << "encode_2bit_stream " << describe(set(), n, p);
        ASSERT_TRUE(untouched(streamed, nb)) << "encode_2bit_stream wrote past the body: " << describe(set(), n, p);
      }

      std::vector<float> out(n + kGuard);
      if (!out.empty()) std::memset(out.data(), kPoison, 4 * out.size());
      auto decode = p.packing == tg::Packing::two_bit ? k_->decode_2bit : k_->decode_base3;
      ASSERT_EQ(decode(body_ref.data(), n, 0, nb, rule.scalar, out.data()), kNoBadIndex) << describe(set(), n, p);
      std::vector<float> out_ref(n);
      ref.decode_body(p.packing, body_ref, rule.scalar, out_ref);
      ASSERT_TRUE(bytes_equal(out.data(), out_ref.data(), 4 * n)) << "decode " << describe(set(), n, p);
      ASSERT_TRUE(untouched(out, n)) << "decode wrote past element n: " << describe(set(), n, p);
    }
  }
}

// The first non-finite value is named wherever it falls: in the vector loop or in the tail.
TEST_P(KernelWalk, MaxAbsNamesTheFirstNonFiniteValue) {
  for (std::size_t n : tg::test::edge_sizes(set().width)) {
    if (n == 0) continue;
    for (std::size_t where : {std::size_t{0}, n / 2, n - 1}) {
      auto g = tg::test::gaussian(n, n);
      g[where] = std::numeric_limits<float>::infinity();
      g[n - 1] = std::nanf("");  // a later bad value must not be the one named
      std::size_t first_bad = kNoBadIndex;
      k_->max_abs(g.data(), 0, n, &first_bad);
      EXPECT_EQ(first_bad, where) << set().name << " n=" << n;
    }
  }
}

// Invalid 2bit bytes (code 11, nonzero padding) are found wherever they fall and the first is named.
TEST_P(KernelWalk, Decode2bitNamesTheFirstInvalidByte) {
  for (std::size_t n : tg::test::edge_sizes(set().width)) {
    if (n == 0) continue;
    std::size_t nb = tg::packed_bytes_2bit(n);
    std::vector<float> out(n);
    for (std::size_t j : {std::size_t{0}, nb / 2, nb - 1}) {
      std::vector<std::uint8_t> body(nb, 0x11);  // codes 01 00 01 00: valid, and padding-free below
      if (n % 4) body[nb - 1] = static_cast<std::uint8_t>(0x11 & ((1u << (2 * (n % 4))) - 1));
      body[j] = 0xC0;  // code 11 in the byte's last element
      if (j == nb - 1 && n % 4) body[j] = static_cast<std::uint8_t>(0x03);  // code 11 in its first
      body.back() = static_cast<std::uint8_t>(body.back() | (n % 4 ? 0x80 : 0xC0));  // a later defect too
      EXPECT_EQ(k_->decode_2bit(body.data(), n, 0, nb, 1.0f, out.data()), j) << set().name << " n=" << n;
    }
    if (n % 4) {  // valid codes, one padding bit set
      std::vector<std::uint8_t> body(nb, 0);
      body[nb - 1] = static_cast<std::uint8_t>(1u << (2 * (n % 4)));
      EXPECT_EQ(k_->decode_2bit(body.data(), n, 0, nb, 1.0f, out.data()), nb - 1) << set().name << " n=" << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Compiled, KernelWalk,
                         ::testing::Range<std::size_t>(0, tg::cpu::compiled_kernel_sets().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return std::string(tg::cpu::compiled_kernel_sets()[info.param].name);
                         });

}  // namespace
