// terngrad-bench: small valid payloads and helpers shared by the reliability tests (fuzz/test_*.cpp).
#pragma once

#include <cfloat>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tg/codec.hpp"

namespace tg::rel {

inline std::vector<float> gaussian(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& x : g) x = dist(rng);
  return g;
}

/// A valid payload of n Gaussian elements in `packing` (float32 through the size threshold).
inline std::vector<std::uint8_t> payload(Packing packing, std::size_t n, std::uint64_t seed = 11) {
  Params p;
  if (packing == Packing::float32) {
    p.float_below = n + 1;
  } else {
    p.packing = packing;
  }
  return encode(reference_codec(), gaussian(n, seed), p, {seed, 1, 6, 2});
}

/// The small payloads the exhaustive corruption tests walk: each packing, empty, one element, and
/// sizes with and without padding in the last byte.
inline std::vector<std::pair<std::string, std::vector<std::uint8_t>>> small_payloads() {
  std::vector<std::pair<std::string, std::vector<std::uint8_t>>> out;
  auto add = [&](Packing packing, std::size_t n) {
    out.emplace_back(std::string(to_string(packing)) + " n=" + std::to_string(n), payload(packing, n));
  };
  for (std::size_t n : {0, 1, 2}) add(Packing::float32, n);
  for (std::size_t n : {0, 1, 8, 13}) add(Packing::two_bit, n);
  for (std::size_t n : {0, 1, 10, 13}) add(Packing::base3, n);
  return out;
}

}  // namespace tg::rel
