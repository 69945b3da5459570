// terngrad-bench: tests of the checkpoint envelope's residual section (no LibTorch): EF-SignSGD
// residuals survive seal/open bit for bit; a section of the wrong shape, a missing one, an unexpected
// one, a corrupted or truncated one is refused with one line naming the problem; a format 1 file
// (before the section existed) still opens; an exchange given a worker's residuals continues exactly
// as the exchange that computed them. Run: ctest -R tg_train_core_test
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "tg/format.hpp"
#include "tg/train/checkpoint_file.hpp"
#include "tg/train/exchange.hpp"

namespace fs = std::filesystem;
using namespace tg::train;

namespace {

fs::path temp_file(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tg_checkpoint_file_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d / name;
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le(std::uint64_t v, int bytes) {
  std::string s;
  for (int k = 0; k < bytes; ++k) s.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
  return s;
}

// The envelope written from the format's description in checkpoint_file.hpp, not by seal_checkpoint:
// archive | section | manifest | "TGCKPT01" | u64 manifest bytes | u64 archive bytes | u32 CRC32C | u32 0.
std::string seal_by_hand(const std::string& archive, const std::string& section, const std::string& manifest) {
  std::string body = archive + section + manifest;
  std::uint32_t c = tg::crc32c({reinterpret_cast<const std::uint8_t*>(body.data()), body.size()});
  return body + "TGCKPT01" + le(manifest.size(), 8) + le(archive.size(), 8) + le(c, 4) + le(0, 4);
}

CheckpointManifest manifest(std::size_t workers, std::vector<std::size_t> numel) {
  CheckpointManifest m;
  m.fingerprint = "lenet|signsgd-ef|2";
  m.step = 15;
  m.tensors = {{"conv1.weight", "[4, 1]"}, {"conv1.bias", "[4]"}};
  m.residual_workers = workers;
  m.residual_numel = std::move(numel);
  return m;
}

// Values whose bits a text or rounding round trip would change: -0, a subnormal, the largest float.
Residuals sample_residuals(std::size_t workers, const std::vector<std::size_t>& numel) {
  std::mt19937_64 rng(17);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Residuals r(workers);
  for (auto& w : r)
    for (std::size_t n : numel) {
      std::vector<float> v(n);
      for (auto& x : v) x = nd(rng);
      if (n > 2) v[0] = -0.0f, v[1] = std::numeric_limits<float>::denorm_min(), v[2] = std::numeric_limits<float>::max();
      w.push_back(std::move(v));
    }
  return r;
}

// The message of the std::invalid_argument that opening `p` with `expect` throws ("" if none).
std::string refusal(const fs::path& p, const CheckpointManifest& expect) {
  try {
    Residuals r;
    open_checkpoint(p.string(), expect, nullptr, &r);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CheckpointResiduals, RoundTripBitForBit) {
  const std::vector<std::size_t> numel = {4, 4};
  Residuals r = sample_residuals(2, numel);
  fs::path p = temp_file("roundtrip.ckpt");
  write_bytes(p, seal_checkpoint("ARCHIVE", manifest(2, numel), &r));
  long step = -1;
  Residuals got;
  EXPECT_EQ(open_checkpoint(p.string(), manifest(2, numel), &step, &got), "ARCHIVE");
  EXPECT_EQ(step, 15);
  ASSERT_EQ(got.size(), 2u);
  for (std::size_t w = 0; w < 2; ++w) {
    ASSERT_EQ(got[w].size(), 2u);
    for (std::size_t t = 0; t < 2; ++t) {
      ASSERT_EQ(got[w][t].size(), numel[t]);
      EXPECT_EQ(0, std::memcmp(got[w][t].data(), r[w][t].data(), 4 * numel[t])) << "worker " << w << ", tensor " << t;
    }
  }
  // The section's bytes are where the format says: after the archive, u64 count then float32, little-endian.
  std::ifstream in(p, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 7u + 8u + 16u);
  EXPECT_EQ(bytes.substr(7, 8), le(4, 8));
  std::uint32_t bits;
  std::memcpy(&bits, &r[0][0][3], 4);
  EXPECT_EQ(bytes.substr(7 + 8 + 12, 4), le(bits, 4));
  fs::remove_all(p.parent_path());
}

// Every refusal is one line that names the problem; a run of another shape never gets residuals.
TEST(CheckpointResiduals, WrongShapeMissingOrUnexpectedIsRefused) {
  const std::vector<std::size_t> numel = {4, 4};
  Residuals r = sample_residuals(2, numel);
  fs::path p = temp_file("shape.ckpt");
  write_bytes(p, seal_checkpoint("ARCHIVE", manifest(2, numel), &r));
  struct Case {
    CheckpointManifest expect;
    std::string says;
  };
  for (const Case& c : {Case{manifest(4, numel), "its residual section holds 2 workers, this run has 4"},
                        Case{manifest(2, {4, 4, 4}), "its residual section holds 2 tensors per worker, this model has 3"},
                        Case{manifest(2, {4, 5}), "the residual of worker 0, tensor 1 has 4 elements, this model's tensor has 5"},
                        Case{manifest(0, {}), "holds error-feedback residuals, which this run"}}) {
    std::string why = refusal(p, c.expect);
    EXPECT_NE(why.find("checkpoint " + p.string() + " refused: "), std::string::npos) << why;
    EXPECT_NE(why.find(c.says), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
  // A checkpoint of a run without residuals, resumed by one that needs them.
  write_bytes(p, seal_checkpoint("ARCHIVE", manifest(0, {})));
  std::string why = refusal(p, manifest(2, numel));
  EXPECT_NE(why.find("holds no error-feedback residuals (format 2"), std::string::npos) << why;
  fs::remove_all(p.parent_path());
}

// Sections altered with a valid CRC (so the shape checks, not the CRC, must catch them), a flipped
// byte, a truncated file.
TEST(CheckpointResiduals, AlteredCorruptedOrTruncatedSectionIsRefused) {
  const std::vector<std::size_t> numel = {3, 2};
  Residuals r = sample_residuals(1, numel);
  std::string section;
  for (std::size_t t = 0; t < 2; ++t) {
    section += le(numel[t], 8);
    for (float v : r[0][t]) {
      std::uint32_t bits;
      std::memcpy(&bits, &v, 4);
      section += le(bits, 4);
    }
  }
  const std::string head = "format 2\nfingerprint lenet|signsgd-ef|2\nstep 15\ntensor conv1.weight [4, 1]\ntensor conv1.bias [4]\n";
  auto man = [&](std::size_t bytes) { return head + "residuals 1 2 " + std::to_string(bytes) + "\n"; };
  fs::path p = temp_file("altered.ckpt");
  const CheckpointManifest expect = manifest(1, numel);

  write_bytes(p, seal_by_hand("ARCHIVE", section, man(section.size())));  // the hand-made file is a good one
  Residuals got;
  EXPECT_EQ(open_checkpoint(p.string(), expect, nullptr, &got), "ARCHIVE");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(0, std::memcmp(got[0][0].data(), r[0][0].data(), 12));

  struct Case {
    std::string file, says;
  };
  std::string wrong_count = section;
  wrong_count[0] = 5;  // tensor 0 claims 5 elements
  std::string short_section = section.substr(0, section.size() - 4);
  std::string long_section = section + le(0, 4);
  for (const Case& c :
       {Case{seal_by_hand("ARCHIVE", wrong_count, man(section.size())), "the residual of worker 0, tensor 0 has 5 elements, this model's tensor has 3"},
        Case{seal_by_hand("ARCHIVE", short_section, man(short_section.size())), "ends inside the residual of worker 0, tensor 1"},
        Case{seal_by_hand("ARCHIVE", long_section, man(long_section.size())), "has 4 bytes after the last residual"},
        Case{seal_by_hand("ARCHIVE", section, man(section.size() + 4)), "the residual section is 36 bytes, the manifest says 40"},
        Case{seal_by_hand("ARCHIVE", section, head + "residuals 1 two 36\n"), "malformed residuals line"},
        Case{seal_by_hand("ARCHIVE", section, head), "the residual section is 36 bytes, the manifest says 0"}}) {
    write_bytes(p, c.file);
    std::string why = refusal(p, expect);
    EXPECT_NE(why.find(c.says), std::string::npos) << "expected '" << c.says << "', got '" << why << "'";
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
  std::string good = seal_by_hand("ARCHIVE", section, man(section.size()));
  std::string flipped = good;
  flipped[7 + 8 + 1] ^= 0x10;  // a bit of worker 0's first residual value
  write_bytes(p, flipped);
  EXPECT_NE(refusal(p, expect).find("(corrupted)"), std::string::npos) << refusal(p, expect);
  write_bytes(p, good.substr(0, good.size() - 1));
  EXPECT_NE(refusal(p, expect).find("no terngrad integrity footer"), std::string::npos) << refusal(p, expect);
  fs::remove_all(p.parent_path());
}

// A format 1 checkpoint (archive | manifest | footer, no section) opens for a run that keeps no
// residuals, and is refused by an EF-SignSGD run with a line saying why.
TEST(CheckpointResiduals, FormatOneStillOpensWithoutResiduals) {
  fs::path p = temp_file("format1.ckpt");
  write_bytes(p, seal_by_hand("ARCHIVE", "", "format 1\nfingerprint lenet|signsgd-ef|2\nstep 15\n"
                                              "tensor conv1.weight [4, 1]\ntensor conv1.bias [4]\n"));
  long step = -1;
  EXPECT_EQ(open_checkpoint(p.string(), manifest(0, {}), &step), "ARCHIVE");
  EXPECT_EQ(step, 15);
  std::string why = refusal(p, manifest(2, {4, 4}));
  EXPECT_NE(why.find("holds no error-feedback residuals (format 1, written before checkpoints kept them)"), std::string::npos)
      << why;
  fs::remove_all(p.parent_path());
}

// What a resume does with the residuals: a fresh exchange given every worker's residuals after step 1
// produces, at steps 2 and 3, the bits of the exchange that ran all four steps.
TEST(CheckpointResiduals, RestoredExchangeContinuesBitForBit) {
  const std::vector<LayerInfo> layers = {{"w", 37}, {"b", 5}};
  ExchangeOptions o;
  o.codec = GradCodec::signsgd_ef;
  o.params.float_below = 0;
  GradientExchange whole(layers, o, tg::make_optimized_codec(1)), first(layers, o, tg::make_optimized_codec(1));
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto grads = [&] {
    std::vector<std::vector<std::vector<float>>> g(2);
    for (auto& w : g)
      for (const auto& l : layers) {
        std::vector<float> v(l.numel);
        for (auto& x : v) x = nd(rng);
        w.push_back(std::move(v));
      }
    return g;
  };
  auto spans = [](const std::vector<std::vector<std::vector<float>>>& g) {
    std::vector<std::vector<std::span<const float>>> s;
    for (const auto& w : g) {
      s.emplace_back();
      for (const auto& t : w) s.back().emplace_back(t);
    }
    return s;
  };
  std::vector<std::vector<std::vector<std::vector<float>>>> steps;
  for (int k = 0; k < 4; ++k) steps.push_back(grads());
  std::vector<std::vector<std::vector<float>>> expected;
  for (std::uint32_t k = 0; k < 4; ++k) {
    auto out = whole.simulate(spans(steps[k]), {0, 0}, k, nullptr);
    if (k < 2) first.simulate(spans(steps[k]), {0, 0}, k, nullptr);
    else expected.push_back(out);
  }
  GradientExchange resumed(layers, o, tg::make_optimized_codec(1));
  for (std::size_t w = 0; w < 2; ++w) {
    std::vector<std::vector<float>> r;
    for (std::size_t t = 0; t < layers.size(); ++t) r.emplace_back(first.residual(w, t).begin(), first.residual(w, t).end());
    resumed.set_residuals(w, std::move(r));
  }
  for (std::uint32_t k = 2; k < 4; ++k) {
    auto out = resumed.simulate(spans(steps[k]), {0, 0}, k, nullptr);
    for (std::size_t t = 0; t < layers.size(); ++t)
      EXPECT_EQ(0, std::memcmp(out[t].data(), expected[k - 2][t].data(), 4 * layers[t].numel)) << "step " << k << ", tensor " << t;
  }
  // Without the residuals (what a resume used to do) the next step differs: the check above can fail.
  GradientExchange fresh(layers, o, tg::make_optimized_codec(1));
  auto out = fresh.simulate(spans(steps[2]), {0, 0}, 2, nullptr);
  EXPECT_NE(0, std::memcmp(out[0].data(), expected[0][0].data(), 4 * 37));
  // Residuals of the wrong shape are refused.
  EXPECT_THROW(resumed.set_residuals(0, {std::vector<float>(37)}), std::invalid_argument);
  EXPECT_THROW(resumed.set_residuals(0, {std::vector<float>(37), std::vector<float>(4)}), std::invalid_argument);
}
