// terngrad-bench: definitions of the paper's nets in LibTorch (see models.hpp). Layer names follow the
// originals (conv1, ip1, local3, fc6, inception_3a, ...) so per-layer reports read like the paper.
// Initialization is LibTorch's default (Kaiming-uniform), not the originals' Gaussian/Xavier fillers.
#include "models.hpp"

#include <stdexcept>

namespace tg::train {
namespace nn = torch::nn;
namespace F = torch::nn::functional;

namespace {

// Caffe LeNet: conv 20 (5x5) - max pool 2 - conv 50 (5x5) - max pool 2 - ip 500 - ReLU - ip 10.
struct LeNet : Net {
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::Linear ip1{nullptr}, ip2{nullptr};
  LeNet(const ModelInput& in) {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(in.channels, 20, 5)));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(20, 50, 5)));
    int h = ((in.height - 4) / 2 - 4) / 2, w = ((in.width - 4) / 2 - 4) / 2;
    if (h < 1 || w < 1) throw std::invalid_argument("lenet needs inputs of at least 12x12 pixels");
    ip1 = register_module("ip1", nn::Linear(50 * h * w, 500));
    ip2 = register_module("ip2", nn::Linear(500, in.classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = F::max_pool2d(conv1(x), F::MaxPool2dFuncOptions(2).stride(2));
    x = F::max_pool2d(conv2(x), F::MaxPool2dFuncOptions(2).stride(2));
    x = torch::relu(ip1(x.flatten(1)));
    return ip2(x);
  }
};

// TensorFlow CIFAR-10 tutorial net (the original TernGrad code's cifarnet): conv 64 (5x5, SAME) - ReLU -
// max pool 3/2 - LRN - conv 64 - ReLU - LRN - max pool 3/2 - local3 384 - local4 192 - softmax_linear.
// TF's lrn(depth_radius 4, bias 1, alpha 0.001/9, beta 0.75) = LibTorch LRN(size 9, alpha 0.001, k 1).
struct CifarNet : Net {
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::LocalResponseNorm norm1{nullptr}, norm2{nullptr};
  nn::Linear local3{nullptr}, local4{nullptr}, softmax_linear{nullptr};
  CifarNet(const ModelInput& in) {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(in.channels, 64, 5).padding(2)));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(64, 64, 5).padding(2)));
    auto lrn = nn::LocalResponseNormOptions(9).alpha(0.001).beta(0.75).k(1.0);
    norm1 = register_module("norm1", nn::LocalResponseNorm(lrn));
    norm2 = register_module("norm2", nn::LocalResponseNorm(lrn));
    int h = (in.height + 1) / 2, w = (in.width + 1) / 2;  // SAME pooling, stride 2
    h = (h + 1) / 2;
    w = (w + 1) / 2;
    local3 = register_module("local3", nn::Linear(64 * h * w, 384));
    local4 = register_module("local4", nn::Linear(384, 192));
    softmax_linear = register_module("softmax_linear", nn::Linear(192, in.classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    auto pool = F::MaxPool2dFuncOptions(3).stride(2).padding(1);
    x = norm1(F::max_pool2d(torch::relu(conv1(x)), pool));
    x = F::max_pool2d(norm2(torch::relu(conv2(x))), pool);
    x = torch::relu(local3(x.flatten(1)));
    x = torch::relu(local4(x));
    return softmax_linear(x);
  }
};

// BVLC AlexNet (Caffe bvlc_alexnet, the paper's AlexNet): 227x227 input, grouped conv2/4/5, LRN.
struct AlexNet : Net {
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr}, conv4{nullptr}, conv5{nullptr};
  nn::Linear fc6{nullptr}, fc7{nullptr}, fc8{nullptr};
  nn::LocalResponseNorm norm{nullptr};
  nn::Dropout drop6{nullptr}, drop7{nullptr};
  AlexNet(const ModelInput& in) {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(in.channels, 96, 11).stride(4)));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(96, 256, 5).padding(2).groups(2)));
    conv3 = register_module("conv3", nn::Conv2d(nn::Conv2dOptions(256, 384, 3).padding(1)));
    conv4 = register_module("conv4", nn::Conv2d(nn::Conv2dOptions(384, 384, 3).padding(1).groups(2)));
    conv5 = register_module("conv5", nn::Conv2d(nn::Conv2dOptions(384, 256, 3).padding(1).groups(2)));
    norm = register_module("norm", nn::LocalResponseNorm(nn::LocalResponseNormOptions(5).alpha(1e-4).beta(0.75).k(1.0)));
    if (in.height != 227 || in.width != 227) throw std::invalid_argument("alexnet is defined for 227x227 inputs");
    fc6 = register_module("fc6", nn::Linear(256 * 6 * 6, 4096));
    fc7 = register_module("fc7", nn::Linear(4096, 4096));
    fc8 = register_module("fc8", nn::Linear(4096, in.classes));
    drop6 = register_module("drop6", nn::Dropout(0.5));
    drop7 = register_module("drop7", nn::Dropout(0.5));
  }
  torch::Tensor forward(torch::Tensor x) override {
    auto pool = F::MaxPool2dFuncOptions(3).stride(2);
    x = F::max_pool2d(norm(torch::relu(conv1(x))), pool);
    x = F::max_pool2d(norm(torch::relu(conv2(x))), pool);
    x = torch::relu(conv3(x));
    x = torch::relu(conv4(x));
    x = F::max_pool2d(torch::relu(conv5(x)), pool);
    x = drop6(torch::relu(fc6(x.flatten(1))));
    x = drop7(torch::relu(fc7(x)));
    return fc8(x);
  }
};

// VGG-A (Simonyan & Zisserman, configuration A, 11 weight layers), 224x224 input.
struct VggA : Net {
  std::vector<nn::Conv2d> convs;
  std::vector<int> pool_after;
  nn::Linear fc6{nullptr}, fc7{nullptr}, fc8{nullptr};
  nn::Dropout drop6{nullptr}, drop7{nullptr};
  VggA(const ModelInput& in) {
    if (in.height != 224 || in.width != 224) throw std::invalid_argument("vgga is defined for 224x224 inputs");
    const int widths[] = {64, -1, 128, -1, 256, 256, -1, 512, 512, -1, 512, 512, -1};
    const char* names[] = {"conv1_1", "conv2_1", "conv3_1", "conv3_2", "conv4_1", "conv4_2", "conv5_1", "conv5_2"};
    int channels = in.channels, k = 0;
    for (int wdt : widths) {
      if (wdt < 0) {
        pool_after.push_back(k - 1);
        continue;
      }
      convs.push_back(register_module(names[k], nn::Conv2d(nn::Conv2dOptions(channels, wdt, 3).padding(1))));
      channels = wdt;
      ++k;
    }
    fc6 = register_module("fc6", nn::Linear(512 * 7 * 7, 4096));
    fc7 = register_module("fc7", nn::Linear(4096, 4096));
    fc8 = register_module("fc8", nn::Linear(4096, in.classes));
    drop6 = register_module("drop6", nn::Dropout(0.5));
    drop7 = register_module("drop7", nn::Dropout(0.5));
  }
  torch::Tensor forward(torch::Tensor x) override {
    for (std::size_t i = 0; i < convs.size(); ++i) {
      x = torch::relu(convs[i](x));
      for (int p : pool_after)
        if (p == static_cast<int>(i)) x = F::max_pool2d(x, F::MaxPool2dFuncOptions(2).stride(2));
    }
    x = drop6(torch::relu(fc6(x.flatten(1))));
    x = drop7(torch::relu(fc7(x)));
    return fc8(x);
  }
};

// One Inception v1 module: 1x1 | 1x1-3x3 | 1x1-5x5 | pool 3x3-1x1, concatenated.
struct Inception : torch::nn::Module {
  nn::Conv2d b1{nullptr}, b3r{nullptr}, b3{nullptr}, b5r{nullptr}, b5{nullptr}, bp{nullptr};
  int out_channels = 0;
  Inception(int in, int c1, int c3r, int c3, int c5r, int c5, int cp) {
    b1 = register_module("1x1", nn::Conv2d(nn::Conv2dOptions(in, c1, 1)));
    b3r = register_module("3x3_reduce", nn::Conv2d(nn::Conv2dOptions(in, c3r, 1)));
    b3 = register_module("3x3", nn::Conv2d(nn::Conv2dOptions(c3r, c3, 3).padding(1)));
    b5r = register_module("5x5_reduce", nn::Conv2d(nn::Conv2dOptions(in, c5r, 1)));
    b5 = register_module("5x5", nn::Conv2d(nn::Conv2dOptions(c5r, c5, 5).padding(2)));
    bp = register_module("pool_proj", nn::Conv2d(nn::Conv2dOptions(in, cp, 1)));
    out_channels = c1 + c3 + c5 + cp;
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y1 = torch::relu(b1(x));
    auto y3 = torch::relu(b3(torch::relu(b3r(x))));
    auto y5 = torch::relu(b5(torch::relu(b5r(x))));
    auto yp = torch::relu(bp(F::max_pool2d(x, F::MaxPool2dFuncOptions(3).stride(1).padding(1))));
    return torch::cat({y1, y3, y5, yp}, 1);
  }
};

// GoogLeNet (Inception v1, Caffe bvlc_googlenet) without the two auxiliary classifiers; 224x224 input.
struct GoogLeNet : Net {
  nn::Conv2d conv1{nullptr}, conv2_reduce{nullptr}, conv2{nullptr};
  nn::LocalResponseNorm norm{nullptr};
  std::vector<std::shared_ptr<Inception>> blocks;
  nn::Dropout drop{nullptr};
  nn::Linear classifier{nullptr};
  GoogLeNet(const ModelInput& in) {
    if (in.height != 224 || in.width != 224) throw std::invalid_argument("googlenet is defined for 224x224 inputs");
    conv1 = register_module("conv1_7x7_s2", nn::Conv2d(nn::Conv2dOptions(in.channels, 64, 7).stride(2).padding(3)));
    conv2_reduce = register_module("conv2_3x3_reduce", nn::Conv2d(nn::Conv2dOptions(64, 64, 1)));
    conv2 = register_module("conv2_3x3", nn::Conv2d(nn::Conv2dOptions(64, 192, 3).padding(1)));
    norm = register_module("norm", nn::LocalResponseNorm(nn::LocalResponseNormOptions(5).alpha(1e-4).beta(0.75).k(1.0)));
    struct Spec { const char* name; int c1, c3r, c3, c5r, c5, cp; };
    const Spec specs[] = {{"inception_3a", 64, 96, 128, 16, 32, 32},   {"inception_3b", 128, 128, 192, 32, 96, 64},
                          {"inception_4a", 192, 96, 208, 16, 48, 64},  {"inception_4b", 160, 112, 224, 24, 64, 64},
                          {"inception_4c", 128, 128, 256, 24, 64, 64}, {"inception_4d", 112, 144, 288, 32, 64, 64},
                          {"inception_4e", 256, 160, 320, 32, 128, 128}, {"inception_5a", 256, 160, 320, 32, 128, 128},
                          {"inception_5b", 384, 192, 384, 48, 128, 128}};
    int channels = 192;
    for (const auto& s : specs) {
      blocks.push_back(register_module(s.name, std::make_shared<Inception>(channels, s.c1, s.c3r, s.c3, s.c5r, s.c5, s.cp)));
      channels = blocks.back()->out_channels;
    }
    drop = register_module("drop", nn::Dropout(0.4));
    classifier = register_module("loss3_classifier", nn::Linear(channels, in.classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    auto pool = F::MaxPool2dFuncOptions(3).stride(2).ceil_mode(true);
    x = norm(F::max_pool2d(torch::relu(conv1(x)), pool));
    x = torch::relu(conv2(torch::relu(conv2_reduce(x))));
    x = F::max_pool2d(norm(x), pool);
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      x = blocks[i]->forward(x);
      if (i == 1 || i == 6) x = F::max_pool2d(x, pool);  // after 3b and 4e
    }
    x = F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions(1));
    return classifier(drop(x.flatten(1)));
  }
};

}  // namespace

std::shared_ptr<Net> make_model(const std::string& name, const ModelInput& input) {
  if (name == "lenet") return std::make_shared<LeNet>(input);
  if (name == "cifarnet") return std::make_shared<CifarNet>(input);
  if (name == "alexnet") return std::make_shared<AlexNet>(input);
  if (name == "vgga") return std::make_shared<VggA>(input);
  if (name == "googlenet") return std::make_shared<GoogLeNet>(input);
  throw std::invalid_argument("model '" + name + "' is not one of: lenet, cifarnet, alexnet, googlenet, vgga");
}

ModelInput imagenet_input(const std::string& name) {
  if (name == "alexnet") return {3, 227, 227, 1000};
  return {3, 224, 224, 1000};
}

}  // namespace tg::train
