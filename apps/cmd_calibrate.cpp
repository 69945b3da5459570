// terngrad-bench: `terngrad calibrate`, on top of the verify library: the battery checking itself under
// the null on a correct implementation over many seeds (tg::verify::calibrate). Exit 0 calibrated,
// 1 not, 2 usage error.
//   terngrad calibrate [--impl optimized] [--profile quick] [--seeds 400] [--alpha 0.05] [--json F]
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "tg/atomic_file.hpp"
#include "tg/verify/battery.hpp"

namespace tg::app {
namespace {

using namespace tg::verify;

struct CalibrateCliOptions {
  std::string impl = "optimized";
  std::string profile = "quick";
  std::uint32_t seeds = 400;
  std::uint64_t seed = 1;
  double alpha = 0.05;
  double ci = 0.95;
  unsigned threads = 0;
  std::vector<std::string> skip, supports;
  std::string json, out;
  double exec_timeout = 300.0;
  bool no_progress = false;
};

int run_calibrate(const CalibrateCliOptions& o) {
  CalibrateOptions co;
  co.base.profile = profile_named(o.profile);
  co.base.seed = o.seed;
  co.base.skip.insert(o.skip.begin(), o.skip.end());
  co.base.supports.insert(o.supports.begin(), o.supports.end());
  co.seeds = o.seeds;
  co.alpha_total = o.alpha;
  co.ci = o.ci;
  co.threads = o.threads;
  co.progress = !o.no_progress;
  check_seed_range(o.seed, o.seeds);
  ExecOptions eo;
  eo.timeout_s = o.exec_timeout;
  // Calibration measures the battery under the null: a mutant is broken on purpose, and its "anti-conservative"
  // rows would say nothing about the battery (verify --impl mutant:NAME shows that it is caught).
  if (o.impl.rfind("mutant:", 0) == 0)
    throw Error(ErrorCode::invalid_argument, "--impl " + o.impl +
                                                 ": calibrate needs a correct implementation (the null); a mutant is "
                                                 "broken on purpose: terngrad verify --impl " + o.impl + " shows it is caught");
  make_sampler(o.impl, eo);  // a bad name or an unavailable implementation fails here, before the run
  // the outputs too, before the run ("-": stdout; --output - is the table there, as without it)
  check_distinct_outputs("--json", o.json, "--output", o.out);
  check_output_file("--output", o.out);
  check_output_file("--json", o.json);
  Calibration cal = calibrate([&] { return make_sampler(o.impl, eo); }, o.impl, co);
  const std::string text = format_calibration(cal);
  if (o.json == "-") std::fputs(format_calibration_json(cal).c_str(), stdout);  // instead of the table
  else std::fputs(text.c_str(), stdout);
  if (!o.out.empty() && o.out != "-") tg::write_file_atomic(o.out, text);
  if (!o.json.empty() && o.json != "-") tg::write_file_atomic(o.json, format_calibration_json(cal));
  return cal.ok() ? 0 : 1;
}

}  // namespace

static Command calibrate_command() {
  auto opts = std::make_shared<CalibrateCliOptions>();
  Command c;
  c.add_fn = [opts](CLI::App& app) {
    CLI::App* sub = app.add_subcommand(
        "calibrate", "The battery checking itself: run it on a correct implementation over many seeds and test each "
                     "statistical row's calibration (standardized SD <= 1, mean 0, valid p-values) and the whole-run "
                     "false-fail rate (exit 0 calibrated, 1 not, 2 error)");
    sub->add_option("--impl", opts->impl, "A correct implementation: reference, optimized, cuda, variant:NAME, exec:'CMD', serve:'CMD'")
        ->capture_default_str();
    sub->add_option("--profile", opts->profile, "quick, ci or full")
        ->check(CLI::IsMember({"quick", "ci", "full"}))
        ->capture_default_str();
    sub->add_option("--seeds", opts->seeds, "Number of runs (seeds --seed .. --seed + N - 1)")
        ->check(tg::app::in_range(2u, 1000000u))
        ->capture_default_str();
    sub->add_option("--seed", opts->seed, "First seed")->capture_default_str();
    sub->add_option("--alpha", opts->alpha, "alpha_total of each run (large, so that rejections can be counted)")
        ->check(tg::app::in_range(1e-12, 0.5))
        ->capture_default_str();
    sub->add_option("--ci", opts->ci,
                    "1 - the probability that the verdict wrongly says NOT CALIBRATED (split over every row and the "
                    "whole-run rate)")
        ->check(tg::app::in_range(0.5, 0.999999))
        ->capture_default_str();
    sub->add_option("--threads", opts->threads, "Runs in parallel (0: one per hardware thread)")->check(tg::app::in_range(0u, 4096u))->capture_default_str();
    sub->add_option("--skip", opts->skip, "Checks to leave out, comma-separated")
        ->delimiter(',')
        ->check(CLI::IsMember(check_names()));
    sub->add_option("--supports", opts->supports, "What the implementation implements (as verify --supports)")
        ->delimiter(',')
        ->check(CLI::IsMember(capability_names()));
    sub->add_option("--json", opts->json, "Write the calibration as JSON to FILE ('-': on stdout, instead of the table)")->check(non_empty_path());
    sub->add_option("--output", opts->out, "Also write the table to FILE ('-': stdout, where it goes anyway)")->check(non_empty_path());
    sub->add_option("--exec-timeout", opts->exec_timeout, "Seconds an external codec (exec:, serve:) may take per call")
        ->check(tg::app::in_range(0.001, 86400.0))
        ->capture_default_str();
    sub->add_flag("--no-progress", opts->no_progress, "No progress lines on stderr");
    only_with(sub, "--exec-timeout", "an external implementation (--impl exec:CMD or serve:CMD)",
              [opts] { return external_impl(opts->impl); });
    return sub;
  };
  c.run_fn = [opts] { return run_calibrate(*opts); };
  return c;
}

const RegisterCommands kRegistered{30, [] { return std::vector<Command>{calibrate_command()}; }};

}  // namespace tg::app
