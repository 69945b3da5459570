// terngrad-bench: AVX-512 kernels of the optimized CPU codec (AVX512F + BMI2; chosen at run time,
// the AVX2 or portable kernels otherwise). Sixteen Philox4x32-10 blocks run side by side, 64 elements
// per iteration. Compiled with -mavx512f -mbmi2 and -ffp-contract=off: bits match the reference.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels.hpp"

namespace tg::cpu {
namespace {

// (hi, lo) of the 32x32 -> 64-bit products of each lane of a with the constant m. The even
// lanes' products land in 64-bit slots; the odd lanes' after moving them down. Two masked shuffles
// interleave the halves (one uop each, instead of a shift and a blend).
inline void mulhilo16(__m512i a, __m512i m, __m512i* hi, __m512i* lo) {
  __m512i even = _mm512_mul_epu32(a, m);
  __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  *hi = _mm512_mask_shuffle_epi32(odd, 0x5555, even, _MM_PERM_DDBB);  // even slots <- high halves
  *lo = _mm512_mask_shuffle_epi32(even, 0xAAAA, odd, _MM_PERM_CCAA);  // odd slots <- low halves
}

// Philox4x32-10 for one stream key, 16 blocks at a time; the round keys are broadcast once.
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

  // x[j] = word j of blocks block .. block + 15
  void blocks(std::uint32_t block, __m512i x[4]) const {
    const __m512i m0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
    const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
    __m512i x0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(block)),
                                  _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    __m512i x1 = c1, x2 = c2, x3 = c3;
#pragma GCC unroll 10
    for (int r = 0; r < 10; ++r) {
      __m512i hi0, lo0, hi1, lo1;
      mulhilo16(x0, m0, &hi0, &lo0);
      mulhilo16(x2, m1, &hi1, &lo1);
      x0 = _mm512_ternarylogic_epi32(hi1, x1, k0[r], 0x96);  // three-way xor
      x1 = lo1;
      x2 = _mm512_ternarylogic_epi32(hi0, x3, k1[r], 0x96);
      x3 = lo0;
    }
    x[0] = x0;
    x[1] = x1;
    x[2] = x2;
    x[3] = x3;
  }
};

// 16 blocks' words (x[j] = word j of block lane) -> uniforms of 64 consecutive elements, 16 per vector.
inline void to_element_order(const __m512i x[4], __m512i u[4]) {
  __m512i t0 = _mm512_unpacklo_epi32(x[0], x[1]);
  __m512i t1 = _mm512_unpackhi_epi32(x[0], x[1]);
  __m512i t2 = _mm512_unpacklo_epi32(x[2], x[3]);
  __m512i t3 = _mm512_unpackhi_epi32(x[2], x[3]);
  __m512i b0 = _mm512_unpacklo_epi64(t0, t2);  // blocks 0, 4, 8, 12 (one per 128-bit lane)
  __m512i b1 = _mm512_unpackhi_epi64(t0, t2);  // blocks 1, 5, 9, 13
  __m512i b2 = _mm512_unpacklo_epi64(t1, t3);  // blocks 2, 6, 10, 14
  __m512i b3 = _mm512_unpackhi_epi64(t1, t3);  // blocks 3, 7, 11, 15
  __m512i a = _mm512_shuffle_i32x4(b0, b1, 0x44);
  __m512i b = _mm512_shuffle_i32x4(b2, b3, 0x44);
  __m512i c = _mm512_shuffle_i32x4(b0, b1, 0xEE);
  __m512i d = _mm512_shuffle_i32x4(b2, b3, 0xEE);
  u[0] = _mm512_shuffle_i32x4(a, b, 0x88);
  u[1] = _mm512_shuffle_i32x4(a, b, 0xDD);
  u[2] = _mm512_shuffle_i32x4(c, d, 0x88);
  u[3] = _mm512_shuffle_i32x4(c, d, 0xDD);
}

// keep bits of 16 elements: (double)u < min(|g|, cap) * 2^32/s; neg bits: sign of g.
inline void decide16(__m512 g, __m512i u, __m512 cap, __m512d scale, unsigned* keep, unsigned* neg) {
  __m512i gi = _mm512_castps_si512(g);
  __m512 a = _mm512_min_ps(_mm512_castsi512_ps(_mm512_and_epi32(gi, _mm512_set1_epi32(0x7fffffff))), cap);
  __m512d plo = _mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(a)), scale);
  __m512d phi = _mm512_mul_pd(
      _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))), scale);
  __m512d ulo = _mm512_cvtepu32_pd(_mm512_castsi512_si256(u));
  __m512d uhi = _mm512_cvtepu32_pd(_mm512_extracti64x4_epi64(u, 1));
  unsigned klo = _mm512_cmp_pd_mask(ulo, plo, _CMP_LT_OQ);
  unsigned khi = _mm512_cmp_pd_mask(uhi, phi, _CMP_LT_OQ);
  *keep = klo | (khi << 8);
  *neg = _mm512_cmplt_epi32_mask(gi, _mm512_setzero_si512());
}

inline void decide64(const float* g, std::size_t base, const Philox16& philox, __m512 cap, __m512d scale,
                     unsigned keep[4], unsigned neg[4]) {
  __m512i x[4], u[4];
  philox.blocks(static_cast<std::uint32_t>(base / 4), x);
  to_element_order(x, u);
  for (int v = 0; v < 4; ++v) decide16(_mm512_loadu_ps(g + base + 16 * v), u[v], cap, scale, &keep[v], &neg[v]);
}

float avx512_max_abs(const float* g, std::size_t begin, std::size_t end, std::size_t* first_bad) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i max_finite = _mm512_set1_epi32(0x7f7fffff);
  __m512i m0 = _mm512_setzero_si512(), m1 = _mm512_setzero_si512();
  __mmask16 bad = 0;
  std::size_t k = begin;
  for (; k + 32 <= end; k += 32) {
    // |g| as integers orders like the floats; non-finite values are above max_finite
    __m512i a0 = _mm512_and_epi32(_mm512_loadu_si512(g + k), abs_mask);
    __m512i a1 = _mm512_and_epi32(_mm512_loadu_si512(g + k + 16), abs_mask);
    bad |= _mm512_cmpgt_epi32_mask(a0, max_finite) | _mm512_cmpgt_epi32_mask(a1, max_finite);
    m0 = _mm512_max_epi32(m0, a0);
    m1 = _mm512_max_epi32(m1, a1);
  }
  if (bad) return portable_kernels().max_abs(g, begin, end, first_bad);
  std::uint32_t bits = static_cast<std::uint32_t>(_mm512_reduce_max_epi32(_mm512_max_epi32(m0, m1)));
  float m;
  std::memcpy(&m, &bits, 4);
  float tail = portable_kernels().max_abs(g, k, end, first_bad);
  return std::max(m, tail);
}

// Decides the elements of [begin, end) 64 at a time and hands each group's keep and sign bits to
// emit(first element, keep[4], neg[4]); returns where the SIMD part stopped (the tail is the caller's).
template <typename Emit>
std::size_t for_each_64(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                        const StreamKey& key, Emit emit) {
  const __m512 cap = _mm512_set1_ps(rule.cap);
  const __m512d scale = _mm512_set1_pd(rule.scale);
  const Philox16 philox(key);
  std::size_t k = begin;
  for (; k + 64 <= end; k += 64) {
    unsigned keep[4], neg[4];
    decide64(g, k, philox, cap, scale, keep, neg);
    emit(k, keep, neg);
  }
  return k;
}

void avx512_ternarize(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                      const StreamKey& key, std::int8_t* trits) {
  std::size_t k = for_each_64(g, begin, end, rule, key, [&](std::size_t first, const unsigned* keep, const unsigned* neg) {
    for (int v = 0; v < 4; ++v) {
      // +1 where kept and positive, -1 where kept and negative, else 0
      __m512i plus = _mm512_maskz_mov_epi32(static_cast<__mmask16>(keep[v] & ~neg[v]), _mm512_set1_epi32(1));
      __m512i both = _mm512_mask_mov_epi32(plus, static_cast<__mmask16>(keep[v] & neg[v]), _mm512_set1_epi32(-1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(trits + first + 16 * v), _mm512_cvtepi32_epi8(both));
    }
  });
  if (k < end) avx2_kernels()->ternarize(g, k, end, rule, key, trits);
}

void avx512_encode_2bit(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                        const StreamKey& key, std::uint8_t* body) {
  std::size_t k = for_each_64(g, begin, end, rule, key, [&](std::size_t first, const unsigned* keep, const unsigned* neg) {
    for (int v = 0; v < 4; ++v) {
      // element e -> bits 2e (plus) and 2e+1 (minus): codes 01 = +1, 10 = -1
      std::uint32_t codes = _pdep_u32(keep[v] & ~neg[v], 0x55555555u) | _pdep_u32(keep[v] & neg[v], 0xAAAAAAAAu);
      std::memcpy(body + first / 4 + 4 * v, &codes, 4);
    }
  });
  if (k < end) avx2_kernels()->encode_2bit(g, k, end, rule, key, body);
}

}  // namespace

const Kernels* avx512_kernels() {
  static const Kernels k = {"avx512",
                            avx512_max_abs,
                            avx2_kernels()->chunk_totals,
                            avx512_ternarize,
                            avx512_encode_2bit,
                            avx2_kernels()->encode_base3,
                            avx2_kernels()->decode_2bit};
  return &k;
}

}  // namespace tg::cpu
