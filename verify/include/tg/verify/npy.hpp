// terngrad-bench: NumPy .npy reader/writer for float32 arrays, the file format of the battery's
// external-codec protocol (docs/battery.md). The parser validates every byte it reads and throws
// tg::Error(invalid_argument) naming the problem on any malformed input; it never reads out of bounds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace tg::verify {

/// A C-ordered little-endian float32 array.
struct NpyArray {
  std::vector<std::uint64_t> shape;
  std::vector<float> data;
};

/// The largest array read_npy accepts by default (elements, and each shape entry): 2^28 float32 =
/// 1 GiB. A larger file is refused before anything is allocated (NpyReadLimits raises it).
inline constexpr std::uint64_t kNpyMaxElements = std::uint64_t{1} << 28;
/// The largest header accepted (numpy itself refuses headers over 10,000 bytes by default).
inline constexpr std::uint64_t kNpyMaxHeaderBytes = 65536;

/// The header of a .npy file: shape, element count, where the data start.
struct NpyHeader {
  std::vector<std::uint64_t> shape;
  std::uint64_t count = 0;
  std::uint64_t data_offset = 0;
};

/// Parses the preamble and header held at the start of `bytes` (the data need not follow). Checks
/// the dtype, order, header size (<= kNpyMaxHeaderBytes) and that the shape's product and every entry
/// are at most max_elements. Throws tg::Error(invalid_argument).
NpyHeader parse_npy_header(std::span<const std::uint8_t> bytes, std::uint64_t max_elements = kNpyMaxElements);

/// Parses a whole .npy file held in `bytes` (format versions 1.0, 2.0 and 3.0). Accepts only
/// dtype '<f4' (or '=f4' / '|f4'-style native little-endian float32), C order, and a data section of
/// exactly prod(shape) * 4 bytes. Throws tg::Error(invalid_argument) otherwise.
NpyArray parse_npy(std::span<const std::uint8_t> bytes);

/// Serializes a float32 array as .npy version 1.0 (shape must match data.size()).
std::vector<std::uint8_t> make_npy(std::span<const float> data, const std::vector<std::uint64_t>& shape);

/// Limits of read_npy.
struct NpyReadLimits {
  std::uint64_t max_elements = kNpyMaxElements;
  bool allow_special = false;  // FIFOs and devices (read up to the limits, each wait bounded by timeout_s)
  double timeout_s = 60.0;     // bound on waiting for data from a FIFO or device
};

/// Reads and parses a file, streaming: opens without blocking, refuses anything but a regular file
/// (unless limits.allow_special), reads the header alone, checks the shape against the file size and
/// the limits, and only then allocates and reads the data. Errors name the path.
NpyArray read_npy(const std::filesystem::path& path);
NpyArray read_npy(const std::filesystem::path& path, const NpyReadLimits& limits);
/// Writes a file atomically (tg::write_file_atomic).
void write_npy(const std::filesystem::path& path, std::span<const float> data,
               const std::vector<std::uint64_t>& shape);

}  // namespace tg::verify
