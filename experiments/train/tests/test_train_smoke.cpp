// terngrad-bench: smoke test of LeNet training on a subset of Fashion-MNIST: float, TernGrad, QSGD and
// EF-SignSGD with 2 simulated workers learn; a resumed run ends with the uninterrupted run's weights
// (TernGrad and EF-SignSGD, simulated and over 2 ranks); 2 c10d/Gloo ranks started by `terngrad launch` end with the simulation's weights for every codec
// (float by allreduce and by allgather), and write the per-rank time split and the wire bytes; weight
// decay in the loss reaches exactly the authors' tensors; AlexNet reads a tensor folder; --device cuda
// runs or says why not; a diverging run names its step and layer; --sim-threads gives the bits of one thread.
// Run: ctest -R tg_train_smoke_test
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sys/wait.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>

#include "tg/train/data.hpp"
#include "tg/train/tensor_data.hpp"
#include "tg/train/trainer.hpp"

namespace fs = std::filesystem;
using tg::train::TrainConfig;

namespace {

bool have_data() {
  return fs::exists(std::string(tg::train::kFashionMnistDir) + "/train-images-idx3-ubyte.gz");
}

TrainConfig small_lenet(const std::string& codec, long steps) {
  TrainConfig c;
  c.model = "lenet";
  c.codec = codec;
  c.workers = 2;
  c.batch = 64;
  c.steps = steps;
  c.train_limit = 8192;
  c.test_limit = 1000;
  c.eval_every = 0;
  c.seed = 3;
  return c;
}

// One step of `model` on few images, no evaluation during the run.
TrainConfig one_step(const std::string& model, int workers, int batch, long train_limit, long test_limit) {
  TrainConfig c;
  c.model = model;
  c.workers = workers;
  c.batch = batch;
  c.steps = 1;
  c.train_limit = train_limit;
  c.test_limit = test_limit;
  c.eval_every = 0;
  return c;
}

double mean_loss(const tg::train::TrainResult& r, std::size_t from, std::size_t to) {
  double s = 0.0;
  for (std::size_t i = from; i < to; ++i) s += r.step_records[i].loss;
  return s / static_cast<double>(to - from);
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tg_train_smoke_" + std::to_string(::getpid())) / name;
  fs::create_directories(d);
  return d;
}

}  // namespace

// Deterministic runs (fixed seed, one thread), so these are regression checks, not statistical tests.
// Margins: chance is 10% on 10 classes; LeNet after 120 steps of batch 64 reaches about 70% on
// Fashion-MNIST, and a broken exchange (wrong sign, sum instead of mean, no update) stays near 10%
// or diverges. The 1000 test images give a binomial standard error below 1.6 points.
TEST(TrainSmoke, EveryCodecLearnsLeNet) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  for (const char* codec : {"float", "terngrad", "qsgd", "signsgd-ef"}) {
    auto r = tg::train::run_training(small_lenet(codec, 120));
    ASSERT_EQ(r.step_records.size(), 120u);
    double early = mean_loss(r, 0, 10), late = mean_loss(r, 100, 120);
    EXPECT_LT(late, 0.6 * early) << codec << ": loss " << early << " -> " << late;
    EXPECT_GT(r.final_test_accuracy, 0.5) << codec;
    if (std::string(codec) == "terngrad") {
      // LeNet's big tensors travel at 2 bits per element plus a 32-byte header.
      for (const auto& l : r.layers) {
        EXPECT_TRUE(l.ternary) << l.name;
        EXPECT_EQ(l.payload_bytes, 32 + (l.numel + 3) / 4) << l.name;
        EXPECT_GT(l.mean_sparsity, 0.0) << l.name;
      }
    }
    std::printf("%s: loss %.3f -> %.3f, test accuracy %.1f%% on %s\n", codec, early, late, 100 * r.final_test_accuracy,
                r.data_description.c_str());
  }
}

// EF-SignSGD too: its checkpoint holds both workers' error-feedback residuals (without them the resumed
// run's first step, from zero residuals, already differs: tg_train_core_test shows that on the exchange).
TEST(TrainSmoke, ResumedRunEqualsUninterruptedRun) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  fs::path d = temp_dir("resume");
  for (const char* codec : {"terngrad", "signsgd-ef"}) {
    TrainConfig full = small_lenet(codec, 30);
    auto a = tg::train::run_training(full);

    TrainConfig first = small_lenet(codec, 30);
    first.steps = 15;
    first.checkpoint = (d / "ckpt.pt").string();
    tg::train::run_training(first);
    TrainConfig second = small_lenet(codec, 30);
    second.resume = (d / "ckpt.pt").string();
    auto c = tg::train::run_training(second);
    EXPECT_EQ(c.start_step, 15) << codec;
    ASSERT_EQ(a.final_weights.size(), c.final_weights.size()) << codec;
    EXPECT_EQ(0, std::memcmp(a.final_weights.data(), c.final_weights.data(), 4 * a.final_weights.size())) << codec;

    // A checkpoint from other settings is refused with a message, not silently used.
    TrainConfig other = small_lenet("float", 30);
    other.resume = (d / "ckpt.pt").string();
    EXPECT_THROW(tg::train::run_training(other), std::invalid_argument) << codec;
    // and the message names the setting that differs, not two unlabelled lists of values
    try {
      tg::train::run_training(other);
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--codec is " + std::string(codec) + " in the checkpoint, float in this run"),
                std::string::npos)
          << e.what();
    }
  }
  fs::remove_all(d.parent_path());
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Float by allreduce is bit-exact here because 2 ranks sum a + b in either order to the same bits.
TEST(TrainSmoke, TwoGlooRanksMatchTheSimulation) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  fs::path d = temp_dir("gloo");
  struct Arm {
    std::string name, codec, float_exchange;
  };
  for (const Arm& a : {Arm{"terngrad", "terngrad", "allreduce"}, Arm{"float-allreduce", "float", "allreduce"},
                       Arm{"float-allgather", "float", "allgather"}, Arm{"qsgd", "qsgd", "allreduce"},
                       Arm{"signsgd-ef", "signsgd-ef", "allreduce"}}) {
    TrainConfig c = small_lenet(a.codec, 20);
    c.float_exchange = a.float_exchange;
    c.qsgd_levels = 3;
    auto sim = tg::train::run_training(c);
    fs::path out = d / a.name;
    std::string cmd = std::string("timeout 120 ") + TG_TERNGRAD_EXE +
                      " launch --nproc 2 --grace-s 10 -- --model lenet --codec " + a.codec +
                      (a.codec == "float" ? " --float-exchange " + a.float_exchange : std::string()) +
                      (a.codec == "qsgd" ? " --qsgd-levels 3" : "") + " --batch 64 --steps 20 --train-limit 8192 --test-limit 1000"
                      " --eval-every 0 --seed 3 --timeout-s 60 --save-weights --out " + out.string() + " > " +
                      (d / "log.txt").string() + " 2>&1";
    int rc = std::system(cmd.c_str());
    ASSERT_EQ(rc, 0) << cmd << "\n(see " << (d / "log.txt").string() << ")";
    auto w = tg::train::read_weights_file((out / "weights.f32").string());
    ASSERT_EQ(w.size(), sim.final_weights.size());
    EXPECT_EQ(0, std::memcmp(w.data(), sim.final_weights.data(), 4 * w.size())) << a.name;
    // Outputs of the multi-process run: the wait/wire split per step, every rank's split, the bytes.
    std::string steps = read_text(out / "steps.csv");
    EXPECT_NE(steps.find("wait_s,wire_s,uplink_bytes,downlink_bytes\n"), std::string::npos) << a.name;
    std::string ranks = read_text(out / "ranks.csv");
    EXPECT_EQ(std::count(ranks.begin(), ranks.end(), '\n'), 1 + 2 * 20) << a.name;
    EXPECT_NE(read_text(out / "run.json").find("\"time_s_per_rank\""), std::string::npos) << a.name;
    if (a.name == "float-allreduce") {  // ring allreduce of 2 ranks: the whole buffer (every value + the loss) each way
      std::uint64_t numel = 0;
      for (const auto& l : sim.layers) numel += l.numel;
      EXPECT_EQ(sim.uplink_bytes, 4 * (numel + 1));
      EXPECT_EQ(sim.downlink_bytes, 4 * (numel + 1));
    }
  }
  fs::remove_all(d.parent_path());
}

// A 2-rank c10d/Gloo run stopped after 10 steps and resumed from rank 0's checkpoint for 10 more ends
// with the weights of the uninterrupted 20-step simulation (which the test above ties to 2 ranks):
// no completed step is lost or repeated across the restart of every rank. EF-SignSGD: rank 0's
// checkpoint holds both ranks' residuals (gathered at the checkpoint), and each rank takes its own back.
TEST(TrainSmoke, TwoGlooRanksResumeFromRankZerosCheckpoint) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  for (const std::string codec : {"terngrad", "signsgd-ef"}) {
    fs::path d = temp_dir("gloo_resume") / codec;
    fs::create_directories(d);
    TrainConfig c = small_lenet(codec, 20);
    auto sim = tg::train::run_training(c);
    std::string common = " --model lenet --codec " + codec + " --batch 64 --train-limit 8192 --test-limit 1000"
                         " --eval-every 0 --seed 3 --timeout-s 60";
    std::string launch = std::string("timeout 120 ") + TG_TERNGRAD_EXE + " launch --nproc 2 --grace-s 10 --";
    std::string log = " > " + (d / "log.txt").string() + " 2>&1";
    std::string ckpt = (d / "ckpt.pt").string();
    std::string first = launch + common + " --steps 10 --checkpoint " + ckpt + " --out " + (d / "a").string() + log;
    ASSERT_EQ(std::system(first.c_str()), 0) << first << "\n(see " << (d / "log.txt").string() << ")";
    ASSERT_TRUE(fs::exists(ckpt)) << "rank 0 wrote no checkpoint";
    std::string second = launch + common + " --steps 20 --resume " + ckpt + " --save-weights --out " +
                         (d / "b").string() + log;
    ASSERT_EQ(std::system(second.c_str()), 0) << second << "\n(see " << (d / "log.txt").string() << ")";
    // The resumed run must really start at step 10 (a run that ignored --resume and trained 20 steps
    // from scratch would reach the same weights, deterministic as it is).
    int run_files = 0;
    for (const auto& entry : fs::recursive_directory_iterator(d / "b")) {
      if (entry.path().filename() != "run.json") continue;
      std::ifstream in(entry.path());
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_NE(text.find("\"start_step\": 10"), std::string::npos) << entry.path();
      ++run_files;
    }
    EXPECT_GE(run_files, 1) << codec << ": the resumed run wrote no run.json";
    auto w = tg::train::read_weights_file((d / "b" / "weights.f32").string());
    ASSERT_EQ(w.size(), sim.final_weights.size()) << codec;
    EXPECT_EQ(0, std::memcmp(w.data(), sim.final_weights.data(), 4 * w.size())) << codec;
  }
  fs::remove_all(temp_dir("gloo_resume").parent_path());
}


// --data tensor end to end: AlexNet on a 4-image preprocessed folder (3x227x227, 1000 classes) for one
// step; a folder of the wrong shape is refused before any training with one line and exit code 2.
TEST(TrainSmoke, AlexNetReadsATensorFolder) {
  fs::path d = temp_dir("tensor");
  auto good = tg::train::synthetic_images(4, 3, 227, 227, 1000, 5);
  tg::train::write_tensor_dir((d / "alexnet").string(), good, good);
  auto small = tg::train::synthetic_images(2, 3, 224, 224, 1000, 5);
  tg::train::write_tensor_dir((d / "small").string(), small, small);
  std::string base = std::string(TG_TERNGRAD_EXE) + " train --model alexnet --data tensor --batch 2 --workers 2 --steps 1"
                     " --eval-every 0 --no-progress --data-dir ";
  std::string log = (d / "log.txt").string();
  ASSERT_EQ(std::system((base + (d / "alexnet").string() + " > " + log + " 2>&1").c_str()), 0) << "see " << log;
  std::string text = read_text(log);
  EXPECT_NE(text.find("final test accuracy"), std::string::npos) << text;
  EXPECT_NE(text.find("4 of 4 images, 3x227x227, 1000 classes"), std::string::npos) << text;
  int rc = std::system((base + (d / "small").string() + " > " + log + " 2>&1").c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 2) << rc;
  text = read_text(log);
  EXPECT_NE(text.find("model alexnet takes 3x227x227 images; "), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  fs::remove_all(d.parent_path());
}

// --device cuda: on a LibTorch build without CUDA (Debian's) one line naming the problem and exit code
// 2; where CUDA is there, a short run that finishes. Only the first branch has run on these machines.
TEST(TrainSmoke, DeviceCudaRunsOrSaysWhyNot) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  fs::path d = temp_dir("cuda");
  std::string log = (d / "log.txt").string();
  std::string cmd = std::string(TG_TERNGRAD_EXE) + " train --device cuda --model lenet --batch 64 --workers 2 --steps 5"
                    " --train-limit 512 --test-limit 100 --eval-every 0 --no-progress > " + log + " 2>&1";
  int rc = std::system(cmd.c_str());
  std::string text = read_text(log);
  ASSERT_TRUE(WIFEXITED(rc)) << rc;
  if (WEXITSTATUS(rc) == 0) {
    EXPECT_NE(text.find("final test accuracy"), std::string::npos) << text;
  } else {
    EXPECT_EQ(WEXITSTATUS(rc), 2) << text;
    EXPECT_NE(text.find("--device cuda: this LibTorch build has no CUDA support or sees no GPU"), std::string::npos) << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  }
  fs::remove_all(d.parent_path());
}

// --weight-decay-in, exactly, after one plain-SGD step on 1 worker (float codec: the exchanged mean of
// one gradient is that gradient). loss: the decay wd w joins the gradient of the authors' decayed
// tensors (LeNet: every weight; CifarNet: local3/local4 weights) before the exchange, so those tensors
// get the bits of the update run (the optimizer adds wd w with the same float operation) and every
// other tensor gets the bits of a run without weight decay.
TEST(TrainSmoke, WeightDecayInTheLossDecaysTheAuthorsTensors) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  for (const char* model : {"lenet", "cifarnet"}) {
    auto run = [&](const char* where, double wd) {
      TrainConfig c = one_step(model, 1, 8, 64, 10);
      c.codec = "float";
      c.optimizer = "sgd";
      c.lr_policy = "fixed";
      c.lr = 0.05;
      c.weight_decay = wd;
      c.weight_decay_in = where;
      return tg::train::run_training(c);
    };
    auto in_loss = run("loss", 0.1), in_update = run("update", 0.1), none = run("loss", 0.0);
    std::size_t at = 0, decayed = 0;
    for (const auto& l : in_loss.layers) {
      bool decays = std::string(model) == "cifarnet" ? (l.name == "local3.weight" || l.name == "local4.weight")
                                                     : l.name.find("weight") != std::string::npos;
      decayed += decays;
      const auto& ref = decays ? in_update.final_weights : none.final_weights;
      EXPECT_EQ(0, std::memcmp(in_loss.final_weights.data() + at, ref.data() + at, 4 * l.numel)) << model << " " << l.name;
      if (!decays) {  // the update run decays this tensor too: it must differ, or the check above proves nothing
        EXPECT_NE(0, std::memcmp(in_update.final_weights.data() + at, none.final_weights.data() + at, 4 * l.numel))
            << model << " " << l.name;
      }
      at += l.numel;
    }
    EXPECT_EQ(decayed, std::string(model) == "cifarnet" ? 2u : 4u) << model;
  }
}

// A run that diverges stops with one message naming the step and the layer whose gradient went
// non-finite (every exchange refuses to encode it: tg::NonFiniteError, caught by the trainer and
// re-thrown with the layer's name). A learning rate of 1e12 makes LeNet's weights, and so its gradients, overflow within a
// few steps. Without the trainer's catch the message would be the codec's ("tensor 3 ...").
TEST(TrainSmoke, DivergedRunNamesTheStepAndTheLayer) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  std::vector<std::string> names;
  for (const auto& l : tg::train::run_training(small_lenet("terngrad", 1)).layers) names.push_back(l.name);
  ASSERT_FALSE(names.empty());
  for (const char* codec : {"terngrad", "qsgd", "signsgd-ef", "float"}) {
    TrainConfig c = small_lenet(codec, 30);
    c.lr_policy = "fixed";
    c.lr = 1e12;
    std::string msg;
    try {
      tg::train::run_training(c);
    } catch (const std::exception& e) {
      msg = e.what();
    }
    ASSERT_FALSE(msg.empty()) << codec << ": the run with lr 1e12 did not diverge";
    const std::string head = "training diverged at step ";
    ASSERT_EQ(0u, msg.rfind(head, 0)) << codec << ": " << msg;
    long step = std::strtol(msg.c_str() + head.size(), nullptr, 10);
    EXPECT_TRUE(step >= 0 && step < 30) << msg;
    const std::string of = ": the gradient of ";
    std::size_t at = msg.find(of);
    ASSERT_NE(at, std::string::npos) << msg;
    std::string layer = msg.substr(at + of.size(), msg.find(" is not finite", at) - at - of.size());
    EXPECT_NE(std::find(names.begin(), names.end(), layer), names.end()) << codec << ": '" << layer << "' in " << msg;
    EXPECT_NE(msg.find("try a smaller --lr"), std::string::npos) << msg;
  }
}

// --sim-threads: the simulated workers' gradients computed on several threads, each on its own copy of
// the model, give the bits of one thread: the final weights and every step's loss, for an uneven split
// (3 workers on 2 threads), EF-SignSGD's per-worker residuals, and CifarNet with weight decay in the loss
// (the decay term added on each copy); and the evaluations, which the threads share chunk by chunk
// (1234 test images: chunks of 500, 500 and 234; evaluated during and at the end of the run), test loss
// and accuracy to the bit. Models with dropout, other devices and ranks are refused.
TEST(TrainSmoke, SimThreadsGiveTheBitsOfOneThread) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  struct Case { const char* model; const char* codec; int workers; long steps; };
  for (const Case& k : {Case{"lenet", "terngrad", 3, 12}, Case{"lenet", "signsgd-ef", 2, 12}, Case{"cifarnet", "terngrad", 2, 3}}) {
    auto run = [&](int threads) {
      TrainConfig c = small_lenet(k.codec, k.steps);
      c.model = k.model;
      c.workers = k.workers;
      c.batch = 8 * k.workers;
      c.test_limit = 1234;
      c.eval_every = k.steps / 2;
      c.weight_decay_in = "loss";
      c.sim_threads = threads;
      return tg::train::run_training(c);
    };
    auto one = run(1), two = run(2);
    ASSERT_EQ(one.final_weights.size(), two.final_weights.size());
    EXPECT_EQ(0, std::memcmp(one.final_weights.data(), two.final_weights.data(), 4 * one.final_weights.size()))
        << k.model << " " << k.codec;
    ASSERT_EQ(one.step_records.size(), two.step_records.size());
    for (std::size_t i = 0; i < one.step_records.size(); ++i)
      EXPECT_EQ(one.step_records[i].loss, two.step_records[i].loss) << k.model << " " << k.codec << " step " << i;
    ASSERT_EQ(one.evals.size(), two.evals.size());
    EXPECT_GE(one.evals.size(), 2u) << k.model;
    for (std::size_t i = 0; i < one.evals.size(); ++i) {
      EXPECT_EQ(0, std::memcmp(&one.evals[i].test_loss, &two.evals[i].test_loss, sizeof(double)))
          << k.model << " " << k.codec << " evaluation " << i << ": " << one.evals[i].test_loss << " against " << two.evals[i].test_loss;
      EXPECT_EQ(one.evals[i].test_accuracy, two.evals[i].test_accuracy) << k.model << " " << k.codec << " evaluation " << i;
    }
  }
  auto refusal = [](TrainConfig c) {
    try {
      tg::train::run_training(c);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  TrainConfig alex = one_step("alexnet", 2, 2, 4, 2);
  alex.data = "synthetic";
  alex.sim_threads = 2;
  EXPECT_NE(refusal(alex).find("dropout"), std::string::npos) << refusal(alex);
  TrainConfig cuda = small_lenet("terngrad", 1);
  cuda.device = "cuda";
  cuda.sim_threads = 2;
  EXPECT_NE(refusal(cuda).find("--sim-threads"), std::string::npos) << refusal(cuda);
}
