// terngrad-bench: the optimized CPU codec's range kernels (internal; codec/tests/test_kernels.cpp walks
// them). Each works on elements [begin, end) of one tensor, with absolute indexes so the Philox counter
// and packing offsets are those of the whole tensor; threads call them on disjoint, aligned ranges.
// Every instruction set's kernels handle any length themselves (masked or scalar tails): the optimized
// codec picks one set once and calls only it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "tg/codec.hpp"

namespace tg::cpu {

inline constexpr std::size_t kNoBadIndex = static_cast<std::size_t>(-1);

struct Kernels {
  const char* name;
  // max |g| over [begin, end); *first_bad = index of the first non-finite value or kNoBadIndex
  // (the returned value is meaningless when a non-finite value was found).
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
  // base3 body bytes for elements [begin, end); begin multiple of 20 (Philox blocks and bytes).
  void (*encode_base3)(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                       const StreamKey& key, std::uint8_t* body);
  // Decode bytes [b0, b1) of a body of n elements to out (scalar * trit); return the index of the
  // first invalid byte (invalid code or nonzero padding) or kNoBadIndex.
  std::size_t (*decode_2bit)(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                             float scalar, float* out);
  std::size_t (*decode_base3)(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                              float scalar, float* out);
  // The same, to trits.
  std::size_t (*unpack_2bit)(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                             std::int8_t* trits);
  std::size_t (*unpack_base3)(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                              std::int8_t* trits);
  // This set's Philox4x32-10 generator: out[i] = block first + i (mod 2^32) of the stream `key`, for
  // i < count. Only the tests call it, to hold each generator to the published known answers.
  void (*philox_blocks)(const StreamKey& key, std::uint32_t first, std::size_t count, PhiloxBlock* out);
};

// One kernel set compiled into this library.
struct KernelSet {
  const char* name;   // "portable", "avx2", "avx512"
  Isa isa;
  // Elements one iteration of the encode loop handles (4 per Philox block in flight): the period of
  // the kernel's tails, from which the tests derive their edge sizes.
  std::size_t width;
  const char* needs;  // the CPU features it needs, for messages ("" for portable)
  bool (*cpu_runs)();
  const Kernels* (*kernels)();  // call only when cpu_runs()
};

// Portable first, then wider instruction sets; only those compiled for this target.
std::span<const KernelSet> compiled_kernel_sets();

const Kernels* portable_kernels();
#if TG_HAVE_X86_SIMD
const Kernels* avx2_kernels();
const Kernels* avx512_kernels();
#endif

// Portable range functions that every set's table may use where it has no vector version.
std::size_t decode_base3_range(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                               float scalar, float* out);
std::size_t unpack_2bit_range(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                              std::int8_t* trits);
std::size_t unpack_base3_range(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                               std::int8_t* trits);
// Packs trits [begin, end) (begin a multiple of 5) into base3 bytes begin/5 ..
void pack_base3_range(const std::int8_t* trits, std::size_t begin, std::size_t end, std::uint8_t* body);

// ---- scalar loops: the portable kernels and the SIMD kernels' tails -------------------------------
// `static` on purpose: each kernel file compiles its own copy with its own instruction-set flags. An
// `inline` function with external linkage would be merged by the linker across files compiled for
// different instruction sets, and the portable kernels could end up running an AVX-512 copy.

// max |g| over [begin, end) one element at a time; stops at the first non-finite value.
static inline float max_abs_scalar(const float* g, std::size_t begin, std::size_t end,
                                   std::size_t* first_bad) {
  float m = 0.0f;
  *first_bad = kNoBadIndex;
  for (std::size_t k = begin; k < end; ++k) {
    std::uint32_t bits;
    std::memcpy(&bits, &g[k], 4);
    bits &= 0x7fffffffu;
    if (bits >= 0x7f800000u) {
      *first_bad = k;
      return m;
    }
    float a;
    std::memcpy(&a, &bits, 4);
    m = std::max(m, a);
  }
  return m;
}

// Trits of elements [begin, end), one Philox block per 4 elements; begin a multiple of 4. out points
// at element begin's trit (out[k - begin]), so a caller may collect them in a local buffer.
static inline void ternarize_scalar(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                                    const StreamKey& key, std::int8_t* out) {
  for (std::size_t b = begin; b < end; b += 4) {
    PhiloxBlock u = philox_block(key, static_cast<std::uint32_t>(b / 4));
    std::size_t stop = std::min<std::size_t>(end, b + 4);
    for (std::size_t k = b; k < stop; ++k)
      out[k - begin] = static_cast<std::int8_t>(ternarize_element(g[k], rule, u.v[k - b]));
  }
}

// 2bit bytes of elements [begin, end) (begin a multiple of 4); the last byte's padding is 0.
static inline void encode_2bit_scalar(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                                      const StreamKey& key, std::uint8_t* body) {
  for (std::size_t b = begin; b < end; b += 4) {
    PhiloxBlock u = philox_block(key, static_cast<std::uint32_t>(b / 4));
    std::size_t stop = std::min<std::size_t>(end, b + 4);
    unsigned byte = 0;
    for (std::size_t k = b; k < stop; ++k)
      byte |= unsigned(code_2bit(ternarize_element(g[k], rule, u.v[k - b]))) << (2 * (k - b));
    body[b / 4] = static_cast<std::uint8_t>(byte);
  }
}

// Decodes 2bit bytes [b0, b1) of an n-element body one byte at a time; returns the first byte with
// the invalid code 11 or nonzero padding past element n, or kNoBadIndex.
static inline std::size_t decode_2bit_scalar(const std::uint8_t* body, std::size_t n, std::size_t b0,
                                             std::size_t b1, float scalar, float* out) {
  for (std::size_t j = b0; j < b1; ++j) {
    unsigned byte = body[j];
    std::size_t valid = std::min<std::size_t>(4, n - 4 * j);  // elements in this byte
    if ((byte & (byte >> 1)) & 0x55u) return j;
    if (valid < 4 && (byte >> (2 * valid)) != 0) return j;
    for (std::size_t m = 0; m < valid; ++m)
      out[4 * j + m] = scalar * static_cast<float>(trit_of_code(static_cast<std::uint8_t>((byte >> (2 * m)) & 3u)));
  }
  return kNoBadIndex;
}

}  // namespace tg::cpu
