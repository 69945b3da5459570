// terngrad-bench: image data sets for the training experiments, without LibTorch: MNIST idx files
// (gzip or plain; Fashion-MNIST from the Debian package by default) and CIFAR-10 binary batches.
//   auto train = tg::train::load_mnist_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace tg::train {

/// Where the Debian package dataset-fashion-mnist puts its files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// A malformed, truncated or missing data file; the message names the file and the defect.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Images as bytes, planar per image: pixels[i * C*H*W + c * H*W + y * W + x]; labels in [0, classes).
struct ImageSet {
  std::size_t count = 0;
  int channels = 0, height = 0, width = 0;
  int classes = 10;
  std::vector<std::uint8_t> pixels;
  std::shared_ptr<const std::uint8_t> mapped;  // when set, the pixels are here (a memory-mapped file), not in `pixels`
  const std::uint8_t* pixel_data() const { return mapped ? mapped.get() : pixels.data(); }
  std::vector<std::int32_t> labels;
  std::string source;  // human description: files and how many images were read
  std::size_t image_bytes() const { return static_cast<std::size_t>(channels) * height * width; }
};

/// Reads an idx3 image file and an idx1 label file (gzip-compressed or plain, detected by content).
/// limit > 0 keeps the first `limit` images. Throws DataError naming the file on any defect.
ImageSet load_mnist_idx(const std::string& images_path, const std::string& labels_path, std::size_t limit = 0);

/// The train (train = true) or test split of an MNIST-layout folder (Fashion-MNIST or MNIST):
/// {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz].
ImageSet load_mnist_dir(const std::string& dir, bool train, std::size_t limit = 0);

/// Reads CIFAR-10 binary batches (records of 1 label byte + 3072 bytes: R, G, B planes of 32x32).
ImageSet load_cifar10_bin(const std::vector<std::string>& files, std::size_t limit = 0);

/// The train (data_batch_1..5.bin) or test (test_batch.bin) split of a cifar-10-batches-bin folder.
ImageSet load_cifar10_dir(const std::string& dir, bool train, std::size_t limit = 0);

/// Writes a file in CIFAR-10 binary format (used by tests and to export subsets).
void write_cifar10_bin(const std::string& path, const ImageSet& set);

/// Bytes of float32 input one worker's shard of a step may take (1 GiB): a --batch that asks for more
/// is refused before the batch is built (a batch of 2^20 28x28 images took 18 s and 1.8 GB before
/// LibTorch's allocation error).
inline constexpr std::size_t kMaxShardInputBytes = std::size_t{1} << 30;

/// std::invalid_argument naming --batch when `shard` images of channels x height x width take more than
/// kMaxShardInputBytes as float32.
inline void check_shard_fits(int channels, int height, int width, std::size_t shard, std::size_t batch) {
  const double bytes = static_cast<double>(shard) * channels * height * width * 4.0;
  if (bytes > static_cast<double>(kMaxShardInputBytes))
    throw std::invalid_argument("--batch " + std::to_string(batch) + " gives each worker " + std::to_string(shard) +
                                " images of " + std::to_string(channels) + "x" + std::to_string(height) + "x" +
                                std::to_string(width) + ", " + std::to_string(static_cast<long long>(bytes / (1 << 20))) +
                                " MiB of float32 input per step, over the limit of 1024 MiB: lower --batch");
}
inline void check_shard_fits(const ImageSet& set, std::size_t shard, std::size_t batch) {
  check_shard_fits(set.channels, set.height, set.width, shard, batch);
}

/// Checked before a data set with a fixed image shape is read (fashion-mnist, mnist: 1x28x28;
/// cifar10: 3x32x32), so that a --batch too large is refused without reading 60,000 images first;
/// other data sets are checked once made (synthetic_images, check_shard_fits).
inline void check_shard_fits_before_loading(const std::string& data, std::size_t shard, std::size_t batch) {
  if (data == "fashion-mnist" || data == "mnist") check_shard_fits(1, 28, 28, shard, batch);
  if (data == "cifar10") check_shard_fits(3, 32, 32, shard, batch);
}

/// Bytes of pixels synthetic_images makes at most (1 GiB); more is refused before allocating.
inline constexpr std::size_t kMaxSyntheticBytes = std::size_t{1} << 30;

/// Random-looking images of the given shape with labels, from a seed (for throughput runs only).
/// std::invalid_argument when count x channels x height x width exceeds kMaxSyntheticBytes.
ImageSet synthetic_images(std::size_t count, int channels, int height, int width, int classes,
                          std::uint64_t seed);

}  // namespace tg::train
