// terngrad-bench: helpers shared by the codec's tests (deterministic gradients, edge sizes, readers of
// the known-answer files in codec/tests/data).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tg/codec.hpp"

namespace tg::test {

/// The known-answer files, relative to the repository root (ctest runs the tests from there).
inline const std::string kDataDir = "codec/tests/data/";

/// Sizes at the edges of a loop that handles `width` elements per iteration (highway's ForeachCount):
/// empty, one element, one iteration +-1, two iterations +-1, four iterations plus an odd tail, and a
/// large size (many iterations, threads, reduction chunks). Sorted, without repeats.
inline std::vector<std::size_t> edge_sizes(std::initializer_list<std::size_t> widths,
                                           std::size_t large = 1000003) {
  std::vector<std::size_t> out = {0, 1, large};
  for (std::size_t w : widths)
    for (std::size_t n : {w - 1, w, w + 1, 2 * w - 1, 2 * w + 1, 4 * w + 3}) out.push_back(n);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}
inline std::vector<std::size_t> edge_sizes(std::size_t width, std::size_t large = 1000003) {
  return edge_sizes({width}, large);
}

/// One line of philox_kat.txt: counter, key and the published output of Philox4x32-10.
struct PhiloxKat {
  PhiloxBlock counter;
  std::uint32_t key[2];
  PhiloxBlock want;
};

inline std::vector<PhiloxKat> read_philox_kat(const std::string& path = kDataDir + "philox_kat.txt") {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path + " (run the tests from the repository root)");
  std::vector<PhiloxKat> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string name;
    PhiloxKat k;
    ls >> name >> std::hex >> k.counter.v[0] >> k.counter.v[1] >> k.counter.v[2] >> k.counter.v[3] >> k.key[0] >>
        k.key[1] >> k.want.v[0] >> k.want.v[1] >> k.want.v[2] >> k.want.v[3];
    if (name != "philox4x32" || !ls) throw std::runtime_error("bad line in " + path + ": " + line);
    out.push_back(k);
  }
  return out;
}

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

inline std::vector<GoldenCase> read_golden(const std::string& path = kDataDir + "golden_payloads.txt") {
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
