// terngrad-bench: training runs of the paper's nets (LibTorch) with float, TernGrad, QSGD or EF-SignSGD gradients,
// N simulated workers in one process or one worker per process over c10d/Gloo. This header has no
// LibTorch types, so the command line and tests compile without LibTorch headers.
//   tg::train::TrainConfig cfg; cfg.model = "lenet"; cfg.steps = 100; auto r = tg::train::run_training(cfg);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tg/train/live_check.hpp"

namespace tg::train {

struct TrainConfig {
  // model and data
  std::string model = "lenet";          // lenet | cifarnet | alexnet | googlenet | vgga
  std::string data = "fashion-mnist";   // fashion-mnist | mnist (idx folder in data_dir) | cifar10 | tensor (tg/train/tensor_data.hpp) | synthetic
  std::string data_dir;                 // default: the Fashion-MNIST package folder
  std::size_t train_limit = 0;          // use the first N training images (0: all)
  std::size_t test_limit = 0;           // use the first N test images (0: all)
  // gradient codec
  std::string codec = "terngrad";       // float | terngrad | qsgd | signsgd-ef
  int qsgd_levels = 4;                  // qsgd: s levels of |g_k| / ||g_bucket||_2
  std::uint64_t qsgd_bucket = 512;      // qsgd: elements per norm (0: one norm per tensor)
  std::string float_exchange = "allreduce";  // float: allreduce (sum over ranks) | allgather (every gradient to every rank)
  std::string packing = "2bit";         // 2bit | base3
  bool layerwise = true;
  bool shared_scalar = true;            // terngrad: workers share the max scalar (false: each its own)
  std::string clip = "none";            // none | clip | saturate
  double c = 2.5;
  std::uint64_t float_below = 0;        // tensors with fewer elements stay float32
  bool quantize_last = true;
  // optimizer
  std::string optimizer = "momentum";   // sgd | momentum | adam
  double lr = 0.01, momentum = 0.9, weight_decay = 5e-4;
  // loss: wd/2 ||w||^2 in the loss on the weights the authors decay (every conv/fc weight; CifarNet:
  // local3/local4 weights only), so it is part of the exchanged gradient; update: the optimizer's
  // weight decay on every parameter after the exchange.
  std::string weight_decay_in = "loss";
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_eps = 1e-8;
  std::string lr_policy = "inv";        // fixed | inv (Caffe: lr (1 + gamma t)^-power) | step (lr gamma^floor(t/step_size))
  double gamma = 1e-4, power = 0.75;
  int step_size = 1000;
  // run
  int batch = 64;                       // total batch over all workers
  int workers = 2;                      // simulated workers (ignored in a multi-process run: world size)
  long steps = 1000;
  double epochs = 0.0;                  // > 0 overrides steps: ceil(epochs * train images / batch)
  std::uint64_t seed = 1;
  int threads = 1;                      // intra-op threads of LibTorch (1 keeps results reproducible)
  int sim_threads = 1;                  // threads computing the simulated workers' gradients (and the test
                                        // evaluations) at once, each on its own copy of the model (same bits as
                                        // 1; in-process simulation on the CPU only, models without dropout)
  std::string device = "cpu";           // cpu | cuda (forward/backward/optimizer there; the exchange stays on the CPU)
  long eval_every = 100;                // test accuracy every N steps (and at the end); 0: only at the end
  std::string out_dir;                  // CSV + JSON outputs (empty: none)
  bool save_weights = false;            // also write weights.f32 (final parameters) into out_dir
  bool progress = false;                // progress bar on stderr
  // checkpoints
  std::string checkpoint;               // path written every checkpoint_every steps and at the end
  long checkpoint_every = 0;
  std::string resume;                   // checkpoint to continue from
  // multi-process (world_size > 0)
  int rank = -1, world_size = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool external_store = false;          // the store runs elsewhere (`terngrad train-store`); rank 0 does not host it
  double timeout_s = 60.0;              // bound on every collective and on the rendezvous
  // fault injection (tests of the multi-process error paths)
  long fault_kill_at_step = -1;         // this rank kills itself with SIGKILL before this step
  long fault_hang_at_step = -1;         // this rank stops responding before this step
  int fault_rank = -1;
  std::string fault_codec;              // a battery mutant as the exchange's codec (tests of the live check)
  // live verification and inspection (live_check.hpp)
  LiveCheckConfig live_check;           // --live-check EVERY: the battery's checks on the gradients sent
  long dump_step = -1;                  // write this step's exchange to out_dir/dump-step<N> (payloads, gradients)
};

/// Totals of one layer over a run.
struct LayerSummary {
  std::string name;
  std::size_t numel = 0;
  bool ternary = false;
  std::uint64_t payload_bytes = 0;  // per worker per step
  std::uint64_t float_bytes = 0;
  double mean_sparsity = 0.0;
  double mean_scalar = 0.0;
};

struct EvalPoint {
  long step = 0;
  double train_loss = 0.0;  // mean training loss since the previous point
  double test_loss = 0.0;
  double test_accuracy = 0.0;
};

/// One training step (loss: mean over workers of their shard's mean loss).
struct StepRecord {
  long step = 0;
  double loss = 0.0, lr = 0.0;
  double compute_s = 0.0, encode_s = 0.0, comm_s = 0.0, decode_s = 0.0, optimizer_s = 0.0;
  double wait_s = 0.0, wire_s = 0.0;                 // comm_s = wait_s + wire_s (0 in the simulation)
  std::uint64_t payload_bytes = 0, float_bytes = 0;  // per worker, all tensors
  std::uint64_t uplink_bytes = 0, downlink_bytes = 0;  // one worker sends / receives this step (every collective)
};

/// One rank's time split at one step (multi-process runs: every rank's, gathered at the end).
struct RankStepTimes {
  long step = 0;
  int rank = 0;
  double compute_s = 0.0, encode_s = 0.0, wait_s = 0.0, wire_s = 0.0, decode_s = 0.0, optimizer_s = 0.0;
};

/// One tensor at one step.
struct LayerStepRecord {
  long step = 0;
  std::uint32_t layer = 0;
  double sparsity = 0.0;
  float scalar = 0.0f;
};

struct TrainResult {
  std::string data_description;
  long start_step = 0, steps = 0;
  int workers = 0;
  std::vector<EvalPoint> evals;
  std::vector<LayerSummary> layers;
  double compute_s = 0.0, encode_s = 0.0, comm_s = 0.0, decode_s = 0.0, optimizer_s = 0.0, wall_s = 0.0;
  double wait_s = 0.0, wire_s = 0.0;
  std::uint64_t uplink_bytes = 0, downlink_bytes = 0;  // per worker per step
  std::vector<RankStepTimes> rank_records;           // multi-process: every rank's split per step
  double final_test_accuracy = 0.0;
  std::vector<float> final_weights;  // every parameter, flattened in model order
  std::vector<StepRecord> step_records;
  std::vector<LayerStepRecord> layer_records;
  long live_checks = 0, live_checks_failed = 0;  // live checks run (and failed) by this process
  double live_check_s = 0.0;                      // their time (outside the step timings)
  bool finished = false;  // every step run: run.json says so ("finished"); a snapshot during the run does not
};

/// Runs (or resumes) one training run. Throws std::exception with a clear message on bad options,
/// bad data, a failed collective (peer died, hung, never joined) or a mismatched checkpoint.
TrainResult run_training(const TrainConfig& config);

/// Writes steps.csv, layers.csv, evals.csv, run.json (and weights.f32 if config.save_weights) into
/// `dir`, each atomically.
void write_outputs(const std::string& dir, const TrainConfig& config, const TrainResult& result);

/// Hosts the rendezvous store for a multi-process run until every rank is done or `timeout_s` passes.
int run_store(const std::string& addr, int port, int world_size, double timeout_s);

/// The models this build defines and their input shapes, for --help.
std::vector<std::string> model_names();

/// Reads a raw little-endian float32 file (weights.f32 written by a run).
std::vector<float> read_weights_file(const std::string& path);

}  // namespace tg::train
