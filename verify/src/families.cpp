// terngrad-bench: gradient families of the battery (see tg/verify/families.hpp). The "lenet"
// family is generated here, not saved from training: LeNet-5 layer shapes (61,706 parameters) with
// per-layer scales typical of an early SGD step on MNIST-like data, heavy tails (Student-t, 3 dof),
// and dead ReLU units (rows of fc1/fc2 exactly zero).
#include "tg/verify/families.hpp"

#include <cmath>
#include <random>

#include "tg/error.hpp"

namespace tg::verify {

std::size_t Gradient::size() const {
  std::size_t n = 0;
  for (const auto& l : layers) n += l.g.size();
  return n;
}

const std::vector<std::string>& family_names() {
  static const std::vector<std::string> names = {"gaussian", "laplace", "student_t", "sparse",
                                                 "spike",    "constant", "zeros",    "tiny",
                                                 "huge",     "multilayer", "lenet"};
  return names;
}

namespace {

std::uint32_t fnv1a(const std::string& s) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

std::vector<float> gaussian(std::size_t d, double scale, std::mt19937_64& rng) {
  std::normal_distribution<double> n(0.0, 1.0);
  std::vector<float> g(d);
  for (auto& x : g) x = static_cast<float>(scale * n(rng));
  return g;
}

std::vector<float> student(std::size_t d, double scale, std::mt19937_64& rng) {
  std::student_t_distribution<double> t(3.0);
  std::vector<float> g(d);
  for (auto& x : g) x = static_cast<float>(scale * t(rng));
  return g;
}

Gradient lenet(std::mt19937_64& rng) {
  // name, rows (output units), columns, per-layer scale of the gradient entries
  struct Shape { const char* name; std::size_t rows, cols; double scale; double dead; };
  static const Shape shapes[] = {
      {"conv1.weight", 6, 25, 3e-2, 0.0},    {"conv1.bias", 1, 6, 1e-2, 0.0},
      {"conv2.weight", 16, 150, 1e-2, 0.0},  {"conv2.bias", 1, 16, 5e-3, 0.0},
      {"fc1.weight", 120, 400, 2e-3, 0.3},   {"fc1.bias", 1, 120, 3e-3, 0.0},
      {"fc2.weight", 84, 120, 4e-3, 0.2},    {"fc2.bias", 1, 84, 5e-3, 0.0},
      {"fc3.weight", 10, 84, 2e-2, 0.0},     {"fc3.bias", 1, 10, 3e-2, 0.0},
  };
  Gradient out;
  out.family = "lenet";
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (const auto& s : shapes) {
    Layer l{s.name, student(s.rows * s.cols, s.scale, rng)};
    for (std::size_t r = 0; r < s.rows; ++r)
      if (u(rng) < s.dead)
        for (std::size_t c = 0; c < s.cols; ++c) l.g[r * s.cols + c] = 0.0f;
    out.layers.push_back(std::move(l));
  }
  return out;
}

}  // namespace

Gradient make_gradient(const std::string& name, std::size_t d, std::uint64_t seed) {
  if (d == 0) throw Error(ErrorCode::invalid_argument, "gradient size must be positive");
  std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                    fnv1a(name)};
  std::mt19937_64 rng(seq);
  Gradient out;
  out.family = name;
  auto single = [&](std::vector<float> g) { out.layers.push_back({name, std::move(g)}); };
  if (name == "gaussian") {
    single(gaussian(d, 1.0, rng));
  } else if (name == "laplace") {
    std::exponential_distribution<double> e(1.0);
    std::bernoulli_distribution b(0.5);
    std::vector<float> g(d);
    for (auto& x : g) x = static_cast<float>(b(rng) ? e(rng) : -e(rng));
    single(std::move(g));
  } else if (name == "student_t") {
    single(student(d, 1.0, rng));
  } else if (name == "sparse") {
    std::vector<float> g = gaussian(d, 1.0, rng);
    std::bernoulli_distribution zero(0.95);
    for (auto& x : g)
      if (zero(rng)) x = 0.0f;
    single(std::move(g));
  } else if (name == "spike") {
    std::uniform_real_distribution<double> u(-1e-3, 1e-3);
    std::vector<float> g(d);
    for (auto& x : g) x = static_cast<float>(u(rng));
    g[std::uniform_int_distribution<std::size_t>(0, d - 1)(rng)] = -1.0f;
    single(std::move(g));
  } else if (name == "constant") {
    single(std::vector<float>(d, 0.25f));
  } else if (name == "zeros") {
    single(std::vector<float>(d, 0.0f));
  } else if (name == "tiny") {
    single(gaussian(d, 1e-30, rng));
  } else if (name == "huge") {
    single(gaussian(d, 1e30, rng));
  } else if (name == "multilayer") {
    // four tensors whose scales differ by 100x from one to the next
    std::size_t sizes[4] = {d / 2, d / 4, d / 8, d - d / 2 - d / 4 - d / 8};
    double scales[4] = {1.0, 1e-2, 1e-4, 1e2};
    for (int l = 0; l < 4; ++l)
      if (sizes[l] > 0) out.layers.push_back({"layer" + std::to_string(l), gaussian(sizes[l], scales[l], rng)});
  } else if (name == "lenet") {
    out = lenet(rng);
  } else {
    std::string known;
    for (const auto& n : family_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::invalid_argument, "unknown gradient family '" + name + "' (known: " + known + ")");
  }
  return out;
}

}  // namespace tg::verify
