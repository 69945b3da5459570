// terngrad-bench: the battery's reports: the table on stdout, --json FILE, --junit FILE (JUnit XML).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tg/verify/battery.hpp"

namespace tg::verify {

std::string strf(const char* f, ...) __attribute__((format(printf, 1, 2)));

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
  o << "exact rows are deterministic facts (no error budget); info rows are reported, not tested.\n\n";
  const char* head[7] = {"check", "family", "measured", "threshold", "p-value", "detectable (power 1-beta)", "verdict"};
  std::vector<std::array<std::string, 7>> cells;
  for (const auto& r : res.rows) {
    std::string verdict = r.kind == "info" ? "info" : (r.pass ? "pass" : "FAIL");
    cells.push_back({r.check, r.family, r.statistic, r.threshold, r.pvalue, r.power, verdict});
  }
  std::size_t w[7];
  for (int k = 0; k < 7; ++k) {
    w[k] = std::string(head[k]).size();
    for (const auto& c : cells) w[k] = std::max(w[k], c[static_cast<std::size_t>(k)].size());
  }
  auto line = [&](const std::array<std::string, 7>& c) {
    for (int k = 0; k < 7; ++k) {
      o << c[static_cast<std::size_t>(k)];
      if (k < 6) o << std::string(w[k] - c[static_cast<std::size_t>(k)].size() + 2, ' ');
    }
    o << "\n";
  };
  line({head[0], head[1], head[2], head[3], head[4], head[5], head[6]});
  for (const auto& c : cells) line(c);
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

std::string format_json(const std::vector<Result>& results) {
  nlohmann::json runs = nlohmann::json::array();
  bool all = true;
  for (const auto& res : results) {
    const Profile& P = res.options.profile;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : res.rows)
      rows.push_back({{"check", r.check},         {"family", r.family}, {"kind", r.kind},
                      {"statistic", r.statistic}, {"threshold", r.threshold}, {"p_value", r.pvalue},
                      {"detectable", r.power},    {"alpha", r.alpha},   {"pass", r.pass},
                      {"detail", r.detail},       {"id", r.id},
                      {"z", std::isfinite(r.z) ? nlohmann::json(r.z) : nlohmann::json()},
                      {"p", std::isfinite(r.p) ? nlohmann::json(r.p) : nlohmann::json()}});
    all = all && res.pass();
    runs.push_back({{"implementation", res.impl},
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
                    {"rows", rows}});
  }
  nlohmann::json doc = {{"tool", "terngrad verify"}, {"pass", all}, {"runs", runs}};
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
}  // namespace

std::string format_junit(const std::vector<Result>& results) {
  std::ostringstream o;
  std::size_t tests = 0, failures = 0;
  double secs = 0;
  for (const auto& res : results) {
    tests += res.rows.size();
    for (const auto& r : res.rows) failures += r.pass ? 0 : 1;
    secs += res.seconds;
  }
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << strf("<testsuites name=\"terngrad verify\" tests=\"%zu\" failures=\"%zu\" time=\"%.3f\">\n", tests, failures, secs);
  for (const auto& res : results) {
    std::size_t f = 0;
    for (const auto& r : res.rows) f += r.pass ? 0 : 1;
    o << "  <testsuite name=\"" << xml(res.impl + " (" + res.options.profile.name + ")") << "\" tests=\""
      << res.rows.size() << "\" failures=\"" << f << "\" time=\"" << strf("%.3f", res.seconds) << "\">\n";
    for (const auto& r : res.rows) {
      std::string name = r.family + ": " + r.statistic;
      o << "    <testcase classname=\"" << xml("verify." + r.check) << "\" name=\"" << xml(name) << "\">";
      std::string sys = "threshold " + r.threshold + "; " + r.pvalue + "; detectable " + r.power + "; alpha " +
                        strf("%.3g", r.alpha) + "; " + r.detail;
      if (!r.pass) o << "<failure message=\"" << xml(r.detail) << "\">" << xml(sys) << "</failure>";
      else o << "<system-out>" << xml(sys) << "</system-out>";
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
