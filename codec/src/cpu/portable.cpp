// terngrad-bench: portable kernels of the optimized CPU codec (one Philox block per 4 elements,
// table-driven unpacking): the whole codec on CPUs without the x86 SIMD kernels, and the byte-level
// decoders and unpackers every kernel set shares.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels.hpp"

namespace tg::cpu {
namespace {

void portable_chunk_totals(const float* g, std::size_t n, std::size_t c0, std::size_t c1, bool square,
                           double mean, double* totals) {
  for (std::size_t c = c0; c < c1; ++c) {
    std::size_t start = c * kReduceChunk, end = std::min<std::size_t>(n, start + kReduceChunk);
    double lane[kReduceLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
    add_to_lanes(g, start, start, end, square, mean, lane);
    totals[c - c0] = combine_lanes(lane);
  }
}

void portable_encode_base3(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                           const StreamKey& key, std::uint8_t* body) {
  constexpr std::size_t kStep = 320;  // multiple of 4 (Philox blocks) and 5 (trits per byte)
  std::int8_t local[kStep];
  for (std::size_t b = begin; b < end; b += kStep) {
    std::size_t stop = std::min<std::size_t>(end, b + kStep);
    ternarize_scalar(g, b, stop, rule, key, local);
    pack_base3_range(local, 0, stop - b, body + b / 5);
  }
}

struct DecodeTable {
  std::array<std::array<float, 4>, 256> trit{};
  std::array<std::uint8_t, 256> bad{};
};

const DecodeTable& decode_table() {
  static const DecodeTable t = [] {
    DecodeTable d;
    for (unsigned b = 0; b < 256; ++b)
      for (unsigned m = 0; m < 4; ++m) {
        unsigned code = (b >> (2 * m)) & 3u;
        if (code == 3) d.bad[b] = 1;
        d.trit[b][m] = code == 0 ? 0.0f : (code == 1 ? 1.0f : -1.0f);
      }
    return d;
  }();
  return t;
}

// Nonzero bits of the last 2bit byte past element n are padding and must be 0.
bool bad_2bit_padding(std::uint8_t byte, std::size_t n, std::size_t j) {
  std::size_t valid = n - 4 * j;  // elements in this byte
  if (valid >= 4) return false;
  return (byte >> (2 * valid)) != 0;
}

std::size_t portable_decode_2bit(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                                 float scalar, float* out) {
  const DecodeTable& t = decode_table();
  for (std::size_t j = b0; j < b1; ++j) {
    std::uint8_t byte = body[j];
    if (t.bad[byte] || bad_2bit_padding(byte, n, j)) return j;
    std::size_t stop = std::min<std::size_t>(n, 4 * j + 4);
    for (std::size_t k = 4 * j; k < stop; ++k) out[k] = scalar * t.trit[byte][k - 4 * j];
  }
  return kNoBadIndex;
}

}  // namespace

std::size_t decode_base3_range(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                               float scalar, float* out) {
  static const float trit_value[3] = {0.0f, 1.0f, -1.0f};
  for (std::size_t j = b0; j < b1; ++j) {
    unsigned v = body[j];
    if (v > kBase3MaxByte) return j;
    for (std::size_t m = 0; m < 5; ++m, v /= 3) {
      std::size_t k = 5 * j + m;
      if (k < n)
        out[k] = scalar * trit_value[v % 3];
      else if (v % 3 != 0)
        return j;
    }
  }
  return kNoBadIndex;
}

namespace {
// Trits of every byte value as 4 (2bit) or 5 (base3) int8 in one word, for byte-at-a-time unpacking.
struct UnpackTables {
  std::array<std::uint32_t, 256> two_bit{};
  std::array<std::uint64_t, 243> base3{};
};
const UnpackTables& unpack_tables() {
  static const UnpackTables t = [] {
    UnpackTables u;
    for (unsigned b = 0; b < 256; ++b) {
      std::int8_t trits[4];
      for (unsigned m = 0; m < 4; ++m) trits[m] = static_cast<std::int8_t>(trit_of_code((b >> (2 * m)) & 3u));
      std::memcpy(&u.two_bit[b], trits, 4);
    }
    for (unsigned b = 0; b < 243; ++b) {
      std::int8_t trits[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      unsigned v = b;
      for (unsigned m = 0; m < 5; ++m, v /= 3) trits[m] = static_cast<std::int8_t>(trit_of_code(static_cast<std::uint8_t>(v % 3)));
      std::memcpy(&u.base3[b], trits, 8);
    }
    return u;
  }();
  return t;
}
}  // namespace

std::size_t unpack_2bit_range(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                              std::int8_t* trits) {
  const UnpackTables& t = unpack_tables();
  std::size_t full = std::min(b1, n / 4);  // bytes holding 4 elements
  std::size_t j = b0;
  for (; j < full; ++j) {
    std::uint8_t byte = body[j];
    if ((byte & (byte >> 1)) & 0x55) return j;  // some code is 11
    std::memcpy(trits + 4 * j, &t.two_bit[byte], 4);
  }
  for (; j < b1; ++j) {  // the last, partly used byte
    std::uint8_t byte = body[j];
    if (decode_table().bad[byte] || bad_2bit_padding(byte, n, j)) return j;
    std::size_t stop = std::min<std::size_t>(n, 4 * j + 4);
    for (std::size_t k = 4 * j; k < stop; ++k)
      trits[k] = static_cast<std::int8_t>(trit_of_code((byte >> (2 * (k - 4 * j))) & 3u));
  }
  return kNoBadIndex;
}

std::size_t unpack_base3_range(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                               std::int8_t* trits) {
  const UnpackTables& t = unpack_tables();
  std::size_t full = std::min(b1, n / 5);  // bytes holding 5 elements
  std::size_t j = b0;
  for (; j < full; ++j) {
    unsigned v = body[j];
    if (v > kBase3MaxByte) return j;
    std::memcpy(trits + 5 * j, &t.base3[v], 5);
  }
  for (; j < b1; ++j) {  // the last, partly used byte
    unsigned v = body[j];
    if (v > kBase3MaxByte) return j;
    for (std::size_t m = 0; m < 5; ++m, v /= 3) {
      std::size_t k = 5 * j + m;
      if (k < n)
        trits[k] = static_cast<std::int8_t>(trit_of_code(static_cast<std::uint8_t>(v % 3)));
      else if (v % 3 != 0)
        return j;
    }
  }
  return kNoBadIndex;
}

void pack_base3_range(const std::int8_t* trits, std::size_t begin, std::size_t end, std::uint8_t* body) {
  for (std::size_t i = begin; i < end; i += 5) {
    unsigned v = 0, p = 1;
    std::size_t stop = std::min<std::size_t>(end, i + 5);
    for (std::size_t k = i; k < stop; ++k, p *= 3) v += digit_base3(trits[k]) * p;
    body[i / 5] = static_cast<std::uint8_t>(v);
  }
}

namespace {

void portable_ternarize(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                        const StreamKey& key, std::int8_t* trits) {
  ternarize_scalar(g, begin, end, rule, key, trits + begin);
}

void portable_philox_blocks(const StreamKey& key, std::uint32_t first, std::size_t count, PhiloxBlock* out) {
  for (std::size_t i = 0; i < count; ++i) out[i] = philox_block(key, static_cast<std::uint32_t>(first + i));
}

}  // namespace

const Kernels* portable_kernels() {
  static const Kernels k = {"portable",
                            max_abs_scalar,
                            portable_chunk_totals,
                            portable_ternarize,
                            encode_2bit_scalar,
                            portable_encode_base3,
                            portable_decode_2bit,
                            decode_base3_range,
                            unpack_2bit_range,
                            unpack_base3_range,
                            encode_2bit_running_scalar,
                            recheck_2bit_scalar,
                            chunk_stats_scalar,
                            philox_fold_scalar,
                            portable_philox_blocks,
                            nullptr};  // no encode_2bit_stream
  return &k;
}

}  // namespace tg::cpu
