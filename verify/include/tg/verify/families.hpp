// terngrad-bench: the gradient families of the battery (STATISTICS.md): gaussian, laplace,
// student-t (3 dof), sparse, spike, constant, zeros, tiny (1e-30), huge (1e30), multilayer (scales
// 100x apart) and lenet (LeNet-5 layer shapes with realistic per-layer scales, generated in code).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tg::verify {

struct Layer {
  std::string name;
  std::vector<float> g;
};

struct Gradient {
  std::string family;
  std::vector<Layer> layers;
  std::size_t size() const;
};

/// All family names in battery order.
const std::vector<std::string>& family_names();

/// A gradient of family `name` with about d elements (lenet has its fixed 61,706), from `seed`.
/// Throws tg::Error(invalid_argument) on an unknown name or d == 0.
Gradient make_gradient(const std::string& name, std::size_t d, std::uint64_t seed);

}  // namespace tg::verify
