// terngrad-bench: a preprocessed-tensor image format for data sets too large to decode at training
// time (ImageNet-style data for AlexNet / GoogLeNet / VGG-A), read by `terngrad train --data tensor`.
// A folder holds:
//   tensors.txt         "key value" lines: format tg-images-u8 1, channels C, height H, width W,
//                       classes K, train N, test M (every key once, nothing else)
//   train-images.u8     N images, C*H*W bytes each, planar (c, y, x), no header
//   train-labels.i32    N labels, int32 little-endian, in [0, K)
//   test-images.u8, test-labels.i32   the same for the M test images
// The image files are memory-mapped (a 190 GB ImageNet train split is not read into memory); the
// labels are read and checked. Producing it: resize/crop each image to the net's input (227x227 for
// AlexNet, 224x224 for GoogLeNet and VGG-A), write its bytes in C, H, W order; shards can be joined
// with cat as long as the labels are joined in the same order.
//   auto train = tg::train::load_tensor_dir("/data/imagenet-227", true);
#pragma once

#include <string>

#include "tg/train/data.hpp"

namespace tg::train {

/// Reads the train (train = true) or test split of a tensor folder; limit > 0 keeps the first `limit`
/// images. Throws DataError naming the file and the defect (missing key, wrong size, bad label...).
ImageSet load_tensor_dir(const std::string& dir, bool train, std::size_t limit = 0);

/// Writes `train` and `test` (same shape and classes) as a tensor folder `dir` (created if needed).
void write_tensor_dir(const std::string& dir, const ImageSet& train, const ImageSet& test);

}  // namespace tg::train
