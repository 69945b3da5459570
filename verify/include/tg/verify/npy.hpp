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

/// Parses a whole .npy file held in `bytes` (format versions 1.0, 2.0 and 3.0). Accepts only
/// dtype '<f4' (or '=f4' / '|f4'-style native little-endian float32), C order, and a data section of
/// exactly prod(shape) * 4 bytes. Throws tg::Error(invalid_argument) otherwise.
NpyArray parse_npy(std::span<const std::uint8_t> bytes);

/// Serializes a float32 array as .npy version 1.0 (shape must match data.size()).
std::vector<std::uint8_t> make_npy(std::span<const float> data, const std::vector<std::uint64_t>& shape);

/// Reads and parses a file; errors name the path.
NpyArray read_npy(const std::filesystem::path& path);
/// Writes a file atomically (tg::write_file_atomic).
void write_npy(const std::filesystem::path& path, std::span<const float> data,
               const std::vector<std::uint64_t>& shape);

}  // namespace tg::verify
