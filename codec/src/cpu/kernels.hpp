// terngrad-bench: the optimized CPU codec's range kernels (internal; codec/tests/test_kernels.cpp walks
// them). Each works on elements [begin, end) of one tensor, with absolute indexes so the Philox counter
// and packing offsets are those of the whole tensor; threads call them on disjoint, aligned ranges.
// Every instruction set's kernels handle any length themselves (masked or scalar tails): the optimized
// codec picks one set once and calls only it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>

#include "tg/codec.hpp"

namespace tg::cpu {

inline constexpr std::size_t kNoBadIndex = static_cast<std::size_t>(-1);

// State of the single-pass 2bit encode over one range (encode_2bit_running), carried from one call
// to the next on consecutive pieces of the range.
struct RunningPass {
  float m = 0.0f;                       // in: max |g| so far (the caller may seed it with any value <= the
                                        // final scalar); out: including this piece
  std::size_t first_bad = kNoBadIndex;  // out: first non-finite element (the kernel stops there)
  std::size_t count = 0;                // in/out: candidates stored so far (those that fail the guard)
  std::size_t settled = 0;              // out: stored candidates [settled, count) were decided with m's final value
};

// The float bounds of the SIMD kernels' keep prefilters (avx2.cpp Scale8, avx512.cpp Scale): scale (1 - 2^-20)
// and scale (1 + 2^-20) rounded to float, or 0 and +inf when the latter is beyond the float range (then the
// float test proves nothing and every lane goes to the exact double test).
struct KeepBounds {
  float lo, hi;
};
inline KeepBounds keep_bounds(double scale) {
  const float lo = static_cast<float>(scale * (1.0 - 0x1p-20)), hi = static_cast<float>(scale * (1.0 + 0x1p-20));
  if (!std::isfinite(hi)) return {0.0f, std::numeric_limits<float>::infinity()};
  return {lo, hi};
}

// Extra candidate slots a kernel may write past count (full-vector stores of compressed lanes).
inline constexpr std::size_t kCandidateSlack = 64;

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
  // Single-pass 2bit encode of [begin, end) (begin a multiple of 4), without a known scalar: each
  // group of elements is decided with the running maximum m (st->m, then max |g| of the range up to
  // and including the group) under the rule make_rule(m, m). Since the final scalar s >= m, every
  // element s keeps is kept here (the decision is monotone in the scale 2^32/m): these are the
  // candidates, and the kernel writes their codes to body. A candidate with
  // (double)u < (double)|g| * make_rule(guard, guard).scale is kept under every final s <= guard
  // (division and multiplication round monotonically), so it is not stored; every other candidate is
  // stored, in element order, at st->count: its offset from begin in cand_pos, its uniform u and |g|
  // (capacity st->count + (end - begin) + kCandidateSlack; end - begin < 2^32). Once s is known, the
  // caller re-decides the stored ones if s <= guard, and encodes the range again otherwise. It stops
  // at the first non-finite value (st->first_bad).
  void (*encode_2bit_running)(const float* g, std::size_t begin, std::size_t end, float guard, const StreamKey& key,
                              std::uint8_t* body, std::uint32_t* cand_pos, std::uint32_t* cand_u, float* cand_a,
                              RunningPass* st);
  // After the single-pass encode: re-decides `count` stored candidates (element base + cand_pos[i],
  // uniform cand_u[i], magnitude cand_a[i]) with the final rule, and clears the codes of those it does
  // not keep.
  void (*recheck_2bit)(std::uint8_t* body, std::size_t base, const std::uint32_t* cand_pos, const std::uint32_t* cand_u,
                       const float* cand_a, std::size_t count, const ScalarRule& rule);
  // Clipping statistics in one pass over chunks [c0, c1) (chunks of kReduceChunk elements of an
  // n-element tensor): t1[c - c0] = the canonical chunk total of g (as chunk_totals, square = false),
  // q1/q2[c - c0] = sum of (g - shift) and of (g - shift)^2 over the chunk in double (any order, at
  // most 2048 additions deep); returns max |g|; *first_bad as max_abs (the sums are then meaningless).
  float (*chunk_stats)(const float* g, std::size_t n, std::size_t c0, std::size_t c1, float shift,
                       double* t1, double* q1, double* q2, std::size_t* first_bad);
  // XOR of every word of Philox blocks first .. first + count - 1 (the generator alone, for the
  // benchmark's roofline; count a multiple of 16).
  std::uint32_t (*philox_fold)(const StreamKey& key, std::uint32_t first, std::size_t count);
  // This set's Philox4x32-10 generator: out[i] = block first + i (mod 2^32) of the stream `key`, for
  // i < count. Only the tests call it, to hold each generator to the published known answers.
  void (*philox_blocks)(const StreamKey& key, std::uint32_t first, std::size_t count, PhiloxBlock* out);
  // encode_2bit writing the body with non-temporal stores, for tensors whose body the caches do not keep
  // (OptimizedCodec::encode_body from kStreamFrom elements); the same bytes. Null: encode_2bit serves.
  void (*encode_2bit_stream)(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                             const StreamKey& key, std::uint8_t* body);
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

// The optimized codec on one kernel set with its own thresholds: elements per thread below which it
// does not start threads, and the tensor size from which it encodes in a single pass; for the
// benchmark (thread start-up, single pass against two) and the tests (small tensors, many parts).
// single_pass_from: tensors from this size on take the single pass (no clipping, own scalar, 2bit);
// measure_path: instead, their first few alternate between the single pass and the two passes, timed,
// and the rest take the faster (the default codec's rule, optimized.cpp kSinglePassFrom).
std::unique_ptr<Codec> make_optimized_codec_with(unsigned threads, const Kernels* kernels, std::size_t min_per_thread,
                                                 std::size_t single_pass_from, bool measure_path = false);
// The path an optimized codec's measured choice settled on: "single pass", "two passes" or "measuring".
const char* chosen_path(const Codec& codec);
// How many of an optimized codec's parallel calls ran in more parts than its per-thread threshold allows
// because its workers were polling (OptimizedCodec::parts_for); 0 for other codecs.
std::size_t polled_parallel_calls(const Codec& codec);
std::size_t default_min_per_thread();
std::size_t default_single_pass_from();

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

// Single-pass encode, one element at a time (the portable set; see Kernels::encode_2bit_running).
static inline void encode_2bit_running_scalar(const float* g, std::size_t begin, std::size_t end, float guard,
                                              const StreamKey& key, std::uint8_t* body, std::uint32_t* cand_pos,
                                              std::uint32_t* cand_u, float* cand_a, RunningPass* st) {
  float m = st->m;
  ScalarRule rule = make_rule(m, m);
  const double guard_scale = make_rule(guard, guard).scale;
  for (std::size_t b = begin; b < end; b += 4) {
    std::size_t stop = std::min<std::size_t>(end, b + 4);
    std::size_t bad;
    float gm = max_abs_scalar(g, b, stop, &bad);
    if (bad != kNoBadIndex) {
      st->first_bad = bad;
      break;
    }
    if (gm > m) {
      m = gm;
      rule = make_rule(m, m);
      st->settled = st->count;
    }
    PhiloxBlock u = philox_block(key, static_cast<std::uint32_t>(b / 4));
    unsigned byte = 0;
    for (std::size_t k = b; k < stop; ++k) {
      int trit = ternarize_element(g[k], rule, u.v[k - b]);
      const float a = abs_float(g[k]);
      if (trit != 0 && !(static_cast<double>(u.v[k - b]) < static_cast<double>(a) * guard_scale)) {
        cand_pos[st->count] = static_cast<std::uint32_t>(k - begin);
        cand_u[st->count] = u.v[k - b];
        cand_a[st->count] = a;
        ++st->count;
      }
      byte |= unsigned(code_2bit(trit)) << (2 * (k - b));
    }
    body[b / 4] = static_cast<std::uint8_t>(byte);
  }
  st->m = m;
}

// Clears the 2bit code of element e.
static inline void clear_code_2bit(std::uint8_t* body, std::size_t e) {
  body[e / 4] = static_cast<std::uint8_t>(body[e / 4] & ~(3u << (2 * (e % 4))));
}

static inline void recheck_2bit_scalar(std::uint8_t* body, std::size_t base, const std::uint32_t* cand_pos,
                                       const std::uint32_t* cand_u, const float* cand_a, std::size_t count,
                                       const ScalarRule& rule) {
  for (std::size_t c = 0; c < count; ++c)
    if (!keep(cand_a[c], rule, cand_u[c])) clear_code_2bit(body, base + cand_pos[c]);
}

// The scalar steps of the canonical chunk sums (tg/reduce.hpp): elements [from, to) of the chunk that starts at
// start, each added to lane (i - start) % kReduceLanes; with square, (x - mean)^2 in place of x.
static inline void add_to_lanes(const float* g, std::size_t start, std::size_t from, std::size_t to, bool square,
                                double mean, double* lane) {
  for (std::size_t i = from; i < to; ++i) {
    double x = static_cast<double>(g[i]);
    if (square) {
      double d = x - mean;
      x = d * d;
    }
    lane[(i - start) % kReduceLanes] += x;
  }
}

// The scalar steps of the fused statistics pass: the lane sums of x as add_to_lanes, and the sums of d = x - shift
// and of d^2, in element order.
static inline void add_to_fused(const float* g, std::size_t start, std::size_t from, std::size_t to, double shift,
                                double* lane, double* s1, double* s2) {
  for (std::size_t i = from; i < to; ++i) {
    double x = static_cast<double>(g[i]);
    lane[(i - start) % kReduceLanes] += x;
    double d = x - shift;
    *s1 += d;
    *s2 += d * d;
  }
}

// Clipping statistics one element at a time (see Kernels::chunk_stats).
static inline float chunk_stats_scalar(const float* g, std::size_t n, std::size_t c0, std::size_t c1, float shift,
                                       double* t1, double* q1, double* q2, std::size_t* first_bad) {
  std::size_t begin = c0 * kReduceChunk, end = std::min<std::size_t>(n, c1 * kReduceChunk);
  float m = max_abs_scalar(g, begin, end, first_bad);
  if (*first_bad != kNoBadIndex) return m;
  const double k = static_cast<double>(shift);
  for (std::size_t c = c0; c < c1; ++c) {
    std::size_t start = c * kReduceChunk, stop = std::min<std::size_t>(n, start + kReduceChunk);
    double lane[kReduceLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
    double s1 = 0.0, s2 = 0.0;
    add_to_fused(g, start, start, stop, k, lane, &s1, &s2);
    t1[c - c0] = combine_lanes(lane);
    q1[c - c0] = s1;
    q2[c - c0] = s2;
  }
  return m;
}

static inline std::uint32_t philox_fold_scalar(const StreamKey& key, std::uint32_t first, std::size_t count) {
  std::uint32_t x = 0;
  for (std::size_t i = 0; i < count; ++i) {
    PhiloxBlock b = philox_block(key, static_cast<std::uint32_t>(first + i));
    x ^= b.v[0] ^ b.v[1] ^ b.v[2] ^ b.v[3];
  }
  return x;
}

}  // namespace tg::cpu
