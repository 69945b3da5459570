// terngrad-bench: the statistical verification battery (STATISTICS.md): profiles, the checks, the
// runner, and its reports (table, JSON, JUnit XML). `terngrad verify` (verify/src/command.cpp) is
// the command-line front end; run_battery is usable from tests.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "tg/verify/sampler.hpp"

namespace tg::verify {

/// Sizes and error rates of one run.
struct Profile {
  std::string name;
  std::size_t d = 0;               // elements of the single-tensor families
  std::uint32_t steps = 0;         // draws per family (unbiased, variance, independence)
  std::uint32_t stream_steps = 0;  // draws of the streams check
  std::uint32_t agg_workers = 0;   // workers of the aggregate check
  std::uint32_t agg_steps = 0;     // draws of the aggregate check
  std::size_t cross_d = 0;         // elements per family in the cross-implementation check
  double alpha_total = 1e-6;
  double beta = 1e-3;
};
/// "quick", "ci" or "full"; tg::Error(invalid_argument) otherwise.
Profile profile_named(const std::string& name);

/// One line of the report.
struct Row {
  std::string check;
  std::string family;
  std::string kind;        // "exact" (deterministic fact), "stat" (uses alpha), "info" (reported only)
  std::string statistic;
  std::string threshold;
  std::string pvalue;      // p-value, its bound, or an interval
  std::string power;       // smallest effect detected with probability >= 1 - beta
  double alpha = 0.0;      // share of alpha_total (stat rows)
  bool pass = true;
  std::string detail;      // why it failed, or what it compared
};

struct Options {
  Profile profile;
  std::uint64_t seed = 20171204;
  std::set<std::string> skip;  // check names to leave out (e.g. "cross")
  bool progress = false;       // progress line on stderr
  std::function<void()> poll;  // if set, called after each block of draws; may throw to stop the run
};

struct Result {
  std::string impl;
  Options options;
  std::vector<Row> rows;
  std::size_t decisions = 0;
  double alpha_each = 0.0;
  double seconds = 0.0;
  bool pass() const;
  std::vector<std::string> failed_checks() const;
};

/// Names of the checks, in report order.
const std::vector<std::string>& check_names();

/// Runs the battery on `sampler`. Errors of the implementation (an external program that fails)
/// propagate as exceptions; check failures are rows with pass == false.
Result run_battery(Sampler& sampler, const Options& options);

/// Samples of one tensor drawn elsewhere (a codec in another language, a GPU run saved to disk):
/// `steps` rows of trits (row-major, steps x g.size()) and the scalar of each row, all with the
/// same stream except the step (row j = step j). `scalar`: the shared scalar the draws were asked
/// for (encode_with_scalar semantics); empty when each row carries the tensor's own scalar.
struct TensorSamples {
  std::span<const float> g;
  std::span<const std::int8_t> trits;
  std::span<const float> scalars;
  std::optional<float> scalar;
  std::string defect;  // e.g. from draws_from_values: values not of the form {-s, 0, +s}
};

struct SampleCheckOptions {
  Params params;             // clip mode and c that the draws used (packing is irrelevant)
  double alpha_total = 1e-6;  // false-fail rate of the whole call, split over its decisions
  double beta = 1e-3;         // power is reported as the smallest effect found with prob. 1 - beta
  bool independence = true;   // the block test of neighbouring masks (2 decisions)
  std::string family = "samples";  // label of the rows
};

/// The battery's per-gradient checks on given samples: structure (exact: values, signs, the scalar
/// against the spec's, |g| >= s kept, 0 never kept), unbiased per coordinate (Clopper-Pearson) and
/// pooled (Bernstein), the variance identity (Bernstein, exact variance) and, if asked, independence
/// of neighbouring masks. Several tensors = one layer-wise gradient (tensor i = layer i). Result's
/// impl is "samples"; alpha_total is split equally over the 3 (or 5) decisions. Needs >= 2 steps,
/// non-empty tensors, finite g; tg::Error(invalid_argument) naming the problem otherwise.
Result check_samples(std::span<const TensorSamples> tensors, const SampleCheckOptions& options);

/// Bit-for-bit comparison of two implementations (`terngrad compare`, and the battery's cross check):
/// for every gradient family and clipping mode, both draw the same stream keys; scalars and trits
/// must be equal, and where both have a codec, the 2bit and base3 payloads byte-identical.
struct CompareOptions {
  std::size_t d = 4099;            // elements per family (lenet keeps its shapes)
  std::uint32_t steps = 2;         // draws per request
  std::uint64_t seed = 20171204;   // of the gradients and the stream keys
  std::vector<ClipMode> modes = {ClipMode::none, ClipMode::clip, ClipMode::saturate};
  bool shared_scalar = true;       // one more case per family: a shared scalar (twice the own one)
  bool all_layers = true;          // false: layers 0, 1 and the last of multi-layer families
  bool stop_at_first = false;      // stop after the first differing case
  bool progress = false;           // progress line on stderr
};
struct CompareCase {
  std::string family, layer, mode;  // mode: none | clip | saturate, "+shared" with a shared scalar
  std::uint64_t trits = 0;          // trits compared
  std::uint32_t payloads = 0;       // payloads compared byte for byte
  std::string difference;           // empty when identical; else the first difference
};
struct CompareResult {
  std::string a, b;
  CompareOptions options;
  std::vector<CompareCase> cases;
  double seconds = 0.0;
  bool identical() const;
  std::uint64_t trits() const;
  std::uint64_t payloads() const;
  const CompareCase* first_difference() const;
};
CompareResult compare_samplers(Sampler& a, Sampler& b, const CompareOptions& options);
std::string format_compare(const CompareResult& result);
std::string format_compare_json(const CompareResult& result);

/// Report writers.
std::string format_table(const Result& result);
std::string format_json(const std::vector<Result>& results);
std::string format_junit(const std::vector<Result>& results);

}  // namespace tg::verify
