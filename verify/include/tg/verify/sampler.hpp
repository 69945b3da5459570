// terngrad-bench: where the battery's ternary draws come from. A Sampler ternarizes a gradient for
// given (seed, worker, tensor, step) and returns trits and scalar per step; implementations wrap a
// tg::Codec (reference, optimized, CUDA, the mutants, the correct variants) or an external program
// (exec protocol, docs/battery.md).
// make_sampler("reference" | "optimized" | "cuda" | "exec:CMD" | "mutant:NAME" | "variant:NAME").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tg/codec.hpp"

namespace tg::verify {

/// One request: `steps` consecutive steps starting at key.step.
struct DrawRequest {
  std::span<const float> g;
  Params params;
  StreamKey key;
  std::uint32_t steps = 1;
  std::optional<float> scalar;  // shared scalar (encode_with_scalar semantics); own scalar if empty
};

/// Rows of trits (steps x d, row-major) and the scalar of each row.
struct Draws {
  std::size_t d = 0;
  std::uint32_t steps = 0;
  std::vector<float> scalars;
  std::vector<std::int8_t> trits;
  /// Empty, or a description of outputs that are not of the form {-s, 0, +s} (external programs).
  std::string defect;
  std::span<const std::int8_t> row(std::uint32_t j) const { return {trits.data() + j * d, d}; }
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::string name() const = 0;
  virtual Draws draw(const DrawRequest& request) = 0;
  /// The codec behind it, when there is one (payload-level checks use it), else nullptr.
  virtual const Codec* codec() const { return nullptr; }
  /// Largest steps x d a single request should ask for (external programs: one process per request).
  virtual std::uint64_t max_request_elements() const { return std::uint64_t{1} << 22; }
  /// What the run cost outside the battery, for a line on stderr after it ("" when nothing is worth
  /// saying): an exec: codec counts its processes and the time spent in them.
  virtual std::string cost_note() const { return {}; }
};

/// Draws from decoded values (steps x d, row-major, float32): trit = sign(v), the row's scalar = its
/// largest |v|. A row with no nonzero value carries no scalar of its own: it gets `requested` (the
/// shared scalar of the request) when there is one, else 0. Values of a row that are nonzero but not
/// +-scalar are reported in Draws::defect (the first one); NaN/Inf throw tg::Error(invalid_argument)
/// naming row and element, as does values.size() != steps * d. `what` prefixes the messages.
Draws draws_from_values(std::span<const float> values, std::size_t d, std::uint32_t steps,
                        std::optional<float> requested, const std::string& what);

/// "the request's gradient: 8192 elements, nonzero |g| from 2.7e+26 to 4.17e+30" ("..., every g = 0"): appended to
/// an error about a codec's non-finite output, the range shows an overflow (|g| near 1e30 squared, a scalar in
/// float16) or an underflow (|g| near 1e-30, a division by a scalar of 0).
std::string gradient_range_note(std::span<const float> g);
/// "NaN", "+inf" or "-inf": how error messages name a non-finite value.
inline const char* non_finite_name(float x) { return x != x ? "NaN" : (x > 0 ? "+inf" : "-inf"); }

/// A sampler over any tg::Codec.
std::unique_ptr<Sampler> make_codec_sampler(std::shared_ptr<const Codec> codec, std::string name);

/// The mutants, by name: the reference codec with one deliberate defect each, which the battery
/// must reject (docs/statistics.md, "Mutants").
struct MutantInfo {
  const char* name;
  const char* description;
};
const std::vector<MutantInfo>& mutant_list();
/// A codec implementing mutant `name` (tg::Error invalid_argument naming the known ones otherwise).
std::shared_ptr<const Codec> make_mutant_codec(const std::string& name);
/// The correct variants, by name: implementations that differ from the reference only where the
/// specification allows it (e.g. sigma in float32, clip bound within the battery's 16-ulp rule), so
/// the battery must accept every one.
const std::vector<MutantInfo>& variant_list();
/// A codec implementing variant `name` (tg::Error invalid_argument naming the known ones otherwise).
std::shared_ptr<const Codec> make_variant_codec(const std::string& name);

/// External program options.
struct ExecOptions {
  double timeout_s = 120.0;
};
/// SIGINT, SIGTERM or SIGHUP while an external-program sampler exists: the sampler stops the running
/// program (its whole process group), its temporary folder is removed when it is destroyed, and this
/// propagates from draw(). The sampler's handlers replace the previous ones only for its lifetime.
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(int signal_number);
  int signal_number() const { return signal_; }

 private:
  int signal_;
};

/// A failure of an external program (exec:, serve:): its exit status, a timeout, a signal, a missing or
/// malformed output, an 'error' answer. The code stays invalid_argument for callers that branch on it; the
/// CLI labels it "error (external codec)" rather than by that code.
class ExternalCodecError : public Error {
 public:
  explicit ExternalCodecError(const std::string& message) : Error(ErrorCode::invalid_argument, message) {}
};

/// Runs `command` (a shell command line) with the protocol arguments appended, once per request.
std::unique_ptr<Sampler> make_exec_sampler(const std::string& command, const ExecOptions& options);
/// Starts `command --serve` once and sends it one request per line (docs/battery.md, serve:).
std::unique_ptr<Sampler> make_serve_sampler(const std::string& command, const ExecOptions& options);

/// Raised when an implementation cannot be used here (e.g. --impl cuda without a GPU): exit code 2.
class Unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses an --impl value and builds the sampler; throws tg::Error(invalid_argument) on a bad value
/// and Unavailable when the implementation is not built or has no device. `argument` is how the
/// messages name where the value came from (compare: "implementation A").
std::unique_ptr<Sampler> make_sampler(const std::string& impl, const ExecOptions& options,
                                      const std::string& argument = "--impl");

/// Whether the CUDA codec is built in and a device is usable (why: the reason when not).
bool cuda_usable(std::string* why);

}  // namespace tg::verify
