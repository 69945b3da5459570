// terngrad-bench: loaders for MNIST idx (gzip or plain, through zlib) and CIFAR-10 binary files.
// Every defect (missing file, bad magic, wrong sizes, truncation, labels out of range) is a DataError.
#include "tg/train/data.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <cstdio>
#include <random>

#include "tg/atomic_file.hpp"

namespace tg::train {
namespace {

// Whole file, decompressed when it is gzip (zlib reads plain files unchanged).
std::vector<std::uint8_t> read_maybe_gzip(const std::string& path, std::size_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw DataError("data file " + path + " does not exist or is not a regular file");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw DataError("cannot open data file " + path + ": " + std::strerror(errno));
  std::vector<std::uint8_t> out;
  std::vector<std::uint8_t> chunk(1 << 20);
  for (;;) {
    int n = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int errnum = 0;
      std::string msg = gzerror(f, &errnum);
      gzclose(f);
      throw DataError("cannot read data file " + path + ": " + msg);
    }
    if (n == 0) break;
    out.insert(out.end(), chunk.begin(), chunk.begin() + n);
    if (out.size() > max_bytes) {
      gzclose(f);
      throw DataError("data file " + path + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  gzclose(f);
  return out;
}

std::uint32_t be32(const std::vector<std::uint8_t>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) | b[at + 3];
}

constexpr std::size_t kMaxFileBytes = std::size_t{1} << 32;  // 4 GiB decompressed: far above any of these sets

}  // namespace

ImageSet load_mnist_idx(const std::string& images_path, const std::string& labels_path, std::size_t limit) {
  std::vector<std::uint8_t> img = read_maybe_gzip(images_path, kMaxFileBytes);
  std::vector<std::uint8_t> lab = read_maybe_gzip(labels_path, kMaxFileBytes);
  if (img.size() < 16) throw DataError(images_path + ": truncated idx3 header (" + std::to_string(img.size()) + " bytes)");
  if (lab.size() < 8) throw DataError(labels_path + ": truncated idx1 header (" + std::to_string(lab.size()) + " bytes)");
  if (be32(img, 0) != 0x00000803) throw DataError(images_path + ": not an idx3 unsigned-byte image file (bad magic)");
  if (be32(lab, 0) != 0x00000801) throw DataError(labels_path + ": not an idx1 unsigned-byte label file (bad magic)");
  std::uint64_t n = be32(img, 4), h = be32(img, 8), w = be32(img, 12), nl = be32(lab, 4);
  if (h == 0 || w == 0 || h > 4096 || w > 4096)
    throw DataError(images_path + ": image size " + std::to_string(h) + "x" + std::to_string(w) + " out of range");
  if (n != nl)
    throw DataError(images_path + " holds " + std::to_string(n) + " images but " + labels_path + " holds " +
                    std::to_string(nl) + " labels");
  if (img.size() != 16 + n * h * w)
    throw DataError(images_path + ": expected " + std::to_string(16 + n * h * w) + " bytes for " + std::to_string(n) +
                    " images, found " + std::to_string(img.size()));
  if (lab.size() != 8 + n)
    throw DataError(labels_path + ": expected " + std::to_string(8 + n) + " bytes, found " + std::to_string(lab.size()));
  std::size_t keep = (limit > 0 && limit < n) ? limit : n;
  ImageSet s;
  s.count = keep;
  s.channels = 1;
  s.height = static_cast<int>(h);
  s.width = static_cast<int>(w);
  s.pixels.assign(img.begin() + 16, img.begin() + 16 + keep * h * w);
  s.labels.assign(lab.begin() + 8, lab.begin() + 8 + keep);
  for (std::size_t i = 0; i < keep; ++i)
    if (s.labels[i] >= s.classes)
      throw DataError(labels_path + ": label " + std::to_string(s.labels[i]) + " at index " + std::to_string(i) +
                      " is not in [0, 10)");
  s.source = images_path + " (" + std::to_string(keep) + " of " + std::to_string(n) + " images)";
  return s;
}

ImageSet load_mnist_dir(const std::string& dir, bool train, std::size_t limit) {
  std::string prefix = dir + "/" + (train ? "train" : "t10k");
  auto pick = [](const std::string& base) {
    std::error_code ec;
    return std::filesystem::exists(base + ".gz", ec) ? base + ".gz" : base;
  };
  return load_mnist_idx(pick(prefix + "-images-idx3-ubyte"), pick(prefix + "-labels-idx1-ubyte"), limit);
}

ImageSet load_cifar10_bin(const std::vector<std::string>& files, std::size_t limit) {
  constexpr std::size_t kRecord = 1 + 3 * 32 * 32;
  if (files.empty()) throw DataError("no CIFAR-10 files given");
  ImageSet s;
  s.channels = 3;
  s.height = 32;
  s.width = 32;
  std::string names;
  for (const auto& path : files) {
    std::vector<std::uint8_t> b = read_maybe_gzip(path, kMaxFileBytes);
    if (b.empty() || b.size() % kRecord != 0)
      throw DataError(path + ": " + std::to_string(b.size()) + " bytes is not a positive multiple of the " +
                      std::to_string(kRecord) + "-byte CIFAR-10 record");
    std::size_t records = b.size() / kRecord;
    for (std::size_t r = 0; r < records && (limit == 0 || s.count < limit); ++r) {
      std::uint8_t label = b[r * kRecord];
      if (label >= 10)
        throw DataError(path + ": label " + std::to_string(label) + " of record " + std::to_string(r) + " is not in [0, 10)");
      s.labels.push_back(label);
      s.pixels.insert(s.pixels.end(), b.begin() + r * kRecord + 1, b.begin() + (r + 1) * kRecord);
      ++s.count;
    }
    names += (names.empty() ? "" : ", ") + path;
  }
  s.source = "CIFAR-10 binary " + names + " (" + std::to_string(s.count) + " images)";
  return s;
}

ImageSet load_cifar10_dir(const std::string& dir, bool train, std::size_t limit) {
  std::vector<std::string> files;
  if (train) {
    for (int i = 1; i <= 5; ++i) files.push_back(dir + "/data_batch_" + std::to_string(i) + ".bin");
  } else {
    files.push_back(dir + "/test_batch.bin");
  }
  return load_cifar10_bin(files, limit);
}

void write_cifar10_bin(const std::string& path, const ImageSet& set) {
  if (set.channels != 3 || set.height != 32 || set.width != 32)
    throw DataError("CIFAR-10 binary format needs 3x32x32 images, got " + std::to_string(set.channels) + "x" +
                    std::to_string(set.height) + "x" + std::to_string(set.width));
  std::string out;
  out.reserve(set.count * 3073);
  for (std::size_t i = 0; i < set.count; ++i) {
    out.push_back(static_cast<char>(set.labels[i]));
    out.append(reinterpret_cast<const char*>(set.pixels.data() + i * 3072), 3072);
  }
  tg::write_file_atomic(path, out);
}

ImageSet synthetic_images(std::size_t count, int channels, int height, int width, int classes, std::uint64_t seed) {
  // Refused before anything is allocated: --batch B makes 2B images (a batch of 2^20 28x28 images
  // asked for 1.6 GB of pixels, then tens of GB of float activations).
  const double bytes = static_cast<double>(count) * channels * height * width;
  if (bytes > static_cast<double>(kMaxSyntheticBytes)) {
    char gib[32];
    std::snprintf(gib, sizeof gib, "%.1f", bytes / (1024.0 * 1024.0 * 1024.0));
    throw std::invalid_argument("synthetic data of " + std::to_string(count) + " images of " + std::to_string(channels) + "x" +
                                std::to_string(height) + "x" + std::to_string(width) + " is " + gib +
                                " GiB, over the limit of 1 GiB (2 x --batch images are made): lower --batch or --train-limit");
  }
  ImageSet s;
  s.count = count;
  s.channels = channels;
  s.height = height;
  s.width = width;
  s.classes = classes;
  std::mt19937_64 rng(seed);
  s.pixels.resize(count * s.image_bytes());
  for (auto& p : s.pixels) p = static_cast<std::uint8_t>(rng() >> 56);
  s.labels.resize(count);
  for (auto& l : s.labels) l = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(classes));
  s.source = "synthetic uniform-noise images " + std::to_string(channels) + "x" + std::to_string(height) + "x" +
             std::to_string(width) + " with random labels (seed " + std::to_string(seed) + ")";
  return s;
}

}  // namespace tg::train
