// terngrad-bench: battery samplers: tg::Codec-backed (reference, optimized, CUDA, mutants), the
// eight mutants of STATISTICS.md, and the --impl parser. The external-program sampler is exec.cpp.
#include "tg/verify/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
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
// through make_mutant_codec; the battery must reject every one (verify --self-test).

class MutantCodec : public Codec {
 public:
  explicit MutantCodec(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return "mutant:" + name_; }
  float max_abs(std::span<const float> g, std::uint32_t tensor) const override {
    return reference_codec().max_abs(g, tensor);
  }
  Moments moments(std::span<const float> g) const override { return reference_codec().moments(g); }
  void ternarize(std::span<const float> g, const ScalarRule& rule, const StreamKey& key,
                 std::span<std::int8_t> trits) const override {
    for (std::size_t i = 0; i < g.size(); i += 4) {
      PhiloxBlock b = philox_block(stream_key(key), static_cast<std::uint32_t>(i / 4));
      for (std::size_t l = 0; l < 4 && i + l < g.size(); ++l)
        trits[i + l] = static_cast<std::int8_t>(element(g[i + l], rule, b[static_cast<int>(block_word(l))]));
    }
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
  void unpack(Packing packing, std::span<const std::uint8_t> body, std::span<std::int8_t> trits) const override {
    reference_codec().unpack(packing, body, trits);
  }
  void decode_body(Packing packing, std::span<const std::uint8_t> body, float scalar,
                   std::span<float> out) const override {
    reference_codec().decode_body(packing, body, scalar, out);
  }

 protected:
  virtual StreamKey stream_key(const StreamKey& key) const { return key; }
  virtual std::size_t block_word(std::size_t lane) const { return lane; }
  virtual int element(float g, const ScalarRule& rule, std::uint32_t u) const {
    return ternarize_element(g, rule, u);
  }

 private:
  std::string name_;
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

}  // namespace

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
    for (std::size_t k = 0; k < d; ++k) {
      if (!std::isfinite(v[k]))
        throw Error(ErrorCode::invalid_argument,
                    what + " row " + std::to_string(j) + " element " + std::to_string(k) + " is not finite");
      s = std::max(s, std::fabs(v[k]));
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
                     ", not in {-s, 0, +s} with s = " + b;
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
  std::string known;
  for (const auto& m : mutant_list()) known += (known.empty() ? "" : ", ") + std::string(m.name);
  throw Error(ErrorCode::invalid_argument, "unknown mutant '" + name + "' (known: " + known + ")");
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

std::unique_ptr<Sampler> make_sampler(const std::string& impl, const ExecOptions& options) {
  if (impl == "reference") {
    return make_codec_sampler(std::shared_ptr<const Codec>(&reference_codec(), [](const Codec*) {}), "reference");
  }
  if (impl == "optimized") return make_codec_sampler(make_optimized_codec(), "optimized");
  if (impl == "cuda") {
    std::string why;
    if (!cuda_usable(&why)) throw Unavailable("--impl cuda: " + why);
#ifdef TG_HAVE_CUDA
    return make_codec_sampler(std::shared_ptr<const Codec>(tg::cuda::make_codec()), "cuda");
#endif
  }
  if (impl.rfind("exec:", 0) == 0) {
    std::string cmd = impl.substr(5);
    if (cmd.find_first_not_of(" \t") == std::string::npos)
      throw Error(ErrorCode::invalid_argument, "--impl exec: needs a command, e.g. exec:'python3 mycodec.py'");
    return make_exec_sampler(cmd, options);
  }
  if (impl.rfind("mutant:", 0) == 0) {
    std::string name = impl.substr(7);
    return make_codec_sampler(make_mutant_codec(name), "mutant:" + name);
  }
  throw Error(ErrorCode::invalid_argument,
              "unknown --impl '" + impl + "' (expected reference, optimized, cuda, exec:CMD or mutant:NAME)");
}

}  // namespace tg::verify
