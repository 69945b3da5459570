// terngrad-bench: AVX2 kernels of the optimized CPU codec. Compiled with -mavx2 only (no FMA:
// the bits are compared with the reference), and called only after a runtime CPU check.
// Eight Philox4x32-10 blocks run side by side (one per 32-bit lane), 32 elements per iteration.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels.hpp"

namespace tg::cpu {
namespace {

// Philox4x32-10 of 8 consecutive blocks starting at `block`, each word in the low half of a 64-bit lane
// (4 blocks per vector): word j of block block + 4 h + l in lane l of x[4 h + j]. _mm256_mul_epu32 gives a
// word's full product in place: lo is the lane itself (its high half is never read), hi one shift away.
// (With 32-bit lanes the odd lanes' products need a shift in and the halves two shifts and two blends out.)
inline void philox8(const StreamKey& key, std::uint32_t block, __m256i x[8]) {
  const __m256i m0 = _mm256_set1_epi64x(0xD2511F53u);
  const __m256i m1 = _mm256_set1_epi64x(0xCD9E8D57u);
  // the counter's low word wraps mod 2^32 as the spec's: a carry into the high half is never read
  __m256i a0 = _mm256_add_epi64(_mm256_set1_epi64x(block), _mm256_setr_epi64x(0, 1, 2, 3));
  __m256i b0 = _mm256_add_epi64(_mm256_set1_epi64x(block), _mm256_setr_epi64x(4, 5, 6, 7));
  __m256i a1 = _mm256_set1_epi32(static_cast<int>(key.step)), a2 = _mm256_set1_epi32(static_cast<int>(key.tensor));
  __m256i a3 = _mm256_set1_epi32(static_cast<int>(key.worker)), b1 = a1, b2 = a2, b3 = a3;
  std::uint32_t k0 = static_cast<std::uint32_t>(key.seed), k1 = static_cast<std::uint32_t>(key.seed >> 32);
  for (int r = 0; r < 10; ++r) {
    const __m256i vk0 = _mm256_set1_epi32(static_cast<int>(k0)), vk1 = _mm256_set1_epi32(static_cast<int>(k1));
    const __m256i pa0 = _mm256_mul_epu32(a0, m0), pa2 = _mm256_mul_epu32(a2, m1);
    const __m256i pb0 = _mm256_mul_epu32(b0, m0), pb2 = _mm256_mul_epu32(b2, m1);
    a0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pa2, 32), a1), vk0);  // hi1 ^ x1 ^ k0
    a1 = pa2;                                                                       // lo1
    a2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pa0, 32), a3), vk1);  // hi0 ^ x3 ^ k1
    a3 = pa0;                                                                       // lo0
    b0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pb2, 32), b1), vk0);
    b1 = pb2;
    b2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pb0, 32), b3), vk1);
    b3 = pb0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  x[0] = a0, x[1] = a1, x[2] = a2, x[3] = a3;
  x[4] = b0, x[5] = b1, x[6] = b2, x[7] = b3;
}

// The uniforms of the 32 elements 4 block .. 4 block + 31, 8 per vector in element order (element 4 b + j
// is word j of block b).
inline void philox_elements(const StreamKey& key, std::uint32_t block, __m256i u[4]) {
  __m256i x[8];
  philox8(key, block, x);
  for (int h = 0; h < 2; ++h) {
    const __m256i* w = x + 4 * h;
    // 64-bit lane l: words 0 and 1 (2 and 3) of block l
    const __m256i w01 = _mm256_blend_epi32(w[0], _mm256_slli_epi64(w[1], 32), 0xAA);
    const __m256i w23 = _mm256_blend_epi32(w[2], _mm256_slli_epi64(w[3], 32), 0xAA);
    const __m256i even = _mm256_unpacklo_epi64(w01, w23);  // blocks 0 | 2
    const __m256i odd = _mm256_unpackhi_epi64(w01, w23);   // blocks 1 | 3
    u[2 * h] = _mm256_permute2x128_si256(even, odd, 0x20);
    u[2 * h + 1] = _mm256_permute2x128_si256(even, odd, 0x31);
  }
}

// The keep test (double)u < (double)a * scale (tg::keep) for 8 lanes, in double.
inline unsigned keep8_double(__m256 a, __m256i u, __m256d scale) {
  __m256d plo = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)), scale);
  __m256d phi = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)), scale);
  // exact unsigned -> double: flip the top bit, convert as signed, add 2^31 back
  __m256i us = _mm256_xor_si256(u, _mm256_set1_epi32(static_cast<int>(0x80000000u)));
  const __m256d two31 = _mm256_set1_pd(2147483648.0);
  __m256d ulo = _mm256_add_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(us)), two31);
  __m256d uhi = _mm256_add_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(us, 1)), two31);
  unsigned klo = static_cast<unsigned>(_mm256_movemask_pd(_mm256_cmp_pd(ulo, plo, _CMP_LT_OQ)));
  unsigned khi = static_cast<unsigned>(_mm256_movemask_pd(_mm256_cmp_pd(uhi, phi, _CMP_LT_OQ)));
  return klo | (khi << 4);
}

// A scale for the float prefilter of the keep test. AVX2 has no unsigned-to-float conversion, so u is
// bracketed by the exact floats L = float(u >> 8) and U = L + 1 (both at most 2^24): 256 L <= u < 256 U.
// lo8 = lo / 256 and hi8 = hi / 256 with lo = float(scale (1 - 2^-20)) and hi = float(scale (1 + 2^-20))
// (lo = 0 and hi = +inf when the latter is beyond the float range; the division by 256 is exact). With a
// * lo8 and a * hi8 rounded to float (relative error 2^-24, or an absolute 2^-150 below the normal range):
//  * U < a * lo8 proves the keep: for a normal product u < 256 U < a lo (1 + 2^-24) <= a scale (1 - 2^-20)
//    (1 + 2^-24)^2 < (double)a * scale; a product below the normal range is below U >= 1 and proves nothing;
//    an infinite one means a * scale > 2^32 > u;
//  * L > a * hi8 proves the drop: for a normal product u >= 256 L > a hi (1 - 2^-24) >= a scale (1 + 2^-20)
//    (1 - 2^-24)^2 > (double)a * scale; below the normal range a * scale < 2^-117 and L > 0 means u >= 256;
//    L = 0 proves nothing, as a * hi8 >= 0;
//  * NaN products (0 * inf) prove nothing.
// The lanes left (u within about 2^-20 of a * scale, or within 256 of it) go to keep8_double: about one
// vector in 2^16 on random data. So the bits are tg::keep's; the prefilter only saves the double work.
struct Scale8 {
  __m256d d;
  __m256 lo8, hi8;
  explicit Scale8(double scale) : d(_mm256_set1_pd(scale)) {
    const KeepBounds b = keep_bounds(scale);
    lo8 = _mm256_set1_ps(b.lo * 0x1p-8f);
    hi8 = _mm256_set1_ps(b.hi * 0x1p-8f);
  }
};

// The bracket of u above: L = float(u >> 8); U = L + 1 (exact).
inline __m256 bracket_low(__m256i u) { return _mm256_cvtepi32_ps(_mm256_srli_epi32(u, 8)); }
inline __m256 bracket_up(__m256 low) { return _mm256_add_ps(low, _mm256_set1_ps(1.0f)); }

// The lanes whose keep the float test above proves, given lo8 (a subset of tg::keep's keeps; the lanes it
// leaves open count as not proved, which is safe for the guard: an unproved candidate is stored and
// re-decided exactly).
inline unsigned proved_keep8(__m256 a, __m256i u, __m256 lo8) {
  const __m256 yes = _mm256_cmp_ps(bracket_up(bracket_low(u)), _mm256_mul_ps(a, lo8), _CMP_LT_OQ);
  return static_cast<unsigned>(_mm256_movemask_ps(yes));
}

// Keep bits (bit k: element k kept) of 8 elements with uniforms u: (double)u < min(|g|, cap) * 2^32/s,
// exactly tg::keep's.
inline unsigned keep8(__m256 g, __m256i u, __m256 cap, const Scale8& scale) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 a = _mm256_min_ps(_mm256_and_ps(g, abs_mask), cap);
  const __m256 low = bracket_low(u);
  const __m256 yes = _mm256_cmp_ps(bracket_up(low), _mm256_mul_ps(a, scale.lo8), _CMP_LT_OQ);
  const __m256 no = _mm256_cmp_ps(low, _mm256_mul_ps(a, scale.hi8), _CMP_GT_OQ);
  if (__builtin_expect(_mm256_movemask_ps(_mm256_or_ps(yes, no)) == 0xff, 1))
    return static_cast<unsigned>(_mm256_movemask_ps(yes));
  return keep8_double(a, u, scale.d);
}

struct Tables {
  std::array<std::uint64_t, 256> bytes{};   // bit k -> byte k = 0x01
  std::array<std::uint16_t, 256> spread{};  // bit k -> bit 2k
};
const Tables& tables() {
  static const Tables t = [] {
    Tables r;
    for (unsigned b = 0; b < 256; ++b)
      for (unsigned k = 0; k < 8; ++k)
        if (b & (1u << k)) {
          r.bytes[b] |= std::uint64_t{1} << (8 * k);
          r.spread[b] = static_cast<std::uint16_t>(r.spread[b] | (1u << (2 * k)));
        }
    return r;
  }();
  return t;
}

// Computes keep and sign bits of the 32 elements starting at `base` (a multiple of 4).
inline void decide32(const float* g, std::size_t base, const StreamKey& key, __m256 cap, const Scale8& scale,
                     unsigned keep[4], unsigned neg[4]) {
  __m256i u[4];
  philox_elements(key, static_cast<std::uint32_t>(base / 4), u);
  for (int v = 0; v < 4; ++v) {
    __m256 gv = _mm256_loadu_ps(g + base + 8 * v);
    keep[v] = keep8(gv, u[v], cap, scale);
    neg[v] = static_cast<unsigned>(_mm256_movemask_ps(gv));
  }
}

float avx2_max_abs(const float* g, std::size_t begin, std::size_t end, std::size_t* first_bad) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i max_finite = _mm256_set1_epi32(0x7f7fffff);
  __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
  __m256i bad = _mm256_setzero_si256();
  std::size_t k = begin;
  for (; k + 16 <= end; k += 16) {
    __m256 a0 = _mm256_and_ps(_mm256_loadu_ps(g + k), abs_mask);
    __m256 a1 = _mm256_and_ps(_mm256_loadu_ps(g + k + 8), abs_mask);
    bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(_mm256_castps_si256(a0), max_finite));
    bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(_mm256_castps_si256(a1), max_finite));
    m0 = _mm256_max_ps(m0, a0);
    m1 = _mm256_max_ps(m1, a1);
  }
  // A non-finite value somewhere: the scalar scan names the first one.
  if (!_mm256_testz_si256(bad, bad)) return max_abs_scalar(g, begin, end, first_bad);
  float lanes[8];
  _mm256_storeu_ps(lanes, _mm256_max_ps(m0, m1));
  float m = *std::max_element(lanes, lanes + 8);
  float tail = max_abs_scalar(g, k, end, first_bad);
  return std::max(m, tail);
}

void avx2_chunk_totals(const float* g, std::size_t n, std::size_t c0, std::size_t c1, bool square,
                       double mean, double* totals) {
  const __m256d vmean = _mm256_set1_pd(mean);
  for (std::size_t c = c0; c < c1; ++c) {
    std::size_t start = c * kReduceChunk, end = std::min<std::size_t>(n, start + kReduceChunk);
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();  // lanes 0-3, 4-7
    std::size_t k = start;
    for (; k + 8 <= end; k += 8) {
      __m256 v = _mm256_loadu_ps(g + k);
      __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
      __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
      if (square) {
        lo = _mm256_sub_pd(lo, vmean);
        hi = _mm256_sub_pd(hi, vmean);
        lo = _mm256_mul_pd(lo, lo);
        hi = _mm256_mul_pd(hi, hi);
      }
      acc0 = _mm256_add_pd(acc0, lo);
      acc1 = _mm256_add_pd(acc1, hi);
    }
    double lane[kReduceLanes];
    _mm256_storeu_pd(lane, acc0);
    _mm256_storeu_pd(lane + 4, acc1);
    add_to_lanes(g, start, k, end, square, mean, lane);
    totals[c - c0] = combine_lanes(lane);
  }
}

void avx2_ternarize(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                    const StreamKey& key, std::int8_t* trits) {
  const Tables& t = tables();
  const __m256 cap = _mm256_set1_ps(rule.cap);
  const Scale8 scale(rule.scale);
  std::size_t k = begin;
  for (; k + 32 <= end; k += 32) {
    unsigned keep[4], neg[4];
    decide32(g, k, key, cap, scale, keep, neg);
    for (int v = 0; v < 4; ++v) {
      std::uint64_t pos = t.bytes[keep[v] & ~neg[v] & 0xff], mns = t.bytes[keep[v] & neg[v]];
      std::uint64_t out = pos | (mns * 0xff);
      std::memcpy(trits + k + 8 * v, &out, 8);
    }
  }
  ternarize_scalar(g, k, end, rule, key, trits + k);
}

void avx2_encode_2bit(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                      const StreamKey& key, std::uint8_t* body) {
  const Tables& t = tables();
  const __m256 cap = _mm256_set1_ps(rule.cap);
  const Scale8 scale(rule.scale);
  std::size_t k = begin;
  for (; k + 32 <= end; k += 32) {
    unsigned keep[4], neg[4];
    decide32(g, k, key, cap, scale, keep, neg);
    std::uint64_t out = 0;
    for (int v = 0; v < 4; ++v) {
      std::uint64_t codes = t.spread[keep[v] & ~neg[v] & 0xff] |
                            (std::uint64_t{t.spread[keep[v] & neg[v]]} << 1);
      out |= codes << (16 * v);
    }
    std::memcpy(body + k / 4, &out, 8);
  }
  encode_2bit_scalar(g, k, end, rule, key, body);
}

void avx2_encode_base3(const float* g, std::size_t begin, std::size_t end, const ScalarRule& rule,
                       const StreamKey& key, std::uint8_t* body) {
  constexpr std::size_t kStep = 320;  // multiple of 32 (SIMD step) and 5 (trits per byte)
  alignas(32) std::int8_t local[kStep];
  for (std::size_t b = begin; b < end; b += kStep) {
    std::size_t stop = std::min<std::size_t>(end, b + kStep);
    // local[k - b] holds the trit of element k in [b, stop)
    std::size_t m = b;
    const Tables& t = tables();
    const __m256 cap = _mm256_set1_ps(rule.cap);
    const Scale8 scale(rule.scale);
    for (; m + 32 <= stop; m += 32) {
      unsigned keep[4], neg[4];
      decide32(g, m, key, cap, scale, keep, neg);
      for (int v = 0; v < 4; ++v) {
        std::uint64_t out = t.bytes[keep[v] & ~neg[v] & 0xff] | (t.bytes[keep[v] & neg[v]] * 0xff);
        std::memcpy(local + (m - b) + 8 * v, &out, 8);
      }
    }
    ternarize_scalar(g, m, stop, rule, key, local + (m - b));
    pack_base3_range(local, 0, stop - b, body + b / 5);
  }
}

std::size_t avx2_decode_2bit(const std::uint8_t* body, std::size_t n, std::size_t b0, std::size_t b1,
                             float scalar, float* out) {
  // trit values of the 4 codes of each byte, and whether a byte holds the invalid code 11
  static const auto lut = [] {
    std::array<std::array<float, 4>, 256> v{};
    for (unsigned b = 0; b < 256; ++b)
      for (unsigned m = 0; m < 4; ++m) {
        unsigned code = (b >> (2 * m)) & 3u;
        v[b][m] = code == 0 ? 0.0f : (code == 1 ? 1.0f : -1.0f);
      }
    return v;
  }();
  const __m256 s = _mm256_set1_ps(scalar);
  std::size_t full = std::min(b1, n / 4);  // bytes with 4 elements and no padding
  std::size_t j = b0;
  for (; j + 2 <= full; j += 2) {
    std::uint8_t x = body[j], y = body[j + 1];
    // a byte holds code 11 iff some pair of bits is 11: (b & (b >> 1)) & 0x55
    if (((x & (x >> 1)) | (y & (y >> 1))) & 0x55) break;
    __m256 v = _mm256_set_m128(_mm_loadu_ps(lut[y].data()), _mm_loadu_ps(lut[x].data()));
    _mm256_storeu_ps(out + 4 * j, _mm256_mul_ps(s, v));
  }
  // the partly used last byte, and the rest from the first invalid byte on (which it names)
  return decode_2bit_scalar(body, n, j, b1, scalar, out);
}

// Software prefetch of the line 1024 elements (4 KiB) past element k: a hint only, the address is an
// integer and never dereferenced (see avx512.cpp's prefetch_ahead).
inline void prefetch_ahead(const float* g, std::size_t k) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(g) + 4 * (k + 1024)), _MM_HINT_T0);
}

// Lane permutations that move the lanes of an 8-bit mask to the front, in order (AVX2 has no
// compress instruction): compress[mask] for _mm256_permutevar8x32_epi32.
const std::array<std::array<std::uint32_t, 8>, 256>& compress_table() {
  static const auto t = [] {
    std::array<std::array<std::uint32_t, 8>, 256> r{};
    for (unsigned mask = 0; mask < 256; ++mask) {
      unsigned j = 0;
      for (unsigned lane = 0; lane < 8; ++lane)
        if (mask & (1u << lane)) r[mask][j++] = lane;
    }
    return r;
  }();
  return t;
}

// Single-pass 2bit encode (Kernels::encode_2bit_running), 32 elements per group: the group's max |g|
// joins the running maximum m before the group is decided with make_rule(m, m) (|g| <= m = cap, so the
// decision is keep8's); proved_keep8 with the guard's scale marks the candidates that need no
// re-check (min(|g|, m) = |g|; a lane it does not prove is stored and re-decided exactly). The stored candidates' offsets, uniforms and magnitudes are moved to
// the front of their vector by a lane permutation and stored whole (the slack holds what lies past
// count). The tail of fewer than 32 elements runs the scalar loop with the same state.
void avx2_encode_2bit_running(const float* g, std::size_t begin, std::size_t end, float guard, const StreamKey& key,
                              std::uint8_t* body, std::uint32_t* cand_pos, std::uint32_t* cand_u, float* cand_a,
                              RunningPass* st) {
  const Tables& t = tables();
  const auto& perm = compress_table();
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i max_finite = _mm256_set1_epi32(0x7f7fffff);
  const __m256i lane_ids = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 guard_lo = Scale8(make_rule(guard, guard).scale).lo8;  // only the proving bound is needed
  float m = st->m;
  std::uint32_t mbits;
  std::memcpy(&mbits, &m, 4);
  ScalarRule rule = make_rule(m, m);
  __m256 cap = _mm256_set1_ps(rule.cap);
  Scale8 scale(rule.scale);
  std::size_t count = st->count;
  std::size_t k = begin;
  for (; k + 32 <= end; k += 32) {
    prefetch_ahead(g, k);
    prefetch_ahead(g, k + 16);
    __m256i raw[4], a[4];
    __m256i bad = _mm256_setzero_si256();
    for (int v = 0; v < 4; ++v) {
      raw[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + k + 8 * v));
      a[v] = _mm256_and_si256(raw[v], abs_mask);
      bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(a[v], max_finite));
    }
    if (!_mm256_testz_si256(bad, bad)) {  // rare (the encode fails): name the first non-finite element
      std::size_t first = kNoBadIndex;
      max_abs_scalar(g, k, k + 32, &first);
      st->first_bad = first;
      st->m = m;
      st->count = count;
      return;
    }
    // |g| as integers orders like the floats (all finite here)
    __m256i mx = _mm256_max_epi32(_mm256_max_epi32(a[0], a[1]), _mm256_max_epi32(a[2], a[3]));
    if (_mm256_movemask_epi8(_mm256_cmpgt_epi32(mx, _mm256_set1_epi32(static_cast<int>(mbits))))) {
      alignas(32) std::uint32_t lanes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), mx);
      mbits = *std::max_element(lanes, lanes + 8);
      std::memcpy(&m, &mbits, 4);
      rule = make_rule(m, m);
      cap = _mm256_set1_ps(rule.cap);
      scale = Scale8(rule.scale);
      st->settled = count;
    }
    __m256i u[4];
    philox_elements(key, static_cast<std::uint32_t>(k / 4), u);
    std::uint64_t out = 0;
    for (int v = 0; v < 4; ++v) {
      unsigned keep = keep8(_mm256_castsi256_ps(raw[v]), u[v], cap, scale);
      unsigned sure = proved_keep8(_mm256_castsi256_ps(a[v]), u[v], guard_lo);
      unsigned neg = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(raw[v])));
      std::uint64_t codes = t.spread[keep & ~neg & 0xff] | (std::uint64_t{t.spread[keep & neg]} << 1);
      out |= codes << (16 * v);
      const unsigned store = keep & ~sure;
      const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(perm[store].data()));
      const __m256i pos = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(k - begin + 8 * v)), lane_ids);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(cand_pos + count), _mm256_permutevar8x32_epi32(pos, p));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(cand_u + count), _mm256_permutevar8x32_epi32(u[v], p));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(cand_a + count), _mm256_permutevar8x32_epi32(a[v], p));
      count += static_cast<std::size_t>(__builtin_popcount(store));
    }
    std::memcpy(body + k / 4, &out, 8);
  }
  st->m = m;
  st->count = count;
  if (k < end) {  // the scalar tail stores offsets from its own start: shift them to this range's
    const std::size_t before = st->count;
    encode_2bit_running_scalar(g, k, end, guard, key, body, cand_pos, cand_u, cand_a, st);
    for (std::size_t c = before; c < st->count; ++c) cand_pos[c] += static_cast<std::uint32_t>(k - begin);
  }
}

// Kernels::recheck_2bit: the decisions 8 candidates at a time (keep8 on the stored |g|), then the
// dropped ones' codes cleared one at a time.
void avx2_recheck_2bit(std::uint8_t* body, std::size_t base, const std::uint32_t* cand_pos, const std::uint32_t* cand_u,
                       const float* cand_a, std::size_t count, const ScalarRule& rule) {
  const __m256 cap = _mm256_set1_ps(rule.cap);
  const Scale8 scale(rule.scale);
  std::size_t c = 0;
  for (; c + 8 <= count; c += 8) {
    __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cand_u + c));
    unsigned keep = keep8(_mm256_loadu_ps(cand_a + c), u, cap, scale);
    for (unsigned drop = ~keep & 0xffu; drop; drop &= drop - 1)
      clear_code_2bit(body, base + cand_pos[c + static_cast<std::size_t>(__builtin_ctz(drop))]);
  }
  recheck_2bit_scalar(body, base, cand_pos + c, cand_u + c, cand_a + c, count - c, rule);
}

// Clipping statistics (Kernels::chunk_stats) in one read of each chunk: the canonical total (lanes 0-3
// and 4-7 in two vectors, as avx2_chunk_totals; the chunk's last < 8 elements one at a time into their
// lanes), the shifted sums q1, q2 (8 lanes, then the tail) and max |g| with the finiteness check.
float avx2_chunk_stats(const float* g, std::size_t n, std::size_t c0, std::size_t c1, float shift, double* t1,
                       double* q1, double* q2, std::size_t* first_bad) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i max_finite = _mm256_set1_epi32(0x7f7fffff);
  const __m256d kv = _mm256_set1_pd(static_cast<double>(shift));
  const double k = static_cast<double>(shift);
  __m256 mx = _mm256_setzero_ps();
  __m256i bad = _mm256_setzero_si256();
  float tail_max = 0.0f;
  for (std::size_t c = c0; c < c1; ++c) {
    std::size_t start = c * kReduceChunk, end = std::min<std::size_t>(n, start + kReduceChunk);
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    __m256d s1a = _mm256_setzero_pd(), s1b = _mm256_setzero_pd(), s2a = _mm256_setzero_pd(), s2b = _mm256_setzero_pd();
    std::size_t i = start;
    for (; i + 8 <= end; i += 8) {
      prefetch_ahead(g, i);
      __m256 v = _mm256_loadu_ps(g + i);
      __m256 a = _mm256_and_ps(v, abs_mask);
      bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(_mm256_castps_si256(a), max_finite));
      mx = _mm256_max_ps(mx, a);
      __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
      __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
      acc0 = _mm256_add_pd(acc0, lo);
      acc1 = _mm256_add_pd(acc1, hi);
      __m256d dlo = _mm256_sub_pd(lo, kv), dhi = _mm256_sub_pd(hi, kv);
      s1a = _mm256_add_pd(s1a, dlo);
      s1b = _mm256_add_pd(s1b, dhi);
      s2a = _mm256_add_pd(s2a, _mm256_mul_pd(dlo, dlo));
      s2b = _mm256_add_pd(s2b, _mm256_mul_pd(dhi, dhi));
    }
    double lane[kReduceLanes], w1[4], w2[4];
    _mm256_storeu_pd(lane, acc0);
    _mm256_storeu_pd(lane + 4, acc1);
    _mm256_storeu_pd(w1, _mm256_add_pd(s1a, s1b));
    _mm256_storeu_pd(w2, _mm256_add_pd(s2a, s2b));
    double s1 = (w1[0] + w1[1]) + (w1[2] + w1[3]), s2 = (w2[0] + w2[1]) + (w2[2] + w2[3]);
    if (i < end) {
      std::size_t bad_at = kNoBadIndex;
      tail_max = std::max(tail_max, max_abs_scalar(g, i, end, &bad_at));
      if (bad_at != kNoBadIndex) bad = _mm256_set1_epi32(-1);
    }
    add_to_fused(g, start, i, end, k, lane, &s1, &s2);
    t1[c - c0] = combine_lanes(lane);
    q1[c - c0] = s1;
    q2[c - c0] = s2;
  }
  *first_bad = kNoBadIndex;
  if (!_mm256_testz_si256(bad, bad)) {  // rare (the encode fails): the scalar scan names the first one
    std::size_t begin = c0 * kReduceChunk, end = std::min<std::size_t>(n, c1 * kReduceChunk);
    return max_abs_scalar(g, begin, end, first_bad);
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, mx);
  return std::max(*std::max_element(lanes, lanes + 8), tail_max);
}

void avx2_philox_blocks(const StreamKey& key, std::uint32_t first, std::size_t count, PhiloxBlock* out) {
  for (std::size_t i = 0; i < count; i += 8) {
    __m256i u[4];
    philox_elements(key, static_cast<std::uint32_t>(first + i), u);
    alignas(32) std::uint32_t words[32];  // element order: block l's words at 4 l .. 4 l + 3
    for (int v = 0; v < 4; ++v) _mm256_store_si256(reinterpret_cast<__m256i*>(words + 8 * v), u[v]);
    for (std::size_t l = 0; l < 8 && i + l < count; ++l)
      for (int j = 0; j < 4; ++j) out[i + l].v[j] = words[4 * l + static_cast<std::size_t>(j)];
  }
}

std::uint32_t avx2_philox_fold(const StreamKey& key, std::uint32_t first, std::size_t count) {
  __m256i acc = _mm256_setzero_si256();
  for (std::size_t i = 0; i < count; i += 8) {
    __m256i x[8];
    philox8(key, static_cast<std::uint32_t>(first + i), x);
    for (int j = 0; j < 8; j += 2) acc = _mm256_xor_si256(acc, _mm256_xor_si256(x[j], x[j + 1]));
  }
  // the words are the low halves of the 64-bit lanes (the high halves are not Philox output)
  alignas(32) std::uint32_t w[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(w), acc);
  return w[0] ^ w[2] ^ w[4] ^ w[6];
}

}  // namespace

const Kernels* avx2_kernels() {
  static const Kernels k = {"avx2",
                            avx2_max_abs,
                            avx2_chunk_totals,
                            avx2_ternarize,
                            avx2_encode_2bit,
                            avx2_encode_base3,
                            avx2_decode_2bit,
                            decode_base3_range,  // byte-at-a-time tables: no vector version
                            unpack_2bit_range,
                            unpack_base3_range,
                            avx2_encode_2bit_running,
                            avx2_recheck_2bit,
                            avx2_chunk_stats,
                            avx2_philox_fold,
                            avx2_philox_blocks,
                            nullptr};  // no encode_2bit_stream
  return &k;
}

}  // namespace tg::cpu
