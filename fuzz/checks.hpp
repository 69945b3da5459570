// terngrad-bench: the properties the fuzz targets check on every input, shared with the GoogleTest
// regression suite (which replays fuzz/corpus and fuzz/regressions through the same functions).
// A violated property throws tg::fuzz::PropertyViolation; the fuzz targets turn it into abort().
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "tg/codec.hpp"

namespace tg::fuzz {

struct PropertyViolation : std::logic_error {
  using std::logic_error::logic_error;
};

inline void require(bool ok, const std::string& what) {
  if (!ok) throw PropertyViolation(what);
}

inline std::uint32_t load_u32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}
inline std::uint64_t load_u64(const std::uint8_t* p) {
  return std::uint64_t(load_u32(p)) | std::uint64_t(load_u32(p + 4)) << 32;
}
inline void store_u32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline float float_of_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline std::uint32_t bits_of_float(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/// Rewrites the body CRC (bytes 24..27) and then the header CRC (28..31) of a payload of at least
/// 32 bytes, so that an input reaches the checks behind the checksums (fuzzing the structure).
inline void reseal(std::vector<std::uint8_t>& p) {
  if (p.size() < kHeaderBytes) return;
  store_u32(p.data() + 24, crc32c({p.data() + kHeaderBytes, p.size() - kHeaderBytes}));
  store_u32(p.data() + 28, crc32c({p.data(), 28}));
}

/// What the format (tg/format.hpp) says a payload is, decided here from the byte
/// layout alone, without the codec's parser: nullopt if the payload is not valid, else its trits
/// (ternary) or float bits (float32). Written independently of codec/src as the fuzzing oracle.
struct SpecPayload {
  Packing packing;
  std::uint64_t count;
  std::uint32_t scalar_bits;
  std::uint32_t tensor;
  std::vector<std::int8_t> trits;       // ternary packings
  std::vector<std::uint32_t> floats;    // float32 packing, raw bits
};

inline std::optional<SpecPayload> spec_decode(std::span<const std::uint8_t> p) {
  if (p.size() < 32) return std::nullopt;
  if (p[0] != 'T' || p[1] != 'G' || p[2] != 'R' || p[3] != 'D') return std::nullopt;
  if (p[4] != 1 || p[5] != 0) return std::nullopt;
  if (load_u32(&p[28]) != crc32c(p.first(28))) return std::nullopt;
  if (p[6] > 2 || p[7] != 0) return std::nullopt;
  SpecPayload s;
  s.packing = static_cast<Packing>(p[6]);
  s.count = load_u64(&p[8]);
  s.scalar_bits = load_u32(&p[16]);
  s.tensor = load_u32(&p[20]);
  if (s.count > (std::uint64_t{1} << 34)) return std::nullopt;
  float scalar = float_of_bits(s.scalar_bits);
  if (!std::isfinite(scalar) || scalar < 0.0f) return std::nullopt;
  // count <= 2^34, so none of these products or sums can wrap in 64 bits
  std::uint64_t need = s.packing == Packing::float32 ? 4 * s.count
                       : s.packing == Packing::two_bit ? (s.count + 3) / 4
                                                       : (s.count + 4) / 5;
  if (p.size() - 32 != need) return std::nullopt;
  std::span<const std::uint8_t> body = p.subspan(32);
  if (load_u32(&p[24]) != crc32c(body)) return std::nullopt;
  if (s.packing == Packing::float32) {
    // float32 bodies: the scalar field is 0 and every value finite (what the encoder writes)
    if (s.scalar_bits != 0) return std::nullopt;
    for (std::uint64_t k = 0; k < s.count; ++k) {
      std::uint32_t bits = load_u32(&body[4 * k]);
      if ((bits & 0x7fffffffu) >= 0x7f800000u) return std::nullopt;
      s.floats.push_back(bits);
    }
    return s;
  }
  const std::int8_t trit_of_digit[3] = {0, 1, -1};
  for (std::size_t j = 0; j < body.size(); ++j) {
    unsigned byte = body[j];
    if (s.packing == Packing::two_bit) {
      for (unsigned m = 0; m < 4; ++m) {
        unsigned code = (byte >> (2 * m)) & 3u;
        if (code == 3) return std::nullopt;
        if (4 * j + m < s.count) s.trits.push_back(trit_of_digit[code]);
        else if (code != 0) return std::nullopt;  // padding must be 00
      }
    } else {
      if (byte > 242) return std::nullopt;
      for (unsigned m = 0; m < 5; ++m, byte /= 3) {
        if (5 * j + m < s.count) s.trits.push_back(trit_of_digit[byte % 3]);
        else if (byte % 3 != 0) return std::nullopt;  // padding digits must be 0
      }
    }
  }
  return s;
}

/// Outcome of one decode: the error code, or the decoded payload.
struct Outcome {
  bool ok = false;
  ErrorCode code = ErrorCode::invalid_argument;
  std::string message;
  Decoded decoded;
};

inline Outcome run_decode(const Codec& codec, std::span<const std::uint8_t> payload) {
  Outcome o;
  try {
    o.decoded = decode(codec, payload);
    o.ok = true;
  } catch (const Error& e) {
    o.code = e.code();
    o.message = e.what();
  } catch (const std::exception& e) {
    throw PropertyViolation(codec.name() + ": decode threw a non-tg::Error exception: " + e.what());
  }
  return o;
}

/// The decoder properties, for one input and every implementation in `codecs`:
///  * decode either returns or throws tg::Error with a message (never another exception);
///  * it accepts exactly the payloads the format accepts (spec_decode), with the same values,
///    bit for bit, and every implementation gives the same outcome (same error code);
///  * parse_header and decode_trits agree with decode.
inline void check_decode(const std::vector<CodecEntry>& codecs, std::span<const std::uint8_t> payload) {
  std::optional<SpecPayload> spec = spec_decode(payload);
  std::optional<Outcome> first;
  for (const auto& entry : codecs) {
    Outcome o = run_decode(*entry.codec, payload);
    const std::string who = entry.name + ": ";
    require(o.ok == spec.has_value(), who + (o.ok ? "accepted a payload the format rejects"
                                                  : "rejected a valid payload: " + o.message));
    if (!o.ok) require(!o.message.empty(), who + "error without a message");
    if (first) {
      require(o.ok == first->ok, who + "disagrees with " + codecs[0].name + " on acceptance");
      if (!o.ok)
        require(o.code == first->code, who + "error " + to_string(o.code) + " differs from " +
                                           codecs[0].name + "'s " + to_string(first->code));
    }
    // parse_header: a header-level error is decode's error; past the header only invalid_code remains.
    std::optional<ErrorCode> header_error;
    try {
      parse_header(payload);
    } catch (const Error& e) {
      header_error = e.code();
    }
    if (header_error)
      require(!o.ok && o.code == *header_error, who + "decode and parse_header disagree");
    else if (!o.ok)
      require(o.code == ErrorCode::invalid_code, who + "body error other than invalid_code: " +
                                                     to_string(o.code));
    if (o.ok) {
      const Decoded& d = o.decoded;
      require(d.header.packing == spec->packing && d.header.count == spec->count &&
                  d.header.tensor == spec->tensor && bits_of_float(d.header.scalar) == spec->scalar_bits,
              who + "header fields differ from the byte layout");
      require(d.values.size() == spec->count, who + "wrong number of values");
      if (spec->packing == Packing::float32) {
        for (std::size_t k = 0; k < d.values.size(); ++k)
          require(bits_of_float(d.values[k]) == spec->floats[k], who + "float32 value " + std::to_string(k) + " differs");
      } else {
        for (std::size_t k = 0; k < d.values.size(); ++k)
          require(bits_of_float(d.values[k]) ==
                      bits_of_float(d.header.scalar * static_cast<float>(spec->trits[k])),
                  who + "value " + std::to_string(k) + " is not scalar * trit");
      }
      // decode_trits: float32 payloads are refused, ternary ones give the spec's trits.
      try {
        Header h;
        std::vector<std::int8_t> trits = decode_trits(*entry.codec, payload, &h);
        require(spec->packing != Packing::float32, who + "decode_trits accepted a float32 payload");
        require(trits == spec->trits, who + "decode_trits differs from the byte layout");
      } catch (const Error& e) {
        require(spec->packing == Packing::float32 && e.code() == ErrorCode::bad_packing,
                who + "decode_trits refused a payload decode accepted: " + e.what());
      }
    }
    if (!first) first = std::move(o);
  }
}

/// Builds an encode case from fuzz bytes: 16 bytes of parameters, then the gradient as float32.
struct EncodeCase {
  Params params;
  StreamKey key;
  std::vector<float> g;
};

inline std::optional<EncodeCase> encode_case_from_bytes(std::span<const std::uint8_t> data,
                                                        std::size_t max_elements = 4096) {
  if (data.size() < 16) return std::nullopt;
  EncodeCase c;
  c.params.clip = static_cast<ClipMode>(data[0] % 3);
  c.params.packing = data[1] % 2 ? Packing::base3 : Packing::two_bit;
  c.params.c = 0.25 * (1 + data[2] % 16);  // 0.25 .. 4
  c.params.float_below = data[3] % 4 == 0 ? data[3] / 4 : 0;  // sometimes the float32 path
  c.key.seed = load_u64(&data[4]);
  c.key.worker = data[12];
  c.key.tensor = data[13];
  c.key.step = load_u32(&data[12]) >> 16;
  std::size_t n = std::min<std::size_t>((data.size() - 16) / 4, max_elements);
  c.g.resize(n);
  for (std::size_t k = 0; k < n; ++k) c.g[k] = float_of_bits(load_u32(&data[16 + 4 * k]));
  return c;
}

/// The encoder properties, for one gradient and every implementation:
///  * a NaN or Inf anywhere gives NonFiniteError naming the tensor and the first bad index, from
///    every implementation; otherwise every implementation gives the same bytes;
///  * the payload decodes; its scalar is max|g| (no clipping) or at most max|g| (clipping); every
///    value is 0 or +-scalar with the sign of g; zeros (of either sign) stay 0; |g| >= scalar > 0
///    is always kept; the float32 path returns g bit for bit.
inline void check_encode(const std::vector<CodecEntry>& codecs, const EncodeCase& c) {
  std::optional<std::size_t> first_bad;
  double max_abs = 0.0;
  for (std::size_t k = 0; k < c.g.size(); ++k) {
    if (!std::isfinite(c.g[k])) {
      first_bad = k;
      break;
    }
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(c.g[k])));
  }
  std::optional<std::vector<std::uint8_t>> first;
  for (const auto& entry : codecs) {
    const std::string who = entry.name + ": ";
    std::vector<std::uint8_t> payload;
    try {
      payload = encode(*entry.codec, c.g, c.params, c.key);
    } catch (const NonFiniteError& e) {
      require(first_bad && e.index() == *first_bad && e.tensor() == c.key.tensor,
              who + "NonFiniteError with the wrong index or tensor: " + e.what());
      continue;
    } catch (const std::exception& e) {
      throw PropertyViolation(who + "encode threw: " + e.what());
    }
    require(!first_bad, who + "encoded a gradient holding NaN or Inf");
    if (first) require(payload == *first, who + "bytes differ from " + codecs[0].name);
    Decoded d;
    try {
      d = decode(*entry.codec, payload);
    } catch (const std::exception& e) {
      throw PropertyViolation(who + "cannot decode its own payload: " + e.what());
    }
    require(d.values.size() == c.g.size() && d.header.tensor == c.key.tensor, who + "wrong count or tensor");
    if (d.header.packing == Packing::float32) {
      require(c.g.size() < c.params.float_below, who + "float32 payload above the threshold");
      for (std::size_t k = 0; k < c.g.size(); ++k)
        require(bits_of_float(d.values[k]) == bits_of_float(c.g[k]), who + "float32 path changed a value");
    } else {
      double s = d.header.scalar;
      if (c.params.clip == ClipMode::none)
        require(s == max_abs, who + "scalar is not max|g|");
      else
        require(s <= max_abs, who + "clipped scalar exceeds max|g|");
      for (std::size_t k = 0; k < c.g.size(); ++k) {
        double v = d.values[k], x = c.g[k];
        require(v == 0.0 || v == s || v == -s, who + "value not in {-s, 0, s}");
        if (x == 0.0) require(v == 0.0, who + "a zero gradient element became nonzero");
        if (v != 0.0) require((v > 0) == (x > 0), who + "sign flipped");
        if (s > 0 && std::fabs(x) >= s) require(v == (x > 0 ? s : -s), who + "|g| >= s was not kept");
      }
    }
    if (!first) first = std::move(payload);
  }
}

}  // namespace tg::fuzz
