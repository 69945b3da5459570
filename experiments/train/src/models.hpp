// terngrad-bench: the paper's nets in LibTorch (private header of the training library).
// LeNet (Caffe), CifarNet (TensorFlow CIFAR-10 tutorial), AlexNet (BVLC), GoogLeNet (Inception v1), VGG-A.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace tg::train {

/// Every model maps a batch [N, C, H, W] of floats to logits [N, classes].
struct Net : torch::nn::Module {
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

struct ModelInput {
  int channels = 1, height = 28, width = 28;  // what the net consumes (after cropping)
  int classes = 10;
};

/// Builds `name` for the given input; throws std::invalid_argument for an unknown name or a shape
/// the net cannot take.
std::shared_ptr<Net> make_model(const std::string& name, const ModelInput& input);

/// The input shape a model is defined for when it runs on synthetic ImageNet-shaped data.
ModelInput imagenet_input(const std::string& name);

}  // namespace tg::train
