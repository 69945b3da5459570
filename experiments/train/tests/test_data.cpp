// terngrad-bench: tests of the MNIST-idx and CIFAR-10 loaders on small files the tests write byte by
// byte, every rejected defect, and the Fashion-MNIST package files. Run: ctest -R tg_train_core_test
#include <gtest/gtest.h>
#include <zlib.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>

#include "tg/train/data.hpp"

namespace fs = std::filesystem;
using tg::train::DataError;

namespace {

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("tg_train_data_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

void write_bytes(const fs::path& p, const std::string& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(p.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
}

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

// 3 images of 2x3 pixels: pixel k of image i = 10*i + k; labels 7, 0, 9.
std::string idx_images() {
  std::string s = be32(0x803) + be32(3) + be32(2) + be32(3);
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 6; ++k) s.push_back(static_cast<char>(10 * i + k));
  return s;
}
std::string idx_labels() { return be32(0x801) + be32(3) + std::string{7, 0, 9}; }

}  // namespace

TEST(MnistIdx, ReadsGzipAndPlainFiles) {
  fs::path d = temp_dir();
  for (bool gz : {true, false}) {
    write_bytes(d / "img", idx_images(), gz);
    write_bytes(d / "lab", idx_labels(), gz);
    auto s = tg::train::load_mnist_idx(d / "img", d / "lab");
    ASSERT_EQ(s.count, 3u);
    EXPECT_EQ(s.channels, 1);
    EXPECT_EQ(s.height, 2);
    EXPECT_EQ(s.width, 3);
    ASSERT_EQ(s.pixels.size(), 18u);
    EXPECT_EQ(s.pixels[6 + 4], 14);   // image 1, pixel (1, 1)
    EXPECT_EQ(s.pixels[12 + 5], 25);  // image 2, last pixel
    EXPECT_EQ(s.labels, (std::vector<std::int32_t>{7, 0, 9}));
    auto first2 = tg::train::load_mnist_idx(d / "img", d / "lab", 2);
    EXPECT_EQ(first2.count, 2u);
    EXPECT_EQ(first2.pixels.size(), 12u);
  }
  fs::remove_all(d);
}

TEST(MnistIdx, RejectsEveryDefectWithTheFileName) {
  fs::path d = temp_dir();
  write_bytes(d / "lab", idx_labels(), false);
  auto expect_error = [&](const std::string& images, const std::string& needle) {
    write_bytes(d / "img", images, false);
    try {
      tg::train::load_mnist_idx(d / "img", d / "lab");
      ADD_FAILURE() << "accepted a file with defect: " << needle;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("img"), std::string::npos) << e.what();
    }
  };
  std::string good = idx_images();
  expect_error(good.substr(0, 10), "truncated");
  expect_error(be32(0x801) + good.substr(4), "bad magic");
  expect_error(good.substr(0, good.size() - 1), "expected");
  expect_error(good + "x", "expected");
  expect_error(be32(0x803) + be32(4) + good.substr(8), "labels");  // 4 images, 3 labels
  expect_error(be32(0x803) + be32(3) + be32(0) + be32(3), "out of range");
  write_bytes(d / "img", good, false);
  write_bytes(d / "lab", be32(0x801) + be32(3) + std::string{7, 10, 9}, false);
  EXPECT_THROW(tg::train::load_mnist_idx(d / "img", d / "lab"), DataError);
  EXPECT_THROW(tg::train::load_mnist_idx(d / "missing", d / "lab"), DataError);
  fs::remove_all(d);
}

TEST(Cifar10Bin, ReadsRecordsWrittenByHand) {
  fs::path d = temp_dir();
  std::string bytes;
  for (int r = 0; r < 4; ++r) {
    bytes.push_back(static_cast<char>(r * 3));  // labels 0, 3, 6, 9
    for (int k = 0; k < 3072; ++k) bytes.push_back(static_cast<char>((r + k) % 251));
  }
  write_bytes(d / "data_batch_1.bin", bytes, false);
  auto s = tg::train::load_cifar10_bin({(d / "data_batch_1.bin").string()});
  ASSERT_EQ(s.count, 4u);
  EXPECT_EQ(s.channels, 3);
  EXPECT_EQ(s.height, 32);
  EXPECT_EQ(s.labels, (std::vector<std::int32_t>{0, 3, 6, 9}));
  EXPECT_EQ(s.pixels[2 * 3072 + 1024 + 5], (2 + 1024 + 5) % 251);  // record 2, green plane, pixel 5
  // The writer reproduces the same bytes.
  tg::train::write_cifar10_bin((d / "copy.bin").string(), s);
  std::ifstream in(d / "copy.bin", std::ios::binary);
  std::string copy((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(copy, bytes);
  EXPECT_EQ(tg::train::load_cifar10_bin({(d / "data_batch_1.bin").string()}, 3).count, 3u);

  write_bytes(d / "short.bin", bytes.substr(0, 3073 * 2 - 1), false);
  EXPECT_THROW(tg::train::load_cifar10_bin({(d / "short.bin").string()}), DataError);
  std::string bad = bytes;
  bad[3073] = 10;
  write_bytes(d / "bad.bin", bad, false);
  EXPECT_THROW(tg::train::load_cifar10_bin({(d / "bad.bin").string()}), DataError);
  EXPECT_THROW(tg::train::load_cifar10_dir(d.string(), true), DataError);  // data_batch_2..5 missing
  fs::remove_all(d);
}

TEST(FashionMnist, DebianPackageTestSplit) {
  if (!fs::exists(std::string(tg::train::kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  auto s = tg::train::load_mnist_dir(tg::train::kFashionMnistDir, false);
  ASSERT_EQ(s.count, 10000u);
  EXPECT_EQ(s.height, 28);
  EXPECT_EQ(s.width, 28);
  std::array<int, 10> per_class{};
  for (auto l : s.labels) ++per_class[static_cast<std::size_t>(l)];
  for (int n : per_class) EXPECT_EQ(n, 1000);  // the published test split is balanced: 1000 per class
}

// issue 16: `train --data synthetic --batch 1048576` made 2^21 images (1.6 GB) before failing in LibTorch.
TEST(Synthetic, OversizedSetRefusedBeforeAllocating) {
  try {
    (void)tg::train::synthetic_images(std::size_t{2} << 20, 1, 28, 28, 10, 1);
    FAIL() << "2^21 images of 28x28 (1.6 GB) were made";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("over the limit of 1 GiB"), std::string::npos) << e.what();
  }
  EXPECT_EQ(tg::train::synthetic_images(16, 1, 28, 28, 10, 1).count, 16u);
}

// issue 16: `train --batch 1048576` (the documented maximum) built a 3 GB batch before LibTorch failed.
TEST(Synthetic, OversizedShardRefused) {
  tg::train::ImageSet set;
  set.channels = 1;
  set.height = set.width = 28;
  EXPECT_THROW(tg::train::check_shard_fits(set, std::size_t{1} << 20, std::size_t{1} << 20), std::invalid_argument);
  EXPECT_NO_THROW(tg::train::check_shard_fits(set, 64, 128));
  // at the limit: 342,392 images of 28x28 float32 (3,136 bytes each) = 1,073,741,312 bytes <= 2^30; one more is over
  EXPECT_NO_THROW(tg::train::check_shard_fits(set, 342392, 342392));
  EXPECT_THROW(tg::train::check_shard_fits(set, 342393, 342393), std::invalid_argument);
}

TEST(Synthetic, OversizedShardRefusedBeforeLoading) {
  EXPECT_THROW(tg::train::check_shard_fits_before_loading("fashion-mnist", std::size_t{1} << 20, std::size_t{1} << 20),
               std::invalid_argument);
  EXPECT_THROW(tg::train::check_shard_fits_before_loading("cifar10", 100000, 200000), std::invalid_argument);  // 1.2 GB
  EXPECT_NO_THROW(tg::train::check_shard_fits_before_loading("cifar10", 64, 128));
  EXPECT_NO_THROW(tg::train::check_shard_fits_before_loading("synthetic", std::size_t{1} << 20, std::size_t{1} << 20));
}
