// terngrad-bench: the wire format of one tensor (header + body) and its checksum.
//
// Header, 32 bytes, little-endian:
//   offset  0  u8[4]  magic "TGRD"
//   offset  4  u16    format version (1)
//   offset  6  u8     packing: 0 = float32 (tensors below the size threshold), 1 = 2bit, 2 = base3
//   offset  7  u8     reserved, must be 0
//   offset  8  u64    element count n (at most 2^34)
//   offset 16  f32    scalar s (0 for float32 bodies)
//   offset 20  u32    tensor id
//   offset 24  u32    CRC32C of the body
//   offset 28  u32    CRC32C of header bytes 0..27
// Body: float32 little-endian values (4n bytes); 2bit: element i in bits 2(i%4) of byte i/4, LSB
// first, 00 = 0, 01 = +1, 10 = -1, unused high bits of the last byte 0; base3: 5 trits per byte,
// byte = sum d_j 3^j (d = 0 zero, 1 plus, 2 minus), missing trits of the last byte 0.
// The payload is exactly header + body bytes; anything else is rejected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tg {

enum class Packing : std::uint8_t { float32 = 0, two_bit = 1, base3 = 2 };

inline constexpr std::uint8_t kMagic[4] = {'T', 'G', 'R', 'D'};
inline constexpr std::uint16_t kFormatVersion = 1;
inline constexpr std::size_t kHeaderBytes = 32;

/// Name of a packing as the command line spells it: "float32", "2bit", "base3".
const char* to_string(Packing packing);

/// Parses "2bit", "base3" or "float32"; throws tg::Error(invalid_argument) naming the bad value.
Packing parse_packing(const char* text);

/// Bytes of the body of n elements in this packing (throws length_overflow past 2^34 elements).
std::uint64_t body_bytes(Packing packing, std::uint64_t n);

/// The fields of a parsed, validated header.
struct Header {
  Packing packing = Packing::two_bit;
  std::uint64_t count = 0;
  float scalar = 0.0f;
  std::uint32_t tensor = 0;
  std::uint32_t body_crc = 0;
};

/// Writes the 32-byte header (computing both checksums) into out[0..32).
void write_header(const Header& header, std::span<std::uint8_t> out);

/// Validates magic, version, packing, reserved byte, header CRC, count, total length and body CRC.
/// Throws tg::Error with the matching code; never reads outside `payload`.
Header parse_header(std::span<const std::uint8_t> payload);

/// Aggregation sums the trits of one tensor's payloads from every worker: payload w must carry payload 0's
/// tensor id, element count and scalar (bit for bit). Throws ErrorCode::scalar_mismatch naming the field that
/// differs and what to do about it.
void require_aggregable(const Header& first, const Header& h, std::size_t w);

/// CRC32C (Castagnoli, reflected, init and final xor 0xffffffff); "123456789" -> 0xe3069283.
std::uint32_t crc32c(std::span<const std::uint8_t> bytes);
/// crc32c of A followed by B from crc32c(A), crc32c(B) and |B| (as zlib's crc32_combine): the CRC of a
/// buffer computed in parts, on several threads.
std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b);

}  // namespace tg
