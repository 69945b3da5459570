// terngrad-bench: QSGD and EF-SignSGD payloads for the training exchange (see baselines.hpp).
#include "tg/train/baselines.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "tg/codec.hpp"
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

// LSB-first bit stream of fixed-width codes (at most 17 bits each), stored 4 bytes at a time: a word is
// written once 32 bits of codes are pending, so every byte written holds codes (no write past the payload).
class BitWriter {
 public:
  explicit BitWriter(std::span<std::uint8_t> out) : out_(out) {}
  void put(std::uint32_t code, int bits) {
    acc_ |= static_cast<std::uint64_t>(code) << fill_;
    fill_ += bits;
    if (fill_ >= 32) {
      for (int b = 0; b < 4; ++b) out_[at_ + b] = static_cast<std::uint8_t>(acc_ >> (8 * b));
      at_ += 4;
      acc_ >>= 32;
      fill_ -= 32;
    }
  }
  void flush() {
    for (; fill_ > 0; fill_ -= 8, acc_ >>= 8) out_[at_++] = static_cast<std::uint8_t>(acc_);
    acc_ = 0;
    fill_ = 0;
  }

 private:
  std::span<std::uint8_t> out_;
  std::size_t at_ = 0;
  std::uint64_t acc_ = 0;
  int fill_ = 0;
};

// Reads what BitWriter wrote: 4 bytes at a time while 4 remain, then byte by byte (no read past the payload).
class BitReader {
 public:
  explicit BitReader(std::span<const std::uint8_t> in) : in_(in) {}
  std::uint32_t get(int bits) {
    if (fill_ < bits) {
      if (at_ + 4 <= in_.size()) {
        std::uint64_t word = 0;
        for (int b = 0; b < 4; ++b) word |= static_cast<std::uint64_t>(in_[at_ + b]) << (8 * b);
        acc_ |= word << fill_;
        fill_ += 32;
        at_ += 4;
      } else {
        for (; fill_ < bits; fill_ += 8) acc_ |= static_cast<std::uint64_t>(in_[at_++]) << fill_;
      }
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

// v, negated when negative is 1: the sign bit flipped (what -v is), without a branch on a sign that is
// as likely one way as the other.
inline float negate_if(float v, std::uint32_t negative) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits ^= negative << 31;
  std::memcpy(&v, &bits, 4);
  return v;
}

// Elements per batch of Philox blocks drawn at once by the QSGD encoder (a multiple of 4).
constexpr std::size_t kPhiloxBatch = 4096;

// The decoded value of QSGD level `level` of a bucket with this norm (the encoder's inverse, one expression
// for the table and the direct path).
inline float qsgd_value(float norm, std::uint32_t level, int levels) {
  return static_cast<float>(static_cast<double>(norm) * level / levels);
}

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
  const std::size_t n = g.size();
  const std::size_t buckets = qsgd_buckets(n, bucket);
  const std::size_t width = bucket == 0 ? n : static_cast<std::size_t>(bucket);
  std::vector<double> scales(buckets);
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t lo_k = b * width, hi_k = std::min(n, lo_k + width);
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
    scales[b] = norm > 0.0f ? static_cast<double>(levels) / static_cast<double>(norm) : 0.0;
  }
  // Element k takes word k % 4 of Philox block k / 4, drawn kPhiloxBatch elements at a time.
  BitWriter bits(out.subspan(4 * buckets));
  PhiloxBlock blocks[kPhiloxBatch / 4];
  std::size_t b = 0, bucket_end = std::min(n, width);
  double scale = scales[0];
  for (std::size_t c0 = 0; c0 < n; c0 += kPhiloxBatch) {
    const std::size_t c1 = std::min(n, c0 + kPhiloxBatch);
    tg::philox_blocks(key, static_cast<std::uint32_t>(c0 / 4), (c1 - c0 + 3) / 4, blocks);
    for (std::size_t k = c0; k < c1; ++k) {
      if (k == bucket_end) {
        ++b;
        bucket_end = std::min(n, bucket_end + width);
        scale = scales[b];
      }
      // r is finite and in [0, levels] (about), so floor(r) is the truncation and both conversions are of
      // values below 2^63: through int64, without the branches of floor and of a uint64 conversion.
      const double r = std::fabs(static_cast<double>(g[k])) * scale;
      const auto whole = static_cast<std::int64_t>(r);
      const double lo = static_cast<double>(whole);  // floor(r)
      const auto threshold = static_cast<std::uint64_t>(static_cast<std::int64_t>((r - lo) * kTwoPow32));  // in [0, 2^32)
      const auto level = static_cast<std::uint32_t>(whole) + (blocks[(k - c0) / 4].v[k % 4] < threshold ? 1u : 0u);
      const std::uint32_t sign = static_cast<std::uint32_t>(level != 0) & static_cast<std::uint32_t>(g[k] < 0.0f);
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
  std::vector<float> table;  // per bucket, where it has more elements than levels: value of each level
  for (std::size_t b = 0; b < buckets; ++b) {
    const float norm = get_f32(payload.subspan(4 * b));
    if (!std::isfinite(norm) || norm < 0.0f)
      throw std::runtime_error("QSGD payload has an invalid norm in bucket " + std::to_string(b));
    const std::size_t lo_k = b * width, hi_k = std::min(out.size(), lo_k + width);
    const bool tabled = hi_k - lo_k > static_cast<std::size_t>(levels);
    if (tabled) {
      table.resize(static_cast<std::size_t>(levels) + 1);
      for (int l = 0; l <= levels; ++l) table[static_cast<std::size_t>(l)] = qsgd_value(norm, static_cast<std::uint32_t>(l), levels);
    }
    for (std::size_t k = lo_k; k < hi_k; ++k) {
      std::uint32_t code = bits.get(lb + 1);
      std::uint32_t level = code & mask;
      if (level > static_cast<std::uint32_t>(levels))
        throw std::runtime_error("QSGD payload: element " + std::to_string(k) + " has level " + std::to_string(level) +
                                 " above " + std::to_string(levels));
      const float v = tabled ? table[level] : qsgd_value(norm, level, levels);
      out[k] = negate_if(v, (code >> lb) & 1u);
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
  // First the checks, so that a non-finite gradient or sum leaves the residual as it was.
  std::uint32_t infinite = 0;  // an OR of "exponent all ones" (Inf or NaN) over g and g + e: a loop that vectorizes
  for (std::size_t k = 0; k < n; ++k) {
    const float p = g[k] + residual[k];
    std::uint32_t gb, pb;
    std::memcpy(&gb, &g[k], 4);
    std::memcpy(&pb, &p, 4);
    infinite |= static_cast<std::uint32_t>((gb & 0x7f800000u) == 0x7f800000u) |
                static_cast<std::uint32_t>((pb & 0x7f800000u) == 0x7f800000u);
  }
  if (infinite)
    for (std::size_t k = 0; k < n; ++k) {
      if (!std::isfinite(g[k])) throw NonFiniteError(tensor, k, g[k]);
      if (!std::isfinite(g[k] + residual[k])) throw NonFiniteError(tensor, k, g[k] + residual[k]);
    }
  double l1 = 0.0;
  for (std::size_t k = 0; k < n; ++k) {
    residual[k] = g[k] + residual[k];  // p = g + e
    l1 += std::fabs(static_cast<double>(residual[k]));
  }
  const float scale = n > 0 ? static_cast<float>(l1 / static_cast<double>(n)) : 0.0f;
  put_f32(out, scale);
  std::span<std::uint8_t> body = out.subspan(4);
  auto pack = [&](std::size_t k0, std::size_t count) {  // the bits of elements k0 .. k0 + count - 1 (count <= 8)
    unsigned byte = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const auto negative = static_cast<std::uint32_t>(residual[k0 + i] < 0.0f);
      byte |= negative << i;
      residual[k0 + i] = residual[k0 + i] - negate_if(scale, negative);  // e = p - decoded
    }
    body[k0 / 8] = static_cast<std::uint8_t>(byte);
  };
  for (std::size_t k0 = 0; k0 + 8 <= n; k0 += 8) pack(k0, 8);  // whole bytes: a loop of fixed length
  if (n % 8) pack(n - n % 8, n % 8);
}

void sign_decode(std::span<const std::uint8_t> payload, std::span<float> out) {
  if (payload.size() != sign_payload_bytes(out.size()))
    throw std::runtime_error("sign payload has " + std::to_string(payload.size()) + " bytes, expected " +
                             std::to_string(sign_payload_bytes(out.size())));
  const float scale = get_f32(payload);
  if (!std::isfinite(scale) || scale < 0.0f) throw std::runtime_error("sign payload has an invalid scale");
  const std::size_t n = out.size();
  auto unpack = [&](std::size_t k0, std::size_t count) {
    const unsigned byte = payload[4 + k0 / 8];
    for (std::size_t i = 0; i < count; ++i) out[k0 + i] = negate_if(scale, (byte >> i) & 1u);
  };
  for (std::size_t k0 = 0; k0 + 8 <= n; k0 += 8) unpack(k0, 8);
  if (n % 8) unpack(n - n % 8, n % 8);
}

}  // namespace tg::train
