// terngrad-bench: per-tensor parameter sizes of the paper's nets (LeNet, CifarNet, AlexNet, GoogLeNet,
// VGG-A), written as tables here so that the performance model needs no LibTorch; a test of the training
// library (experiments/train/tests/test_model_tables.cpp) checks them against the LibTorch definitions.
//   tg::model::NetSpec n = tg::model::net("alexnet");   // 16 tensors, 60965224 parameters
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tg::model {

/// One trainable tensor (weights or biases), named as LibTorch's named_parameters() names it.
struct TensorSpec {
  std::string name;
  std::uint64_t numel = 0;
};

struct NetSpec {
  std::string name;
  std::string input;  // e.g. "3x227x227, 1000 classes"
  std::vector<TensorSpec> tensors;
  std::uint64_t parameters() const;
};

/// The nets of the paper at the input they are defined for: lenet 1x28x28 (10 classes), cifarnet
/// 3x24x24 (CIFAR-10 crops, 10 classes), alexnet 3x227x227, googlenet and vgga 3x224x224 (1000 classes).
/// Throws std::invalid_argument naming the known nets for another name.
NetSpec net(const std::string& name);
/// The same nets at another input (LeNet and CifarNet depend on it; the ImageNet nets only on classes).
NetSpec net(const std::string& name, int channels, int height, int width, int classes);
std::vector<std::string> net_names();

/// The tensors of a measured run: the "layers" list (name, numel) of the run.json that
/// `terngrad train --out DIR` writes. Throws std::runtime_error naming the file and the problem.
NetSpec read_run_layers(const std::string& run_json_path);

}  // namespace tg::model
