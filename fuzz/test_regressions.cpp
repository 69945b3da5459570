// terngrad-bench: replays the fuzz seed corpus (fuzz/corpus) and every input a fuzzer ever crashed on
// (fuzz/regressions/<target>/) through the same property checks as the fuzz targets (checks.hpp),
// so each crash found becomes a permanent regression test. Runs from the repository root:
//   build/<preset>/fuzz/tg_reliability_tests --gtest_filter='FuzzRegressions.*'
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "checks.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<std::pair<std::string, std::vector<std::uint8_t>>> files_in(const fs::path& dir) {
  std::vector<std::pair<std::string, std::vector<std::uint8_t>>> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().filename().string().starts_with(".")) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    out.emplace_back(entry.path().string(),
                     std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The seed corpus holds valid payloads of every packing (what the decode fuzzers start from).
TEST(FuzzRegressions, SeedCorpusHoldsValidPayloadsOfEveryPacking) {
  auto seeds = files_in("fuzz/corpus/decode");
  ASSERT_FALSE(seeds.empty()) << "run from the repository root; fuzz/corpus/decode is missing";
  bool seen[3] = {false, false, false};
  for (const auto& [name, bytes] : seeds) {
    auto spec = tg::fuzz::spec_decode(bytes);
    ASSERT_TRUE(spec.has_value()) << name << " is not a valid payload";
    seen[static_cast<int>(spec->packing)] = true;
    EXPECT_LE(bytes.size(), 256u) << name << ": keep seeds small";
  }
  EXPECT_TRUE(seen[0] && seen[1] && seen[2]) << "a packing has no seed";
}

TEST(FuzzRegressions, DecodeInputsKeepTheirProperties) {
  auto codecs = tg::cpu_codecs(2);
  std::size_t n = 0;
  for (const char* dir : {"fuzz/corpus/decode", "fuzz/regressions/decode", "fuzz/regressions/decode_resealed"}) {
    for (auto& [name, bytes] : files_in(dir)) {
      ++n;
      try {
        tg::fuzz::check_decode(codecs, bytes);  // raw
        tg::fuzz::reseal(bytes);
        tg::fuzz::check_decode(codecs, bytes);  // as the resealing target sees it
      } catch (const tg::fuzz::PropertyViolation& e) {
        ADD_FAILURE() << name << ": " << e.what();
      }
    }
  }
  EXPECT_GT(n, 0u);
}

TEST(FuzzRegressions, EncodeInputsKeepTheirProperties) {
  auto codecs = tg::cpu_codecs(2);
  std::size_t n = 0;
  for (const char* dir : {"fuzz/corpus/encode", "fuzz/regressions/encode"}) {
    for (const auto& [name, bytes] : files_in(dir)) {
      auto c = tg::fuzz::encode_case_from_bytes(bytes);
      if (!c) continue;
      ++n;
      try {
        tg::fuzz::check_encode(codecs, *c);
      } catch (const tg::fuzz::PropertyViolation& e) {
        ADD_FAILURE() << name << ": " << e.what();
      }
    }
  }
  EXPECT_GT(n, 0u);
}

}  // namespace

#ifdef TG_HAVE_NPY
#include "npy_checks.hpp"

namespace {

TEST(FuzzRegressions, NpyInputsKeepTheirProperties) {
  std::size_t n = 0, parsed = 0;
  for (const char* dir : {"fuzz/corpus/npy", "fuzz/regressions/npy"}) {
    for (const auto& [name, bytes] : files_in(dir)) {
      ++n;
      try {
        tg::fuzz::check_npy(bytes);
        tg::verify::parse_npy(bytes);
        ++parsed;
      } catch (const tg::fuzz::PropertyViolation& e) {
        ADD_FAILURE() << name << ": " << e.what();
      } catch (const tg::Error&) {
      }
    }
  }
  EXPECT_GT(n, 0u);
  EXPECT_GT(parsed, 0u) << "the npy seed corpus holds no valid file";
}

}  // namespace
#endif
