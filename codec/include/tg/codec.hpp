// terngrad-bench: the TernGrad codec API (Wen et al., NeurIPS 2017), namespace tg.
// One tensor g of d elements becomes s * trits, trits in {-1, 0, +1}, with s = ||g||_inf
// (after the clipping rule) and b_k ~ Bernoulli(|g_k| / s), keyed by tg::StreamKey.
// Every implementation (reference, optimized CPU, CUDA) derives from tg::Codec and produces the
// same bytes; the free functions below build payloads on top of whichever one they are given.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tg/element.hpp"
#include "tg/error.hpp"
#include "tg/format.hpp"
#include "tg/philox.hpp"
#include "tg/reduce.hpp"

namespace tg {

/// How the scalar is chosen (paper Section 3.3, Eq. 7), with sigma the population std of g:
///  none:     s = max|g|.
///  clip:     g' = clamp(g, -c sigma, c sigma), s = max|g'|  (paper Eq. 7; GRACE).
///  saturate: s = c sigma (or max|g| if smaller); |g| >= s maps to sign * s (the original TF code).
/// clip and saturate give the same distribution and, here, the same bytes; both names are kept so
/// a comparison with either original reads naturally. Under clipping the estimator is unbiased
/// for clamp(g, c sigma), not for g.
enum class ClipMode : std::uint8_t { none = 0, clip = 1, saturate = 2 };

const char* to_string(ClipMode mode);
/// Parses "none", "clip" or "saturate"; throws tg::Error(invalid_argument) naming the bad value.
ClipMode parse_clip_mode(const char* text);

/// The clip factors the codec takes: c in [kMinClipFactor, kMaxClipFactor] (the paper's 2.5 in the middle). A
/// smaller c makes c * sigma underflow to a bound of 0 for small gradients (1e-320 did), a larger one clips nothing.
inline constexpr double kMinClipFactor = 1e-3;
inline constexpr double kMaxClipFactor = 1e6;

/// Codec parameters (independent of the stream key).
struct Params {
  ClipMode clip = ClipMode::none;
  double c = 2.5;                         // clip factor, in [kMinClipFactor, kMaxClipFactor]
  Packing packing = Packing::two_bit;     // two_bit or base3 for ternary tensors
  std::uint64_t float_below = 0;          // tensors with fewer elements travel as float32 (0: never)
};

/// Throws tg::Error(invalid_argument) if c is not in [kMinClipFactor, kMaxClipFactor] or the packing is float32.
void validate(const Params& params);

/// What the scalar rule needs of one tensor under a clipping mode: max |g| and the clip bound
/// float(c * sigma) of the canonical sigma (+inf for ClipMode::none).
struct ClipStats {
  float max_abs = 0.0f;
  float bound = 0.0f;
};

/// One implementation of the per-tensor kernels. All implementations give identical results.
class Codec {
 public:
  virtual ~Codec() = default;
  virtual std::string name() const = 0;

  /// max |g_k| over the tensor. Throws NonFiniteError(tensor, first bad index) on NaN or Inf.
  virtual float max_abs(std::span<const float> g, std::uint32_t tensor) const = 0;
  /// Mean and population sigma in the canonical order of tg/reduce.hpp (input already checked finite).
  virtual Moments moments(std::span<const float> g) const = 0;
  /// max_abs (NonFiniteError naming `tensor`) and the clip bound under params.clip and params.c, the
  /// same bits as max_abs followed by moments. The default runs those two; the optimized codec finds
  /// both in one pass over g when it can prove the bound equal (and runs the sigma pass when not).
  virtual ClipStats clip_stats(std::span<const float> g, const Params& params, std::uint32_t tensor) const;
  /// trits[k] = ternarize_element(g[k], rule, u_k(key)); trits.size() == g.size().
  virtual void ternarize(std::span<const float> g, const ScalarRule& rule, const StreamKey& key,
                         std::span<std::int8_t> trits) const = 0;
  /// Ternarize and pack in one pass; body.size() == body_bytes(packing, g.size()).
  virtual void encode_body(std::span<const float> g, const ScalarRule& rule, const StreamKey& key,
                           Packing packing, std::span<std::uint8_t> body) const = 0;
  /// One tensor's whole encode below the header: the rule (its own scalar under params.clip, or
  /// *shared_scalar with the tensor's own clip bound when shared_scalar is not null) and the body
  /// (body.size() == body_bytes(params.packing, g.size())); returns the rule. Throws NonFiniteError
  /// naming key.tensor. tg::encode and tg::encode_with_scalar call this once per tensor. The default
  /// runs max_abs, moments (when clipping) and encode_body; a codec that must move g elsewhere first
  /// (the CUDA codec uploads it) overrides it to move g once instead of once per call.
  virtual ScalarRule encode_tensor(std::span<const float> g, const Params& params, const StreamKey& key,
                                   const float* shared_scalar, std::span<std::uint8_t> body) const;
  /// crc32c(bytes) (tg/format.hpp), the payload's body checksum; tg::encode and tg::encode_with_scalar
  /// call it once per tensor. The optimized codec computes large bodies in parts on its threads.
  virtual std::uint32_t checksum(std::span<const std::uint8_t> bytes) const;
  /// Unpacks a ternary body into trits, rejecting invalid codes (tg::Error invalid_code).
  virtual void unpack(Packing packing, std::span<const std::uint8_t> body,
                      std::span<std::int8_t> trits) const = 0;
  /// Unpacks a ternary body straight to floats: out[k] = scalar * trit_k.
  virtual void decode_body(Packing packing, std::span<const std::uint8_t> body, float scalar,
                           std::span<float> out) const = 0;
};

/// The reference codec: plain loops, one function per equation (codec/src/reference).
const Codec& reference_codec();
/// Instruction sets of the optimized CPU codec.
enum class Isa { portable, avx2, avx512, best };
/// The optimized CPU codec: the best SIMD kernels this CPU runs (AVX-512, AVX2, else portable code)
/// and `threads` threads for large tensors (0: all hardware threads). force_portable disables SIMD.
std::unique_ptr<Codec> make_optimized_codec(unsigned threads = 0, bool force_portable = false);
/// The optimized codec with one instruction set (tg::Error invalid_argument if this CPU lacks it).
std::unique_ptr<Codec> make_optimized_codec_isa(unsigned threads, Isa isa);
/// Whether this CPU runs the AVX2 (AVX2) and AVX-512 (AVX512F + BMI2) kernels (always false where
/// the library was built without them: targets other than x86-64).
bool cpu_has_avx2();
bool cpu_has_avx512();
/// Philox blocks first .. first + count - 1 (mod 2^32) of the stream `key` into out[0 .. count): the
/// words of philox_block(key, first + i), made by the widest generator this CPU runs (about 20x the
/// scalar philox_block with AVX-512). For codecs outside this library that draw from the same stream.
void philox_blocks(const StreamKey& key, std::uint32_t first, std::size_t count, PhiloxBlock* out);

/// The registry of CPU implementations, one naming scheme: "reference", "optimized" (best kernels,
/// `threads` threads), "optimized-<isa>" with isa portable, avx2 or avx512, and any optimized name
/// with a thread count "-t<N>" (the name an OptimizedCodec reports, e.g. "optimized-avx2-t1").
/// The battery (--impl), the Python package (codec=...) and the test/benchmark table below all make
/// codecs through it. tg::Error invalid_argument names the known names, or what this CPU lacks.
std::shared_ptr<const Codec> make_codec(const std::string& name, unsigned threads = 0);
/// The implementation names this CPU runs, without thread suffixes: reference, optimized, optimized-<isa>...
std::vector<std::string> codec_names();

/// Named entry of the table of CPU implementations that tests and benchmarks walk.
struct CodecEntry {
  std::string name;
  std::shared_ptr<const Codec> codec;
};
/// reference, optimized with 1 thread for each instruction set this CPU runs (portable, avx2,
/// avx512), and the best optimized codec with `threads` threads.
std::vector<CodecEntry> cpu_codecs(unsigned threads = 0);

// ---- per-tensor scalar ----------------------------------------------------------------------

/// The clip bound c*sigma as float (+inf for ClipMode::none).
float clip_bound(const Codec& codec, std::span<const float> g, const Params& params);
/// The rule of one tensor with its own scalar (checks g finite; throws NonFiniteError naming `tensor`).
ScalarRule own_rule(const Codec& codec, std::span<const float> g, const Params& params,
                    std::uint32_t tensor);
/// s of one tensor under the clipping rule (what a worker contributes to the shared max).
float tensor_scalar(const Codec& codec, std::span<const float> g, const Params& params,
                    std::uint32_t tensor);
/// The shared scalar: max over workers of their tensor_scalar (one max-allreduce in a real run).
float shared_scalar(std::span<const float> worker_scalars);

/// One worker's statistics of one tensor, computed once (Codec::clip_stats): its scalar (what
/// tensor_scalar returns, the worker's contribution to the shared max) and its clip bound, which
/// encode_with_scalar(..., own) then uses instead of computing it again. count, clip and c record
/// what they describe: encode_with_scalar refuses statistics of another size or clipping rule.
struct TensorStats {
  std::uint64_t count = 0;
  ClipMode clip = ClipMode::none;
  double c = 2.5;
  float max_abs = 0.0f;
  float bound = 0.0f;   // c * sigma as float; +inf for ClipMode::none
  float scalar = 0.0f;  // min(max_abs, bound)
};
/// The statistics of g under params (checks g finite; throws NonFiniteError naming `tensor`).
TensorStats tensor_stats(const Codec& codec, std::span<const float> g, const Params& params,
                         std::uint32_t tensor);

// ---- payloads --------------------------------------------------------------------------------

/// Ternarize g with its own scalar into trits (no packing); returns the scalar.
float ternarize(const Codec& codec, std::span<const float> g, const Params& params,
                const StreamKey& key, std::span<std::int8_t> trits);

/// Encodes one tensor (tensor id = key.tensor) into a self-describing payload. Tensors smaller
/// than params.float_below travel as float32. Throws before producing anything on bad input.
std::vector<std::uint8_t> encode(const Codec& codec, std::span<const float> g, const Params& params,
                                 const StreamKey& key);

/// Encodes with an externally given scalar (the shared max over workers): the worker's own clip
/// bound still applies, then magnitudes above `scalar` saturate to it.
std::vector<std::uint8_t> encode_with_scalar(const Codec& codec, std::span<const float> g,
                                             const Params& params, const StreamKey& key,
                                             float scalar);
/// The same bytes, with the worker's own statistics of g already computed by tensor_stats (same g,
/// same params): one pass over g (the body) instead of the statistics pass and the body. g must not
/// have changed since; tg::Error(invalid_argument) if `own` records another size or clipping rule.
std::vector<std::uint8_t> encode_with_scalar(const Codec& codec, std::span<const float> g,
                                             const Params& params, const StreamKey& key,
                                             float scalar, const TensorStats& own);

/// The same payloads written into `out`, reusing its storage: out.size() becomes the payload's size. A buffer
/// that already has that size (the same tensor shape as its last payload) is overwritten without being
/// cleared or reallocated first (at 2^24 elements the clearing took 0.16-0.21 ms, 2-3% of a 2-thread encode;
/// docs/performance.md, "Threads"). Throws what the
/// function without `_into` throws, before or after writing; `out` is then left empty, never half-written.
void encode_into(const Codec& codec, std::span<const float> g, const Params& params, const StreamKey& key,
                 std::vector<std::uint8_t>& out);
void encode_with_scalar_into(const Codec& codec, std::span<const float> g, const Params& params,
                             const StreamKey& key, float scalar, std::vector<std::uint8_t>& out);
void encode_with_scalar_into(const Codec& codec, std::span<const float> g, const Params& params,
                             const StreamKey& key, float scalar, const TensorStats& own,
                             std::vector<std::uint8_t>& out);

/// Layer-wise encode: tensor i gets its own scalar and tensor id key.tensor + i.
std::vector<std::vector<std::uint8_t>> encode_layers(const Codec& codec,
                                                     const std::vector<std::span<const float>>& layers,
                                                     const Params& params, const StreamKey& key);

/// A decoded payload.
struct Decoded {
  Header header;
  std::vector<float> values;  // scalar * trit, or the float32 body
};

/// Decodes a payload (validates everything first; tg::Error on any defect).
Decoded decode(const Codec& codec, std::span<const std::uint8_t> payload);
/// Decodes a ternary payload to trits (tg::Error bad_packing for float32 payloads).
std::vector<std::int8_t> decode_trits(const Codec& codec, std::span<const std::uint8_t> payload,
                                      Header* header = nullptr);

/// Result of aggregating N workers' payloads that share one scalar.
struct Aggregate {
  float scalar = 0.0f;
  std::uint32_t workers = 0;
  std::vector<std::int32_t> sums;  // sum of trits, in [-N, N]
  std::vector<float> mean;         // (double)scalar * sum / N, rounded to float
};

/// Exact integer aggregation; every payload must have the same scalar bits, count, tensor id and
/// be ternary (tg::Error scalar_mismatch otherwise).
Aggregate aggregate(const Codec& codec, const std::vector<std::span<const std::uint8_t>>& payloads);

// ---- the paper's identities, in double ---------------------------------------------------------

/// ||g||_inf ||g||_1 - ||g||_2^2 (expected squared error of TernGrad with s = max|g|).
double variance_identity(std::span<const float> g);
/// sum_k |x_k| (s - |x_k|) for an explicit scalar s >= max|x| (the identity for a given s).
double variance_for_scalar(std::span<const float> x, double s);

}  // namespace tg
