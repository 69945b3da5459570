// terngrad-bench: the two comparison codecs of the training exchange, without LibTorch or Eigen:
// QSGD with s levels (Alistarh et al., NeurIPS 2017) and SignSGD with error feedback (EF-SignSGD,
// Karimireddy et al., ICML 2019). Payload formats (little-endian; what the byte counts count):
//   QSGD:  [float32 norm][n codes of 1 + ceil(log2(s+1)) bits, LSB first: level | sign << level_bits]
//          (fixed-width codes, not the paper's Elias coding; a zero level carries sign 0)
//   sign:  [float32 scale][n bits, LSB first: 1 = negative]
// QSGD draws its uniforms from the project's Philox stream (tg/philox.hpp) keyed by
// (seed, worker, kQsgdTensorBase + tensor, step), so a run is bit-reproducible on every rank.
//   std::vector<std::uint8_t> p(qsgd_payload_bytes(g.size(), 4)); qsgd_encode(g, 4, key, 0, p);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tg/philox.hpp"

namespace tg::train {

/// Philox tensor ids of QSGD streams: kQsgdTensorBase + tensor index (the convex tool's QSGD uses the
/// same offset), disjoint from TernGrad's tensor ids.
inline constexpr std::uint32_t kQsgdTensorBase = 0x51000000u;

/// Largest QSGD level count accepted (codes stay within 17 bits).
inline constexpr int kQsgdMaxLevels = 65535;

/// Bits of one QSGD code: 1 sign bit + ceil(log2(levels + 1)) level bits.
int qsgd_bits_per_element(int levels);
/// Bytes of one QSGD payload of n elements: 4 (norm) + ceil(n * bits / 8).
std::size_t qsgd_payload_bytes(std::size_t n, int levels);

/// QSGD: with norm = ||g||_2 (double, rounded up to float32 so that |g_k| <= norm), r = s |g_k| / norm,
/// level = floor(r) + 1 with probability r - floor(r) (a 32-bit Philox word u against
/// floor((r - floor r) 2^32)), else floor(r). Decoded value sign(g_k) * norm * level / s: unbiased up to
/// the 2^-32 resolution of the threshold and float32 rounding. `out` must have qsgd_payload_bytes bytes.
/// Throws tg::NonFiniteError (naming `tensor`) on NaN/Inf, std::invalid_argument on bad sizes/levels.
void qsgd_encode(std::span<const float> g, int levels, const StreamKey& key, std::uint32_t tensor,
                 std::span<std::uint8_t> out);
/// Decodes a QSGD payload into out (out.size() elements). Throws std::runtime_error on a bad payload.
void qsgd_decode(std::span<const std::uint8_t> payload, int levels, std::span<float> out);

/// Bytes of one sign payload of n elements: 4 (scale) + ceil(n / 8).
std::size_t sign_payload_bytes(std::size_t n);

/// EF-SignSGD, one worker and one tensor: p = g + e (float32), scale = ||p||_1 / n (double, stored as
/// float32), decoded = -scale where p_k < 0 else +scale, then e <- p - decoded (float32). So the residual
/// identity e_{t+1} = (g + e_t) - decoded holds exactly in float32 arithmetic. `residual` is e (in/out).
void signsgd_ef_encode(std::span<const float> g, std::span<float> residual, std::uint32_t tensor,
                       std::span<std::uint8_t> out);
/// Decodes a sign payload into out (out.size() elements).
void sign_decode(std::span<const std::uint8_t> payload, std::span<float> out);

}  // namespace tg::train
