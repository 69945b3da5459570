// terngrad-bench: the reference codec. Plain loops, one function per equation, never optimized:
// every faster path (SIMD, threads, CUDA) is tested byte for byte against this file.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tg/codec.hpp"

namespace tg {
namespace {

// u_i: word i % 4 of Philox block i / 4 of the tensor's stream (tg/philox.hpp).
std::uint32_t uniform_word(const StreamKey& key, std::uint64_t i) {
  PhiloxBlock block = philox_block(key, static_cast<std::uint32_t>(i / 4));
  return block.v[i % 4];
}

// s = max_k |g_k|  (= ||g||_inf); NaN or Inf anywhere is an error naming the first index.
float reference_max_abs(std::span<const float> g, std::uint32_t tensor) {
  float m = 0.0f;
  for (std::size_t k = 0; k < g.size(); ++k) {
    if (!std::isfinite(g[k])) throw NonFiniteError(tensor, k, g[k]);
    float a = std::fabs(g[k]);
    if (a > m) m = a;
  }
  return m;
}

// Canonical sum of term(k) over k (tg/reduce.hpp): 8 lanes per 2048-element chunk, chunks in order.
template <typename Term>
double canonical_sum(std::size_t n, Term term) {
  double total = 0.0;
  for (std::size_t start = 0; start < n; start += kReduceChunk) {
    std::size_t end = std::min<std::size_t>(n, start + kReduceChunk);
    double lane[kReduceLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (std::size_t k = start; k < end; ++k) lane[(k - start) % kReduceLanes] += term(k);
    total = total + combine_lanes(lane);
  }
  return total;
}

// mean = (1/n) sum g_k;  sigma = sqrt((1/n) sum (g_k - mean)^2)
Moments reference_moments(std::span<const float> g) {
  Moments m;
  if (g.empty()) return m;
  double n = static_cast<double>(g.size());
  m.mean = canonical_sum(g.size(), [&](std::size_t k) { return static_cast<double>(g[k]); }) / n;
  double var = canonical_sum(g.size(), [&](std::size_t k) {
                 double d = static_cast<double>(g[k]) - m.mean;
                 return d * d;
               }) / n;
  m.sigma = std::sqrt(var);
  return m;
}

// g~_k / s = sign(g_k) b_k,  b_k = [u_k < min(|g_k|, cap) 2^32 / s]  (tg/element.hpp)
void reference_ternarize(std::span<const float> g, const ScalarRule& rule, const StreamKey& key,
                         std::span<std::int8_t> trits) {
  for (std::size_t k = 0; k < g.size(); ++k)
    trits[k] = static_cast<std::int8_t>(ternarize_element(g[k], rule, uniform_word(key, k)));
}

// byte i/4 |= code(t_i) << 2 (i % 4)
void pack_2bit(std::span<const std::int8_t> trits, std::span<std::uint8_t> body) {
  std::fill(body.begin(), body.end(), std::uint8_t{0});  // (memset with an empty span's null data() is UB)
  for (std::size_t i = 0; i < trits.size(); ++i)
    body[i / 4] = static_cast<std::uint8_t>(body[i / 4] | (code_2bit(trits[i]) << (2 * (i % 4))));
}

// byte j = sum_{m<5} d(t_{5j+m}) 3^m
void pack_base3(std::span<const std::int8_t> trits, std::span<std::uint8_t> body) {
  for (std::size_t j = 0; j < body.size(); ++j) {
    unsigned value = 0, power = 1;
    for (std::size_t m = 0; m < 5; ++m, power *= 3) {
      std::size_t i = 5 * j + m;
      if (i < trits.size()) value += digit_base3(trits[i]) * power;
    }
    body[j] = static_cast<std::uint8_t>(value);
  }
}

[[noreturn]] void invalid_code(const char* what, std::size_t byte, unsigned value) {
  throw Error(ErrorCode::invalid_code, std::string("invalid ") + what + " body: byte " +
                                           std::to_string(byte) + " holds " + std::to_string(value));
}

// t_i = trit(code at bits 2 (i % 4) of byte i / 4); code 11 and nonzero padding are invalid.
void unpack_2bit(std::span<const std::uint8_t> body, std::span<std::int8_t> trits) {
  std::size_t n = trits.size();
  for (std::size_t j = 0; j < body.size(); ++j) {
    for (std::size_t m = 0; m < 4; ++m) {
      unsigned code = (body[j] >> (2 * m)) & 3u;
      std::size_t i = 4 * j + m;
      if (code == 3 || (i >= n && code != 0)) invalid_code("2bit", j, body[j]);
      if (i < n) trits[i] = static_cast<std::int8_t>(trit_of_code(static_cast<std::uint8_t>(code)));
    }
  }
}

// d_m = (byte / 3^m) mod 3; bytes above 242 and nonzero padding digits are invalid.
void unpack_base3(std::span<const std::uint8_t> body, std::span<std::int8_t> trits) {
  std::size_t n = trits.size();
  for (std::size_t j = 0; j < body.size(); ++j) {
    unsigned value = body[j];
    if (value > kBase3MaxByte) invalid_code("base3", j, value);
    for (std::size_t m = 0; m < 5; ++m, value /= 3) {
      std::size_t i = 5 * j + m;
      unsigned digit = value % 3;
      if (i >= n && digit != 0) invalid_code("base3", j, body[j]);
      if (i < n) trits[i] = static_cast<std::int8_t>(trit_of_code(static_cast<std::uint8_t>(digit)));
    }
  }
}

class ReferenceCodec final : public Codec {
 public:
  std::string name() const override { return "reference"; }
  float max_abs(std::span<const float> g, std::uint32_t tensor) const override {
    return reference_max_abs(g, tensor);
  }
  Moments moments(std::span<const float> g) const override { return reference_moments(g); }
  void ternarize(std::span<const float> g, const ScalarRule& rule, const StreamKey& key,
                 std::span<std::int8_t> trits) const override {
    reference_ternarize(g, rule, key, trits);
  }
  void encode_body(std::span<const float> g, const ScalarRule& rule, const StreamKey& key,
                   Packing packing, std::span<std::uint8_t> body) const override {
    std::vector<std::int8_t> trits(g.size());
    reference_ternarize(g, rule, key, trits);
    if (packing == Packing::two_bit)
      pack_2bit(trits, body);
    else
      pack_base3(trits, body);
  }
  void unpack(Packing packing, std::span<const std::uint8_t> body,
              std::span<std::int8_t> trits) const override {
    if (packing == Packing::two_bit)
      unpack_2bit(body, trits);
    else
      unpack_base3(body, trits);
  }
  // out_k = s * t_k
  void decode_body(Packing packing, std::span<const std::uint8_t> body, float scalar,
                   std::span<float> out) const override {
    std::vector<std::int8_t> trits(out.size());
    unpack(packing, body, trits);
    for (std::size_t k = 0; k < out.size(); ++k) out[k] = scalar * static_cast<float>(trits[k]);
  }
};

}  // namespace

const Codec& reference_codec() {
  static const ReferenceCodec codec;
  return codec;
}

}  // namespace tg
