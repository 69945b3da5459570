// terngrad-bench: helpers shared by the unit tests (deterministic gradients, golden file reader).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tg/codec.hpp"

namespace tg::test {

/// Gaussian float32 gradient of n elements, reproducible from `seed`.
inline std::vector<float> gaussian(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> g(n);
  for (auto& x : g) x = dist(rng);
  return g;
}

/// Gradient with many exact zeros, exact ties at max|g|, negative zeros and a spike.
inline std::vector<float> awkward(std::size_t n, std::uint64_t seed) {
  std::vector<float> g = gaussian(n, seed);
  for (std::size_t k = 0; k < n; ++k) {
    if (k % 7 == 3) g[k] = 0.0f;
    if (k % 11 == 5) g[k] = -0.0f;
    if (k % 13 == 1) g[k] = (k % 2 ? -4.0f : 4.0f);
  }
  if (n > 2) g[n / 2] = 50.0f;
  return g;
}

/// Every clipping mode with every ternary packing (c = 1.5 for saturate so it clips more often).
inline std::vector<Params> all_params() {
  std::vector<Params> out;
  for (auto clip : {ClipMode::none, ClipMode::clip, ClipMode::saturate})
    for (auto packing : {Packing::two_bit, Packing::base3}) {
      Params p;
      p.clip = clip;
      p.packing = packing;
      p.c = clip == ClipMode::saturate ? 1.5 : 2.5;
      out.push_back(p);
    }
  return out;
}

struct GoldenCase {
  std::string name;
  StreamKey key;
  Params params;
  std::vector<float> input;
  std::vector<std::uint8_t> payload;
};

inline std::vector<GoldenCase> read_golden(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open golden file " + path);
  std::vector<GoldenCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string tag;
    ls >> tag;
    if (tag == "case") {
      GoldenCase c;
      std::string clip, packing;
      std::size_t n;
      ls >> c.name >> c.key.seed >> c.key.worker >> c.key.tensor >> c.key.step >> clip >> c.params.c >>
          packing >> n;
      c.params.clip = parse_clip_mode(clip.c_str());
      c.params.packing = parse_packing(packing.c_str());
      cases.push_back(c);
    } else if (tag == "input") {
      std::string hex;
      while (ls >> hex) {
        std::uint32_t bits = static_cast<std::uint32_t>(std::stoul(hex, nullptr, 16));
        float v;
        std::memcpy(&v, &bits, 4);
        cases.back().input.push_back(v);
      }
    } else if (tag == "payload") {
      std::string hex;
      ls >> hex;
      for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
        cases.back().payload.push_back(static_cast<std::uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
    }
  }
  return cases;
}

inline std::string hex(const std::vector<std::uint8_t>& bytes) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (auto b : bytes) {
    s += d[b >> 4];
    s += d[b & 15];
  }
  return s;
}

}  // namespace tg::test
