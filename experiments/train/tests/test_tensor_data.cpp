// terngrad-bench: the preprocessed-tensor image folder (tg/train/tensor_data.hpp) on a tiny fixture the
// test writes byte by byte: round trip, limit, and every rejected defect. Run: ctest -R tg_train_core_test
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tg/train/tensor_data.hpp"

namespace fs = std::filesystem;
using tg::train::DataError;

namespace {

fs::path fixture_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tg_train_tensor_" + std::to_string(::getpid())) / name;
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le32(std::uint32_t v) {
  return {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16), static_cast<char>(v >> 24)};
}

// 3 train images and 2 test images of 2 channels x 2 x 3 pixels (12 bytes): byte k of image i = 20*i + k;
// 5 classes; train labels 4, 0, 2; test labels 1, 3.
void write_fixture(const fs::path& d) {
  write(d / "tensors.txt", "format tg-images-u8 1\nchannels 2\nheight 2\nwidth 3\nclasses 5\ntrain 3\ntest 2\n");
  std::string tr, te;
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 12; ++k) tr += static_cast<char>(20 * i + k);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 12; ++k) te += static_cast<char>(100 + 20 * i + k);
  write(d / "train-images.u8", tr);
  write(d / "test-images.u8", te);
  write(d / "train-labels.i32", le32(4) + le32(0) + le32(2));
  write(d / "test-labels.i32", le32(1) + le32(3));
}

std::string error_of(const fs::path& d, bool train = true) {
  try {
    tg::train::load_tensor_dir(d.string(), train);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TensorData, ReadsTheFixture) {
  fs::path d = fixture_dir("ok");
  write_fixture(d);
  auto train = tg::train::load_tensor_dir(d.string(), true);
  EXPECT_EQ(train.count, 3u);
  EXPECT_EQ(train.channels, 2);
  EXPECT_EQ(train.height, 2);
  EXPECT_EQ(train.width, 3);
  EXPECT_EQ(train.classes, 5);
  EXPECT_EQ(train.labels, (std::vector<std::int32_t>{4, 0, 2}));
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 12; ++k) ASSERT_EQ(train.pixel_data()[12 * i + k], 20 * i + k);
  auto test = tg::train::load_tensor_dir(d.string(), false, 1);
  EXPECT_EQ(test.count, 1u);
  EXPECT_EQ(test.labels, (std::vector<std::int32_t>{1}));
  EXPECT_EQ(test.pixel_data()[5], 105);
  // Round trip through the writer.
  fs::path e = fixture_dir("copy");
  tg::train::write_tensor_dir(e.string(), train, tg::train::load_tensor_dir(d.string(), false));
  for (const char* f : {"tensors.txt", "train-images.u8", "train-labels.i32", "test-images.u8", "test-labels.i32"}) {
    std::ifstream a(d / f, std::ios::binary), b(e / f, std::ios::binary);
    std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
    EXPECT_EQ(sa, sb) << f;
  }
  fs::remove_all(d.parent_path());
}

TEST(TensorData, RejectsEveryDefectWithItsFile) {
  fs::path d = fixture_dir("bad");
  struct Case {
    const char* what;
    const char* file;
    std::string bytes;
    const char* expect;  // a piece of the message
  };
  const std::string ok_txt = "format tg-images-u8 1\nchannels 2\nheight 2\nwidth 3\nclasses 5\ntrain 3\ntest 2\n";
  const Case cases[] = {
      {"wrong magic", "tensors.txt", "format tg-images-f32 1\nchannels 2\nheight 2\nwidth 3\nclasses 5\ntrain 3\ntest 2\n", "format"},
      {"missing key", "tensors.txt", "format tg-images-u8 1\nchannels 2\nheight 2\nwidth 3\nclasses 5\ntrain 3\n", "'test' is missing"},
      {"unknown key", "tensors.txt", ok_txt + "depth 4\n", "unknown key 'depth'"},
      {"twice", "tensors.txt", ok_txt + "train 3\n", "appears twice"},
      {"not a number", "tensors.txt", "format tg-images-u8 1\nchannels two\nheight 2\nwidth 3\nclasses 5\ntrain 3\ntest 2\n", "channels 'two'"},
      {"zero height", "tensors.txt", "format tg-images-u8 1\nchannels 2\nheight 0\nwidth 3\nclasses 5\ntrain 3\ntest 2\n", "height '0'"},
      {"short images", "train-images.u8", std::string(35, '\0'), "35 bytes, expected 36"},
      {"long labels", "train-labels.i32", le32(0) + le32(0) + le32(0) + le32(0), "16 bytes, expected 12"},
      {"label too big", "train-labels.i32", le32(4) + le32(5) + le32(2), "label 5 of image 1"},
      {"negative label", "train-labels.i32", le32(4) + le32(0) + le32(0xffffffffu), "label -1 of image 2"},
  };
  for (const Case& c : cases) {
    write_fixture(d);
    write(d / c.file, c.bytes);
    std::string msg = error_of(d);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": '" << msg << "'";
    EXPECT_NE(msg.find(c.file), std::string::npos) << c.what << ": '" << msg << "'";
  }
  write_fixture(d);
  fs::remove(d / "test-images.u8");
  EXPECT_NE(error_of(d, false).find("test-images.u8: cannot open"), std::string::npos) << error_of(d, false);
  fs::remove_all(d.parent_path());
}
