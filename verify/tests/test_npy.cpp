// terngrad-bench: the .npy parser of the exec protocol: files as NumPy writes them parse; every
// malformed input throws tg::Error(invalid_argument) naming the problem. Run: ctest -R tg_verify_tests
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tg/verify/npy.hpp"
#include "tg/error.hpp"

namespace tg::verify {
namespace {

// The bytes numpy 1.x writes for np.save(f, np.array([1.0, -2.0], dtype=np.float32)) (header padded
// so that the data starts at a multiple of 64).
std::vector<std::uint8_t> numpy_file(const std::string& dict, std::vector<std::uint8_t> data, int version = 1) {
  std::string h = dict;
  std::size_t pre = version == 1 ? 10 : 12;
  h.append((64 - (pre + h.size() + 1) % 64) % 64, ' ');
  h.push_back('\n');
  std::vector<std::uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(version), 0};
  out.push_back(static_cast<std::uint8_t>(h.size() & 0xff));
  out.push_back(static_cast<std::uint8_t>(h.size() >> 8));
  if (version != 1) out.push_back(0), out.push_back(0);
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

const std::vector<std::uint8_t> kOneMinusTwo = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};

std::string error_of(const std::vector<std::uint8_t>& bytes) {
  try {
    parse_npy(bytes);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "(no error)";
}

TEST(Npy, ParsesWhatNumpyWrites) {
  auto a = parse_npy(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", kOneMinusTwo));
  ASSERT_EQ(a.shape, (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(a.data, (std::vector<float>{1.0f, -2.0f}));
  auto b = parse_npy(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }", kOneMinusTwo, 2));
  EXPECT_EQ(b.shape, (std::vector<std::uint64_t>{1, 2}));
  auto c = parse_npy(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", {}));
  EXPECT_TRUE(c.data.empty());
}

TEST(Npy, RoundTrip) {
  std::vector<float> v = {0.0f, -0.0f, 1.5f, 3.4e38f, -1e-30f, 7.0f};
  auto bytes = make_npy(v, {2, 3});
  EXPECT_EQ(bytes.size() % 64, 24u);  // 64-byte aligned header + 24 bytes of data
  auto a = parse_npy(bytes);
  EXPECT_EQ(a.shape, (std::vector<std::uint64_t>{2, 3}));
  ASSERT_EQ(a.data.size(), v.size());
  EXPECT_EQ(std::memcmp(a.data.data(), v.data(), 24), 0);
  EXPECT_THROW(make_npy(v, {4}), Error);
}

TEST(Npy, RejectsMalformedInputNamingTheProblem) {
  std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  EXPECT_NE(error_of({}).find("shorter than the 10-byte preamble"), std::string::npos);
  auto f = numpy_file(ok, kOneMinusTwo);
  auto bad = f;
  bad[1] = 'X';
  EXPECT_NE(error_of(bad).find("magic"), std::string::npos);
  bad = f;
  bad[6] = 9;
  EXPECT_NE(error_of(bad).find("version 9.0"), std::string::npos);
  bad = f;
  bad[8] = 0xff, bad[9] = 0xff;
  EXPECT_NE(error_of(bad).find("runs past the end"), std::string::npos);
  bad = f;
  bad.pop_back();
  EXPECT_NE(error_of(bad).find("data section has 7 bytes, shape needs 8"), std::string::npos);
  bad = f;
  bad.push_back(0);
  EXPECT_NE(error_of(bad).find("data section has 9 bytes"), std::string::npos);
  EXPECT_NE(error_of(numpy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", kOneMinusTwo))
                .find("dtype is '<f8'"), std::string::npos);
  EXPECT_NE(error_of(numpy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", kOneMinusTwo))
                .find("dtype is '>f4'"), std::string::npos);
  EXPECT_NE(error_of(numpy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 1), }", kOneMinusTwo))
                .size(), 0u);
  EXPECT_NE(error_of(numpy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                                std::vector<std::uint8_t>(16))).find("fortran_order"), std::string::npos);
  EXPECT_NE(error_of(numpy_file("{'descr': '<f4', 'shape': (2,), }", kOneMinusTwo)).find("lacks"), std::string::npos);
  EXPECT_NE(error_of(numpy_file("{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", kOneMinusTwo)).size(), 0u);
  EXPECT_NE(error_of(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", kOneMinusTwo))
                .find("unknown key 'x'"), std::string::npos);
  EXPECT_NE(error_of(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
                                kOneMinusTwo)).find("overflows"), std::string::npos);
  EXPECT_NE(error_of(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
                                kOneMinusTwo)).find("overflows"), std::string::npos);
  EXPECT_NE(error_of(numpy_file("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", kOneMinusTwo))
                .find("True or False"), std::string::npos);
  EXPECT_NE(error_of(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } junk", kOneMinusTwo))
                .find("after the header"), std::string::npos);
  EXPECT_NE(error_of(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", kOneMinusTwo))
                .find("nonnegative integer"), std::string::npos);
  // Every truncation of a valid file is rejected without reading past the end.
  for (std::size_t n = 0; n < f.size(); ++n)
    EXPECT_THROW(parse_npy(std::span<const std::uint8_t>(f.data(), n)), Error) << n;
}

TEST(Npy, ReadNamesThePath) {
  try {
    read_npy("/nonexistent/x.npy");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.npy"), std::string::npos);
  }
}

}  // namespace
}  // namespace tg::verify
