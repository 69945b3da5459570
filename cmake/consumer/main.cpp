// A program outside terngrad-bench: encodes a gradient with the installed codec, decodes it, and checks
// that every decoded value is 0 or +-scalar (the install_consumer test).
#include <cmath>
#include <cstdio>
#include <vector>

#include <tg/codec.hpp>

int main() {
  std::vector<float> g(1000);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.1f * static_cast<float>(i));
  tg::Params params;  // no clipping, 2-bit packing
  tg::StreamKey key{20171204, 0, 0, 0};
  std::vector<std::uint8_t> payload = tg::encode(tg::reference_codec(), g, params, key);
  tg::Decoded d = tg::decode(*tg::make_optimized_codec(), payload);
  for (float v : d.values)
    if (v != 0.0f && std::fabs(v) != d.header.scalar) return std::printf("consumer: bad value %g\n", v), 1;
  std::printf("consumer: round trip ok (%zu bytes, scalar %g)\n", payload.size(), d.header.scalar);
  return 0;
}
