// terngrad-bench: the battery's reports: the table on stdout, --json FILE, --junit FILE (JUnit XML).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tg/strf.hpp"
#include "tg/verify/battery.hpp"
#include "tg/wrap.hpp"
#include "tg_version.hpp"

namespace tg::verify {

std::string format_columns(const std::vector<TextColumn>& columns, const std::vector<std::vector<std::string>>& rows) {
  const std::size_t n = columns.size();
  std::vector<std::size_t> w(n);
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t widest = columns[k].head.size();
    for (const auto& row : rows)
      if (k < row.size()) widest = std::max(widest, row[k].size());
    w[k] = std::min(widest, std::max(columns[k].width, std::size_t{1}));
  }
  std::ostringstream o;
  auto emit = [&](const std::vector<std::string>& row) {
    std::vector<std::vector<std::string>> parts(n);
    std::size_t height = 1;
    for (std::size_t k = 0; k < n; ++k) {
      parts[k] = tg::wrap_line(k < row.size() ? row[k] : std::string(), w[k]);
      height = std::max(height, parts[k].size());
    }
    for (std::size_t i = 0; i < height; ++i) {
      std::string line;
      for (std::size_t k = 0; k < n; ++k) {
        const std::string cell = i < parts[k].size() ? parts[k][i] : std::string();
        const std::string pad(w[k] - std::min(w[k], cell.size()), ' ');
        if (k > 0) line += "  ";
        line += columns[k].right ? pad + cell : cell + pad;
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      o << line << "\n";
    }
  };
  std::vector<std::string> head;
  for (const auto& c : columns) head.push_back(c.head);
  emit(head);
  for (const auto& row : rows) emit(row);
  return o.str();
}

std::string format_table(const Result& res) {
  const Profile& P = res.options.profile;
  std::ostringstream o;
  const bool given = P.name == "samples";  // check_samples: the caller drew them
  if (given)
    o << "terngrad verify: samples given by the caller (no implementation or seed of ours)\n";
  else
    o << "terngrad verify: implementation " << res.impl << ", profile " << P.name << ", seed " << res.options.seed << "\n";
  o << strf("error budget: alpha_total %.3g split over %zu statistical decisions (Bonferroni): %.3g each; "
            "power 1 - beta with beta %.3g\n",
            P.alpha_total, res.decisions, res.alpha_each, P.beta);
  if (given)
    o << strf("sizes: %zu elements, %u draws\n", P.d, P.steps);
  else
    o << strf("sizes: %zu elements per family, %u draws; streams %u draws; aggregate %u workers x %u draws\n", P.d,
              P.steps, P.stream_steps, P.agg_workers, P.agg_steps);
  if (!res.options.supports.empty()) {
    std::string caps;
    for (const auto& s : res.options.supports) caps += (caps.empty() ? "" : ", ") + s;
    o << "the implementation supports: " << caps << " (the rest is left out, with the reason, below the checks)\n";
  }
  o << "exact rows are deterministic facts (no error budget); info rows are reported, not tested.\n\n";
  // Caps chosen so that a row fits in about 160 columns; the longest cells of a ci run (a measured value of
  // 95 characters, a detectable effect of 72) wrap onto a second or third line.
  const std::vector<TextColumn> columns = {{"check", 24},     {"family", 14},   {"measured", 38}, {"threshold", 18},
                                           {"p-value", 24},   {"detectable (power 1-beta)", 25}, {"verdict", 7}};
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : res.rows) {
    std::string verdict = r.kind == "info" || r.kind == "skipped" ? r.kind : (r.pass ? "pass" : "FAIL");
    cells.push_back({r.check, r.family, r.statistic, r.threshold, r.pvalue, r.power, verdict});
  }
  o << format_columns(columns, cells);
  bool any = false;
  for (const auto& r : res.rows)
    if (!r.pass) {
      if (!any) o << "\nfailures:\n";
      any = true;
      o << "  " << r.check << " [" << r.family << "]: " << r.detail << "\n";
    }
  std::size_t fails = 0;
  for (const auto& r : res.rows) fails += r.pass ? 0 : 1;
  o << strf("\nverdict: %s (%zu rows, %zu failed) in %.1f s\n", res.pass() ? "PASS" : "FAIL", res.rows.size(), fails,
            res.seconds);
  return o.str();
}

namespace {

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      if (c != std::string::npos) return line.substr(line.find_first_not_of(" \t", c + 1));
    }
  return "unknown";
}

// What a reader of the file needs to reproduce or compare it (cf. Google Benchmark's "context").
nlohmann::json context_of(const std::vector<Result>& results) {
  nlohmann::json c = {{"tool_version", tg::kToolVersion},
                      {"source_commit", tg::kSourceCommit},
                      {"date", utc_now()},
                      {"host", host_name()},
                      {"cpu", cpu_model()},
                      {"cpus", std::thread::hardware_concurrency()}};
  if (!results.empty()) {
    const Options& o = results.front().options;
    c["seed"] = o.seed;
    c["profile"] = o.profile.name;
    c["alpha_total"] = o.profile.alpha_total;
    c["beta"] = o.profile.beta;
    c["skip"] = std::vector<std::string>(o.skip.begin(), o.skip.end());
    c["supports"] = o.supports.empty() ? std::vector<std::string>{"all"}
                                       : std::vector<std::string>(o.supports.begin(), o.supports.end());
  }
  return c;
}

}  // namespace

std::string format_summary(const Result& res) {
  const Profile& P = res.options.profile;
  std::size_t failed = 0, stat = 0;
  for (const auto& r : res.rows) failed += r.pass ? 0 : 1, stat += r.kind == "stat";
  std::string out = strf("terngrad verify: %s on %s: %zu of %zu rows failed (alpha_total %.3g over %zu decisions)\n",
                         res.pass() ? "PASS" : "FAIL", res.impl.c_str(), failed, res.rows.size(), P.alpha_total, stat);
  std::size_t shown = 0;
  for (const auto& r : res.rows) {
    if (r.pass) continue;
    if (++shown > 12) {
      out += strf("  ... and %zu more (result.table() has them all)\n", failed - 12);
      break;
    }
    std::string what = r.detail.size() > 160 ? r.detail.substr(0, 157) + "..." : r.detail;
    out += "  " + r.id + ": " + r.statistic;
    if (std::isfinite(r.effect)) out += strf(" (effect %.3g, detectable %.3g)", r.effect, r.detectable);
    out += "; " + what + "\n";
  }
  if (P.name != "samples") {
    std::string skip, sup;
    for (const auto& s : res.options.skip) skip += (skip.empty() ? "" : ",") + s;
    for (const auto& s : res.options.supports) sup += (sup.empty() ? "" : ",") + s;
    const unsigned long long seed = res.options.seed;
    const bool unseeded = !res.options.reproducible;
    const std::size_t module_colon = res.impl.rfind("python:", 0) == 0 ? res.impl.find(':', 7) : std::string::npos;
    if (module_colon != std::string::npos)  // python:MODULE:FUNCTION, as `python -m terngrad verify --impl` takes it
      out += strf("reproduce: python -m terngrad verify --impl '%s' --profile %s --seed %llu%s%s%s%s\n", res.impl.c_str(),
                  P.name.c_str(), seed, skip.empty() ? "" : " --skip ", skip.c_str(), sup.empty() ? "" : " --supports ",
                  sup.c_str());
    else if (!res.python_function.empty() || res.impl.rfind("python:", 0) == 0)  // a draw function: the call
      out += strf("reproduce: terngrad.verify.run(%s, profile='%s', seed=%llu%s%s%s%s%s)\n",
                  (res.python_function.empty() ? res.impl.substr(7) : res.python_function).c_str(), P.name.c_str(), seed,
                  skip.empty() ? "" : ", skip='", skip.c_str(), skip.empty() ? "" : "'.split(',')",
                  sup.empty() ? "" : (", supports='" + sup + "'.split(',')").c_str(), unseeded ? ", reproducible=False" : "");
    else
      out += strf("reproduce: terngrad verify --impl '%s' --profile %s --seed %llu%s%s%s%s%s\n", res.impl.c_str(),
                  P.name.c_str(), seed, skip.empty() ? "" : " --skip ", skip.c_str(), sup.empty() ? "" : " --supports ",
                  sup.c_str(), unseeded ? " --unseeded" : "");
  }
  return out;
}

bool Result::as_expected() const {
  if (expected == "reject") return !pass();
  return pass();
}

std::string format_json(const std::vector<Result>& results) {
  nlohmann::json runs = nlohmann::json::array();
  bool all = true;
  for (const auto& res : results) {
    const Profile& P = res.options.profile;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : res.rows)
      rows.push_back({{"id", r.id},
                      {"check", r.check},
                      {"family", r.family},
                      {"kind", r.kind},
                      {"pass", r.pass},
                      {"statistic", r.statistic},
                      {"threshold", r.threshold},
                      {"p_value", r.pvalue},
                      {"detectable", r.power},
                      {"effect", number(r.effect)},
                      {"limit", number(r.limit)},
                      {"detectable_effect", number(r.detectable)},
                      {"z", number(r.z)},
                      {"p", number(r.p)},
                      {"alpha", r.alpha},
                      {"detail", r.detail}});
    all = all && res.as_expected();
    nlohmann::json run = {{"implementation", res.impl},
                          {"profile", P.name},
                          {"seed", res.options.seed},
                          {"alpha_total", P.alpha_total},
                          {"beta", P.beta},
                          {"decisions", res.decisions},
                          {"alpha_each", res.alpha_each},
                          {"sizes", {{"d", P.d}, {"steps", P.steps}, {"stream_steps", P.stream_steps},
                                     {"agg_workers", P.agg_workers}, {"agg_steps", P.agg_steps}, {"cross_d", P.cross_d}}},
                          {"seconds", res.seconds},
                          {"pass", res.pass()},
                          {"expected", res.expected.empty() ? "pass" : res.expected},
                          {"as_expected", res.as_expected()},
                          {"rows", rows}};
    runs.push_back(run);
  }
  nlohmann::json doc = {{"tool", "terngrad verify"},
                        {"schema_version", 2},
                        {"context", context_of(results)},
                        {"pass", all},
                        {"runs", runs}};
  return doc.dump(2) + "\n";
}

namespace {
std::string xml(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') o += ' ';
        else o += c;
    }
  }
  return o;
}

// The stable name of a row's test case: family[.label] (the id without the check), the check being
// the class name; measured values go to <system-out>, never into names.
std::string case_name(const Row& r) {
  std::string rest = r.id.substr(std::min(r.id.size(), r.check.size() + 1));
  for (auto& ch : rest)
    if (ch == '/') ch = '.';
  return rest.empty() ? r.family : rest;
}

std::string row_text(const Row& r) {
  return "measured " + r.statistic + "; threshold " + r.threshold + "; " + r.pvalue + "; detectable " + r.power +
         "; alpha " + strf("%.3g", r.alpha) + "; " + r.detail;
}
}  // namespace

std::string format_junit(const std::vector<Result>& results) {
  struct Case {
    std::string classname, name, failure, skipped, out;
  };
  struct Suite {
    std::string name;
    double seconds;
    std::vector<Case> cases;
  };
  std::vector<Suite> suites;
  for (const auto& res : results) {
    Suite su{res.impl + " (" + res.options.profile.name + ")", res.seconds, {}};
    if (res.expected == "reject") {
      // A mutant in the self-test: one case, passed when the battery rejected it.
      std::string fails;
      for (const auto& c : res.failed_checks()) fails += (fails.empty() ? "" : ", ") + c;
      Case k{"self-test", res.impl + " is rejected", "", "", ""};
      if (res.pass()) k.failure = "the battery passed " + res.impl + ", which must be rejected";
      k.out = res.pass() ? "every check passed" : "rejected by: " + fails;
      su.cases.push_back(k);
    } else {
      for (const auto& r : res.rows) {
        Case k{r.check, case_name(r), "", "", row_text(r)};
        if (r.kind == "skipped") k.skipped = r.detail;
        else if (!r.pass) k.failure = r.detail;
        su.cases.push_back(k);
      }
    }
    suites.push_back(std::move(su));
  }
  std::size_t tests = 0, failures = 0, skipped = 0;
  double secs = 0;
  for (const auto& su : suites) {
    secs += su.seconds;
    for (const auto& k : su.cases) tests += 1, failures += !k.failure.empty(), skipped += !k.skipped.empty();
  }
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << strf("<testsuites name=\"terngrad verify\" tests=\"%zu\" failures=\"%zu\" skipped=\"%zu\" time=\"%.3f\">\n",
            tests, failures, skipped, secs);
  for (const auto& su : suites) {
    std::size_t f = 0, sk = 0;
    for (const auto& k : su.cases) f += !k.failure.empty(), sk += !k.skipped.empty();
    o << "  <testsuite name=\"" << xml(su.name) << "\" tests=\"" << su.cases.size() << "\" failures=\"" << f
      << "\" skipped=\"" << sk << "\" time=\"" << strf("%.3f", su.seconds) << "\">\n";
    for (const auto& k : su.cases) {
      o << "    <testcase classname=\"" << xml(k.classname) << "\" name=\"" << xml(k.name) << "\">";
      if (!k.skipped.empty()) o << "<skipped message=\"" << xml(k.skipped) << "\"/>";
      if (!k.failure.empty()) o << "<failure message=\"" << xml(k.failure) << "\">" << xml(k.out) << "</failure>";
      else o << "<system-out>" << xml(k.out) << "</system-out>";
      o << "</testcase>\n";
    }
    o << "  </testsuite>\n";
  }
  o << "</testsuites>\n";
  return o.str();
}

std::string format_compare_json(const CompareResult& r) {
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& k : r.cases)
    cases.push_back({{"family", k.family}, {"layer", k.layer}, {"clip", k.mode}, {"trits", k.trits},
                     {"payloads", k.payloads}, {"identical", k.difference.empty()}, {"difference", k.difference}});
  nlohmann::json doc = {{"a", r.a},
                        {"b", r.b},
                        {"seed", r.options.seed},
                        {"d", r.options.d},
                        {"steps", r.options.steps},
                        {"identical", r.identical()},
                        {"trits", r.trits()},
                        {"payloads", r.payloads()},
                        {"seconds", r.seconds},
                        {"cases", cases}};
  return doc.dump(2) + "\n";
}

}  // namespace tg::verify
