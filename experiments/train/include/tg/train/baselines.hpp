// terngrad-bench: the two comparison codecs of the training exchange, without LibTorch or Eigen:
// QSGD with s levels (Alistarh et al., NeurIPS 2017) and SignSGD with error feedback (EF-SignSGD,
// Karimireddy et al., ICML 2019). Payload formats (little-endian; what the byte counts count):
//   QSGD:  [B float32 norms][n codes of 1 + ceil(log2(s+1)) bits, LSB first: level | sign << level_bits]
//          B = ceil(n / d) buckets of d consecutive elements, each quantized against its own norm (the
//          paper's bucketing; d = 0: one bucket, the whole tensor). Fixed-width codes, not the paper's
//          Elias coding; a zero level carries sign 0.
//   sign:  [float32 scale][n bits, LSB first: 1 = negative]
// QSGD draws its uniforms from the project's Philox stream (tg/philox.hpp) keyed by
// (seed, worker, kQsgdTensorBase + tensor, step), so a run is bit-reproducible on every rank.
//   std::vector<std::uint8_t> p(qsgd_payload_bytes(g.size(), 4, 512)); qsgd_encode(g, 4, 512, key, 0, p);
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

/// Largest QSGD bucket size accepted (0 means one bucket for the whole tensor).
inline constexpr std::uint64_t kQsgdMaxBucket = std::uint64_t{1} << 31;

/// Number of QSGD buckets (norms) of a tensor of n elements with bucket size d: ceil(n / d), and 1 when
/// d = 0 or n = 0.
std::size_t qsgd_buckets(std::size_t n, std::uint64_t bucket);

/// Bits of one QSGD code: 1 sign bit + ceil(log2(levels + 1)) level bits.
int qsgd_bits_per_element(int levels);
/// Bytes of one QSGD payload of n elements: 4 * qsgd_buckets(n, bucket) (norms) + ceil(n * bits / 8).
std::size_t qsgd_payload_bytes(std::size_t n, int levels, std::uint64_t bucket);

/// QSGD: per bucket b of `bucket` consecutive elements (all of g when bucket = 0), with
/// norm = ||g_b||_2 (double, rounded up to float32 so that |g_k| <= norm), r = s |g_k| / norm,
/// level = floor(r) + 1 with probability r - floor(r) (a 32-bit Philox word u against
/// floor((r - floor r) 2^32)), else floor(r). Decoded value sign(g_k) * norm * level / s: unbiased up to
/// the 2^-32 resolution of the threshold and float32 rounding. Element k uses word k % 4 of Philox block
/// k / 4 whatever the bucket size. `out` must have qsgd_payload_bytes bytes.
/// Throws tg::NonFiniteError (naming `tensor`) on NaN/Inf, std::invalid_argument on bad sizes/levels/bucket.
void qsgd_encode(std::span<const float> g, int levels, std::uint64_t bucket, const StreamKey& key,
                 std::uint32_t tensor, std::span<std::uint8_t> out);
/// Decodes a QSGD payload into out (out.size() elements). Throws std::runtime_error on a bad payload.
void qsgd_decode(std::span<const std::uint8_t> payload, int levels, std::uint64_t bucket, std::span<float> out);

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
