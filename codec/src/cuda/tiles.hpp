// terngrad-bench: the CUDA codec's per-thread work items, __host__ __device__ (tg/config.hpp), so the
// host test tests/cuda/test_cuda_tiles.cpp checks every one against the reference without a GPU; the
// kernels in kernels.cu only map thread indexes onto these items.
#pragma once

#include <cstdint>
#include <cstring>

#include "tg/element.hpp"
#include "tg/philox.hpp"
#include "tg/reduce.hpp"

namespace tg::cuda::detail {

/// Elements per packing tile: a multiple of 4 (2bit byte, Philox block), 5 (base3 byte), 20 and 2048
/// (reduction chunk), so tiles never split a byte, a Philox block or a chunk.
inline constexpr std::uint64_t kPackTile = 5 * kReduceChunk;  // 10240

/// Per-tensor state the kernels share through the workspace.
struct LayerState {
  unsigned int max_bits;          // max |g| as float bits (order-preserving for nonnegative floats)
  unsigned int reserved;
  unsigned long long first_bad;   // first non-finite index (atomicMin), ~0 when none
  double mean;
  double sigma;
  ScalarRule rule;
};

/// The layer L with begins[L] <= item < begins[L + 1] (begins has count + 1 nondecreasing entries,
/// begins[0] == 0, item < begins[count]); empty layers (equal begins) are skipped.
TG_HD_INLINE std::uint32_t find_layer(const std::uint64_t* begins, std::uint32_t count, std::uint64_t item) {
  std::uint32_t lo = 0, hi = count;  // invariant: begins[lo] <= item < begins[hi]
  while (hi - lo > 1) {
    std::uint32_t mid = lo + (hi - lo) / 2;
    if (begins[mid] <= item)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/// Loads 4 floats; p must be 16-byte aligned when `vector` is true.
TG_HD_INLINE void load4(const float* p, bool vector, float* v) {
#if defined(__CUDA_ARCH__)
  if (vector) {
    float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    return;
  }
#else
  (void)vector;
#endif
  v[0] = p[0], v[1] = p[1], v[2] = p[2], v[3] = p[3];
}

/// Stores 4 floats; p must be 16-byte aligned when `vector` is true.
TG_HD_INLINE void store4(float* p, bool vector, const float* v) {
#if defined(__CUDA_ARCH__)
  if (vector) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    return;
  }
#else
  (void)vector;
#endif
  p[0] = v[0], p[1] = v[1], p[2] = v[2], p[3] = v[3];
}

// ---- scalar pass ---------------------------------------------------------------------------------

/// Running max |g| and first non-finite index over elements [begin, end) (inputs may be NaN/Inf).
struct MaxScan {
  float max = 0.0f;
  std::uint64_t first_bad = ~std::uint64_t{0};
};
TG_HD_INLINE void scan_element(float x, std::uint64_t k, MaxScan& s) {
  float a = abs_float(x);
  // a - a is 0 for finite a and NaN for Inf or NaN.
  if (!(a - a == 0.0f)) {
    if (k < s.first_bad) s.first_bad = k;
    return;
  }
  if (a > s.max) s.max = a;
}

/// Sum of one lane of one reduction chunk (tg/reduce.hpp): lane l of chunk c adds, in increasing
/// index order from 0.0, term(g[k]) for k = c*2048 + l + 8j < n; term = g (square false) or
/// (g - mean)^2 (square true, d * d without contraction).
TG_HD_INLINE double lane_sum(const float* g, std::uint64_t n, std::uint64_t chunk, unsigned lane,
                             bool square, double mean) {
  std::uint64_t begin = chunk * kReduceChunk;
  std::uint64_t end = begin + kReduceChunk < n ? begin + kReduceChunk : n;
  double sum = 0.0;
  for (std::uint64_t k = begin + lane; k < end; k += kReduceLanes) {
    double x = static_cast<double>(g[k]);
    if (square) {
      double d = x - mean;
      sum = sum + d * d;
    } else {
      sum = sum + x;
    }
  }
  return sum;
}

/// The rule of one tensor from its max, clip bound and optional shared scalar (codec/src/common/api.cpp:
/// own_rule uses s = min(max, bound), encode_with_scalar uses make_rule(shared, bound)).
TG_HD_INLINE ScalarRule rule_for(float max_abs, float bound, const float* shared_scalar) {
  if (shared_scalar) return make_rule(*shared_scalar, bound);
  float s = bound < max_abs ? bound : max_abs;
  return make_rule(s, s);
}

// ---- ternarize and pack --------------------------------------------------------------------------

/// Trits of Philox block b (elements 4b .. 4b+3, those below n); returns how many are valid.
TG_HD_INLINE int trits_of_block(const float* g, std::uint64_t n, std::uint64_t b, bool vector,
                                const ScalarRule& rule, const StreamKey& key, int* trit) {
  std::uint64_t first = 4 * b;
  int valid = n - first >= 4 ? 4 : static_cast<int>(n - first);
  float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (valid == 4)
    load4(g + first, vector, v);
  else
    for (int m = 0; m < valid; ++m) v[m] = g[first + m];
  PhiloxBlock u = philox_block(key, static_cast<std::uint32_t>(b));
  for (int m = 0; m < 4; ++m) trit[m] = m < valid ? ternarize_element(v[m], rule, u.v[m]) : 0;
  return valid;
}

/// 2bit byte b (= Philox block b): element 4b+m in bits 2m, padding 0.
TG_HD_INLINE std::uint8_t encode_2bit_block(const float* g, std::uint64_t n, std::uint64_t b, bool vector,
                                            const ScalarRule& rule, const StreamKey& key) {
  int t[4];
  trits_of_block(g, n, b, vector, rule, key, t);
  return static_cast<std::uint8_t>(code_2bit(t[0]) | (code_2bit(t[1]) << 2) | (code_2bit(t[2]) << 4) |
                                   (code_2bit(t[3]) << 6));
}

/// base3 bytes 4q .. 4q+3 (elements 20q .. 20q+19 = Philox blocks 5q .. 5q+4) into out[0..4);
/// returns how many of the four bytes exist (the body has ceil(n/5) bytes).
TG_HD_INLINE int encode_base3_quad(const float* g, std::uint64_t n, std::uint64_t q, bool vector,
                                   const ScalarRule& rule, const StreamKey& key, std::uint8_t* out) {
  int t[20];
  for (int i = 0; i < 5; ++i) {
    std::uint64_t b = 5 * q + i;
    if (4 * b < n)
      trits_of_block(g, n, b, vector, rule, key, t + 4 * i);
    else
      t[4 * i] = t[4 * i + 1] = t[4 * i + 2] = t[4 * i + 3] = 0;
  }
  for (int j = 0; j < 4; ++j) {
    const int* d = t + 5 * j;
    out[j] = static_cast<std::uint8_t>(digit_base3(d[0]) + 3 * digit_base3(d[1]) + 9 * digit_base3(d[2]) +
                                       27 * digit_base3(d[3]) + 81 * digit_base3(d[4]));
  }
  std::uint64_t bytes = packed_bytes_base3(n) - 4 * q;
  return bytes >= 4 ? 4 : static_cast<int>(bytes);
}

/// One body byte j computed element by element (the plain version: a Philox block per element).
TG_HD_INLINE std::uint8_t encode_byte_plain(const float* g, std::uint64_t n, std::uint64_t j, bool base3,
                                            const ScalarRule& rule, const StreamKey& key) {
  unsigned per = base3 ? 5u : 4u, value = 0, weight = 1;
  for (unsigned m = 0; m < per; ++m) {
    std::uint64_t i = per * j + m;
    int trit = 0;
    if (i < n) trit = ternarize_element(g[i], rule, philox_block(key, static_cast<std::uint32_t>(i / 4)).v[i % 4]);
    if (base3) {
      value += digit_base3(trit) * weight;
      weight *= 3;
    } else {
      value |= static_cast<unsigned>(code_2bit(trit)) << (2 * m);
    }
  }
  return static_cast<std::uint8_t>(value);
}

// ---- unpack and decode ---------------------------------------------------------------------------

/// Trits of body byte j of an n-element body (4 for 2bit, 5 for base3; those past n are padding and
/// must be 0). Returns false for an invalid byte (2bit code 11, base3 byte > 242, nonzero padding).
TG_HD_INLINE bool unpack_byte(std::uint8_t byte, std::uint64_t j, std::uint64_t n, bool base3, int* trit) {
  unsigned per = base3 ? 5u : 4u;
  unsigned value = byte;
  if (base3 && value > kBase3MaxByte) return false;
  bool ok = true;
  for (unsigned m = 0; m < per; ++m) {
    unsigned code;
    if (base3) {
      code = value % 3;
      value /= 3;
    } else {
      code = (value >> (2 * m)) & 3u;
    }
    if (code == 3 || (per * j + m >= n && code != 0)) ok = false;
    trit[m] = trit_of_code(static_cast<std::uint8_t>(code));
  }
  return ok;
}

}  // namespace tg::cuda::detail
