// terngrad-bench: the seed-averaged curves and their CSV form (experiments/convex/src/output.cpp): every
// recorded row is complete, the last one (t = steps) included.
// Run: ctest -R tg_convex_tests (or build/<dir>/experiments/convex/tg_convex_tests --gtest_filter='ConvexOutput*').
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "tg/convex/methods.hpp"
#include "tg/convex/output.hpp"
#include "tg/convex/problem.hpp"
#include "tg/convex/simulate.hpp"

using namespace tg::convex;

namespace {
std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, ',')) out.push_back(f);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}
}  // namespace

// The per-step quantities (||update||^2, Assumption 3's ||g||_inf ||g||_1, ||g||_2^2, the codec variance)
// exist at every recorded t, t = steps included: they are the gradient and codec step at w_t. Before the
// fix the row t = steps read past the per-step vectors and wrote nan in five columns.
TEST(ConvexOutput, EveryCsvRowIsCompleteIncludingTheLast) {
  ProblemSpec s;
  s.dim = 5;
  s.samples = 50;
  LeastSquares p(s);
  RunSpec run;
  run.workers = 2;
  run.batch = 2;
  run.steps = 7;
  for (const char* name : {"float", "tern", "tern-clip", "qsgd", "sign"}) {
    auto traces = run_seeds(p, parse_method(name), run, 1, 3);
    for (const auto& tr : traces) {
      EXPECT_EQ(tr.assumption3.size(), static_cast<std::size_t>(run.steps + 1)) << name;
      EXPECT_EQ(tr.update_sq.size(), static_cast<std::size_t>(run.steps + 1)) << name;
    }
    Curves c = summarize(name, traces, 3);
    ASSERT_EQ(c.t, (std::vector<int>{0, 3, 6, 7})) << name;
    std::istringstream csv(curves_csv({c}));
    std::string line;
    std::getline(csv, line);
    const auto header = split(line);
    ASSERT_EQ(header.size(), 12u);
    int rows = 0;
    while (std::getline(csv, line)) {
      ++rows;
      const auto f = split(line);
      ASSERT_EQ(f.size(), header.size()) << line;
      for (std::size_t k = 1; k < f.size(); ++k) {
        if (header[k] == "dist2_predicted") {
          EXPECT_TRUE(f[k].empty()) << line;  // no prediction was given to summarize
          continue;
        }
        char* end = nullptr;
        const double v = std::strtod(f[k].c_str(), &end);
        EXPECT_TRUE(!f[k].empty() && *end == '\0' && std::isfinite(v)) << name << ": " << header[k] << " = '"
                                                                       << f[k] << "' in row " << line;
      }
    }
    EXPECT_EQ(rows, 4) << name;
  }
}

// A diverged run's values (inf, nan) are empty cells of curves.csv, as they are null in summary.json (they
// were written as "inf" and "-nan", which a CSV reader takes for text or for a number of its own).
TEST(ConvexOutput, NonFiniteValuesAreEmptyCells) {
  Curves c;
  c.method = "tern";
  c.t = {0, 1};
  const double inf = INFINITY, nan = NAN;
  for (auto* v : {&c.dist2_mean, &c.dist2_p10, &c.dist2_p90, &c.loss_gap, &c.update_sq, &c.assumption3, &c.grad_sq,
                  &c.var_measured, &c.var_identity, &c.dist2_predicted})
    *v = {1.5, inf};
  c.loss_gap[1] = nan;
  c.var_identity[1] = -inf;
  std::istringstream csv(curves_csv({c}));
  std::string line;
  std::getline(csv, line);
  std::getline(csv, line);
  EXPECT_EQ(line, "tern,0,1.5,1.5,1.5,1.5,1.5,1.5,1.5,1.5,1.5,1.5");
  std::getline(csv, line);
  EXPECT_EQ(line, "tern,1,,,,,,,,,,");
  const nlohmann::json j = curves_json({c});
  EXPECT_TRUE(j[0]["loss_gap"][1].is_null());
  EXPECT_TRUE(j[0]["dist2_mean"][1].is_null());
}
