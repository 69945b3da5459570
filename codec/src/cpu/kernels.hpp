// terngrad-bench: the optimized CPU codec's range kernels (internal). Each works on elements
// [begin, end) of one tensor, with absolute indexes so the Philox counter and packing offsets are
// those of the whole tensor; threads call them on disjoint, aligned ranges.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tg/codec.hpp"

namespace tg::cpu {

inline constexpr std::size_t kNoBadIndex = static_cast<std::size_t>(-1);

struct Kernels {
  const char* name;
  // max |g| over [begin, end); *first_bad = index of the first non-finite value or kNoBadIndex.
  float (*max_abs)(const float* g, std::size_t begin, std::size_t end, std::size_t* first_bad);
  // Canonical chunk totals (tg/reduce.hpp) of chunks [c0, c1): term = g (square = false) or
  // (g - mean)^2 (square = true); totals[c - c0] receives chunk c's total.
  void (*chunk_totals)(const float* g, std::size_t n, std::size_t c0, std::size_t c1, bool square,
                       double mean, double* totals);
  // trits[k] for k in [begin, end); begin is a multiple of 4.
  void (*ternarize)(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                    const StreamKey& key, std::int8_t* trits);
  // 2bit body bytes for elements [begin, end); begin multiple of 4; writes bytes begin/4 ..
  void (*encode_2bit)(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                      const StreamKey& key, std::uint8_t* body);
  // base3 body bytes for elements [begin, end); begin multiple of 5.
  void (*encode_base3)(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                       const StreamKey& key, std::uint8_t* body);
  // Decode 2bit bytes [b0, b1) of a body of n elements to out (scalar * trit); returns the index of
  // the first invalid byte or kNoBadIndex.
  std::size_t (*decode_2bit)(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                             float scalar, float* out);
};

const Kernels& portable_kernels();
// SIMD kernel sets; call only after checking the CPU (tg::cpu_has_avx2 / cpu_has_avx512).
const Kernels* avx2_kernels();
const Kernels* avx512_kernels();

// Shared by both kernel sets (portable code).
std::size_t decode_base3_range(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                               float scalar, float* out);
std::size_t unpack_2bit_range(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                              std::int8_t* trits);
std::size_t unpack_base3_range(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                               std::int8_t* trits);
// Packs trits [begin, end) (begin a multiple of 5) into base3 bytes begin/5 ..
void pack_base3_range(const std::int8_t* trits, std::size_t begin, std::size_t end, std::uint8_t* body);

}  // namespace tg::cpu
