// terngrad-bench: seed-averaged curves of the convex experiments and their CSV / JSON form
// (written with tg::write_file_atomic by `terngrad converge`).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tg/convex/simulate.hpp"

namespace tg::convex {

struct Curves {
  std::string method;
  std::vector<int> t;                    // recorded steps
  std::vector<double> dist2_mean, dist2_p10, dist2_p90;  // ||w_t - w*||^2 over seeds
  std::vector<double> loss_gap;          // mean C(w_t) - C(w*)
  std::vector<double> update_sq;         // mean ||g~_t||^2
  std::vector<double> assumption3;       // mean of mean_w ||g_w||_inf ||g_w||_1
  std::vector<double> grad_sq;           // mean of mean_w ||g_w||_2^2
  std::vector<double> var_measured;      // mean ||g~_t - E[g~_t | g]||^2
  std::vector<double> var_identity;      // mean of the identity's value
  std::vector<double> dist2_predicted;   // exact E||w_t - w*||^2 (least squares), else empty
  std::vector<std::vector<double>> block_dist2;  // per block: mean ||w_t,b - w*_b||^2 / scale_b^2
  double slope = 0;                      // least-squares slope of log dist2_mean on log t over the last half
  double final_dist2 = 0;
  int seeds = 0, diverged = 0;
};

/// Means over seeds at t = 0, every, 2*every, ..., steps (the per-step quantities too: run_sgd records them
/// at t = steps, at the final iterate).
/// block_scales: one per block (block curves are divided by scale^2); empty: 1.
Curves summarize(const std::string& method, const std::vector<Trace>& traces, int every,
                 const std::vector<double>& predicted = {}, const std::vector<double>& block_scales = {});
/// The first line of curves_csv.
inline constexpr const char* kCurvesCsvHeader =
    "method,t,dist2_mean,dist2_p10,dist2_p90,dist2_predicted,loss_gap,update_sq,assumption3,grad_sq,var_measured,"
    "var_identity";
std::string curves_csv(const std::vector<Curves>& curves);
nlohmann::json curves_json(const std::vector<Curves>& curves);

}  // namespace tg::convex
