// terngrad-bench: AVX-512 kernels of the optimized CPU codec (AVX512F + BMI2; chosen at run time,
// the AVX2 or portable kernels otherwise). Sixteen Philox4x32-10 blocks run side by side, 64 elements
// per iteration; the last, partial iteration uses masked loads and stores, so every kernel here handles
// any length itself. Compiled with -mavx512f -mbmi2 and -ffp-contract=off: bits match the reference.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels.hpp"

namespace tg::cpu {
namespace {

// Philox4x32-10 for one stream key, 16 blocks at a time, each word in the low half of a 64-bit lane (8
// blocks per vector, two vectors per word). _mm512_mul_epu32 then gives a word's full 64-bit product in
// place: lo is the lane itself (the high half is never read: the multiplies use the low halves and only
// the low halves are kept), hi is one shift away. Against 32-bit lanes (16 blocks per vector, the odd
// lanes' products moved down and the halves interleaved by two shuffles) this trades four shuffles and two
// shifts per round for four shifts and two more three-way xors (the same count, fewer shuffles): on the
// project's AMD EPYC VM the encode in cache went from 0.58 to 0.51 ns per element (docs/performance.md,
// "Eighth round").
struct Philox16 {
  __m512i k0[10], k1[10], c1, c2, c3;
  explicit Philox16(const StreamKey& key) {
    std::uint32_t a = static_cast<std::uint32_t>(key.seed), b = static_cast<std::uint32_t>(key.seed >> 32);
    for (int r = 0; r < 10; ++r, a += 0x9E3779B9u, b += 0xBB67AE85u) {
      k0[r] = _mm512_set1_epi32(static_cast<int>(a));
      k1[r] = _mm512_set1_epi32(static_cast<int>(b));
    }
    c1 = _mm512_set1_epi32(static_cast<int>(key.step));
    c2 = _mm512_set1_epi32(static_cast<int>(key.tensor));
    c3 = _mm512_set1_epi32(static_cast<int>(key.worker));
  }

  // Word j of blocks block + 8 h + l in the low half of 64-bit lane l of x[4 h + j] (h = 0, 1).
  void blocks(std::uint32_t block, __m512i x[8]) const {
    const __m512i m0 = _mm512_set1_epi64(0xD2511F53u);
    const __m512i m1 = _mm512_set1_epi64(0xCD9E8D57u);
    // the counter's low word wraps mod 2^32 as the spec's: a carry into the high half is never read
    __m512i a0 = _mm512_add_epi64(_mm512_set1_epi64(block), _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
    __m512i b0 = _mm512_add_epi64(_mm512_set1_epi64(block), _mm512_setr_epi64(8, 9, 10, 11, 12, 13, 14, 15));
    __m512i a1 = c1, a2 = c2, a3 = c3, b1 = c1, b2 = c2, b3 = c3;
#pragma GCC unroll 10
    for (int r = 0; r < 10; ++r) {
      const __m512i pa0 = _mm512_mul_epu32(a0, m0), pa2 = _mm512_mul_epu32(a2, m1);
      const __m512i pb0 = _mm512_mul_epu32(b0, m0), pb2 = _mm512_mul_epu32(b2, m1);
      a0 = _mm512_ternarylogic_epi32(_mm512_srli_epi64(pa2, 32), a1, k0[r], 0x96);  // hi1 ^ x1 ^ k0
      a1 = pa2;                                                                     // lo1
      a2 = _mm512_ternarylogic_epi32(_mm512_srli_epi64(pa0, 32), a3, k1[r], 0x96);  // hi0 ^ x3 ^ k1
      a3 = pa0;                                                                     // lo0
      b0 = _mm512_ternarylogic_epi32(_mm512_srli_epi64(pb2, 32), b1, k0[r], 0x96);
      b1 = pb2;
      b2 = _mm512_ternarylogic_epi32(_mm512_srli_epi64(pb0, 32), b3, k1[r], 0x96);
      b3 = pb0;
    }
    x[0] = a0, x[1] = a1, x[2] = a2, x[3] = a3;
    x[4] = b0, x[5] = b1, x[6] = b2, x[7] = b3;
  }

  // The uniforms of the 64 elements 4 block .. 4 block + 63, 16 per vector in element order (element
  // 4 b + j is word j of block b).
  void elements(std::uint32_t block, __m512i u[4]) const {
    __m512i x[8];
    blocks(block, x);
    const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    for (int h = 0; h < 2; ++h) {
      const __m512i* w = x + 4 * h;
      // 64-bit lane l: words 0 and 1 (2 and 3) of block l
      const __m512i w01 = _mm512_mask_shuffle_epi32(w[0], 0xAAAA, w[1], _MM_PERM_CCAA);
      const __m512i w23 = _mm512_mask_shuffle_epi32(w[2], 0xAAAA, w[3], _MM_PERM_CCAA);
      const __m512i even = _mm512_unpacklo_epi64(w01, w23);  // blocks 0, 2, 4, 6: one per 128-bit lane
      const __m512i odd = _mm512_unpackhi_epi64(w01, w23);   // blocks 1, 3, 5, 7
      u[2 * h] = _mm512_permutex2var_epi64(even, first, odd);
      u[2 * h + 1] = _mm512_permutex2var_epi64(even, second, odd);
    }
  }
};

// The keep test (double)u < (double)a * scale (tg::keep) for 16 lanes, decided in float wherever the
// float result cannot differ from the double one, in double otherwise. With lo <= scale (1 - 2^-20) and
// hi >= scale (1 + 2^-20) (each rounded once from the double), and u, a * lo, a * hi rounded to float
// (relative error 2^-24 each, or an absolute 2^-150 below the normal range):
//  * float(u) < a * lo  implies u < (double)a * scale: for a * lo normal, u < a scale (1 - 2^-22); for a * lo
//    subnormal, float(u) < 2^-126 means u = 0 while a * lo > 0 means a > 0 and scale > 0; an infinite
//    a * lo means a * scale > FLT_MAX > u;
//  * float(u) > a * hi  implies u >= (double)a * scale: a * hi >= 0, so u > 0; for a * hi normal,
//    u > a scale (1 + 2^-22); for a * hi below the normal range, a * scale < 2^-125 < 1 <= u (the strict
//    compare stands in for a separate u > 0 test: a lane with float(u) = a * hi only goes to double);
//  * NaN products decide nothing. A scale above the float range (s < 2^-96) gives lo = 0, hi = +inf: every
//    lane then goes to double.
// The lanes left (u within about 2^-20 of a * scale, or u = 0 with a * lo = 0) are decided in double: about
// one vector in 2^15 on random data. So the bits are tg::keep's; the prefilter only saves the double work.
struct Scale {
  __m512d d;
  __m512 lo, hi;
  explicit Scale(double scale) : d(_mm512_set1_pd(scale)) {
    const KeepBounds b = keep_bounds(scale);
    lo = _mm512_set1_ps(b.lo);
    hi = _mm512_set1_ps(b.hi);
  }
};

inline unsigned keep16_double(__m512 a, __m512i u, __m512d scale) {
  __m512d plo = _mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(a)), scale);
  __m512d phi = _mm512_mul_pd(
      _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))), scale);
  __m512d ulo = _mm512_cvtepu32_pd(_mm512_castsi512_si256(u));
  __m512d uhi = _mm512_cvtepu32_pd(_mm512_extracti64x4_epi64(u, 1));
  return _mm512_cmp_pd_mask(ulo, plo, _CMP_LT_OQ) | (_mm512_cmp_pd_mask(uhi, phi, _CMP_LT_OQ) << 8);
}

// The lanes whose keep the float test proves, given a Scale's lo (a subset of tg::keep's keeps; the lanes
// it leaves open count as not proved).
inline unsigned proved_keep16(__m512 a, __m512i u, __m512 lo) {
  return _mm512_cmp_ps_mask(_mm512_cvtepu32_ps(u), _mm512_mul_ps(a, lo), _CMP_LT_OQ);
}

// Keep bits of 16 lanes of magnitudes a (already clamped) and uniforms u: exactly tg::keep's.
inline unsigned keep16(__m512 a, __m512i u, const Scale& scale) {
  const __mmask16 yes = static_cast<__mmask16>(proved_keep16(a, u, scale.lo));
  const __mmask16 no = _mm512_cmp_ps_mask(_mm512_cvtepu32_ps(u), _mm512_mul_ps(a, scale.hi), _CMP_GT_OQ);
  if (__builtin_expect(static_cast<__mmask16>(yes | no) == 0xffff, 1)) return yes;
  return keep16_double(a, u, scale.d);
}

// keep bits of 16 elements: (double)u < min(|g|, cap) * 2^32/s; neg bits: sign of g.
inline void decide16(__m512 g, __m512i u, __m512 cap, const Scale& scale, unsigned* keep, unsigned* neg) {
  __m512i gi = _mm512_castps_si512(g);
  __m512 a = _mm512_min_ps(_mm512_castsi512_ps(_mm512_and_epi32(gi, _mm512_set1_epi32(0x7fffffff))), cap);
  *keep = keep16(a, u, scale);
  *neg = _mm512_cmplt_epi32_mask(gi, _mm512_setzero_si512());
}

// Lane mask of the first `lanes` of 16 (lanes may exceed 16).
inline __mmask16 first_lanes(std::size_t lanes) {
  return lanes >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << lanes) - 1u);
}

// The 2bit codes of 16 lanes: element e -> bits 2e (plus) and 2e+1 (minus), codes 01 = +1, 10 = -1, 00 = 0.
inline std::uint32_t codes16(unsigned keep, unsigned neg) {
  return _pdep_u32(keep & ~neg, 0x55555555u) | _pdep_u32(keep & neg, 0xAAAAAAAAu);
}

// Software prefetch of the line kPrefetch elements past element k (a hint only: the address is formed as
// an integer and never dereferenced, so it may lie past the tensor). On the project's VM the hardware
// prefetchers alone leave a read stream latency-bound: the fused clipping statistics read at ~0.7x the
// rate of max_abs without it and at ~1x with it (docs/performance.md).
constexpr std::size_t kPrefetch = 1024;  // elements ahead (4 KiB)
inline void prefetch_ahead(const float* g, std::size_t k) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(g) + 4 * (k + kPrefetch)), _MM_HINT_T0);
}

// Keep and sign bits of the `count` (<= 64) elements starting at `base` (a multiple of 4); bits of the
// lanes past count are 0. Lanes past count are never loaded: no read past the tensor.
inline void decide64(const float* g, std::size_t base, std::size_t count, const Philox16& philox, __m512 cap,
                     const Scale& scale, unsigned keep[4], unsigned neg[4]) {
  __m512i u[4];
  for (std::size_t l = 0; l < 64; l += 16) prefetch_ahead(g, base + l);
  philox.elements(static_cast<std::uint32_t>(base / 4), u);
  for (int v = 0; v < 4; ++v) {
    std::size_t first = 16 * static_cast<std::size_t>(v);
    if (count >= first + 16) {
      decide16(_mm512_loadu_ps(g + base + first), u[v], cap, scale, &keep[v], &neg[v]);
    } else if (count > first) {
      __mmask16 m = first_lanes(count - first);
      decide16(_mm512_maskz_loadu_ps(m, g + base + first), u[v], cap, scale, &keep[v], &neg[v]);
      keep[v] &= m;  // a zero never keeps; masked for clarity
      neg[v] &= m;
    } else {
      keep[v] = neg[v] = 0;
    }
  }
}

// Decides the elements of [begin, end) 64 at a time, the last group partly, and hands each group's
// keep and sign bits to emit(first element, element count, keep[4], neg[4]).
template <typename Emit>
void for_each_64(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                 const StreamKey& key, Emit emit) {
  const __m512 cap = _mm512_set1_ps(rule.cap);
  const Scale scale(rule.scale);
  const Philox16 philox(key);
  for (std::size_t k = begin; k < end; k += 64) {
    std::size_t count = std::min<std::size_t>(64, end - k);
    unsigned keep[4], neg[4];
    decide64(g, k, count, philox, cap, scale, keep, neg);
    emit(k, count, keep, neg);
  }
}

// max |g| as integer compares (|g| as integers orders like the floats; non-finite values are above
// the largest finite one), 32 elements per iteration, the tail with masked loads. kPrefetch: with the
// software prefetch. This pass does nothing but read, and whether the prefetch helps it depends on the CPU:
// at 2^24 and 1 thread it made the pass faster on the Xeon VM (9.5-10.1 against 11.3-12.4 ms) and slower on
// the AMD EPYC VM (median 3.91 against 2.90 ms in an interleaved A/B). avx512_kernels() picks by vendor
// (docs/performance.md, "Tenth round"). The other kernels keep their prefetch: on the AMD VM it changed
// neither the fused statistics nor the encode pass beyond their spread.
template <bool kPrefetch>
float max_abs_read(const float* g, std::size_t begin, std::size_t end, std::size_t* first_bad) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i max_finite = _mm512_set1_epi32(0x7f7fffff);
  __m512i m0 = _mm512_setzero_si512(), m1 = _mm512_setzero_si512();
  __mmask16 bad = 0;
  std::size_t k = begin;
  for (; k + 32 <= end; k += 32) {
    if constexpr (kPrefetch) {
      prefetch_ahead(g, k);
      prefetch_ahead(g, k + 16);
    }
    __m512i a0 = _mm512_and_epi32(_mm512_loadu_si512(g + k), abs_mask);
    __m512i a1 = _mm512_and_epi32(_mm512_loadu_si512(g + k + 16), abs_mask);
    bad |= _mm512_cmpgt_epi32_mask(a0, max_finite) | _mm512_cmpgt_epi32_mask(a1, max_finite);
    m0 = _mm512_max_epi32(m0, a0);
    m1 = _mm512_max_epi32(m1, a1);
  }
  for (; k < end; k += 16) {  // masked-off lanes load as 0
    __m512i a = _mm512_and_epi32(_mm512_maskz_loadu_epi32(first_lanes(end - k), g + k), abs_mask);
    bad |= _mm512_cmpgt_epi32_mask(a, max_finite);
    m0 = _mm512_max_epi32(m0, a);
  }
  *first_bad = kNoBadIndex;
  if (bad) {
    // Rare (the encode fails): find the first non-finite value 16 lanes at a time.
    for (std::size_t q = begin; q < end; q += 16) {
      __m512i a = _mm512_and_epi32(_mm512_maskz_loadu_epi32(first_lanes(end - q), g + q), abs_mask);
      unsigned lanes = _mm512_cmpgt_epi32_mask(a, max_finite);
      if (lanes) {
        *first_bad = q + static_cast<std::size_t>(__builtin_ctz(lanes));
        break;
      }
    }
    return 0.0f;
  }
  std::uint32_t bits = static_cast<std::uint32_t>(_mm512_reduce_max_epi32(_mm512_max_epi32(m0, m1)));
  float m;
  std::memcpy(&m, &bits, 4);
  return m;
}

// Canonical chunk totals (tg/reduce.hpp): the 8 lanes of the order are the 8 doubles of one vector;
// the chunk's last partial vector adds only its valid lanes (a masked add leaves the others as they are).
void avx512_chunk_totals(const float* g, std::size_t n, std::size_t c0, std::size_t c1, bool square,
                         double mean, double* totals) {
  const __m512d vmean = _mm512_set1_pd(mean);
  for (std::size_t c = c0; c < c1; ++c) {
    std::size_t start = c * kReduceChunk, end = std::min<std::size_t>(n, start + kReduceChunk);
    __m512d acc = _mm512_setzero_pd();
    for (std::size_t k = start; k < end; k += 8) {
      std::size_t lanes = std::min<std::size_t>(8, end - k);
      __mmask8 m = static_cast<__mmask8>(first_lanes(lanes));
      __m512d x = _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_maskz_loadu_ps(m, g + k)));
      if (square) {
        x = _mm512_sub_pd(x, vmean);
        x = _mm512_mul_pd(x, x);
      }
      acc = _mm512_mask_add_pd(acc, m, acc, x);
    }
    double lane[kReduceLanes];
    _mm512_storeu_pd(lane, acc);
    totals[c - c0] = combine_lanes(lane);
  }
}

// Trits of elements [begin, end) (begin a multiple of 4) to out[k - begin].
void ternarize_to(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                  const StreamKey& key, std::int8_t* out) {
  for_each_64(g, begin, end, rule, key,
              [&](std::size_t first, std::size_t count, const unsigned* keep, const unsigned* neg) {
                for (int v = 0; v < 4; ++v) {
                  std::size_t lane0 = 16 * static_cast<std::size_t>(v);
                  if (count <= lane0) break;
                  // +1 where kept and positive, -1 where kept and negative, else 0
                  __m512i plus = _mm512_maskz_mov_epi32(static_cast<__mmask16>(keep[v] & ~neg[v]), _mm512_set1_epi32(1));
                  __m512i both = _mm512_mask_mov_epi32(plus, static_cast<__mmask16>(keep[v] & neg[v]), _mm512_set1_epi32(-1));
                  std::int8_t* dst = out + (first - begin) + lane0;
                  if (count >= lane0 + 16)
                    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(both));
                  else  // the last partial vector: a masked narrowing store writes only its lanes
                    _mm512_mask_cvtepi32_storeu_epi8(dst, first_lanes(count - lane0), both);
                }
              });
}

void avx512_ternarize(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                      const StreamKey& key, std::int8_t* trits) {
  ternarize_to(g, begin, end, rule, key, trits + begin);
}

// 2bit encode; kStream: whole 64-byte lines of the body as non-temporal stores (Kernels::encode_2bit_stream).
template <bool kStream>
void encode_2bit_lines(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                       const StreamKey& key, std::uint8_t* body) {
  auto emit = [&](std::size_t first, std::size_t count, const unsigned* keep, const unsigned* neg) {
    for (int v = 0; v < 4; ++v) {
      std::size_t lane0 = 16 * static_cast<std::size_t>(v);
      if (count <= lane0) break;
      // lanes past the end have no bits, so the last byte's padding is 0
      std::uint32_t codes = codes16(keep[v], neg[v]);
      std::size_t elements = std::min<std::size_t>(16, count - lane0);
      std::memcpy(body + first / 4 + 4 * v, &codes, (elements + 3) / 4);
    }
  };
  // Whole 64-byte lines of the body (256 elements, four groups) go out as one 64-byte store each
  // (non-temporal with kStream); the part before the first whole line and after the last one as above.
  // The arithmetic is unchanged, so are the bytes (docs/performance.md, "Third round", for the figures).
  const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(body + begin / 4);
  const std::size_t head = std::min<std::size_t>(end - begin, 4 * ((64 - at % 64) % 64));
  const std::size_t mid = begin + head, stop = mid + 256 * ((end - mid) / 256);
  for_each_64(g, begin, mid, rule, key, emit);
  const __m512 cap = _mm512_set1_ps(rule.cap);
  const Scale scale(rule.scale);
  const Philox16 philox(key);
  for (std::size_t k = mid; k < stop; k += 256) {
    // the line's eight 64-bit words are put together in registers: built in memory 4 bytes at a time and
    // read back as one vector, they would stall the load (a store cannot forward to a wider load)
    std::uint64_t word[8];
    for (int q = 0; q < 4; ++q) {
      unsigned keep[4], neg[4];
      decide64(g, k + 64 * static_cast<std::size_t>(q), 64, philox, cap, scale, keep, neg);
      for (int w = 0; w < 2; ++w)
        word[2 * q + w] = codes16(keep[2 * w], neg[2 * w]) | std::uint64_t{codes16(keep[2 * w + 1], neg[2 * w + 1])} << 32;
    }
    const __m512i line = _mm512_set_epi64(static_cast<long long>(word[7]), static_cast<long long>(word[6]),
                                          static_cast<long long>(word[5]), static_cast<long long>(word[4]),
                                          static_cast<long long>(word[3]), static_cast<long long>(word[2]),
                                          static_cast<long long>(word[1]), static_cast<long long>(word[0]));
    if constexpr (kStream)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(body + k / 4), line);
    else
      _mm512_store_si512(body + k / 4, line);
  }
  if constexpr (kStream) _mm_sfence();
  for_each_64(g, stop, end, rule, key, emit);
}

void avx512_encode_2bit(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                        const StreamKey& key, std::uint8_t* body) {
  encode_2bit_lines<false>(g, begin, end, rule, key, body);
}

void avx512_encode_2bit_stream(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                               const StreamKey& key, std::uint8_t* body) {
  encode_2bit_lines<true>(g, begin, end, rule, key, body);
}

void avx512_encode_base3(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                         const StreamKey& key, std::uint8_t* body) {
  constexpr std::size_t kStep = 320;  // multiple of 64 (SIMD step) and 5 (trits per byte)
  alignas(64) std::int8_t local[kStep];
  for (std::size_t b = begin; b < end; b += kStep) {
    std::size_t stop = std::min<std::size_t>(end, b + kStep);
    ternarize_to(g, b, stop, rule, key, local);
    pack_base3_range(local, 0, stop - b, body + b / 5);
  }
}

// 2bit bytes to floats, 4 bytes (16 elements) per iteration: lane e takes bits 2e of the 32-bit word.
std::size_t avx512_decode_2bit(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                               float scalar, float* out) {
  const __m512 s = _mm512_set1_ps(scalar);
  const __m512i shifts = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i three = _mm512_set1_epi32(3);
  std::size_t full = std::min(b1, n / 4);  // bytes with 4 elements and no padding
  std::size_t j = b0;
  for (; j + 4 <= full; j += 4) {
    std::uint32_t word;
    std::memcpy(&word, body + j, 4);
    if ((word & (word >> 1)) & 0x55555555u) break;  // some code is 11: the scalar loop names the byte
    __m512i codes = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(static_cast<int>(word)), shifts), three);
    __m512 trit = _mm512_mask_mov_ps(_mm512_setzero_ps(), _mm512_cmpeq_epi32_mask(codes, _mm512_set1_epi32(1)),
                                     _mm512_set1_ps(1.0f));
    trit = _mm512_mask_mov_ps(trit, _mm512_cmpeq_epi32_mask(codes, _mm512_set1_epi32(2)), _mm512_set1_ps(-1.0f));
    _mm512_storeu_ps(out + 4 * j, _mm512_mul_ps(s, trit));  // scalar * trit, as every decoder computes it
  }
  return decode_2bit_scalar(body, n, j, b1, scalar, out);
}

// Single-pass 2bit encode (Kernels::encode_2bit_running), 64 elements per group: the group's max
// |g| joins the running maximum m before the group is decided with make_rule(m, m); the offsets,
// uniforms and magnitudes of the candidates that fail the guard are compressed into the candidate arrays.
void avx512_encode_2bit_running(const float* g, std::size_t begin, std::size_t end, float guard, const StreamKey& key,
                                std::uint8_t* body, std::uint32_t* cand_pos, std::uint32_t* cand_u, float* cand_a,
                                RunningPass* st) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i lane_ids = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 guard_lo = Scale(make_rule(guard, guard).scale).lo;  // only the proving bound is needed
  const __m512i max_finite = _mm512_set1_epi32(0x7f7fffff);
  const Philox16 philox(key);
  float m = st->m;
  std::uint32_t mbits;
  std::memcpy(&mbits, &m, 4);
  ScalarRule rule = make_rule(m, m);
  Scale scale(rule.scale);
  std::size_t count = st->count;
  for (std::size_t k = begin; k < end; k += 64) {
    std::size_t n = std::min<std::size_t>(64, end - k);
    for (std::size_t l = 0; l < 64; l += 16) prefetch_ahead(g, k + l);
    __m512i raw[4], a[4];
    for (int v = 0; v < 4; ++v) {
      std::size_t first = 16 * static_cast<std::size_t>(v);
      __mmask16 lanes = n > first ? first_lanes(n - first) : static_cast<__mmask16>(0);
      raw[v] = _mm512_maskz_loadu_epi32(lanes, g + k + first);  // lanes past the end load 0
      a[v] = _mm512_and_epi32(raw[v], abs_mask);
    }
    // |g| as integers orders like the floats and non-finite values lie above the largest finite one, so
    // the group holds one exactly when its maximum does (one compare per group instead of one per vector)
    const __m512i mx = _mm512_max_epi32(_mm512_max_epi32(a[0], a[1]), _mm512_max_epi32(a[2], a[3]));
    if (_mm512_cmpgt_epi32_mask(mx, max_finite)) {  // rare (the encode fails): name the first non-finite element
      for (std::size_t q = k; q < k + n; ++q) {
        std::uint32_t bits;
        std::memcpy(&bits, g + q, 4);
        if ((bits & 0x7fffffffu) > 0x7f7fffffu) {
          st->first_bad = q;
          break;
        }
      }
      break;
    }
    if (_mm512_cmpgt_epi32_mask(mx, _mm512_set1_epi32(static_cast<int>(mbits)))) {  // the maximum rises
      mbits = static_cast<std::uint32_t>(_mm512_reduce_max_epi32(mx));
      std::memcpy(&m, &mbits, 4);
      rule = make_rule(m, m);
      scale = Scale(rule.scale);
      st->settled = count;
    }
    __m512i u[4];
    philox.elements(static_cast<std::uint32_t>(k / 4), u);
    std::uint32_t line[4] = {0, 0, 0, 0};  // the group's 16 body bytes
    for (int v = 0; v < 4; ++v) {
      std::size_t lane0 = 16 * static_cast<std::size_t>(v);
      if (n <= lane0) break;
      // |g| <= m, so min(|g|, cap = m) = |g|: keep <=> (double)u < (double)|g| * 2^32/m
      const __m512 af = _mm512_castsi512_ps(a[v]);
      const unsigned keep = keep16(af, u[v], scale);
      // proved kept under every final scalar <= guard: no re-check (a lane the float test leaves open is
      // stored and re-decided exactly, like any other candidate)
      const unsigned sure = proved_keep16(af, u[v], guard_lo);
      unsigned neg = _mm512_cmplt_epi32_mask(raw[v], _mm512_setzero_si512());
      line[v] = codes16(keep, neg);
      // candidates: the stored lanes' indexes compressed once, the three arrays gathered with them and
      // stored as full vectors (the slack holds what lies past count)
      const unsigned store = keep & ~sure;
      const __m512i idx = _mm512_maskz_compress_epi32(static_cast<__mmask16>(store), lane_ids);
      _mm512_storeu_si512(cand_pos + count,
                          _mm512_add_epi32(idx, _mm512_set1_epi32(static_cast<int>(k - begin + lane0))));
      _mm512_storeu_si512(cand_u + count, _mm512_permutexvar_epi32(idx, u[v]));
      _mm512_storeu_si512(cand_a + count, _mm512_permutexvar_epi32(idx, a[v]));
      count += static_cast<std::size_t>(__builtin_popcount(store));
    }
    if (n == 64)
      std::memcpy(body + k / 4, line, 16);  // one store (a variable length would copy byte by byte)
    else
      std::memcpy(body + k / 4, line, (n + 3) / 4);
  }
  st->m = m;
  st->count = count;
}

// Kernels::recheck_2bit: the decisions 16 candidates at a time, then the dropped ones' codes cleared
// one at a time.
void avx512_recheck_2bit(std::uint8_t* body, std::size_t base, const std::uint32_t* cand_pos,
                         const std::uint32_t* cand_u, const float* cand_a, std::size_t count, const ScalarRule& rule) {
  const Scale scale(rule.scale);
  const __m512 cap = _mm512_set1_ps(rule.cap);
  for (std::size_t c = 0; c < count; c += 16) {
    __mmask16 m = first_lanes(count - c);
    __m512i u = _mm512_maskz_loadu_epi32(m, cand_u + c);
    __m512 a = _mm512_min_ps(_mm512_maskz_loadu_ps(m, cand_a + c), cap);
    unsigned keep = keep16(a, u, scale);
    for (unsigned drop = m & ~keep; drop; drop &= drop - 1)
      clear_code_2bit(body, base + cand_pos[c + static_cast<std::size_t>(__builtin_ctz(drop))]);
  }
}

// Clipping statistics (Kernels::chunk_stats): per chunk, the canonical total (8 lanes = the 8 doubles
// of one vector, as avx512_chunk_totals), the shifted sums q1, q2 (16 lanes, 128 terms deep) and the
// running max |g| with the finiteness check, in one read of the chunk.
float avx512_chunk_stats(const float* g, std::size_t n, std::size_t c0, std::size_t c1, float shift,
                         double* t1, double* q1, double* q2, std::size_t* first_bad) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i max_finite = _mm512_set1_epi32(0x7f7fffff);
  const __m512d k = _mm512_set1_pd(static_cast<double>(shift));
  __m512i mx = _mm512_setzero_si512();
  __mmask16 bad = 0;
  for (std::size_t c = c0; c < c1; ++c) {
    std::size_t start = c * kReduceChunk, end = std::min<std::size_t>(n, start + kReduceChunk);
    __m512d acc = _mm512_setzero_pd();
    __m512d s1a = _mm512_setzero_pd(), s1b = _mm512_setzero_pd(), s2a = _mm512_setzero_pd(), s2b = _mm512_setzero_pd();
    // 16 elements; lanes outside m (the chunk's last partial vector) load as 0 and add nothing
    auto step = [&](__m512 v, __mmask16 m) {
      __m512i a = _mm512_and_epi32(_mm512_castps_si512(v), abs_mask);
      bad |= _mm512_cmpgt_epi32_mask(a, max_finite);
      mx = _mm512_max_epi32(mx, a);
      __mmask8 mlo = static_cast<__mmask8>(m & 0xff), mhi = static_cast<__mmask8>(m >> 8);
      __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
      __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
      // canonical lanes: element offset l mod 8 -> double lane l, in index order (lo before hi)
      acc = _mm512_mask_add_pd(acc, mlo, acc, lo);
      acc = _mm512_mask_add_pd(acc, mhi, acc, hi);
      __m512d dlo = _mm512_sub_pd(lo, k), dhi = _mm512_sub_pd(hi, k);
      s1a = _mm512_mask_add_pd(s1a, mlo, s1a, dlo);
      s1b = _mm512_mask_add_pd(s1b, mhi, s1b, dhi);
      s2a = _mm512_mask_add_pd(s2a, mlo, s2a, _mm512_mul_pd(dlo, dlo));
      s2b = _mm512_mask_add_pd(s2b, mhi, s2b, _mm512_mul_pd(dhi, dhi));
    };
    std::size_t i = start;
    for (; i + 16 <= end; i += 16) {
      prefetch_ahead(g, i);
      step(_mm512_loadu_ps(g + i), static_cast<__mmask16>(0xffff));
    }
    if (i < end) {
      __mmask16 m = first_lanes(end - i);
      step(_mm512_maskz_loadu_ps(m, g + i), m);
    }
    double lane[kReduceLanes];
    _mm512_storeu_pd(lane, acc);
    t1[c - c0] = combine_lanes(lane);
    q1[c - c0] = _mm512_reduce_add_pd(_mm512_add_pd(s1a, s1b));
    q2[c - c0] = _mm512_reduce_add_pd(_mm512_add_pd(s2a, s2b));
  }
  *first_bad = kNoBadIndex;
  if (bad) {
    std::size_t begin = c0 * kReduceChunk, end = std::min<std::size_t>(n, c1 * kReduceChunk);
    return max_abs_scalar(g, begin, end, first_bad);
  }
  std::uint32_t bits = static_cast<std::uint32_t>(_mm512_reduce_max_epi32(mx));
  float m;
  std::memcpy(&m, &bits, 4);
  return m;
}

std::uint32_t avx512_philox_fold(const StreamKey& key, std::uint32_t first, std::size_t count) {
  const Philox16 philox(key);
  __m512i acc = _mm512_setzero_si512();
  for (std::size_t i = 0; i < count; i += 16) {
    __m512i x[8];
    philox.blocks(static_cast<std::uint32_t>(first + i), x);
    for (int j = 0; j < 8; j += 2) acc = _mm512_ternarylogic_epi32(acc, x[j], x[j + 1], 0x96);
  }
  // the low halves of the 64-bit lanes hold the words (the high halves are not Philox output)
  return static_cast<std::uint32_t>(_mm512_reduce_or_epi32(_mm512_and_epi32(acc, _mm512_set1_epi64(0xFFFFFFFFu))));
}

void avx512_philox_blocks(const StreamKey& key, std::uint32_t first, std::size_t count, PhiloxBlock* out) {
  const Philox16 philox(key);
  for (std::size_t i = 0; i < count; i += 16) {
    __m512i u[4];
    philox.elements(static_cast<std::uint32_t>(first + i), u);
    alignas(64) std::uint32_t words[64];  // element order: block l's words at 4 l .. 4 l + 3
    for (int v = 0; v < 4; ++v) _mm512_store_si512(words + 16 * v, u[v]);
    for (std::size_t l = 0; l < 16 && i + l < count; ++l)
      for (int j = 0; j < 4; ++j) out[i + l].v[j] = words[4 * l + static_cast<std::size_t>(j)];
  }
}

}  // namespace

const Kernels* avx512_kernels() {
  // the read pass with the software prefetch except on AMD CPUs, where it measured slower (max_abs_read)
  static const auto max_abs = [] {
    __builtin_cpu_init();  // this may run before the CPU model's own initializer
    return __builtin_cpu_is("amd") ? max_abs_read<false> : max_abs_read<true>;
  }();
  static const Kernels k = {"avx512",
                            max_abs,
                            avx512_chunk_totals,
                            avx512_ternarize,
                            avx512_encode_2bit,
                            avx512_encode_base3,
                            avx512_decode_2bit,
                            decode_base3_range,  // byte-at-a-time tables: no vector version
                            unpack_2bit_range,
                            unpack_base3_range,
                            avx512_encode_2bit_running,
                            avx512_recheck_2bit,
                            avx512_chunk_stats,
                            avx512_philox_fold,
                            avx512_philox_blocks,
                            avx512_encode_2bit_stream};
  return &k;
}

}  // namespace tg::cpu
