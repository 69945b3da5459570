// terngrad-bench: the typed errors every codec entry point throws.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tg {

enum class ErrorCode {
  non_finite,        // NaN or Inf in a gradient (tensor id and index of the first one)
  invalid_argument,  // an option out of range, or sizes that do not match
  truncated,         // fewer bytes than the header or the body needs
  bad_magic,         // not a terngrad payload
  bad_version,       // a format version this build does not read
  bad_packing,       // unknown packing id, or a nonzero reserved field
  invalid_code,      // 11 in a 2bit body, a byte >= 243 in a base3 body, bad padding
  crc_mismatch,      // header or body checksum differs
  length_overflow,   // an element count that cannot be valid (over 2^34, or overflowing sizes)
  length_mismatch,   // the payload is longer than its header says
  scalar_mismatch,   // aggregation of payloads that do not share scalar, size or tensor id
};

/// Short name of an error code ("crc_mismatch"), for messages and JSON.
const char* to_string(ErrorCode code);

/// Every failure of the codec: a code to branch on and a message that names the problem.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

/// A NaN or Inf in a gradient: names the tensor and the index of the first bad value.
class NonFiniteError : public Error {
 public:
  NonFiniteError(std::uint32_t tensor, std::uint64_t index, float value);
  /// The same error with a caller's message (e.g. one that names the argument or file it came from).
  NonFiniteError(std::uint32_t tensor, std::uint64_t index, const std::string& message)
      : Error(ErrorCode::non_finite, message), tensor_(tensor), index_(index) {}
  std::uint32_t tensor() const { return tensor_; }
  std::uint64_t index() const { return index_; }

 private:
  std::uint32_t tensor_;
  std::uint64_t index_;
};

}  // namespace tg
