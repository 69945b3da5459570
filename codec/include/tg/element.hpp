// terngrad-bench: the per-element rules, written once and used by every implementation
// (reference loops, SIMD CPU code and CUDA kernels), so that they agree bit for bit.
#pragma once

#include <cstdint>

#include "tg/config.hpp"

namespace tg {

/// 2^32 as a double: scales a keep-probability into the 32-bit uniform's range.
inline constexpr double kTwoPow32 = 4294967296.0;

/// The per-tensor quantities every element decision needs.
///  scalar: s, the magnitude of every nonzero output (0 means "all outputs zero").
///  cap:    magnitudes are clamped to cap before the decision (cap = min(s, c*sigma) under clipping,
///          cap = s otherwise). Elements with |g| >= cap are kept with probability cap/s.
///  scale:  2^32 / s in double (0 when s == 0), computed once per tensor by `make_rule`.
struct ScalarRule {
  float scalar = 0.0f;
  float cap = 0.0f;
  double scale = 0.0;
};

/// Builds the rule for scalar s and clamp bound cap (the cap is lowered to s if it exceeds it).
TG_HD_INLINE ScalarRule make_rule(float scalar, float cap) {
  ScalarRule r;
  r.scalar = scalar;
  r.cap = cap < scalar ? cap : scalar;
  r.scale = scalar > 0.0f ? kTwoPow32 / static_cast<double>(scalar) : 0.0;
  return r;
}

/// |x| of a float without branching on NaN (inputs are checked finite before this is called).
TG_HD_INLINE float abs_float(float x) { return x < 0.0f ? -x : (x == 0.0f ? 0.0f : x); }

/// Keep decision, b_k ~ Bernoulli(p_k) with p_k = min(|g_k|, cap) / s, in exact arithmetic:
///   keep  <=>  (double)u  <  (double)min(|g_k|, cap) * (2^32 / s)
/// u is a uniform 32-bit word, so P(keep) = ceil(p_k 2^32) / 2^32: bias below 2^-32 per element.
/// |g_k| >= cap = s always keeps (the product is >= 2^32 (1 - 2^-52) > u); g_k = 0 never keeps.
TG_HD_INLINE bool keep(float g, const ScalarRule& rule, std::uint32_t u) {
  float a = abs_float(g);
  a = a < rule.cap ? a : rule.cap;
  return static_cast<double>(u) < static_cast<double>(a) * rule.scale;
}

/// Trit of one element: +1, 0 or -1 (the output is scalar * trit).
TG_HD_INLINE int ternarize_element(float g, const ScalarRule& rule, std::uint32_t u) {
  if (!keep(g, rule, u)) return 0;
  return g < 0.0f ? -1 : 1;
}

/// 2bit wire code of a trit: 00 = 0, 01 = +1, 10 = -1 (11 is invalid).
TG_HD_INLINE std::uint8_t code_2bit(int trit) {
  return static_cast<std::uint8_t>(trit == 0 ? 0u : (trit > 0 ? 1u : 2u));
}

/// base3 digit of a trit: 0 = zero, 1 = +1, 2 = -1.
TG_HD_INLINE std::uint8_t digit_base3(int trit) { return code_2bit(trit); }

/// Trit of a 2bit code or base3 digit (codes 0, 1, 2 only).
TG_HD_INLINE int trit_of_code(std::uint8_t code) { return code == 0 ? 0 : (code == 1 ? 1 : -1); }

/// Bytes of the packed body for n elements.
TG_HD_INLINE std::uint64_t packed_bytes_2bit(std::uint64_t n) { return (n + 3) / 4; }
TG_HD_INLINE std::uint64_t packed_bytes_base3(std::uint64_t n) { return (n + 4) / 5; }

/// Largest valid base3 byte is 3^5 - 1 = 242.
inline constexpr unsigned kBase3MaxByte = 242;

}  // namespace tg
