// terngrad-bench: the `terngrad train` and `terngrad launch` subcommands (and the hidden `train-store`).
//   terngrad train --model lenet --codec terngrad --workers 2 --steps 1000 --out reports/train/runs/x
//   terngrad launch --nproc 2 -- --model lenet --steps 100 --out /tmp/run
#include <unistd.h>

#include <array>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tg/atomic_file.hpp"
#include "tg/train/data.hpp"
#include "tg/train/launcher.hpp"
#include "tg/train/trainer.hpp"

namespace tg::app {
namespace {

// What the command line adds to the training configuration.
struct TrainCli {
  std::string json;  // FILE, or "-" for stdout
  bool progress = false, no_progress = false;
  bool check_options = false;  // `terngrad launch` checks the options once this way before it starts the ranks
};

void add_train_options(CLI::App* sub, tg::train::TrainConfig& c, TrainCli& cli) {
  sub->add_option("--model,--net", c.model, "Net (--net as in `terngrad model`)")->check(CLI::IsMember({"lenet", "cifarnet", "alexnet", "googlenet", "vgga"}));
  sub->add_option("--data", c.data,
                  "Data: fashion-mnist (Debian package), mnist, cifar10 or tensor (preprocessed images, for AlexNet/"
                  "GoogLeNet/VGG-A; all three with --data-dir), synthetic")
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "cifar10", "tensor", "synthetic"}));
  sub->add_option("--data-dir", c.data_dir, "Folder of the MNIST idx files, of cifar-10-batches-bin, or a tensor folder (tensors.txt)")
      ->check(CLI::ExistingDirectory);
  sub->add_option("--device", c.device, "cpu, or cuda where the LibTorch build has CUDA (the exchange stays on the CPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  sub->add_option("--train-limit", c.train_limit, "Use the first N training images (0: all)");
  sub->add_option("--test-limit", c.test_limit, "Use the first N test images (0: all)");
  sub->add_option("--codec", c.codec, "Gradient codec: float, terngrad, qsgd (s levels), signsgd-ef (sign with error feedback)")
      ->check(CLI::IsMember({"float", "terngrad", "qsgd", "signsgd-ef"}));
  sub->add_option("--qsgd-levels", c.qsgd_levels, "QSGD: s, levels of |g|/||g||_2 (1 + ceil(log2(s+1)) bits per element)")
      ->check(tg::app::in_range(1, 65535));
  sub->add_option("--qsgd-bucket", c.qsgd_bucket,
                  "QSGD: elements per bucket, each quantized against its own L2 norm (one float32 per bucket); "
                  "0: one norm per tensor")
      ->check(tg::app::in_range(std::uint64_t{0}, std::uint64_t{1} << 31));
  sub->add_option("--float-exchange", c.float_exchange,
                  "Float codec: allreduce (sum over ranks, Gloo ring) or allgather (every gradient to every rank)")
      ->check(CLI::IsMember({"allreduce", "allgather"}));
  sub->add_option("--packing", c.packing, "TernGrad packing")->check(CLI::IsMember({"2bit", "base3"}));
  sub->add_option("--layerwise", c.layerwise, "One scalar per tensor (true) or one for all tensors (false)");
  sub->add_option("--shared-scalar", c.shared_scalar,
                  "TernGrad: every worker uses the max of the workers' scalars (true, the paper's scalar sharing) or its own (false)");
  sub->add_option("--clip", c.clip, "Clipping mode")->check(CLI::IsMember({"none", "clip", "saturate"}));
  sub->add_option("--c", c.c, "Clip factor (bound c*sigma)")->check(tg::app::in_range(tg::kMinClipFactor, tg::kMaxClipFactor));
  sub->add_option("--float-below", c.float_below, "Tensors with fewer elements stay float32 (0: none)");
  sub->add_option("--quantize-last", c.quantize_last, "Whether the last layer's tensors are ternarized");
  sub->add_option("--optimizer", c.optimizer, "Optimizer")->check(CLI::IsMember({"sgd", "momentum", "adam"}));
  sub->add_option("--lr", c.lr, "Base learning rate (LibTorch holds it as a float)")->check(tg::app::in_range(1e-10, 1e4));
  sub->add_option("--momentum", c.momentum, "Momentum (optimizer momentum)")->check(tg::app::in_range(0.0, 0.9999));
  sub->add_option("--weight-decay", c.weight_decay, "L2 weight decay")->check(tg::app::in_range(0.0, 1.0));
  sub->add_option("--weight-decay-in", c.weight_decay_in,
                  "loss: wd/2 ||w||^2 in the loss (conv/fc weights; CifarNet: local3/local4), exchanged with the gradient, "
                  "as the authors' TF code; update: in the optimizer after the exchange, every parameter")
      ->check(CLI::IsMember({"loss", "update"}));
  sub->add_option("--lr-policy", c.lr_policy, "fixed | inv: lr (1+gamma t)^-power | step: lr gamma^floor(t/step_size)")
      ->check(CLI::IsMember({"fixed", "inv", "step"}));
  sub->add_option("--gamma", c.gamma, "Learning-rate policy gamma")->check(tg::app::in_range(0.0, 1e6));
  sub->add_option("--power", c.power, "Learning-rate policy power (inv)")->check(tg::app::in_range(0.0, 1e3));
  sub->add_option("--step-size", c.step_size, "Learning-rate policy step size (step)")->check(tg::app::in_range(1, 1 << 30));
  sub->add_option("--batch", c.batch, "Total batch over all workers (refused when one worker's share is over 1 GiB of float32 input, or --data synthetic's 2 x batch images over 1 GiB of pixels)")->check(tg::app::in_range(1, 1 << 20));
  sub->add_option("--workers", c.workers, "Simulated workers (in one process)")->check(tg::app::in_range(1, 1024));
  sub->add_option("--steps", c.steps, "Training steps")->check(tg::app::in_range(1L, 1L << 31));
  sub->add_option("--epochs", c.epochs, "Epochs (overrides --steps when > 0)")->check(tg::app::in_range(0.0, 1e6));
  sub->add_option("--seed", c.seed, "Seed of initialization, data order and the codec's stream");
  sub->add_option("--threads", c.threads, "LibTorch threads per process (1 keeps runs bit-reproducible)")->check(tg::app::in_range(1, 256));
  sub->add_option("--sim-threads", c.sim_threads,
                  "threads computing the simulated workers' gradients (and the test evaluations) at once, each on its "
                  "own copy of the model: the same bits as 1, up to that many times faster (in-process simulation on "
                  "the CPU; LeNet and CifarNet, whose layers draw no random numbers)")
      ->check(tg::app::in_range(1, 256));
  sub->add_option("--eval-every", c.eval_every, "Test accuracy every N steps (0: only at the end)")->check(tg::app::in_range(0L, 1L << 31));
  sub->add_option("--out", c.out_dir, "Folder for steps.csv, layers.csv, evals.csv, run.json, weights.f32")->check(non_empty_path());
  sub->add_flag("--save-weights", c.save_weights, "Also write the final parameters to weights.f32 in --out");
  sub->add_flag("--progress", cli.progress, "Progress bar on stderr even when it is not a terminal");
  sub->add_flag("--no-progress", cli.no_progress, "No progress bar (default: a bar when stderr is a terminal)");
  CLI::Option* checkpoint = sub->add_option("--checkpoint", c.checkpoint, "Checkpoint file, written every --checkpoint-every steps and at the end (atomically, by rank 0; --codec signsgd-ef: with every worker's error-feedback residuals, gathered from all ranks, so give every rank the same --checkpoint, as `terngrad launch` does)")->check(non_empty_path());
  sub->add_option("--checkpoint-every", c.checkpoint_every, "Steps between checkpoints (needs --checkpoint)")->check(tg::app::in_range(0L, 1L << 31))->needs(checkpoint);
  sub->add_option("--resume", c.resume, "Continue from this checkpoint (every rank reads the same file; --codec signsgd-ef: each worker takes its own residuals back, and a checkpoint without them is refused)")->check(tg::app::regular_file());
  sub->add_option("--timeout-s", c.timeout_s, "Bound on the rendezvous and on every collective (multi-process)")
      ->check(tg::app::in_range(0.1, 86400.0));
  sub->add_option("--external-store", c.external_store, "The store is hosted by `terngrad train-store` (a subcommand left out of `terngrad --help`; see `terngrad train-store --help`), not by rank 0");
  // Set by `terngrad launch` (or by hand to start ranks one by one).
  sub->add_option("--rank", c.rank, "Rank of this process in a multi-process run (default: none, one process)")
      ->check(tg::app::in_range(0, 1023))
      ->default_str("none");
  sub->add_option("--world-size", c.world_size, "Number of ranks (0: simulation in one process)")->check(tg::app::in_range(0, 1024));
  sub->add_option("--master-addr", c.master_addr, "Address of the rendezvous store");
  sub->add_option("--master-port", c.master_port, "Port of the rendezvous store")->check(tg::app::in_range(1, 65535));
  // Fault injection for the tests of the multi-process error paths (hidden).
  sub->add_option("--fault-kill-at-step", c.fault_kill_at_step)->group("");
  sub->add_option("--fault-hang-at-step", c.fault_hang_at_step)->group("");
  sub->add_option("--fault-rank", c.fault_rank)->group("");
  sub->add_option("--fault-codec", c.fault_codec)->group("")->check(CLI::IsMember({"deterministic", "uniform8", "step-reuse", "shared-uniform"}));
  // Live verification (experiments/train/include/tg/train/live_check.hpp, docs/torch.md).
  sub->add_option("--live-check", c.live_check.every,
                  "Every N steps (0: never), run the battery's per-gradient checks on extra encodings of worker 0's real gradient")
      ->check(tg::app::in_range(0L, 1L << 31));
  sub->add_option("--live-check-draws", c.live_check.draws, "Extra encodings per checked tensor (own Philox keys)")
      ->check(tg::app::in_range(2u, 1u << 20));
  sub->add_option("--live-check-alpha", c.live_check.alpha_total,
                  "False-fail budget of the whole run, split over the planned checks and tensors")
      ->check(tg::app::in_range(1e-300, 0.5));  // as verify --alpha
  sub->add_option("--live-check-fail", c.live_check.fail, "On a failed check: continue, or stop (exit 1)")
      ->check(CLI::IsMember({"continue", "stop"}));
  sub->add_option("--live-check-layers", c.live_check.layers,
                  "Tensors to check: largest (default), all, or comma-separated names or indices of ternary tensors");
  sub->add_option("--dump-step", c.dump_step,
                  "Write that step's exchange (every worker's payload bytes per tensor, the gradients) to --out/dump-step<N> (default: none)")
      ->check(tg::app::in_range(0L, 1L << 31))
      ->default_str("none");
  sub->add_option("--json", cli.json, "Also write the run summary as JSON to FILE ('-': on stdout, instead of the text)")->check(non_empty_path());
  sub->add_flag("--check-options", cli.check_options, "Check the options and exit (used by `terngrad launch`)")->group("");
  // options that only some runs use are refused in the others, not ignored (c outlives the parse: it is the
  // command's shared TrainConfig)
  tg::train::TrainConfig* cfg = &c;
  tg::app::only_with(sub, "--gamma", "--lr-policy inv or step", [cfg] { return cfg->lr_policy != "fixed"; });
  tg::app::only_with(sub, "--power", "--lr-policy inv", [cfg] { return cfg->lr_policy == "inv"; });
  tg::app::only_with(sub, "--step-size", "--lr-policy step", [cfg] { return cfg->lr_policy == "step"; });
  tg::app::only_with(sub, "--momentum", "--optimizer momentum", [cfg] { return cfg->optimizer == "momentum"; });
  tg::app::only_with(sub, "--c", "--clip clip or saturate", [cfg] { return cfg->clip != "none"; });
  // codec-specific options: each codec reads its own (the exchange, experiments/train/src/exchange.cpp)
  for (const char* option : {"--qsgd-levels", "--qsgd-bucket"})
    tg::app::only_with(sub, option, "--codec qsgd", [cfg] { return cfg->codec == "qsgd"; });
  tg::app::only_with(sub, "--float-exchange", "--codec float", [cfg] { return cfg->codec == "float"; });
  for (const char* option : {"--packing", "--clip", "--layerwise", "--shared-scalar"})
    tg::app::only_with(sub, option, "--codec terngrad", [cfg] { return cfg->codec == "terngrad"; });
  for (const char* option : {"--float-below", "--quantize-last"})
    tg::app::only_with(sub, option, "a compressing codec (--codec terngrad, qsgd or signsgd-ef)",
                       [cfg] { return cfg->codec != "float"; });
  tg::app::only_with(sub, "--data-dir", "--data mnist, cifar10, tensor or fashion-mnist (a folder of the data)",
                     [cfg] { return cfg->data != "synthetic"; });
  for (const char* option : {"--master-addr", "--master-port", "--timeout-s", "--external-store"})
    tg::app::only_with(sub, option, "a multi-process run (--world-size N, as `terngrad launch` gives each rank)",
                       [cfg] { return cfg->world_size > 0; });
  for (const char* option : {"--live-check-draws", "--live-check-alpha", "--live-check-fail", "--live-check-layers"})
    tg::app::only_with(sub, option, "--live-check N (N > 0)", [cfg] { return cfg->live_check.every > 0; });
}

int run_train(tg::train::TrainConfig c, const TrainCli& cli) {
  if (cli.progress && cli.no_progress) throw std::invalid_argument("--progress and --no-progress contradict each other");
  c.progress = cli.progress || (!cli.no_progress && ::isatty(STDERR_FILENO));
  if ((c.world_size > 0) != (c.rank >= 0))
    throw std::invalid_argument("--rank and --world-size go together (or use `terngrad launch`)");
  if (c.dump_step >= 0 && c.out_dir.empty()) throw std::invalid_argument("--dump-step needs --out (the folder it writes to)");
  if (c.dump_step >= 0 && c.codec != "terngrad" && !(c.codec == "float" && c.float_exchange == "allgather"))
    throw std::invalid_argument("--dump-step writes the per-worker payloads of an allgather exchange: it needs --codec "
                                "terngrad or --codec float --float-exchange allgather, not --codec " + c.codec +
                                (c.codec == "float" ? " by allreduce" : ""));
  if (c.world_size > 0 && c.rank >= c.world_size)
    throw std::invalid_argument("--rank " + std::to_string(c.rank) + " is not below --world-size " + std::to_string(c.world_size));
  const int workers = c.world_size > 0 ? c.world_size : c.workers;
  if (workers > 0 && c.batch > 0)
    tg::train::check_shard_fits_before_loading(c.data, static_cast<std::size_t>(c.batch / workers),
                                               static_cast<std::size_t>(c.batch));
  // Every output, before the data is loaded; nothing is created here (the trainer makes --out at its first
  // write, after its own checks), so a refused option leaves no empty run folder.
  tg::app::check_output_folder("--out", c.out_dir);
  tg::app::check_distinct_outputs("--json", cli.json, "--checkpoint", c.checkpoint);
  tg::app::check_output_file("--json", cli.json);
  tg::app::check_output_file("--checkpoint", c.checkpoint, false);
  tg::app::check_output_not_input("--json", cli.json, "--resume", c.resume);
  for (const auto& [option, path] : {std::pair{"--json", cli.json}, std::pair{"--checkpoint", c.checkpoint}})
    tg::app::check_output_not_in_folder(option, path, "--out", c.out_dir,
                                        {"run.json", "steps.csv", "ranks.csv", "layers.csv", "evals.csv", "live_checks.csv"});
  if (cli.check_options) return 0;
  if (!c.out_dir.empty())
    tg::app::note_on_interrupt("no summary written; --out " + c.out_dir +
                                   " keeps the run as of its last write (run.json: \"finished\": false)",
                               (std::filesystem::path(c.out_dir) / "run.json").string());
  tg::train::TrainResult r = tg::train::run_training(c);
  if (c.world_size > 0 && c.rank != 0) return 0;
  std::uint64_t tp = 0, tf = 0, ap = 0, af = 0;
  for (const auto& l : r.layers) {
    ap += l.payload_bytes;
    af += l.float_bytes;
    if (l.ternary) tp += l.payload_bytes, tf += l.float_bytes;
  }
  if (!cli.json.empty()) {
    nlohmann::json j = {{"model", c.model}, {"data", r.data_description}, {"codec", c.codec}, {"workers", r.workers},
                        {"steps", r.steps}, {"final_test_accuracy", r.final_test_accuracy},
                        {"payload_bytes_per_worker_step", ap}, {"float32_bytes_per_worker_step", af},
                        {"live_checks", r.live_checks}, {"live_checks_failed", r.live_checks_failed},
                        {"uplink_bytes_per_worker_step", r.uplink_bytes}, {"downlink_bytes_per_worker_step", r.downlink_bytes},
                        {"time_s", {{"compute", r.compute_s}, {"encode", r.encode_s}, {"communicate", r.comm_s},
                                    {"wait", r.wait_s}, {"wire", r.wire_s}, {"decode", r.decode_s},
                                    {"optimizer", r.optimizer_s}, {"wall", r.wall_s}}}};
    if (cli.json == "-") {
      std::printf("%s\n", j.dump().c_str());
      return 0;
    }
    tg::write_file_atomic(cli.json, j.dump(1) + "\n");
  }
  std::printf("model %s, codec %s, %d %s, total batch %d, steps %ld..%ld, seed %llu\n", c.model.c_str(), c.codec.c_str(),
              r.workers, c.world_size > 0 ? "ranks (c10d/Gloo)" : "simulated workers", c.batch, r.start_step, r.steps,
              static_cast<unsigned long long>(c.seed));
  std::printf("data: %s\n", r.data_description.c_str());
  if (!r.evals.empty())
    std::printf("final test accuracy %.2f%%, test loss %.4f (step %ld)\n", 100.0 * r.final_test_accuracy,
                r.evals.back().test_loss, r.evals.back().step);
  std::printf("bytes per worker per step: %llu (float32 %llu, %.2fx less)", static_cast<unsigned long long>(ap),
              static_cast<unsigned long long>(af), ap ? static_cast<double>(af) / ap : 0.0);
  if (tp) std::printf("; ternary tensors %llu (float32 %llu, %.2fx less)", static_cast<unsigned long long>(tp),
                      static_cast<unsigned long long>(tf), static_cast<double>(tf) / tp);
  if (c.live_check.every > 0)
    std::printf("\nlive checks: %ld run, %ld failed, %.3f s (%s)", r.live_checks, r.live_checks_failed, r.live_check_s,
                c.out_dir.empty() ? "no --out: results on stderr only" : "live_checks.csv");
  std::printf("\nwire bytes per worker per step: uplink %llu, downlink %llu (%s)\n",
              static_cast<unsigned long long>(r.uplink_bytes), static_cast<unsigned long long>(r.downlink_bytes),
              c.codec == "float" && c.float_exchange == "allreduce" ? "ring allreduce: 2(N-1)/N of the buffer each way"
                                                                    : "allgather: own buffer up, the N-1 others down");
  std::printf("time: compute %.2f s, encode %.3f s, communicate %.3f s (wait %.3f s, wire %.3f s), decode %.3f s, "
              "optimizer %.2f s, wall %.2f s\n",
              r.compute_s, r.encode_s, r.comm_s, r.wait_s, r.wire_s, r.decode_s, r.optimizer_s, r.wall_s);
  if (!r.rank_records.empty()) {
    std::vector<std::array<double, 6>> per(static_cast<std::size_t>(r.workers), std::array<double, 6>{});
    for (const auto& t : r.rank_records) {
      auto& p = per[static_cast<std::size_t>(t.rank)];
      p[0] += t.compute_s, p[1] += t.encode_s, p[2] += t.wait_s, p[3] += t.wire_s, p[4] += t.decode_s, p[5] += t.optimizer_s;
    }
    for (std::size_t k = 0; k < per.size(); ++k)
      std::printf("rank %zu: compute %.2f s, encode %.3f s, wait %.3f s, wire %.3f s, decode %.3f s, optimizer %.2f s\n", k,
                  per[k][0], per[k][1], per[k][2], per[k][3], per[k][4], per[k][5]);
  }
  if (!c.out_dir.empty()) std::printf("outputs in %s\n", c.out_dir.c_str());
  return 0;
}

}  // namespace

static std::vector<Command> train_commands() {
  std::vector<Command> list;
  {
    auto cfg = std::make_shared<tg::train::TrainConfig>();
    auto cli = std::make_shared<TrainCli>();
    Command c;
    c.add_fn = [cfg, cli](CLI::App& app) {
      CLI::App* sub = app.add_subcommand("train", "Train a paper net with float, TernGrad, QSGD or EF-SignSGD gradients (LibTorch)");
      add_train_options(sub, *cfg, *cli);
      return sub;
    };
    c.run_fn = [cfg, cli] {
      try {
        return run_train(*cfg, *cli);
      } catch (const tg::train::LiveCheckFailed& e) {  // --live-check-fail stop: exit 1, not the guard's 2
        std::fprintf(stderr, "terngrad train: stopped: %s\n", e.what());
        return 1;
      }
    };
    list.push_back(c);
  }
  {
    auto opts = std::make_shared<tg::train::LaunchOptions>();
    Command c;
    c.add_fn = [opts](CLI::App& app) {
      CLI::App* sub = app.add_subcommand("launch", "Start N local ranks of `terngrad train` over c10d/Gloo: launch --nproc N -- <train options>");
      sub->add_option("--nproc", opts->nproc, "Number of ranks")->check(tg::app::in_range(1, 256));
      sub->add_option("--addr", opts->addr, "Loopback address of the store");
      sub->add_option("--port", opts->port, "Store port (0: a free one)")->check(tg::app::in_range(0, 65535));
      sub->add_option("--grace-s", opts->grace_s, "After a rank fails, seconds the others get to exit before being killed")
          ->check(tg::app::in_range(0.0, 86400.0));
      sub->add_option("train_options", opts->train_args, "Options of `terngrad train`, after --");
      return sub;
    };
    c.run_fn = [opts] { return tg::train::launch(*opts); };
    list.push_back(c);
  }
  {
    struct StoreOptions {
      std::string addr = "127.0.0.1";
      int port = 29500, world = 2;
      double timeout_s = 600.0;
    };
    auto opts = std::make_shared<StoreOptions>();
    Command c;
    c.add_fn = [opts](CLI::App& app) {
      CLI::App* sub = app.add_subcommand("train-store", "Host the rendezvous store of a multi-process run (for --external-store)");
      sub->group("");
      sub->add_option("--addr", opts->addr, "Address");
      sub->add_option("--port", opts->port, "Port")->check(tg::app::in_range(1, 65535));
      sub->add_option("--world-size", opts->world, "Number of ranks")->check(tg::app::in_range(1, 1024));
      sub->add_option("--timeout-s", opts->timeout_s, "Serve for at most this long")->check(tg::app::in_range(0.1, 86400.0));
      return sub;
    };
    c.run_fn = [opts] {
      return tg::train::run_store(opts->addr, opts->port, opts->world, opts->timeout_s);
    };
    list.push_back(c);
  }
  return list;
}

const RegisterCommands kRegistered{50, train_commands};  // train, launch, train-store

}  // namespace tg::app
