// terngrad-bench: writes the fuzz seed corpus: valid payloads of each packing (fuzz/corpus/decode)
// and encoder inputs with awkward floats (fuzz/corpus/encode). Rerun after a format change:
//   cmake --build build/fuzz --target tg_fuzz_make_corpus && build/fuzz/fuzz/tg_fuzz_make_corpus fuzz/corpus
#include <cfloat>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tg/atomic_file.hpp"
#include "tg/codec.hpp"

namespace {

void write(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  tg::write_file_atomic(path, {reinterpret_cast<const char*>(bytes.data()), bytes.size()});
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
}

std::vector<float> gaussian(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& x : g) x = dist(rng);
  return g;
}

// 16 parameter bytes (see tg::fuzz::encode_case_from_bytes) followed by the floats.
std::vector<std::uint8_t> encode_input(std::uint8_t clip, std::uint8_t packing, std::uint8_t float_below,
                                       const std::vector<float>& g) {
  std::vector<std::uint8_t> b = {clip, packing, 9, float_below, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 0};
  for (float x : g) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::uint8_t>(bits >> (8 * i)));
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tg_fuzz_make_corpus <corpus folder>\n");
    return 2;
  }
  std::string root = argv[1];
  const tg::Codec& ref = tg::reference_codec();
  for (auto packing : {tg::Packing::two_bit, tg::Packing::base3}) {
    for (std::size_t n : {0, 1, 4, 5, 7, 37}) {
      tg::Params p;
      p.packing = packing;
      p.clip = n == 37 ? tg::ClipMode::clip : tg::ClipMode::none;
      auto payload = tg::encode(ref, gaussian(n, n + 1), p, {42, 1, 3, 7});
      write(root + "/decode/" + tg::to_string(packing) + "_n" + std::to_string(n), payload);
    }
  }
  for (std::size_t n : {0, 3}) {
    tg::Params p;
    p.float_below = 4;
    write(root + "/decode/float32_n" + std::to_string(n), tg::encode(ref, gaussian(n, 9), p, {42, 1, 3, 7}));
  }
  const float inf = std::numeric_limits<float>::infinity();
  const float denorm = std::numeric_limits<float>::denorm_min();
  write(root + "/encode/gaussian_2bit", encode_input(0, 0, 1, gaussian(24, 3)));
  write(root + "/encode/gaussian_base3_clip", encode_input(1, 1, 1, gaussian(24, 4)));
  write(root + "/encode/edges_saturate", encode_input(2, 0, 1, {0.0f, -0.0f, denorm, -denorm, FLT_MIN, FLT_MAX,
                                                                -FLT_MAX, 1.0f, -2.5f, 1e-39f}));
  write(root + "/encode/nan_inf", encode_input(0, 1, 1, {1.0f, -0.0f, std::nanf(""), inf, -inf}));
  write(root + "/encode/float_path", encode_input(0, 0, 32, {-0.0f, denorm, FLT_MAX, 3.0f}));
  return 0;
}
