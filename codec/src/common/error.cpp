// terngrad-bench: messages of the codec's typed errors.
#include <cmath>
#include <string>

#include "tg/error.hpp"

namespace tg {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::non_finite: return "non_finite";
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::truncated: return "truncated";
    case ErrorCode::bad_magic: return "bad_magic";
    case ErrorCode::bad_version: return "bad_version";
    case ErrorCode::bad_packing: return "bad_packing";
    case ErrorCode::invalid_code: return "invalid_code";
    case ErrorCode::crc_mismatch: return "crc_mismatch";
    case ErrorCode::length_overflow: return "length_overflow";
    case ErrorCode::length_mismatch: return "length_mismatch";
    case ErrorCode::scalar_mismatch: return "scalar_mismatch";
  }
  return "unknown";
}

namespace {
std::string non_finite_message(std::uint32_t tensor, std::uint64_t index, float value) {
  const char* what = std::isnan(value) ? "NaN" : (value > 0 ? "+Inf" : "-Inf");
  return "tensor " + std::to_string(tensor) + ": " + what + " at index " + std::to_string(index) +
         " (gradients must be finite; nothing was computed or written)";
}
}  // namespace

NonFiniteError::NonFiniteError(std::uint32_t tensor, std::uint64_t index, float value)
    : Error(ErrorCode::non_finite, non_finite_message(tensor, index, value)),
      tensor_(tensor),
      index_(index) {}

}  // namespace tg
