// terngrad-bench: the per-tensor size tables of the paper's nets (see nets.hpp). They follow
// experiments/train/src/models.cpp layer by layer; test_model_tables.cpp keeps them in step with it.
#include "tg/model/nets.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace tg::model {
namespace {

// A convolution's weight (out x in/groups x k x k) and bias (out).
void conv(NetSpec& n, const std::string& name, std::uint64_t in, std::uint64_t out, std::uint64_t k,
          std::uint64_t groups = 1) {
  n.tensors.push_back({name + ".weight", out * (in / groups) * k * k});
  n.tensors.push_back({name + ".bias", out});
}
void linear(NetSpec& n, const std::string& name, std::uint64_t in, std::uint64_t out) {
  n.tensors.push_back({name + ".weight", out * in});
  n.tensors.push_back({name + ".bias", out});
}

std::string describe(int c, int h, int w, int classes) {
  return std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w) + ", " + std::to_string(classes) + " classes";
}

// Caffe LeNet: conv1 20@5x5, pool 2, conv2 50@5x5, pool 2, ip1 500, ip2 classes.
NetSpec lenet(int c, int h, int w, int classes) {
  NetSpec n{"lenet", describe(c, h, w, classes), {}};
  int fh = ((h - 4) / 2 - 4) / 2, fw = ((w - 4) / 2 - 4) / 2;
  if (fh < 1 || fw < 1) throw std::invalid_argument("lenet needs inputs of at least 12x12 pixels");
  conv(n, "conv1", c, 20, 5);
  conv(n, "conv2", 20, 50, 5);
  linear(n, "ip1", 50ull * fh * fw, 500);
  linear(n, "ip2", 500, classes);
  return n;
}

// TensorFlow CIFAR-10 tutorial net: conv1 64@5x5 SAME, pool 3/2 SAME, conv2 64@5x5, pool 3/2, local3 384,
// local4 192, softmax_linear classes.
NetSpec cifarnet(int c, int h, int w, int classes) {
  NetSpec n{"cifarnet", describe(c, h, w, classes), {}};
  int fh = ((h + 1) / 2 + 1) / 2, fw = ((w + 1) / 2 + 1) / 2;
  conv(n, "conv1", c, 64, 5);
  conv(n, "conv2", 64, 64, 5);
  linear(n, "local3", 64ull * fh * fw, 384);
  linear(n, "local4", 384, 192);
  linear(n, "softmax_linear", 192, classes);
  return n;
}

// BVLC AlexNet, 227x227: grouped conv2/4/5.
NetSpec alexnet(int c, int classes) {
  NetSpec n{"alexnet", describe(c, 227, 227, classes), {}};
  conv(n, "conv1", c, 96, 11);
  conv(n, "conv2", 96, 256, 5, 2);
  conv(n, "conv3", 256, 384, 3);
  conv(n, "conv4", 384, 384, 3, 2);
  conv(n, "conv5", 384, 256, 3, 2);
  linear(n, "fc6", 256 * 6 * 6, 4096);
  linear(n, "fc7", 4096, 4096);
  linear(n, "fc8", 4096, classes);
  return n;
}

// VGG configuration A (11 weight layers), 224x224.
NetSpec vgga(int c, int classes) {
  NetSpec n{"vgga", describe(c, 224, 224, classes), {}};
  struct Layer { const char* name; int out; };
  const Layer convs[] = {{"conv1_1", 64},  {"conv2_1", 128}, {"conv3_1", 256}, {"conv3_2", 256},
                         {"conv4_1", 512}, {"conv4_2", 512}, {"conv5_1", 512}, {"conv5_2", 512}};
  std::uint64_t in = c;
  for (const auto& l : convs) {
    conv(n, l.name, in, l.out, 3);
    in = l.out;
  }
  linear(n, "fc6", 512 * 7 * 7, 4096);
  linear(n, "fc7", 4096, 4096);
  linear(n, "fc8", 4096, classes);
  return n;
}

// GoogLeNet (Inception v1) without the auxiliary classifiers, 224x224.
NetSpec googlenet(int c, int classes) {
  NetSpec n{"googlenet", describe(c, 224, 224, classes), {}};
  conv(n, "conv1_7x7_s2", c, 64, 7);
  conv(n, "conv2_3x3_reduce", 64, 64, 1);
  conv(n, "conv2_3x3", 64, 192, 3);
  struct Spec { const char* name; int c1, c3r, c3, c5r, c5, cp; };
  const Spec specs[] = {{"inception_3a", 64, 96, 128, 16, 32, 32},    {"inception_3b", 128, 128, 192, 32, 96, 64},
                        {"inception_4a", 192, 96, 208, 16, 48, 64},   {"inception_4b", 160, 112, 224, 24, 64, 64},
                        {"inception_4c", 128, 128, 256, 24, 64, 64},  {"inception_4d", 112, 144, 288, 32, 64, 64},
                        {"inception_4e", 256, 160, 320, 32, 128, 128}, {"inception_5a", 256, 160, 320, 32, 128, 128},
                        {"inception_5b", 384, 192, 384, 48, 128, 128}};
  std::uint64_t in = 192;
  for (const auto& s : specs) {
    std::string p = s.name;
    conv(n, p + ".1x1", in, s.c1, 1);
    conv(n, p + ".3x3_reduce", in, s.c3r, 1);
    conv(n, p + ".3x3", s.c3r, s.c3, 3);
    conv(n, p + ".5x5_reduce", in, s.c5r, 1);
    conv(n, p + ".5x5", s.c5r, s.c5, 5);
    conv(n, p + ".pool_proj", in, s.cp, 1);
    in = s.c1 + s.c3 + s.c5 + s.cp;
  }
  linear(n, "loss3_classifier", in, classes);
  return n;
}

}  // namespace

std::uint64_t NetSpec::parameters() const {
  std::uint64_t total = 0;
  for (const auto& t : tensors) total += t.numel;
  return total;
}

std::vector<std::string> net_names() { return {"lenet", "cifarnet", "alexnet", "googlenet", "vgga"}; }

NetSpec net(const std::string& name, int channels, int height, int width, int classes) {
  if (channels < 1 || classes < 1) throw std::invalid_argument("channels and classes must be >= 1");
  if (name == "lenet") return lenet(channels, height, width, classes);
  if (name == "cifarnet") return cifarnet(channels, height, width, classes);
  if (name == "alexnet") {
    if (height != 227 || width != 227) throw std::invalid_argument("alexnet is defined for 227x227 inputs");
    return alexnet(channels, classes);
  }
  if (name == "vgga" || name == "googlenet") {
    if (height != 224 || width != 224) throw std::invalid_argument(name + " is defined for 224x224 inputs");
    return name == "vgga" ? vgga(channels, classes) : googlenet(channels, classes);
  }
  throw std::invalid_argument("net '" + name + "' is not one of: lenet, cifarnet, alexnet, googlenet, vgga");
}

NetSpec net(const std::string& name) {
  if (name == "lenet") return net(name, 1, 28, 28, 10);
  if (name == "cifarnet") return net(name, 3, 24, 24, 10);
  if (name == "alexnet") return net(name, 3, 227, 227, 1000);
  return net(name, 3, 224, 224, 1000);
}

NetSpec read_run_layers(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception&) {
    throw std::runtime_error(path + " is not valid JSON");
  }
  if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array() || j["layers"].empty())
    throw std::runtime_error(path + " has no \"layers\" list (expected the run.json of `terngrad train --out`)");
  NetSpec n;
  n.name = j.contains("config") && j["config"].contains("model") && j["config"]["model"].is_string()
               ? j["config"]["model"].get<std::string>()
               : "run";
  n.input = "layers of " + path;
  for (const auto& l : j["layers"]) {
    if (!l.is_object() || !l.contains("name") || !l["name"].is_string() || !l.contains("numel") ||
        !l["numel"].is_number_unsigned())
      throw std::runtime_error(path + ": every entry of \"layers\" needs a string \"name\" and an unsigned \"numel\"");
    const std::uint64_t numel = l["numel"].get<std::uint64_t>();
    // a tensor of 0 elements sends nothing, and one beyond 2^40 elements (4 TiB of float32) is no gradient: an
    // edited or damaged file, which would give "0 parameters" or an overflowed payload size
    if (numel == 0 || numel > (std::uint64_t{1} << 40))
      throw std::runtime_error(path + ": layer \"" + l["name"].get<std::string>().substr(0, 80) + "\" has numel " +
                               std::to_string(numel) + ", not in [1, 2^40]");
    n.tensors.push_back({l["name"].get<std::string>(), numel});
  }
  return n;
}

}  // namespace tg::model
