// terngrad-bench: Philox4x32-10 known answers (published Random123 vectors, tests/data/philox_kat.txt)
// and the stream keying of tg/philox.hpp.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "tg/philox.hpp"

namespace {

TEST(Philox, PublishedKnownAnswers) {
  std::ifstream in("tests/data/philox_kat.txt");
  ASSERT_TRUE(in) << "tests/data/philox_kat.txt missing (run ctest from the build tree)";
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string name;
    tg::PhiloxBlock ctr, want;
    std::uint32_t k0, k1;
    ls >> name >> std::hex >> ctr.v[0] >> ctr.v[1] >> ctr.v[2] >> ctr.v[3] >> k0 >> k1 >> want.v[0] >>
        want.v[1] >> want.v[2] >> want.v[3];
    ASSERT_EQ(name, "philox4x32") << line;
    tg::PhiloxBlock got = tg::philox4x32_10(ctr, k0, k1);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(got.v[j], want.v[j]) << "word " << j << " of: " << line;
    ++checked;
  }
  EXPECT_EQ(checked, 3);
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
