// terngrad-bench: QSGD and EF-SignSGD payloads for the training exchange (see baselines.hpp).
#include "tg/train/baselines.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "tg/error.hpp"

namespace tg::train {
namespace {

constexpr double kTwoPow32 = 4294967296.0;

void put_f32(std::span<std::uint8_t> out, float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  for (int b = 0; b < 4; ++b) out[b] = static_cast<std::uint8_t>(bits >> (8 * b));
}

float get_f32(std::span<const std::uint8_t> in) {
  std::uint32_t bits = 0;
  for (int b = 3; b >= 0; --b) bits = (bits << 8) | in[b];
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

int level_bits(int levels) {
  int b = 0;
  while ((1L << b) < static_cast<long>(levels) + 1) ++b;
  return b;
}

void check_bucket(std::uint64_t bucket) {
  if (bucket > kQsgdMaxBucket)
    throw std::invalid_argument("QSGD bucket size " + std::to_string(bucket) + " is above " +
                                std::to_string(kQsgdMaxBucket));
}

void check_levels(int levels) {
  if (levels < 1 || levels > kQsgdMaxLevels)
    throw std::invalid_argument("QSGD levels " + std::to_string(levels) + " is not in [1, " +
                                std::to_string(kQsgdMaxLevels) + "]");
}

// LSB-first bit stream of fixed-width codes.
class BitWriter {
 public:
  explicit BitWriter(std::span<std::uint8_t> out) : out_(out) {}
  void put(std::uint32_t code, int bits) {
    acc_ |= static_cast<std::uint64_t>(code) << fill_;
    fill_ += bits;
    while (fill_ >= 8) {
      out_[at_++] = static_cast<std::uint8_t>(acc_);
      acc_ >>= 8;
      fill_ -= 8;
    }
  }
  void flush() {
    if (fill_ > 0) out_[at_++] = static_cast<std::uint8_t>(acc_);
    acc_ = 0;
    fill_ = 0;
  }

 private:
  std::span<std::uint8_t> out_;
  std::size_t at_ = 0;
  std::uint64_t acc_ = 0;
  int fill_ = 0;
};

class BitReader {
 public:
  explicit BitReader(std::span<const std::uint8_t> in) : in_(in) {}
  std::uint32_t get(int bits) {
    while (fill_ < bits) {
      acc_ |= static_cast<std::uint64_t>(in_[at_++]) << fill_;
      fill_ += 8;
    }
    auto v = static_cast<std::uint32_t>(acc_ & ((std::uint64_t{1} << bits) - 1));
    acc_ >>= bits;
    fill_ -= bits;
    return v;
  }

 private:
  std::span<const std::uint8_t> in_;
  std::size_t at_ = 0;
  std::uint64_t acc_ = 0;
  int fill_ = 0;
};

}  // namespace

int qsgd_bits_per_element(int levels) {
  check_levels(levels);
  return 1 + level_bits(levels);
}

std::size_t qsgd_buckets(std::size_t n, std::uint64_t bucket) {
  check_bucket(bucket);
  if (bucket == 0 || n == 0) return 1;
  return static_cast<std::size_t>((static_cast<std::uint64_t>(n) + bucket - 1) / bucket);
}

std::size_t qsgd_payload_bytes(std::size_t n, int levels, std::uint64_t bucket) {
  auto bits = static_cast<std::uint64_t>(qsgd_bits_per_element(levels));
  return 4 * qsgd_buckets(n, bucket) + static_cast<std::size_t>((static_cast<std::uint64_t>(n) * bits + 7) / 8);
}

void qsgd_encode(std::span<const float> g, int levels, std::uint64_t bucket, const StreamKey& key,
                 std::uint32_t tensor, std::span<std::uint8_t> out) {
  const int lb = level_bits(levels);
  const std::size_t expected = qsgd_payload_bytes(g.size(), levels, bucket);
  if (out.size() != expected)
    throw std::invalid_argument("QSGD payload buffer has " + std::to_string(out.size()) + " bytes, expected " +
                                std::to_string(expected));
  if (g.size() > kMaxElements) throw std::invalid_argument("tensor too large for one Philox stream");
  for (std::size_t k = 0; k < g.size(); ++k)
    if (!std::isfinite(g[k])) throw NonFiniteError(tensor, k, g[k]);
  const std::size_t buckets = qsgd_buckets(g.size(), bucket);
  const std::size_t width = bucket == 0 ? g.size() : static_cast<std::size_t>(bucket);
  BitWriter bits(out.subspan(4 * buckets));
  PhiloxBlock block{};
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t lo_k = b * width, hi_k = std::min(g.size(), lo_k + width);
    double sumsq = 0.0;
    for (std::size_t k = lo_k; k < hi_k; ++k) sumsq += static_cast<double>(g[k]) * g[k];
    const double norm_d = std::sqrt(sumsq);
    float norm = static_cast<float>(norm_d);
    if (static_cast<double>(norm) < norm_d) norm = std::nextafter(norm, std::numeric_limits<float>::infinity());
    if (!std::isfinite(norm))
      throw std::invalid_argument("tensor " + std::to_string(tensor) + ": L2 norm " + std::to_string(norm_d) +
                                  " of elements " + std::to_string(lo_k) + ".." + std::to_string(hi_k) +
                                  " does not fit in float32");
    put_f32(out.subspan(4 * b), norm);
    const double scale = norm > 0.0f ? static_cast<double>(levels) / static_cast<double>(norm) : 0.0;
    for (std::size_t k = lo_k; k < hi_k; ++k) {
      if (k % 4 == 0 || k == lo_k) block = philox_block(key, static_cast<std::uint32_t>(k / 4));
      double r = std::fabs(static_cast<double>(g[k])) * scale;  // in [0, levels]
      double lo = std::floor(r);
      auto threshold = static_cast<std::uint64_t>((r - lo) * kTwoPow32);  // in [0, 2^32)
      auto level = static_cast<std::uint32_t>(lo) + (block.v[k % 4] < threshold ? 1u : 0u);
      std::uint32_t sign = level != 0 && g[k] < 0.0f ? 1u : 0u;
      bits.put(level | (sign << lb), lb + 1);
    }
  }
  bits.flush();
}

void qsgd_decode(std::span<const std::uint8_t> payload, int levels, std::uint64_t bucket, std::span<float> out) {
  const int lb = level_bits(levels);
  const std::size_t expected = qsgd_payload_bytes(out.size(), levels, bucket);
  if (payload.size() != expected)
    throw std::runtime_error("QSGD payload has " + std::to_string(payload.size()) + " bytes, expected " +
                             std::to_string(expected));
  const std::size_t buckets = qsgd_buckets(out.size(), bucket);
  const std::size_t width = bucket == 0 ? out.size() : static_cast<std::size_t>(bucket);
  BitReader bits(payload.subspan(4 * buckets));
  const std::uint32_t mask = (1u << lb) - 1u;
  for (std::size_t b = 0; b < buckets; ++b) {
    const float norm = get_f32(payload.subspan(4 * b));
    if (!std::isfinite(norm) || norm < 0.0f)
      throw std::runtime_error("QSGD payload has an invalid norm in bucket " + std::to_string(b));
    const std::size_t lo_k = b * width, hi_k = std::min(out.size(), lo_k + width);
    for (std::size_t k = lo_k; k < hi_k; ++k) {
      std::uint32_t code = bits.get(lb + 1);
      std::uint32_t level = code & mask;
      if (level > static_cast<std::uint32_t>(levels))
        throw std::runtime_error("QSGD payload: element " + std::to_string(k) + " has level " + std::to_string(level) +
                                 " above " + std::to_string(levels));
      auto v = static_cast<float>(static_cast<double>(norm) * level / levels);
      out[k] = (code >> lb) & 1u ? -v : v;
    }
  }
}

std::size_t sign_payload_bytes(std::size_t n) { return 4 + (n + 7) / 8; }

void signsgd_ef_encode(std::span<const float> g, std::span<float> residual, std::uint32_t tensor,
                       std::span<std::uint8_t> out) {
  const std::size_t n = g.size();
  if (residual.size() != n) throw std::invalid_argument("residual and gradient differ in size");
  if (out.size() != sign_payload_bytes(n))
    throw std::invalid_argument("sign payload buffer has " + std::to_string(out.size()) + " bytes, expected " +
                                std::to_string(sign_payload_bytes(n)));
  double l1 = 0.0;
  for (std::size_t k = 0; k < n; ++k) {
    if (!std::isfinite(g[k])) throw NonFiniteError(tensor, k, g[k]);
    residual[k] = g[k] + residual[k];  // p = g + e
    if (!std::isfinite(residual[k])) throw NonFiniteError(tensor, k, residual[k]);
    l1 += std::fabs(static_cast<double>(residual[k]));
  }
  const float scale = n > 0 ? static_cast<float>(l1 / static_cast<double>(n)) : 0.0f;
  put_f32(out, scale);
  std::span<std::uint8_t> body = out.subspan(4);
  std::fill(body.begin(), body.end(), std::uint8_t{0});
  for (std::size_t k = 0; k < n; ++k) {
    bool negative = residual[k] < 0.0f;
    if (negative) body[k / 8] = static_cast<std::uint8_t>(body[k / 8] | (1u << (k % 8)));
    residual[k] = residual[k] - (negative ? -scale : scale);  // e = p - decoded
  }
}

void sign_decode(std::span<const std::uint8_t> payload, std::span<float> out) {
  if (payload.size() != sign_payload_bytes(out.size()))
    throw std::runtime_error("sign payload has " + std::to_string(payload.size()) + " bytes, expected " +
                             std::to_string(sign_payload_bytes(out.size())));
  const float scale = get_f32(payload);
  if (!std::isfinite(scale) || scale < 0.0f) throw std::runtime_error("sign payload has an invalid scale");
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = (payload[4 + k / 8] >> (k % 8)) & 1u ? -scale : scale;
}

}  // namespace tg::train
