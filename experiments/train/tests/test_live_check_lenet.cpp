// terngrad-bench: `terngrad train --live-check` on a short LeNet run (Fashion-MNIST subset, 2 simulated
// workers): the checks pass on the real codec; with the exchange's codec replaced by the battery's
// deterministic-rounding mutant (--fault-codec, a test hook) they fail at once, naming step and layer,
// and --live-check-fail stop ends the run with exit 1; a bad layer name is refused with exit 2.
// Part of tg_train_smoke_test. Run: ctest -R tg_train_smoke_test
//
// False-fail rate of LiveCheckPassesOnLeNet: at most its alpha_total (1e-3) for a correct codec, split
// over its 3 planned checks (Bonferroni); the run is deterministic (fixed seed, one thread), so the
// outcome is fixed for this build. Power against the mutant: see test_live_check.cpp.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "scratch_dir.hpp"
#include "tg/train/data.hpp"
#include "tg/train/trainer.hpp"

namespace fs = std::filesystem;
using tg::train::TrainConfig;

namespace {

bool have_fashion_mnist() { return fs::exists(std::string(tg::train::kFashionMnistDir) + "/train-images-idx3-ubyte.gz"); }

fs::path live_dir(const std::string& name) { return tg::test::scratch_dir("tg_train_live_lenet_", name); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TrainConfig live_lenet(long steps, long every) {
  TrainConfig c;
  c.model = "lenet";
  c.codec = "terngrad";
  c.workers = 2;
  c.batch = 64;
  c.steps = steps;
  c.train_limit = 4096;
  c.test_limit = 500;
  c.eval_every = 0;
  c.seed = 5;
  c.live_check.every = every;
  c.live_check.draws = 32;
  c.live_check.alpha_total = 1e-3;
  return c;
}

const std::string kLenetArgs =
    " train --model lenet --codec terngrad --workers 2 --batch 64 --train-limit 2048 --test-limit 200 --eval-every 0"
    " --seed 5 --no-progress";

int run_cli(const std::string& args, const fs::path& log) {
  std::string cmd = std::string("timeout 120 ") + TG_TERNGRAD_EXE + args + " > " + log.string() + " 2>&1";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST(LiveCheckLeNet, PassesOnTheRealCodec) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  fs::path d = live_dir("pass");
  TrainConfig c = live_lenet(21, 10);
  c.out_dir = d.string();
  tg::train::TrainResult r = tg::train::run_training(c);
  EXPECT_EQ(r.live_checks, 3);  // steps 0, 10, 20
  EXPECT_EQ(r.live_checks_failed, 0);
  std::string csv = slurp(d / "live_checks.csv");
  for (const char* row : {"0,ip1.weight,unbiased,stat,", "10,ip1.weight,variance,stat,", "20,ip1.weight,structure,exact,",
                          "20,ip1.weight,independence,"})
    EXPECT_NE(csv.find(row), std::string::npos) << row << " not in\n" << csv;
  EXPECT_EQ(csv.find(",fail,"), std::string::npos) << csv;
  EXPECT_NE(slurp(d / "run.json").find("\"live_check\""), std::string::npos);
}

TEST(LiveCheckLeNet, CatchesABrokenEncoderAndStops) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  fs::path d = live_dir("broken");
  // continue (the default): every check fails, the run goes on to its last step
  TrainConfig c = live_lenet(6, 5);
  c.fault_codec = "deterministic";
  c.out_dir = (d / "continue").string();
  testing::internal::CaptureStderr();
  tg::train::TrainResult r = tg::train::run_training(c);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.live_checks, 2);
  EXPECT_EQ(r.live_checks_failed, 2);
  EXPECT_EQ(r.step_records.size(), 6u);
  EXPECT_NE(err.find("live check FAILED at step 0, layer ip1.weight"), std::string::npos) << err;
  EXPECT_NE(err.find("live check FAILED at step 5, layer ip1.weight"), std::string::npos) << err;

  // stop: exit 1 at the first check, with the message; the CSV has that check's rows
  fs::path out = d / "stop";
  int rc = run_cli(kLenetArgs + " --steps 20 --live-check 5 --live-check-fail stop --fault-codec deterministic --out " +
                       out.string(),
                   d / "stop.log");
  std::string log = slurp(d / "stop.log");
  EXPECT_EQ(rc, 1) << log;
  EXPECT_NE(log.find("terngrad train: stopped: live check FAILED at step 0, layer ip1.weight"), std::string::npos) << log;
  EXPECT_NE(slurp(out / "live_checks.csv").find("0,ip1.weight,unbiased,stat,"), std::string::npos);

  // a layer that does not exist: exit 2, one line naming it
  rc = run_cli(kLenetArgs + " --steps 2 --live-check 1 --live-check-layers ip9.weight", d / "bad.log");
  log = slurp(d / "bad.log");
  EXPECT_EQ(rc, 2) << log;
  EXPECT_NE(log.find("no tensor 'ip9.weight'"), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;

  // an empty item and a tensor listed twice are refused, not dropped or merged (as every comma list of the CLI)
  const std::pair<const char*, const char*> refused[] = {
      {"ip1.weight,", "--live-check-layers: has an empty item in 'ip1.weight,'"},
      {"ip1.weight,ip1.weight", "--live-check-layers: lists 'ip1.weight' twice"}};
  for (const auto& [layers, message] : refused) {
    rc = run_cli(kLenetArgs + " --steps 2 --live-check 1 --live-check-layers " + layers, d / "bad.log");
    log = slurp(d / "bad.log");
    EXPECT_EQ(rc, 2) << log;
    EXPECT_NE(log.find(message), std::string::npos) << log;
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  }
}
