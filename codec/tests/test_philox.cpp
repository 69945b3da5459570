// terngrad-bench: Philox4x32-10 known answers (published Random123 vectors, codec/tests/data/philox_kat.txt)
// and the stream keying of tg/philox.hpp. Each kernel set's own generator: test_kernels.cpp.
#include <gtest/gtest.h>

#include <set>

#include "test_util.hpp"
#include "tg/philox.hpp"

namespace {

TEST(Philox, PublishedKnownAnswers) {
  auto kats = tg::test::read_philox_kat();
  ASSERT_EQ(kats.size(), 3u);
  for (std::size_t i = 0; i < kats.size(); ++i) {
    const auto& k = kats[i];
    tg::PhiloxBlock got = tg::philox4x32_10(k.counter, k.key[0], k.key[1]);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(got.v[j], k.want.v[j]) << "word " << j << " of vector " << i;
  }
}

TEST(Philox, StreamKeyPacking) {
  // counter = {block, step, tensor, worker}, key = {seed lo, seed hi} (tg/philox.hpp)
  tg::StreamKey key{0x1122334455667788ull, 7, 9, 11};
  tg::PhiloxBlock want = tg::philox4x32_10({{5, 11, 9, 7}}, 0x55667788u, 0x11223344u);
  tg::PhiloxBlock got = tg::philox_block(key, 5);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(got.v[j], want.v[j]);
}

TEST(Philox, DistinctKeysGiveDistinctBlocks) {
  std::set<std::uint32_t> seen;
  int blocks = 0;
  for (std::uint64_t seed : {0ull, 1ull, 1ull << 32})
    for (std::uint32_t w : {0u, 1u})
      for (std::uint32_t t : {0u, 1u})
        for (std::uint32_t s : {0u, 1u}) {
          seen.insert(tg::philox_block({seed, w, t, s}, 0).v[0]);
          ++blocks;
        }
  // 24 distinct (key, counter) pairs; a 32-bit collision among 24 words has probability ~7e-8.
  EXPECT_EQ(static_cast<int>(seen.size()), blocks);
}

}  // namespace
