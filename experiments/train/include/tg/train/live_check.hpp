// terngrad-bench: live verification of the gradients a training run sends (`terngrad train
// --live-check EVERY`), and a dump of one step's exchange (payload bytes per worker and tensor) for
// tests that compare other encoders with the trainer's. No LibTorch types.
//
//   LiveChecker live(config.live_check, exchange, exchange_options, codec, total_steps, out_dir);
//   ... after each exchange:  live.after_exchange(step, worker_0_grads, step_stats);
//
// Every `every` steps (steps 0, every, 2*every, ...) the checker takes worker 0's (rank 0's) real
// gradient of the chosen tensors, draws `draws` extra encodings of each with the exchange's codec,
// options and shared scalar, under keys of their own (seed XOR 'LIVECHK', worker 0, tensor t, steps
// (step/every)*draws + j: the exchange keys with the user seed, so none coincides), and runs the
// battery's per-gradient checks on them (tg::verify::check_samples: structure, unbiased, variance
// identity, independence). Alpha spending: alpha_total over the planned checks of the run
// (ceil(total_steps / every)), split equally over the chosen tensors: a correct codec fails any
// check anywhere in the run with probability at most alpha_total.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "tg/codec.hpp"
#include "tg/train/exchange.hpp"

namespace tg::train {

struct LiveCheckConfig {
  long every = 0;               // 0: no live checks
  std::uint32_t draws = 32;     // extra encodings per tensor and check (>= 2)
  double alpha_total = 1e-3;    // false-fail budget of the whole run
  double beta = 1e-3;           // power is reported at 1 - beta
  std::string fail = "continue";  // continue | stop (throws LiveCheckFailed: exit 1)
  std::string layers = "largest";  // largest | all | comma-separated tensor names or indices (ternary ones)
};

/// Thrown with --live-check-fail stop when a check fails; the message names the step, tensor, checks.
class LiveCheckFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The seed of the live draws: the run's seed XOR 'LIVECHK\0' (never the exchange's seed).
inline constexpr std::uint64_t kLiveSeedXor = 0x4C49564543484B00ULL;

/// One row of live_checks.csv.
struct LiveCheckRow {
  long step = 0;
  std::string layer, check, kind, statistic, p;  // p: p-value (or its bound) of stat rows; empty for exact rows
  double alpha = 0.0;
  bool pass = true;
  double seconds = 0.0;  // the whole check of that tensor at that step (draws + battery)
  std::string detail;
};

class LiveChecker {
 public:
  /// Validates the configuration against the model (tg::Error invalid_argument / std::invalid_argument
  /// naming the problem: unknown tensor, a float32 tensor, draws < 2, alpha outside (0, 1), codec float).
  /// `total_steps`: the planned run (the alpha budget is spent over its checks). `out_dir`: where
  /// live_checks.csv goes (empty: nowhere). `start_step` > 0 (a resumed run) keeps the earlier rows.
  LiveChecker(const LiveCheckConfig& config, const GradientExchange& exchange, const ExchangeOptions& options,
              std::shared_ptr<const Codec> codec, long total_steps, std::string out_dir, long start_step = 0);

  bool enabled() const { return config_.every > 0; }
  bool due(long step) const { return enabled() && step % config_.every == 0; }
  long planned_checks() const { return planned_; }
  double alpha_per_tensor() const { return alpha_each_; }
  const std::vector<std::size_t>& tensors() const { return chosen_; }
  /// The plan, one line: tensors, draws, every, alpha_total over the planned checks.
  std::string plan() const;

  /// Runs the check of `step` if due: `grads` are worker 0's gradients (every tensor), `stats` the
  /// exchange's statistics of that step (its shared scalars). Failures go to stderr at once; with
  /// fail == "stop" it throws LiveCheckFailed after writing the CSV. Returns false if a check failed.
  bool after_exchange(long step, const std::vector<std::span<const float>>& grads, const StepStats& stats);

  const std::vector<LiveCheckRow>& rows() const { return rows_; }
  long checks_run() const { return checks_run_; }
  long checks_failed() const { return checks_failed_; }
  double seconds() const { return seconds_; }

 private:
  void write_csv() const;

  LiveCheckConfig config_;
  std::vector<LayerInfo> layers_;
  ExchangeOptions options_;
  std::shared_ptr<const Codec> codec_;
  std::string out_dir_;
  std::vector<std::size_t> chosen_;
  long planned_ = 0;
  double alpha_each_ = 0.0;
  std::string earlier_;  // rows of an earlier run (resume)
  std::vector<LiveCheckRow> rows_;
  long checks_run_ = 0, checks_failed_ = 0;
  double seconds_ = 0.0;
};

/// live_checks.csv's header line (with its newline).
const std::string& live_check_csv_header();

/// Test hook (`terngrad train --fault-codec NAME`, hidden): the exchange's codec replaced by one of
/// the battery's mutants (tg::verify::mutant_list(), e.g. "deterministic"), to show that the live
/// check catches a broken encoder. Empty name: the trainer's optimized codec (one thread).
std::shared_ptr<const Codec> make_exchange_codec(const std::string& fault_codec);

/// Writes one step's exchange into `dir`: for every worker w and tensor t of `stats.buffers`,
/// payload-w<w>-t<t>.bin (the bytes the exchange sent), for the workers this process holds
/// (`first_worker` + i) grad-w<w>-t<t>.f32 (raw little-endian float32), and dump.json (seed, step,
/// tensors: name, numel, ternary, shared scalar). Each file atomically.
void dump_exchange(const std::string& dir, long step, const std::vector<LayerInfo>& layers,
                   const ExchangeOptions& options, int first_worker,
                   const std::vector<std::vector<std::span<const float>>>& grads, const StepStats& stats);

}  // namespace tg::train
