// terngrad-bench: the statistical verification battery (STATISTICS.md): profiles, the checks, the
// runner, and its reports (table, JSON, JUnit XML). `terngrad verify` (verify/src/command.cpp) is
// the command-line front end; run_battery is usable from tests.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
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

/// Report writers.
std::string format_table(const Result& result);
std::string format_json(const std::vector<Result>& results);
std::string format_junit(const std::vector<Result>& results);

}  // namespace tg::verify
