// terngrad-bench: battery samplers: tg::Codec-backed (reference, optimized, CUDA, mutants, variants),
// the mutants (deliberately wrong codecs), the correct variants, and the --impl parser. The
// external-program sampler is exec.cpp.
#include "tg/verify/sampler.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <cstring>

#ifdef TG_HAVE_CUDA
#include "tg/cuda.hpp"
#endif

namespace tg::verify {
namespace {

class CodecSampler : public Sampler {
 public:
  CodecSampler(std::shared_ptr<const Codec> codec, std::string name)
      : codec_(std::move(codec)), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  const Codec* codec() const override { return codec_.get(); }
  Draws draw(const DrawRequest& r) override {
    Draws out;
    out.d = r.g.size();
    out.steps = r.steps;
    ScalarRule rule;
    if (r.scalar) {
      codec_->max_abs(r.g, r.key.tensor);
      rule = make_rule(*r.scalar, clip_bound(*codec_, r.g, r.params));
    } else {
      rule = own_rule(*codec_, r.g, r.params, r.key.tensor);
    }
    out.scalars.assign(r.steps, rule.scalar);
    out.trits.resize(static_cast<std::size_t>(r.steps) * out.d);
    for (std::uint32_t j = 0; j < r.steps; ++j) {
      StreamKey k = r.key;
      k.step = r.key.step + j;
      codec_->ternarize(r.g, rule, k, {out.trits.data() + j * out.d, out.d});
    }
    return out;
  }

 private:
  std::shared_ptr<const Codec> codec_;
  std::string name_;
};

// ---- mutants ---------------------------------------------------------------------------------
// Each is the reference codec with one deliberate defect. They never leave this file except
// through make_mutant_codec; the battery must reject every one (verify --self-test). 1-8 are the classic
// ones (docs/statistics.md, "Mutants"); 9-14 break the streams' independence in ways a real kernel could, 15-16 the
// keep probability and the clip statistics, 17-18 the streams again, 19-20 the sign symmetry of the keep rate.

// The reference codec under another name: mutants and variants override what they change.
class ForwardingCodec : public Codec {
 public:
  explicit ForwardingCodec(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  float max_abs(std::span<const float> g, std::uint32_t tensor) const override {
    return reference_codec().max_abs(g, tensor);
  }
  Moments moments(std::span<const float> g) const override { return reference_codec().moments(g); }
  void ternarize(std::span<const float> g, const ScalarRule& rule, const StreamKey& key,
                 std::span<std::int8_t> trits) const override {
    reference_codec().ternarize(g, rule, key, trits);
  }
  void encode_body(std::span<const float> g, const ScalarRule& rule, const StreamKey& key, Packing packing,
                   std::span<std::uint8_t> body) const override {
    reference_codec().encode_body(g, rule, key, packing, body);
  }
  void unpack(Packing packing, std::span<const std::uint8_t> body, std::span<std::int8_t> trits) const override {
    reference_codec().unpack(packing, body, trits);
  }
  void decode_body(Packing packing, std::span<const std::uint8_t> body, float scalar,
                   std::span<float> out) const override {
    reference_codec().decode_body(packing, body, scalar, out);
  }

 private:
  std::string name_;
};

// A codec that decides element by element from the spec's uniforms (hooks below): the mutants, and the
// variants that change the keep rule.
class PerElementCodec : public ForwardingCodec {
 public:
  explicit PerElementCodec(const std::string& full_name) : ForwardingCodec(full_name) {}
  void ternarize(std::span<const float> g, const ScalarRule& rule, const StreamKey& key,
                 std::span<std::int8_t> trits) const override {
    std::vector<std::uint32_t> u(g.size());
    uniforms(key, u);
    for (std::size_t i = 0; i < g.size(); ++i) trits[i] = static_cast<std::int8_t>(element(g[i], rule, u[i]));
  }
  void encode_body(std::span<const float> g, const ScalarRule& rule, const StreamKey& key, Packing packing,
                   std::span<std::uint8_t> body) const override {
    std::vector<std::int8_t> t(g.size());
    ternarize(g, rule, key, t);
    std::fill(body.begin(), body.end(), std::uint8_t{0});
    if (packing == Packing::two_bit) {
      for (std::size_t i = 0; i < t.size(); ++i) body[i / 4] |= static_cast<std::uint8_t>(code_2bit(t[i]) << (2 * (i % 4)));
    } else {
      static const unsigned pow3[5] = {1, 3, 9, 27, 81};
      for (std::size_t i = 0; i < t.size(); ++i) body[i / 5] = static_cast<std::uint8_t>(body[i / 5] + digit_base3(t[i]) * pow3[i % 5]);
    }
  }

 protected:
  // The defect hooks: which stream, which word of a block, the uniform of every element (defaults:
  // those of tg/philox.hpp, through the first two hooks), and the per-element rule.
  virtual StreamKey stream_key(const StreamKey& key) const { return key; }
  virtual std::size_t block_word(std::size_t lane) const { return lane; }
  virtual void uniforms(const StreamKey& key, std::span<std::uint32_t> u) const {
    for (std::size_t i = 0; i < u.size(); i += 4) {
      PhiloxBlock b = philox_block(stream_key(key), static_cast<std::uint32_t>(i / 4));
      for (std::size_t l = 0; l < 4 && i + l < u.size(); ++l) u[i + l] = b[static_cast<int>(block_word(l))];
    }
  }
  virtual int element(float g, const ScalarRule& rule, std::uint32_t u) const {
    return ternarize_element(g, rule, u);
  }
};

class MutantCodec : public PerElementCodec {
 public:
  explicit MutantCodec(const std::string& name) : PerElementCodec("mutant:" + name) {}
};

// 1. deterministic rounding: keep iff p > 1/2.
class DeterministicMutant : public MutantCodec {
 public:
  DeterministicMutant() : MutantCodec("deterministic") {}
  int element(float g, const ScalarRule& rule, std::uint32_t) const override {
    return ternarize_element(g, rule, 0x80000000u);  // u = 2^31: keep iff p 2^32 > 2^31
  }
};
// 2. the uniform has 8-bit resolution: P(keep) = ceil(256 p) / 256.
class Uniform8Mutant : public MutantCodec {
 public:
  Uniform8Mutant() : MutantCodec("uniform8") {}
  int element(float g, const ScalarRule& rule, std::uint32_t u) const override {
    return ternarize_element(g, rule, u & 0xff000000u);
  }
};
// 3. no zero level: every nonzero element becomes sign(g) (SignSGD-like, scalar s).
class SignOnlyMutant : public MutantCodec {
 public:
  SignOnlyMutant() : MutantCodec("sign-only") {}
  int element(float g, const ScalarRule&, std::uint32_t) const override { return g > 0.0f ? 1 : (g < 0.0f ? -1 : 0); }
};
// 4. scalar = ||g||_2 instead of ||g||_inf (unbiased, larger variance).
class L2ScalarMutant : public MutantCodec {
 public:
  L2ScalarMutant() : MutantCodec("l2-scalar") {}
  float max_abs(std::span<const float> g, std::uint32_t tensor) const override {
    reference_codec().max_abs(g, tensor);  // same finiteness check
    double s = 0.0;
    for (float x : g) s += static_cast<double>(x) * x;
    return static_cast<float>(std::sqrt(s));
  }
};
// 5. one uniform shared by each block of 4 neighbouring elements (right marginals, correlated).
class SharedUniformMutant : public MutantCodec {
 public:
  SharedUniformMutant() : MutantCodec("shared-uniform") {}
  std::size_t block_word(std::size_t) const override { return 0; }
};
// 6. the same stream at every step (seed reuse).
class StepReuseMutant : public MutantCodec {
 public:
  StepReuseMutant() : MutantCodec("step-reuse") {}
  StreamKey stream_key(const StreamKey& key) const override {
    StreamKey k = key;
    k.step = 0;
    return k;
  }
};
// 7. scalar from the first half of the tensor only: larger magnitudes silently clip to it.
class PartialScalarMutant : public MutantCodec {
 public:
  PartialScalarMutant() : MutantCodec("partial-scalar") {}
  float max_abs(std::span<const float> g, std::uint32_t tensor) const override {
    reference_codec().max_abs(g, tensor);
    return reference_codec().max_abs(g.first((g.size() + 1) / 2), tensor);
  }
};
// 8. sign error: negative entries come out positive.
class SignErrorMutant : public MutantCodec {
 public:
  SignErrorMutant() : MutantCodec("sign-error") {}
  int element(float g, const ScalarRule& rule, std::uint32_t u) const override {
    return ternarize_element(g, rule, u) != 0 ? 1 : 0;
  }
};
// 9. the tensor id truncated to 8 bits in the key: tensors t and t + 256 share a stream.
class TensorTruncationMutant : public MutantCodec {
 public:
  TensorTruncationMutant() : MutantCodec("tensor-truncation") {}
  StreamKey stream_key(const StreamKey& key) const override {
    StreamKey k = key;
    k.tensor = key.tensor & 0xffu;
    return k;
  }
};
// 10. one stream for all steps, advanced by only h ~ d/2 positions per step: the second half of
// step k is the first half of step k + 1 (a counter offset computed from the wrong size).
class StepOverlapMutant : public MutantCodec {
 public:
  StepOverlapMutant() : MutantCodec("step-overlap") {}
  void uniforms(const StreamKey& key, std::span<std::uint32_t> u) const override {
    std::uint64_t h = ((u.size() + 1) / 2 + 3) / 4 * 4;  // a multiple of 4: position P is word P % 4 = i % 4
    StreamKey k0 = key;
    k0.step = 0;
    std::uint64_t base = static_cast<std::uint64_t>(key.step) * h;
    for (std::size_t i = 0; i < u.size(); i += 4) {
      PhiloxBlock b = philox_block(k0, static_cast<std::uint32_t>((base + i) / 4));
      for (std::size_t l = 0; l < 4 && i + l < u.size(); ++l) u[i + l] = b[static_cast<int>(l)];
    }
  }
};
// 11. worker and step added into one counter word: worker w at step k is worker w - 1 at step k + 1.
class AdditiveKeysMutant : public MutantCodec {
 public:
  AdditiveKeysMutant() : MutantCodec("additive-keys") {}
  StreamKey stream_key(const StreamKey& key) const override {
    StreamKey k = key;
    k.step = key.step + key.worker;
    k.worker = 0;
    return k;
  }
};
// 12. a counter per thread block of 1024 elements that restarts at 0: element i uses u_{i mod 1024}.
class BlockCounterMutant : public MutantCodec {
 public:
  BlockCounterMutant() : MutantCodec("block-counter") {}
  void uniforms(const StreamKey& key, std::span<std::uint32_t> u) const override {
    MutantCodec::uniforms(key, u);
    for (std::size_t i = 1024; i < u.size(); ++i) u[i] = u[i % 1024];  // (sources below 1024 are untouched)
  }
};
// 13. the second half of the tensor reuses the first half's uniforms: u_i = u_{i mod h}, h = ceil(d/2).
class HalfShareMutant : public MutantCodec {
 public:
  HalfShareMutant() : MutantCodec("half-share") {}
  void uniforms(const StreamKey& key, std::span<std::uint32_t> u) const override {
    MutantCodec::uniforms(key, u);
    std::size_t h = (u.size() + 1) / 2;
    for (std::size_t i = h; i < u.size(); ++i) u[i] = u[i - h];
  }
};
// 14. "antithetic variates": the odd runs of 64 elements take the complement of the uniforms 64
// before them. Every marginal is still uniform; only the dependence at lag 64 is wrong.
class AntitheticMutant : public MutantCodec {
 public:
  AntitheticMutant() : MutantCodec("antithetic") {}
  void uniforms(const StreamKey& key, std::span<std::uint32_t> u) const override {
    MutantCodec::uniforms(key, u);
    for (std::size_t i = 64; i < u.size(); ++i)
      if ((i / 64) % 2 == 1) u[i] = 0xffffffffu - u[i - 64];  // i - 64 lies in an even run: its own uniform
  }
};
// 17. antithetic variates across the halves: element i + h takes the complement of element i's uniform,
// h = floor(d/2). Every marginal is uniform; the masks at distance d/2 are negatively correlated, and
// on the p = 1/2 probe the second half's mask bits are the complement of the first half's.
class AntitheticHalfMutant : public MutantCodec {
 public:
  AntitheticHalfMutant() : MutantCodec("antithetic-half") {}
  void uniforms(const StreamKey& key, std::span<std::uint32_t> u) const override {
    MutantCodec::uniforms(key, u);
    const std::size_t h = u.size() / 2;
    for (std::size_t i = h; i < 2 * h; ++i) u[i] = 0xffffffffu - u[i - h];
  }
};
// 18. a stride bug: the odd runs of 96 elements reuse the uniforms 96 before them. Right marginals; the
// dependence is at lag 96 only, which no lag row and no block of 64 sees (blocks of 512 at ci, the
// collision scan's runs of >= 72 bits at every profile do).
class Stride96Mutant : public MutantCodec {
 public:
  Stride96Mutant() : MutantCodec("stride-96") {}
  void uniforms(const StreamKey& key, std::span<std::uint32_t> u) const override {
    MutantCodec::uniforms(key, u);
    for (std::size_t i = 96; i < u.size(); ++i)
      if ((i / 96) % 2 == 1) u[i] = u[i - 96];  // i - 96 lies in an even run: its own uniform
  }
};
// 15. the keep probability rounded to a multiple of 1/1024: p < 1/2048 is never kept (biased
// towards zero for small entries, unbiased for p on the grid).
class PGrid1024Mutant : public MutantCodec {
 public:
  PGrid1024Mutant() : MutantCodec("p-grid-1024") {}
  int element(float g, const ScalarRule& rule, std::uint32_t u) const override {
    if (rule.scalar == 0.0f) return 0;
    float a = std::min(abs_float(g), rule.cap);
    double q = std::nearbyint(static_cast<double>(a) / static_cast<double>(rule.scalar) * 1024.0);
    if (!(static_cast<double>(u) < q * 4194304.0)) return 0;  // q / 1024 * 2^32 = q * 2^22
    return g < 0.0f ? -1 : 1;
  }
};
// 16. the clip statistics in float32 the naive way (running sums, squares not rescaled): sigma
// is 0 when the squares underflow (|g| ~ 1e-30) and +inf when they overflow (|g| ~ 1e30), and
// the running sums lose digits on large tensors.
class F32SigmaNaiveMutant : public MutantCodec {
 public:
  F32SigmaNaiveMutant() : MutantCodec("f32-sigma-naive") {}
  Moments moments(std::span<const float> g) const override {
    if (g.empty()) return {};
    float n = static_cast<float>(g.size());
    float sum = 0.0f;
    for (float x : g) sum += x;
    float mean = sum / n;
    float squares = 0.0f;
    for (float x : g) {
      float d = x - mean;
      squares += d * d;
    }
    float sigma = std::sqrt(squares / n);  // float overload: sqrtf
    return {mean, sigma};
  }
};

// The spec's keep probability min(|g|, cap) / s, at most 1, for a nonzero scalar (mutants 19 to 21).
double keep_share(float g, const ScalarRule& rule) {
  return std::min(static_cast<double>(std::min(abs_float(g), rule.cap)) / static_cast<double>(rule.scalar), 1.0);
}

// The trit of g kept with probability q on the spec's uniform u (u < q 2^32), for mutants 20-22.
int keep_at_rate(float g, double q, std::uint32_t u) {
  if (!(static_cast<double>(u) < q * 4294967296.0)) return 0;
  return g < 0.0f ? -1 : 1;
}

// 19. stochastic rounding written as floor(g/s + v) with v = the top 9 bits of the uniform: positives round
// down (keep iff v >= 1 - p: P(keep) = floor(512 p)/512 at most p) and negatives up (keep iff v < p:
// ceil(512 p)/512 at least p), so every coordinate drifts by about -s/1024 while the keep rate, summed with
// the signs, stays right.
class FloorRoundingMutant : public MutantCodec {
 public:
  FloorRoundingMutant() : MutantCodec("floor-rounding") {}
  int element(float g, const ScalarRule& rule, std::uint32_t u) const override {
    if (rule.scalar == 0.0f || g == 0.0f) return 0;
    const double p = keep_share(g, rule);
    const double v = static_cast<double>(u >> 23) / 512.0;
    if (g > 0.0f) return v >= 1.0 - p ? 1 : 0;
    return v < p ? -1 : 0;
  }
};

// 20. a keep rate 1/64 too low for positive entries and 1/64 too high for negative ones (p < 1 only): every
// coordinate drifts by -p s/64, and nothing but the drift rows shows it: the keep rate summed with the signs,
// its bins of p, the variance and the sure keeps are all as the spec's.
class SignDriftMutant : public MutantCodec {
 public:
  SignDriftMutant() : MutantCodec("sign-drift") {}
  int element(float g, const ScalarRule& rule, std::uint32_t u) const override {
    if (rule.scalar == 0.0f || g == 0.0f) return 0;
    const double p = keep_share(g, rule);
    return keep_at_rate(g, p >= 1.0 ? 1.0 : std::min(1.0, p * (g > 0.0f ? 63.0 / 64.0 : 65.0 / 64.0)), u);
  }
};

// 21. a keep-rate error that depends on the sign and on p, and cancels in every total: where p is in
// [2^-12, 2^-11), positive entries are kept at 2p and negative ones never (elsewhere at p). The two signs
// cancel in the keep rate summed with the signs and in its bins; the drift, summed over every p, is about
// 1e-4 s per coordinate at most (pladder's; below the drift rows' power); each coordinate's error, p < 2^-11,
// is below the per-coordinate test's. Only the bins of p taken with the sign (drift-by-p) see it.
class SignByPMutant : public MutantCodec {
 public:
  SignByPMutant() : MutantCodec("sign-by-p") {}
  int element(float g, const ScalarRule& rule, std::uint32_t u) const override {
    if (rule.scalar == 0.0f || g == 0.0f) return 0;
    const double p = keep_share(g, rule);
    const bool band = p >= 0x1p-12 && p < 0x1p-11;
    return keep_at_rate(g, band ? (g > 0.0f ? 2.0 * p : 0.0) : p, u);
  }
};

// 22. a keep-rate error that changes sign along p and cancels in every total and bin: where p is in
// [2^-12, 9 2^-15) entries are kept at 8p, where it is in [9 2^-15, 2^-11) never (elsewhere at p), as a
// piecewise approximation of the keep rate might be wrong on two neighbouring pieces. On pladder, whose p
// is log-uniform in [2^-12, 2^-11), the two pieces' errors are equal and opposite, 7/8 of the band's keeps
// each; the error does not depend on the sign, so the drift rows see nothing either, and each coordinate's
// error, below 2^-11 x 7/8, is below the per-coordinate test's power. Only the partial sums in p order
// inside the band's bin see it, at p = 9 2^-15.
class PWaveMutant : public MutantCodec {
 public:
  PWaveMutant() : MutantCodec("p-wave") {}
  int element(float g, const ScalarRule& rule, std::uint32_t u) const override {
    if (rule.scalar == 0.0f || g == 0.0f) return 0;
    const double p = keep_share(g, rule);
    if (p >= 0x1p-12 && p < 9 * 0x1p-15) return keep_at_rate(g, 8.0 * p, u);
    if (p >= 9 * 0x1p-15 && p < 0x1p-11) return 0;
    return keep_at_rate(g, p, u);
  }
};
// 23. the uniform has 16-bit resolution: P(keep) = ceil(65536 p) / 65536. Above p = 2^-12 that is a relative
// excess of at most 2^-4, which the bins of p see only at ci and full (the bin p < 2^-18, where every p is kept at
// 2^-16); every near drop (p < 2^-26) is kept at 2^-16, far above the float32 allowance, and at quick the row
// near-drops is what sees it (about 16 keeps where 8 fail).
class Uniform16Mutant : public MutantCodec {
 public:
  Uniform16Mutant() : MutantCodec("uniform16") {}
  int element(float g, const ScalarRule& rule, std::uint32_t u) const override {
    return ternarize_element(g, rule, u & 0xffff0000u);
  }
};

// 24. the clip bound from the sample standard deviation, squares summed over n - 1 (torch.std()'s default,
// numpy's std(ddof=1)): c sigma is sqrt(n / (n - 1)) too large, a relative 1/(2n). That is outside the float32
// window (clip_bound_ulps) on every tensor the families draw at quick; on the tails row's two-element tensors
// the bound passes max|g| and the scalar is max|g|. Only the scalar changes: the keep rule is the spec's.
// The structure rows under clipping fail and name the sample standard deviation; the fresh-gradient row
// (state between calls) passes, as it should: the codec keeps none.
class SampleSigmaMutant : public MutantCodec {
 public:
  SampleSigmaMutant() : MutantCodec("sample-sigma") {}
  Moments moments(std::span<const float> g) const override {
    Moments m = reference_codec().moments(g);
    const double n = static_cast<double>(g.size());
    if (g.size() > 1) m.sigma *= std::sqrt(n / (n - 1.0));
    return m;
  }
};

// 25. the keep rule u <= p (u <= |x| 2^32 / s) instead of u < p: the same decision but where the word equals
// the threshold, which for g = 0 is the word 0 (once in 2^32 element-draws): an element of g = 0 is kept, as +s.
// The row structure/extreme uniforms plants g = 0 where the spec's stream has the word 0.
class KeepLeMutant : public MutantCodec {
 public:
  KeepLeMutant() : MutantCodec("keep-le") {}
  int element(float g, const ScalarRule& rule, std::uint32_t u) const override {
    const float a = std::min(std::fabs(g), rule.cap);
    return static_cast<double>(u) <= static_cast<double>(a) * rule.scale ? (g < 0.0f ? -1 : 1) : 0;
  }
};

// 26. stochastic rounding floor(p + u) in float32 with a 24-bit uniform (torch.floor(x + torch.rand_like(x))):
// it keeps iff u >= 1 - p, with the right probability but not the spec's decision (cross sees the bytes), and
// where p = 1 and u = 1 - 2^-24, p + u rounds to 2 and the output is 2s (once in 2^24 draws of an element of
// p = 1). The row structure/extreme uniforms plants the maximum where the spec's word is 0xffffff3b.
class F32FloorMutant : public MutantCodec {
 public:
  F32FloorMutant() : MutantCodec("f32-floor") {}
  int element(float g, const ScalarRule& rule, std::uint32_t u) const override {
    if (!(rule.scalar > 0.0f)) return 0;
    const float x = std::min(std::fabs(g), rule.cap) / rule.scalar;
    const float uf = static_cast<float>(u >> 8) * 0x1p-24f;
    const float sum = x + uf;  // rounded to float32
    const int t = static_cast<int>(std::floor(sum));
    return g < 0.0f ? -t : t;
  }
};

// 27. a 2-bit packing that drops the partial last byte: the last d mod 4 elements are never kept (their codes
// are not written, and a decoder reads them as 0). Every other element is the spec's.
class PackTailMutant : public MutantCodec {
 public:
  PackTailMutant() : MutantCodec("pack-tail") {}
  void ternarize(std::span<const float> g, const ScalarRule& rule, const StreamKey& key,
                 std::span<std::int8_t> trits) const override {
    MutantCodec::ternarize(g, rule, key, trits);
    for (std::size_t i = g.size() - g.size() % 4; i < g.size(); ++i) trits[i] = 0;
  }
};

// ---- correct variants --------------------------------------------------------------------------
// Implementations that differ from the reference where the specification allows it and must pass
// the battery. Everything but the difference is forwarded to the reference codec.

class VariantCodec : public ForwardingCodec {
 public:
  explicit VariantCodec(const std::string& name) : ForwardingCodec("variant:" + name) {}
};

// Pairwise float32 sum of term(begin .. begin + n - 1), NumPy's order: leaves of at most 128
// terms summed in 8 interleaved accumulators, halves (cut at a multiple of 8) added recursively.
// The error grows like log2(n) ulps, not n as a running sum's does.
template <typename Term>
float pairwise_sum_f32(std::size_t begin, std::size_t n, const Term& term) {
  if (n < 8) {
    float s = 0.0f;
    for (std::size_t k = 0; k < n; ++k) s += term(begin + k);
    return s;
  }
  if (n <= 128) {
    float r[8];
    for (std::size_t j = 0; j < 8; ++j) r[j] = term(begin + j);
    std::size_t k = 8;
    for (; k + 8 <= n; k += 8)
      for (std::size_t j = 0; j < 8; ++j) r[j] += term(begin + k + j);
    float s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; k < n; ++k) s += term(begin + k);
    return s;
  }
  std::size_t half = n / 2;
  half -= half % 8;
  return pairwise_sum_f32(begin, half, term) + pairwise_sum_f32(begin + half, n - half, term);
}

// sigma in float32 as a careful framework computes it: pairwise sums, and the deviations divided
// by their largest magnitude m before squaring, so that the squares lie in [0, 1] and neither
// underflow (|g| ~ 1e-30) nor overflow (|g| ~ 1e30); sigma = m sqrt(sum / n).
class F32SigmaVariant : public VariantCodec {
 public:
  F32SigmaVariant() : VariantCodec("f32-sigma") {}
  Moments moments(std::span<const float> g) const override {
    if (g.empty()) return {};
    float n = static_cast<float>(g.size());
    float mean = pairwise_sum_f32(0, g.size(), [&](std::size_t k) { return g[k]; }) / n;
    float m = 0.0f;
    for (float x : g) m = std::max(m, std::fabs(x - mean));
    if (m == 0.0f) return {mean, 0.0};
    float squares = pairwise_sum_f32(0, g.size(), [&](std::size_t k) {
      float d = (g[k] - mean) / m;
      return d * d;
    });
    float sigma = m * std::sqrt(squares / n);  // float overload: sqrtf
    return {mean, sigma};
  }
};

// sigma in float32 as a GPU framework's var/std reduction computes it: 512 threads each run Welford's update
// (count, mean, M2 in float32) over the elements k = t, t + 512, ..., and the threads' results are merged
// pairwise in a tree (Chan's formula, float32). The data are first scaled by a power of two that brings
// max|g| into [1, 2), which is exact and keeps the squares from underflowing or overflowing; sigma =
// sqrt(M2 / n), scaled back. The running means' rounding enters the deviations to first order, so where
// |mean| is large against sigma the result lies either side of the spec's (docs/statistics.md).
class F32WelfordVariant : public VariantCodec {
 public:
  F32WelfordVariant() : VariantCodec("f32-welford") {}
  Moments moments(std::span<const float> g) const override {
    if (g.empty()) return {};
    float top = 0.0f;
    for (float x : g) top = std::max(top, std::fabs(x));
    if (top == 0.0f) return {0.0, 0.0};
    const int e = std::ilogb(top);
    struct W {
      float n = 0.0f, mean = 0.0f, m2 = 0.0f;
    };
    constexpr std::size_t kThreads = 512;
    std::vector<W> w(std::min(kThreads, g.size()));
    for (std::size_t t = 0; t < w.size(); ++t)
      for (std::size_t k = t; k < g.size(); k += w.size()) {
        const float x = std::ldexp(g[k], -e);
        W& a = w[t];
        a.n += 1.0f;
        const float delta = x - a.mean;
        a.mean += delta / a.n;
        a.m2 += delta * (x - a.mean);
      }
    for (std::size_t step = 1; step < w.size(); step *= 2)
      for (std::size_t t = 0; t + step < w.size(); t += 2 * step) {
        W& a = w[t];
        const W& b = w[t + step];
        const float n = a.n + b.n, delta = b.mean - a.mean;
        a.mean += delta * (b.n / n);
        a.m2 += b.m2 + delta * delta * (a.n * b.n / n);
        a.n = n;
      }
    const float sigma = std::sqrt(w[0].m2 / w[0].n);  // float overload: sqrtf
    return {std::ldexp(static_cast<double>(w[0].mean), e), std::ldexp(static_cast<double>(sigma), e)};
  }
};

// p = |x| * (1/s) in float32 (the GPU idiom g.abs() * (1 / s)) against a float32 uniform: every p and decision
// within float32 rounding of the spec's. Where 1/s overflows (a subnormal scalar) it divides instead, as a
// careful codec must. Two uniforms:
// - f32-p: 24 bits, (u >> 8) 2^-24, as torch.rand draws them. s (1/s) rounds to 1 - 2^-24 for about 15% of
//   scalars, so the maximum (and every clipped element) is left out with probability 2^-24 per draw: what the
//   battery's sure-keeps allowance is for.
// - f32-u23: 23 bits in the mantissa form, the bits 0x3F800000 | (u >> 9) read as a float in [1, 2), less 1,
//   which is (u >> 9) 2^-23 exactly (a framework idiom for float32 uniforms). Its grid step 2^-23 is the
//   coarsest of a correct float32 codec: it keeps every p below 2^-23 when the uniform is 0, with probability
//   2^-23 per draw, the near-drops allowance (kNearDropKeep).
class F32PVariant : public PerElementCodec {
 public:
  F32PVariant(const std::string& name, bool mantissa23) : PerElementCodec(name), mantissa23_(mantissa23) {}
  int element(float g, const ScalarRule& rule, std::uint32_t u) const override {
    if (!(rule.scalar > 0.0f)) return 0;
    const float a = std::min(std::fabs(g), rule.cap);
    const float inv = 1.0f / rule.scalar;
    const float p = std::isfinite(inv) ? a * inv : a / rule.scalar;
    const float uf = mantissa23_ ? std::bit_cast<float>(0x3F800000u | (u >> 9)) - 1.0f
                                 : static_cast<float>(u >> 8) * 0x1p-24f;
    return uf < p ? (g > 0.0f ? 1 : (g < 0.0f ? -1 : 0)) : 0;
  }

 private:
  bool mantissa23_;
};

}  // namespace

std::string gradient_range_note(std::span<const float> g) {
  float lo = std::numeric_limits<float>::infinity(), hi = 0.0f;
  for (float x : g)
    if (x != 0.0f) lo = std::min(lo, std::fabs(x)), hi = std::max(hi, std::fabs(x));
  char range[96];
  if (hi > 0.0f)
    std::snprintf(range, sizeof range, "nonzero |g| from %.3g to %.3g", static_cast<double>(lo), static_cast<double>(hi));
  else
    std::snprintf(range, sizeof range, "every g = 0");
  return "the request's gradient: " + std::to_string(g.size()) + " elements, " + range;
}

Draws draws_from_values(std::span<const float> values, std::size_t d, std::uint32_t steps,
                        std::optional<float> requested, const std::string& what) {
  if (values.size() != static_cast<std::size_t>(steps) * d)
    throw Error(ErrorCode::invalid_argument, what + " has " + std::to_string(values.size()) + " values, expected " +
                                                 std::to_string(steps) + " x " + std::to_string(d));
  char a[32], b[32];
  Draws out;
  out.d = d;
  out.steps = steps;
  out.scalars.assign(steps, 0.0f);
  out.trits.resize(values.size());
  for (std::uint32_t j = 0; j < steps; ++j) {
    const float* v = values.data() + static_cast<std::size_t>(j) * d;
    float s = 0.0f;
    std::size_t at = 0;  // the first element of the largest magnitude
    for (std::size_t k = 0; k < d; ++k) {
      if (!std::isfinite(v[k]))
        throw Error(ErrorCode::invalid_argument, what + " row " + std::to_string(j) + " element " + std::to_string(k) +
                                                     " is not finite (" +
                                                     non_finite_name(v[k]) + ")");
      if (std::fabs(v[k]) > s) s = std::fabs(v[k]), at = k;
    }
    // A row with no nonzero output carries no scalar; under a shared scalar that is legitimate
    // (every |g| small against s), so the row's scalar is the one requested.
    if (s == 0.0f && requested) s = *requested;
    out.scalars[j] = s;
    for (std::size_t k = 0; k < d; ++k) {
      float x = v[k];
      if (x != 0.0f && std::fabs(x) != s && out.defect.empty()) {
        std::snprintf(a, sizeof a, "%.9g", static_cast<double>(x));
        std::snprintf(b, sizeof b, "%.9g", static_cast<double>(s));
        out.defect = "row " + std::to_string(j) + " element " + std::to_string(k) + " is " + a +
                     ", not in {-s, 0, +s} with s = " + b + " (the row's largest magnitude, at element " +
                     std::to_string(at) + ")";
        // a trit of +-2 next to +-1 (floor(p + u) rounded up to 2 in float32, for one)
        if (s == 2.0f * std::fabs(x))
          out.defect += std::string(": the largest is twice ") + (a[0] == '-' ? a + 1 : a) + ", a trit of 2?";
      }
      out.trits[static_cast<std::size_t>(j) * d + k] = static_cast<std::int8_t>(x > 0.0f ? 1 : (x < 0.0f ? -1 : 0));
    }
  }
  return out;
}

std::unique_ptr<Sampler> make_codec_sampler(std::shared_ptr<const Codec> codec, std::string name) {
  return std::make_unique<CodecSampler>(std::move(codec), std::move(name));
}

const std::vector<MutantInfo>& mutant_list() {
  static const std::vector<MutantInfo> list = {
      {"deterministic", "deterministic rounding: keep iff p > 1/2"},
      {"uniform8", "uniform with 8-bit resolution: P(keep) = ceil(256 p)/256"},
      {"sign-only", "no zero level: sign(g) * s everywhere (SignSGD-like)"},
      {"l2-scalar", "scalar ||g||_2 instead of ||g||_inf (unbiased, wrong variance)"},
      {"shared-uniform", "one uniform per block of 4 neighbours (right marginals, correlated)"},
      {"step-reuse", "the same stream at every step (seed reuse)"},
      {"partial-scalar", "scalar from the first half of the tensor only (clips silently)"},
      {"sign-error", "negative entries come out positive"},
      {"tensor-truncation", "tensor id truncated to 8 bits in the key: tensors 0 and 256 share a stream"},
      {"step-overlap", "one stream advanced by ~d/2 per step: consecutive steps overlap by half a tensor"},
      {"additive-keys", "key step + worker: worker w at step k equals worker w-1 at step k+1"},
      {"block-counter", "counter restarts every 1024 elements: element i uses the uniform of i % 1024"},
      {"half-share", "element i >= h = ceil(d/2) reuses the uniform of element i - h"},
      {"antithetic", "odd runs of 64 elements use 1 - u of the run before (negative lag-64 correlation)"},
      {"p-grid-1024", "keep probability rounded to a multiple of 1/1024: p < 1/2048 never kept"},
      {"f32-sigma-naive", "clip sigma from float32 running sums: 0 on 1e-30 data, inf on 1e30 data"},
      {"antithetic-half", "element i + floor(d/2) uses 1 - u of element i (negative correlation at lag d/2)"},
      {"stride-96", "odd runs of 96 elements reuse the uniforms of the run before (a stride bug at lag 96)"},
      {"floor-rounding", "floor(g/s + v), v a 9-bit uniform: positives round down, negatives up (drift -s/1024)"},
      {"sign-drift", "keep rate (1 - 1/64) p for positive entries, (1 + 1/64) p for negative ones (drift -p s/64)"},
      {"sign-by-p", "for p in [2^-12, 2^-11): keep rate 2p for positive entries, 0 for negative ones"},
      {"p-wave", "keep rate 8p for p in [2^-12, 9 2^-15), 0 for p in [9 2^-15, 2^-11): cancels in every bin of p"},
      {"uniform16", "uniform with 16-bit resolution: P(keep) = ceil(65536 p)/65536 (every p < 2^-16 kept at 2^-16)"},
      {"sample-sigma", "clip sigma over n - 1 (torch.std()'s default): the clip bound sqrt(n/(n-1)) too large"},
      {"keep-le", "keep iff u <= p instead of u < p: an element of g = 0 is kept where its uniform is 0"},
      {"f32-floor", "floor(p + u) in float32, 24-bit u: keeps iff u >= 1 - p, and outputs 2s where p = 1, u = 1 - 2^-24"},
      {"pack-tail", "2-bit packing that drops the partial last byte: the last d mod 4 elements never kept"},
  };
  return list;
}

const std::vector<MutantInfo>& variant_list() {
  static const std::vector<MutantInfo> list = {
      {"f32-sigma", "clip sigma in float32: pairwise sums of ((g - mean)/max|g - mean|)^2 (PyTorch-like)"},
      {"f32-p", "keep iff (u >> 8) 2^-24 < |x| * (1/s) in float32 (24-bit uniforms, GPU-style p)"},
      {"f32-welford", "clip sigma in float32 by Welford updates over 512 strided threads, merged in a tree (GPU var/std)"},
      {"f32-u23", "keep iff (1.m - 1) < |x| * (1/s) in float32, m = u >> 9 (23-bit uniforms, the mantissa form)"},
  };
  return list;
}

std::shared_ptr<const Codec> make_mutant_codec(const std::string& name) {
  if (name == "deterministic") return std::make_shared<DeterministicMutant>();
  if (name == "uniform8") return std::make_shared<Uniform8Mutant>();
  if (name == "sign-only") return std::make_shared<SignOnlyMutant>();
  if (name == "l2-scalar") return std::make_shared<L2ScalarMutant>();
  if (name == "shared-uniform") return std::make_shared<SharedUniformMutant>();
  if (name == "step-reuse") return std::make_shared<StepReuseMutant>();
  if (name == "partial-scalar") return std::make_shared<PartialScalarMutant>();
  if (name == "sign-error") return std::make_shared<SignErrorMutant>();
  if (name == "tensor-truncation") return std::make_shared<TensorTruncationMutant>();
  if (name == "step-overlap") return std::make_shared<StepOverlapMutant>();
  if (name == "additive-keys") return std::make_shared<AdditiveKeysMutant>();
  if (name == "block-counter") return std::make_shared<BlockCounterMutant>();
  if (name == "half-share") return std::make_shared<HalfShareMutant>();
  if (name == "antithetic") return std::make_shared<AntitheticMutant>();
  if (name == "p-grid-1024") return std::make_shared<PGrid1024Mutant>();
  if (name == "f32-sigma-naive") return std::make_shared<F32SigmaNaiveMutant>();
  if (name == "antithetic-half") return std::make_shared<AntitheticHalfMutant>();
  if (name == "stride-96") return std::make_shared<Stride96Mutant>();
  if (name == "floor-rounding") return std::make_shared<FloorRoundingMutant>();
  if (name == "sign-drift") return std::make_shared<SignDriftMutant>();
  if (name == "sign-by-p") return std::make_shared<SignByPMutant>();
  if (name == "p-wave") return std::make_shared<PWaveMutant>();
  if (name == "uniform16") return std::make_shared<Uniform16Mutant>();
  if (name == "sample-sigma") return std::make_shared<SampleSigmaMutant>();
  if (name == "keep-le") return std::make_shared<KeepLeMutant>();
  if (name == "f32-floor") return std::make_shared<F32FloorMutant>();
  if (name == "pack-tail") return std::make_shared<PackTailMutant>();
  std::string known;
  for (const auto& m : mutant_list()) known += (known.empty() ? "" : ", ") + std::string(m.name);
  throw Error(ErrorCode::invalid_argument, "unknown mutant '" + name + "' (known: " + known + ")");
}

std::shared_ptr<const Codec> make_variant_codec(const std::string& name) {
  if (name == "f32-sigma") return std::make_shared<F32SigmaVariant>();
  if (name == "f32-p") return std::make_shared<F32PVariant>("variant:f32-p", false);
  if (name == "f32-welford") return std::make_shared<F32WelfordVariant>();
  if (name == "f32-u23") return std::make_shared<F32PVariant>("variant:f32-u23", true);
  std::string known;
  for (const auto& v : variant_list()) known += (known.empty() ? "" : ", ") + std::string(v.name);
  throw Error(ErrorCode::invalid_argument, "unknown variant '" + name + "' (known: " + known + ")");
}

bool cuda_usable(std::string* why) {
#ifdef TG_HAVE_CUDA
  std::string reason;
  bool ok = tg::cuda::device_available(&reason);
  if (!ok && why) *why = "no usable CUDA device: " + reason;
  return ok;
#else
  if (why) *why = "this build has no CUDA codec (configure with TG_ENABLE_CUDA=ON on a machine with nvcc)";
  return false;
#endif
}

std::unique_ptr<Sampler> make_sampler(const std::string& impl, const ExecOptions& options, const std::string& argument) {
  if (impl == "reference" || impl.rfind("optimized", 0) == 0) return make_codec_sampler(make_codec(impl), impl);
  if (impl == "cuda") {
    std::string why;
    if (!cuda_usable(&why)) throw Unavailable(argument + " cuda: " + why);
#ifdef TG_HAVE_CUDA
    return make_codec_sampler(std::shared_ptr<const Codec>(tg::cuda::make_codec()), "cuda");
#endif
  }
  if (impl.rfind("exec:", 0) == 0) {
    std::string cmd = impl.substr(5);
    if (cmd.find_first_not_of(" \t") == std::string::npos)
      throw Error(ErrorCode::invalid_argument, argument + " exec: needs a command, e.g. exec:'python3 mycodec.py'");
    return make_exec_sampler(cmd, options);
  }
  if (impl.rfind("serve:", 0) == 0) {
    std::string cmd = impl.substr(6);
    if (cmd.find_first_not_of(" \t") == std::string::npos)
      throw Error(ErrorCode::invalid_argument, argument + " serve: needs a command, e.g. serve:'python3 mycodec.py'");
    return make_serve_sampler(cmd, options);
  }
  if (impl.rfind("mutant:", 0) == 0) {
    std::string name = impl.substr(7);
    return make_codec_sampler(make_mutant_codec(name), "mutant:" + name);
  }
  if (impl.rfind("variant:", 0) == 0) {
    std::string name = impl.substr(8);
    return make_codec_sampler(make_variant_codec(name), "variant:" + name);
  }
  throw Error(ErrorCode::invalid_argument, "unknown " + argument + " '" + impl +
                                               "' (expected reference, optimized, optimized-<isa>[-t<N>], cuda, exec:CMD, serve:CMD, mutant:NAME or variant:NAME)");
}

}  // namespace tg::verify
