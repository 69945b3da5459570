// terngrad-bench: payload header and CRC32C (layout in tg/format.hpp).
#include <array>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#if defined(__x86_64__) || defined(_M_X64)
#include <nmmintrin.h>
#define TG_HAVE_X86 1
#endif

#include "tg/codec.hpp"
#include "tg/format.hpp"

namespace tg {
namespace {

constexpr std::uint32_t kCrc32cPoly = 0x82f63b78u;  // reflected Castagnoli polynomial

std::array<std::array<std::uint32_t, 256>, 8> make_tables() {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t c = b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCrc32cPoly : c >> 1;
    t[0][b] = c;
  }
  for (std::uint32_t b = 0; b < 256; ++b)
    for (int s = 1; s < 8; ++s) t[s][b] = (t[s - 1][b] >> 8) ^ t[0][t[s - 1][b] & 0xff];
  return t;
}

// Slicing-by-8 software CRC32C (portable path).
std::uint32_t crc32c_portable(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
  static const auto t = make_tables();
  while (n >= 8) {
    std::uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
          t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
  return crc;
}

// The CRC register after n zero bytes, starting from crc (no pre- or post-conditioning): multiplication
// by x^(8n) modulo the reflected Castagnoli polynomial (32x32 matrices over GF(2), as zlib's
// crc32_combine). The operators for 2^k zero bytes (k < 64) are built once by repeated squaring of the
// one-zero-bit operator; building them on every call cost ~20 us, as much as the CRC of 200 KB.
std::uint32_t gf2_times(const std::uint32_t* mat, std::uint32_t vec) {
  std::uint32_t sum = 0;
  for (; vec; vec >>= 1, ++mat)
    if (vec & 1) sum ^= *mat;
  return sum;
}
using Gf2Matrix = std::array<std::uint32_t, 32>;
Gf2Matrix gf2_square(const Gf2Matrix& m) {
  Gf2Matrix out;
  for (int k = 0; k < 32; ++k) out[k] = gf2_times(m.data(), m[k]);
  return out;
}
std::array<Gf2Matrix, 64> make_zero_byte_operators() {
  Gf2Matrix op;
  op[0] = 0x82F63B78u;  // one zero bit
  for (int k = 1; k < 32; ++k) op[k] = 1u << (k - 1);
  for (int bits = 1; bits < 8; bits *= 2) op = gf2_square(op);  // 2, 4, then 8 zero bits
  std::array<Gf2Matrix, 64> ops;
  ops[0] = op;
  for (std::size_t k = 1; k < ops.size(); ++k) ops[k] = gf2_square(ops[k - 1]);
  return ops;
}
std::uint32_t crc32c_zeros(std::uint32_t crc, std::uint64_t n) {
  static const std::array<Gf2Matrix, 64> ops = make_zero_byte_operators();
  for (std::size_t k = 0; n; ++k, n >>= 1)
    if (n & 1) crc = gf2_times(ops[k].data(), crc);
  return crc;
}

#ifdef TG_HAVE_X86
// Three independent CRC chains over the thirds of the input hide the crc32 instruction's latency (3
// cycles, one per cycle issued); their registers are then joined: crc(A B) = zeros(crc(A), |B|) ^ crc0(B),
// where crc0 starts from 0 (the register update is linear). Below kCrcSplit bytes one chain.
constexpr std::size_t kCrcSplit = std::size_t{1} << 16;
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42_chain(std::uint32_t crc, const std::uint8_t* p,
                                                                    std::size_t n);
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(std::uint32_t crc, const std::uint8_t* p,
                                                              std::size_t n) {
  if (n < kCrcSplit) return crc32c_sse42_chain(crc, p, n);
  const std::size_t third = n / 24 * 8;  // whole 8-byte words
  const std::uint8_t* b = p + third;
  const std::uint8_t* c = p + 2 * third;
  std::uint64_t c0 = crc, c1 = 0, c2 = 0;
  for (std::size_t k = 0; k < third; k += 8) {
    std::uint64_t va, vb, vc;
    std::memcpy(&va, p + k, 8);
    std::memcpy(&vb, b + k, 8);
    std::memcpy(&vc, c + k, 8);
    c0 = _mm_crc32_u64(c0, va);
    c1 = _mm_crc32_u64(c1, vb);
    c2 = _mm_crc32_u64(c2, vc);
  }
  std::uint32_t r = crc32c_zeros(static_cast<std::uint32_t>(c0), third) ^ static_cast<std::uint32_t>(c1);
  r = crc32c_zeros(r, third) ^ static_cast<std::uint32_t>(c2);
  return crc32c_sse42_chain(r, p + 3 * third, n - 3 * third);
}
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42_chain(std::uint32_t crc, const std::uint8_t* p,
                                                                    std::size_t n) {
  std::uint64_t c = crc;
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  std::uint32_t c32 = static_cast<std::uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}
#endif

void put_u16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}
void put_u32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put_u64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint16_t get_u16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }
std::uint32_t get_u32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
std::uint64_t get_u64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::uint32_t crc32c(std::span<const std::uint8_t> bytes) {
  std::uint32_t crc = 0xffffffffu;
#ifdef TG_HAVE_X86
  static const bool hw = __builtin_cpu_supports("sse4.2");
  if (hw) return crc32c_sse42(crc, bytes.data(), bytes.size()) ^ 0xffffffffu;
#endif
  return crc32c_portable(crc, bytes.data(), bytes.size()) ^ 0xffffffffu;
}

// crc(A B) = zeros(crc(A), |B|) ^ crc(B): the conditioning of A's register and of B's start cancel, since
// the register update is linear (see crc32c_sse42).
std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) {
  return crc32c_zeros(crc_a, len_b) ^ crc_b;
}

const char* to_string(Packing packing) {
  switch (packing) {
    case Packing::float32: return "float32";
    case Packing::two_bit: return "2bit";
    case Packing::base3: return "base3";
  }
  return "unknown";
}

Packing parse_packing(const char* text) {
  std::string s = text ? text : "";
  if (s == "2bit") return Packing::two_bit;
  if (s == "base3") return Packing::base3;
  if (s == "float32") return Packing::float32;
  throw Error(ErrorCode::invalid_argument,
              "unknown packing '" + s + "' (expected 2bit, base3 or float32)");
}

std::uint64_t body_bytes(Packing packing, std::uint64_t n) {
  if (n > kMaxElements)
    throw Error(ErrorCode::length_overflow, "element count " + std::to_string(n) +
                                                " exceeds the maximum of 2^34 per tensor");
  switch (packing) {
    case Packing::float32: return 4 * n;
    case Packing::two_bit: return packed_bytes_2bit(n);
    case Packing::base3: return packed_bytes_base3(n);
  }
  throw Error(ErrorCode::bad_packing, "unknown packing id " + std::to_string(int(packing)));
}

void write_header(const Header& h, std::span<std::uint8_t> out) {
  if (out.size() < kHeaderBytes) throw Error(ErrorCode::invalid_argument, "header buffer too small");
  std::uint8_t* p = out.data();
  std::memcpy(p, kMagic, 4);
  put_u16(p + 4, kFormatVersion);
  p[6] = static_cast<std::uint8_t>(h.packing);
  p[7] = 0;
  put_u64(p + 8, h.count);
  std::uint32_t scalar_bits;
  std::memcpy(&scalar_bits, &h.scalar, 4);
  put_u32(p + 16, scalar_bits);
  put_u32(p + 20, h.tensor);
  put_u32(p + 24, h.body_crc);
  put_u32(p + 28, crc32c({p, 28}));
}

Header parse_header(std::span<const std::uint8_t> payload) {
  if (payload.size() < kHeaderBytes)
    throw Error(ErrorCode::truncated, "payload of " + std::to_string(payload.size()) +
                                          " bytes is shorter than the 32-byte header");
  const std::uint8_t* p = payload.data();
  if (std::memcmp(p, kMagic, 4) != 0)
    throw Error(ErrorCode::bad_magic, "not a terngrad payload (magic bytes are not 'TGRD')");
  std::uint16_t version = get_u16(p + 4);
  if (version != kFormatVersion)
    throw Error(ErrorCode::bad_version, "payload format version " + std::to_string(version) +
                                            " is not supported (this build reads version 1)");
  if (get_u32(p + 28) != crc32c({p, 28}))
    throw Error(ErrorCode::crc_mismatch, "header checksum mismatch (corrupted header)");
  if (p[6] > static_cast<std::uint8_t>(Packing::base3))
    throw Error(ErrorCode::bad_packing, "unknown packing id " + std::to_string(p[6]));
  if (p[7] != 0)
    throw Error(ErrorCode::bad_packing, "reserved header byte is " + std::to_string(p[7]) + ", not 0");
  Header h;
  h.packing = static_cast<Packing>(p[6]);
  h.count = get_u64(p + 8);
  std::uint32_t scalar_bits = get_u32(p + 16);
  std::memcpy(&h.scalar, &scalar_bits, 4);
  h.tensor = get_u32(p + 20);
  h.body_crc = get_u32(p + 24);
  std::uint64_t need = body_bytes(h.packing, h.count);  // throws length_overflow
  if (!(h.scalar >= 0.0f) || h.scalar == std::numeric_limits<float>::infinity())
    throw Error(ErrorCode::invalid_code, "payload scalar is negative, NaN or infinite");
  std::uint64_t have = payload.size() - kHeaderBytes;
  if (have < need)
    throw Error(ErrorCode::truncated, "body has " + std::to_string(have) + " bytes, header says " +
                                          std::to_string(need));
  if (have > need)
    throw Error(ErrorCode::length_mismatch, "payload has " + std::to_string(have - need) +
                                                " bytes beyond the body its header describes");
  if (crc32c(payload.subspan(kHeaderBytes)) != h.body_crc)
    throw Error(ErrorCode::crc_mismatch, "body checksum mismatch (corrupted body)");
  return h;
}

void require_aggregable(const Header& first, const Header& h, std::size_t w) {
  const bool same_scalar = std::memcmp(&h.scalar, &first.scalar, 4) == 0;
  if (same_scalar && h.count == first.count && h.tensor == first.tensor) return;
  char b[512];
  const char* fix = h.tensor != first.tensor  ? "payloads of different tensors: aggregate one tensor's payloads at a time"
                    : h.count != first.count ? "one tensor has the same number of elements on every worker"
                                             : "encode every worker's payload with one shared scalar (shared_scalar)";
  std::snprintf(b, sizeof b,
                "payload %zu (tensor %u, %llu elements, scalar %.9g) does not match payload 0 (tensor %u, %llu "
                "elements, scalar %.9g): %s",
                w, h.tensor, static_cast<unsigned long long>(h.count), static_cast<double>(h.scalar), first.tensor,
                static_cast<unsigned long long>(first.count), static_cast<double>(first.scalar), fix);
  throw Error(ErrorCode::scalar_mismatch, b);
}

}  // namespace tg
