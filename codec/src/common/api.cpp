// terngrad-bench: payload-level operations, written once on top of any tg::Codec implementation.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "tg/codec.hpp"

namespace tg {

const char* to_string(ClipMode mode) {
  switch (mode) {
    case ClipMode::none: return "none";
    case ClipMode::clip: return "clip";
    case ClipMode::saturate: return "saturate";
  }
  return "unknown";
}

ClipMode parse_clip_mode(const char* text) {
  std::string s = text ? text : "";
  if (s == "none") return ClipMode::none;
  if (s == "clip") return ClipMode::clip;
  if (s == "saturate") return ClipMode::saturate;
  throw Error(ErrorCode::invalid_argument,
              "unknown clipping mode '" + s + "' (expected none, clip or saturate)");
}

void validate(const Params& params) {
  if (!(params.c >= kMinClipFactor && params.c <= kMaxClipFactor)) {  // NaN too
    char shown[96];  // %g: std::to_string printed a tiny c (1e-320) as 0.000000
    std::snprintf(shown, sizeof shown, "clip factor c must be in [%g, %g], got %.6g", kMinClipFactor, kMaxClipFactor,
                  params.c);
    throw Error(ErrorCode::invalid_argument, shown);
  }
  if (params.packing != Packing::two_bit && params.packing != Packing::base3)
    throw Error(ErrorCode::invalid_argument, std::string("packing must be 2bit or base3, got ") +
                                                 to_string(params.packing));
  if (static_cast<int>(params.clip) > 2)
    throw Error(ErrorCode::invalid_argument, "unknown clipping mode");
}

namespace {
void check_size(std::uint64_t n) {
  if (n > kMaxElements)
    throw Error(ErrorCode::length_overflow, "tensor of " + std::to_string(n) +
                                                " elements exceeds the maximum of 2^34");
}

// clip bound for a tensor already known to be finite
float clip_bound_checked(const Codec& codec, std::span<const float> g, const Params& params) {
  if (params.clip == ClipMode::none) return std::numeric_limits<float>::infinity();
  Moments m = codec.moments(g);
  return static_cast<float>(params.c * m.sigma);  // rounds to nearest; +inf past FLT_MAX
}
}  // namespace

ClipStats Codec::clip_stats(std::span<const float> g, const Params& params, std::uint32_t tensor) const {
  ClipStats st;
  st.max_abs = max_abs(g, tensor);
  st.bound = clip_bound_checked(*this, g, params);
  return st;
}

float clip_bound(const Codec& codec, std::span<const float> g, const Params& params) {
  validate(params);
  check_size(g.size());
  return codec.clip_stats(g, params, 0).bound;
}

TensorStats tensor_stats(const Codec& codec, std::span<const float> g, const Params& params,
                         std::uint32_t tensor) {
  validate(params);
  check_size(g.size());
  ClipStats st = codec.clip_stats(g, params, tensor);
  TensorStats t;
  t.count = g.size();
  t.clip = params.clip;
  t.c = params.c;
  t.max_abs = st.max_abs;
  t.bound = st.bound;
  t.scalar = std::min(st.max_abs, st.bound);  // clip: max|clamp(g)|; saturate: min(c sigma, max|g|)
  return t;
}

ScalarRule own_rule(const Codec& codec, std::span<const float> g, const Params& params,
                    std::uint32_t tensor) {
  float s = tensor_stats(codec, g, params, tensor).scalar;
  return make_rule(s, s);
}

float tensor_scalar(const Codec& codec, std::span<const float> g, const Params& params,
                    std::uint32_t tensor) {
  return own_rule(codec, g, params, tensor).scalar;
}

float shared_scalar(std::span<const float> worker_scalars) {
  float s = 0.0f;
  for (float v : worker_scalars) {
    if (!std::isfinite(v) || v < 0.0f)
      throw Error(ErrorCode::invalid_argument, "worker scalar " + std::to_string(v) +
                                                   " is not a finite nonnegative number");
    s = std::max(s, v);
  }
  return s;
}

float ternarize(const Codec& codec, std::span<const float> g, const Params& params,
                const StreamKey& key, std::span<std::int8_t> trits) {
  if (trits.size() != g.size())
    throw Error(ErrorCode::invalid_argument, "trit buffer has " + std::to_string(trits.size()) +
                                                 " elements, gradient has " + std::to_string(g.size()));
  ScalarRule rule = own_rule(codec, g, params, key.tensor);
  codec.ternarize(g, rule, key, trits);
  return rule.scalar;
}

namespace {
// Sizes `out` for a payload of `bytes` bytes: a buffer of that size already is overwritten, not cleared.
std::span<std::uint8_t> size_payload(std::vector<std::uint8_t>& out, std::uint64_t bytes) {
  out.resize(static_cast<std::size_t>(bytes));
  return {out.data() + kHeaderBytes, out.size() - kHeaderBytes};
}

void encode_float(std::span<const float> g, std::uint32_t tensor, std::vector<std::uint8_t>& out) {
  std::span<std::uint8_t> body = size_payload(out, kHeaderBytes + 4 * std::uint64_t{g.size()});
  for (std::size_t k = 0; k < g.size(); ++k) {
    std::uint32_t bits;
    std::memcpy(&bits, &g[k], 4);
    for (int b = 0; b < 4; ++b) body[4 * k + b] = static_cast<std::uint8_t>(bits >> (8 * b));
  }
  Header h{Packing::float32, g.size(), 0.0f, tensor, crc32c(body)};
  write_header(h, out);
}

// Header + body of one ternary tensor: write_body(body) writes the body and returns its rule.
template <typename WriteBody>
void encode_ternary(const Codec& codec, std::size_t n, const Params& params, std::uint32_t tensor,
                    std::vector<std::uint8_t>& out, WriteBody write_body) {
  std::span<std::uint8_t> body = size_payload(out, kHeaderBytes + body_bytes(params.packing, n));
  ScalarRule rule = write_body(body);
  Header h{params.packing, n, rule.scalar, tensor, codec.checksum(body)};
  write_header(h, out);
}

bool travels_as_float(const Params& params, std::size_t n) { return n < params.float_below; }

void check_shared_scalar(float scalar) {
  if (!std::isfinite(scalar) || scalar < 0.0f)
    throw Error(ErrorCode::invalid_argument,
                "shared scalar " + std::to_string(scalar) + " is not a finite nonnegative number");
}

// Runs an encode into `out`; on any error `out` is left empty, so no half-written payload survives.
template <typename Fn>
void into(std::vector<std::uint8_t>& out, Fn fn) {
  try {
    fn();
  } catch (...) {
    out.clear();
    throw;
  }
}

template <typename Fn>
std::vector<std::uint8_t> fresh(Fn fn) {
  std::vector<std::uint8_t> out;
  fn(out);
  return out;
}

// encode_into (shared_scalar null) and encode_with_scalar_into (the given scalar).
void encode_checked(const Codec& codec, std::span<const float> g, const Params& params, const StreamKey& key,
                    const float* shared_scalar, std::vector<std::uint8_t>& out) {
  into(out, [&] {
    validate(params);
    if (shared_scalar) check_shared_scalar(*shared_scalar);
    check_size(g.size());
    if (travels_as_float(params, g.size())) {
      codec.max_abs(g, key.tensor);  // same finiteness rule for float tensors
      encode_float(g, key.tensor, out);
      return;
    }
    encode_ternary(codec, g.size(), params, key.tensor, out, [&](std::span<std::uint8_t> body) {
      return codec.encode_tensor(g, params, key, shared_scalar, body);
    });
  });
}
}  // namespace

void encode_into(const Codec& codec, std::span<const float> g, const Params& params, const StreamKey& key,
                 std::vector<std::uint8_t>& out) {
  encode_checked(codec, g, params, key, nullptr, out);
}

void encode_with_scalar_into(const Codec& codec, std::span<const float> g, const Params& params,
                             const StreamKey& key, float scalar, std::vector<std::uint8_t>& out) {
  encode_checked(codec, g, params, key, &scalar, out);
}

void encode_with_scalar_into(const Codec& codec, std::span<const float> g, const Params& params,
                             const StreamKey& key, float scalar, const TensorStats& own,
                             std::vector<std::uint8_t>& out) {
  into(out, [&] {
    validate(params);
    check_shared_scalar(scalar);
    check_size(g.size());
    if (own.count != g.size() || own.clip != params.clip || (params.clip != ClipMode::none && own.c != params.c))
      throw Error(ErrorCode::invalid_argument,
                  "tensor statistics of " + std::to_string(own.count) + " elements (clip " + to_string(own.clip) +
                      ", c " + std::to_string(own.c) + ") do not describe this tensor of " +
                      std::to_string(g.size()) + " elements (clip " + to_string(params.clip) + ", c " +
                      std::to_string(params.c) + "): compute them with tensor_stats on the same tensor and parameters");
    if (travels_as_float(params, g.size())) {  // finite: tensor_stats checked
      encode_float(g, key.tensor, out);
      return;
    }
    // The rule of Codec::encode_tensor with a shared scalar: the given scalar, this worker's own bound.
    encode_ternary(codec, g.size(), params, key.tensor, out, [&](std::span<std::uint8_t> body) {
      ScalarRule rule = make_rule(scalar, own.bound);
      codec.encode_body(g, rule, key, params.packing, body);
      return rule;
    });
  });
}

std::vector<std::uint8_t> encode(const Codec& codec, std::span<const float> g, const Params& params,
                                 const StreamKey& key) {
  return fresh([&](std::vector<std::uint8_t>& out) { encode_into(codec, g, params, key, out); });
}

std::vector<std::uint8_t> encode_with_scalar(const Codec& codec, std::span<const float> g, const Params& params,
                                             const StreamKey& key, float scalar) {
  return fresh([&](std::vector<std::uint8_t>& out) { encode_with_scalar_into(codec, g, params, key, scalar, out); });
}

std::vector<std::uint8_t> encode_with_scalar(const Codec& codec, std::span<const float> g, const Params& params,
                                             const StreamKey& key, float scalar, const TensorStats& own) {
  return fresh(
      [&](std::vector<std::uint8_t>& out) { encode_with_scalar_into(codec, g, params, key, scalar, own, out); });
}

std::uint32_t Codec::checksum(std::span<const std::uint8_t> bytes) const { return crc32c(bytes); }

ScalarRule Codec::encode_tensor(std::span<const float> g, const Params& params, const StreamKey& key,
                                const float* shared_scalar, std::span<std::uint8_t> body) const {
  ClipStats st = clip_stats(g, params, key.tensor);
  float m = st.max_abs, bound = st.bound;
  // own scalar: clip: max|clamp(g)|; saturate: min(c sigma, max|g|). Shared: the given scalar, with
  // magnitudes above this worker's own bound clamped to it.
  ScalarRule rule = shared_scalar ? make_rule(*shared_scalar, bound) : make_rule(std::min(m, bound), std::min(m, bound));
  encode_body(g, rule, key, params.packing, body);
  return rule;
}

std::vector<std::vector<std::uint8_t>> encode_layers(const Codec& codec,
                                                     const std::vector<std::span<const float>>& layers,
                                                     const Params& params, const StreamKey& key) {
  std::vector<std::vector<std::uint8_t>> out;
  out.reserve(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    StreamKey k = key;
    k.tensor = key.tensor + static_cast<std::uint32_t>(i);
    out.push_back(encode(codec, layers[i], params, k));
  }
  return out;
}

Decoded decode(const Codec& codec, std::span<const std::uint8_t> payload) {
  Decoded d;
  d.header = parse_header(payload);
  std::span<const std::uint8_t> body = payload.subspan(kHeaderBytes);
  d.values.resize(d.header.count);
  if (d.header.packing == Packing::float32) {
    // The encoder writes scalar 0 and finite values only; anything else is not its payload.
    std::uint32_t scalar_bits;
    std::memcpy(&scalar_bits, &d.header.scalar, 4);
    if (scalar_bits != 0)
      throw Error(ErrorCode::invalid_code, "float32 payload carries a nonzero scalar field");
    for (std::size_t k = 0; k < d.values.size(); ++k) {
      std::uint32_t bits = 0;
      for (int b = 3; b >= 0; --b) bits = (bits << 8) | body[4 * k + b];
      if ((bits & 0x7fffffffu) >= 0x7f800000u)
        throw Error(ErrorCode::invalid_code, "float32 payload holds NaN or Inf at element " + std::to_string(k));
      std::memcpy(&d.values[k], &bits, 4);
    }
  } else {
    codec.decode_body(d.header.packing, body, d.header.scalar, d.values);
  }
  return d;
}

std::vector<std::int8_t> decode_trits(const Codec& codec, std::span<const std::uint8_t> payload,
                                      Header* header) {
  Header h = parse_header(payload);
  if (h.packing == Packing::float32)
    throw Error(ErrorCode::bad_packing, "payload carries float32 values, not trits");
  std::vector<std::int8_t> trits(h.count);
  codec.unpack(h.packing, payload.subspan(kHeaderBytes), trits);
  if (header) *header = h;
  return trits;
}

Aggregate aggregate(const Codec& codec, const std::vector<std::span<const std::uint8_t>>& payloads) {
  if (payloads.empty()) throw Error(ErrorCode::invalid_argument, "aggregate of zero payloads");
  Aggregate agg;
  Header first;
  std::vector<std::int8_t> trits;  // one buffer for every worker
  for (std::size_t w = 0; w < payloads.size(); ++w) {
    Header h = parse_header(payloads[w]);
    if (h.packing == Packing::float32)
      throw Error(ErrorCode::bad_packing, "payload " + std::to_string(w) + " carries float32 values, not trits");
    if (w == 0) {
      first = h;
      agg.scalar = h.scalar;
      agg.sums.assign(h.count, 0);
      trits.resize(h.count);
    } else {
      require_aggregable(first, h, w);
    }
    codec.unpack(h.packing, payloads[w].subspan(kHeaderBytes), trits);
    std::int32_t* sums = agg.sums.data();
    const std::int8_t* t = trits.data();
    for (std::size_t k = 0; k < trits.size(); ++k) sums[k] += t[k];
  }
  agg.workers = static_cast<std::uint32_t>(payloads.size());
  agg.mean.resize(agg.sums.size());
  // mean = (float)((double)s * sum / N); a sum takes only 2N+1 values, so tabulate them once
  double n = static_cast<double>(agg.workers);
  std::vector<float> value_of(2 * agg.workers + 1);
  for (std::int64_t v = -static_cast<std::int64_t>(agg.workers); v <= agg.workers; ++v)
    value_of[v + agg.workers] = static_cast<float>(static_cast<double>(agg.scalar) * static_cast<double>(v) / n);
  const float* table = value_of.data() + agg.workers;
  for (std::size_t k = 0; k < agg.sums.size(); ++k) agg.mean[k] = table[agg.sums[k]];
  return agg;
}

double variance_identity(std::span<const float> g) {
  double inf = 0.0, l1 = 0.0, l2 = 0.0;
  for (float v : g) {
    double a = std::fabs(static_cast<double>(v));
    inf = std::max(inf, a);
    l1 += a;
    l2 += a * a;
  }
  return inf * l1 - l2;
}

double variance_for_scalar(std::span<const float> x, double s) {
  double total = 0.0;
  for (float v : x) {
    double a = std::fabs(static_cast<double>(v));
    total += a * (s - a);
  }
  return total;
}

}  // namespace tg
