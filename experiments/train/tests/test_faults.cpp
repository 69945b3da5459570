// terngrad-bench: distributed faults in c10d/Gloo runs: a rank killed mid-run, a rank that hangs, a rank
// that never joins, a store that goes away or is not there. Every surviving rank must exit by itself
// with code 2 and one clear error line within a bounded time. Run: ctest -R tg_train_fault_test (label long)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Outcome {
  int status = -1;
  double seconds = 0.0;
  bool hung = false;
  std::string log;
};

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("tg_train_faults_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

pid_t start(const std::string& args, const fs::path& log) {
  std::string cmd = std::string("exec ") + TG_TERNGRAD_EXE + " " + args + " > " + log.string() + " 2>&1";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Waits at most `bound_s`; a process still running then is killed and reported as hung.
Outcome finish(pid_t pid, const fs::path& log, Clock::time_point t0, double bound_s) {
  Outcome o;
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      o.status = status;
      break;
    }
    if (std::chrono::duration<double>(Clock::now() - t0).count() > bound_s) {
      o.hung = true;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  o.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  o.log = ss.str();
  return o;
}

// Waits until `log` contains `text` (true) or `bound_s` passes (false).
bool wait_for_line(const fs::path& log, const std::string& text, double bound_s) {
  auto t0 = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - t0).count() < bound_s) {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    if (ss.str().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int exit_code(const Outcome& o) { return WIFEXITED(o.status) ? WEXITSTATUS(o.status) : -1; }

int free_port() {
  static int next = 20000 + static_cast<int>(::getpid() % 20000);
  return next++;
}

// Small, data-free runs: LeNet on synthetic images, many steps so the fault lands mid-run.
const std::string kRun = "--model lenet --data synthetic --batch 8 --steps 100000 --eval-every 0 --test-limit 8";

}  // namespace

// Bounds: process start (LibTorch load) takes 1-3 s on the shared 2-core machine; each bound below is
// the configured timeout plus 25 s of slack, so a failure means an unbounded wait, not a slow start.

TEST(Faults, RankKilledMidRunEndsThePeer) {
  fs::path d = temp_dir();
  auto t0 = Clock::now();
  pid_t p = start("launch --nproc 2 --grace-s 30 -- " + kRun + " --timeout-s 5 --fault-kill-at-step 20 --fault-rank 1",
                  d / "kill.log");
  Outcome o = finish(p, d / "kill.log", t0, 5 + 30 + 25);
  ASSERT_FALSE(o.hung) << o.log;
  EXPECT_EQ(exit_code(o), 2) << o.log;
  EXPECT_NE(o.log.find("rank 1 was killed by signal 9"), std::string::npos) << o.log;
  // Rank 0 noticed on its own (closed connection) and exited with code 2 and one error line.
  EXPECT_NE(o.log.find("rank 0 exited with code 2"), std::string::npos) << o.log;
  EXPECT_NE(o.log.find("terngrad train: error: rank 0 of 2:"), std::string::npos) << o.log;
  EXPECT_EQ(o.log.find("did not exit within"), std::string::npos) << o.log;
  EXPECT_EQ(o.log.find("frame #"), std::string::npos) << "stack trace in the message:\n" << o.log;
  fs::remove_all(d);
}

TEST(Faults, HungRankEndsThePeerAfterTheTimeout) {
  fs::path d = temp_dir();
  auto t0 = Clock::now();
  pid_t p = start("launch --nproc 2 --grace-s 3 -- " + kRun + " --timeout-s 4 --fault-hang-at-step 20 --fault-rank 1",
                  d / "hang.log");
  Outcome o = finish(p, d / "hang.log", t0, 4 + 3 + 25);
  ASSERT_FALSE(o.hung) << o.log;
  EXPECT_EQ(exit_code(o), 2) << o.log;
  EXPECT_NE(o.log.find("rank 0 exited with code 2"), std::string::npos) << o.log;
  EXPECT_NE(o.log.find("terngrad train: error: rank 0 of 2:"), std::string::npos) << o.log;
  // The hung rank never exits by itself; the launcher kills it after the grace period.
  EXPECT_NE(o.log.find("rank 1 did not exit within"), std::string::npos) << o.log;
  fs::remove_all(d);
}

TEST(Faults, RankThatNeverJoinsEndsTheOthers) {
  fs::path d = temp_dir();
  int port = free_port();
  auto t0 = Clock::now();
  pid_t p = start("train " + kRun + " --timeout-s 3 --rank 0 --world-size 2 --master-port " + std::to_string(port),
                  d / "alone.log");
  Outcome o = finish(p, d / "alone.log", t0, 3 + 25);
  ASSERT_FALSE(o.hung) << o.log;
  EXPECT_EQ(exit_code(o), 2) << o.log;
  EXPECT_NE(o.log.find("rendezvous of 2 ranks did not complete"), std::string::npos) << o.log;
  EXPECT_EQ(o.log.find("frame #"), std::string::npos) << o.log;
  fs::remove_all(d);
}

TEST(Faults, StoreThatIsNotThere) {
  fs::path d = temp_dir();
  int port = free_port();
  auto t0 = Clock::now();
  pid_t p = start("train " + kRun + " --timeout-s 3 --external-store true --rank 1 --world-size 2 --master-port " +
                      std::to_string(port),
                  d / "nostore.log");
  Outcome o = finish(p, d / "nostore.log", t0, 3 + 25);
  ASSERT_FALSE(o.hung) << o.log;
  EXPECT_EQ(exit_code(o), 2) << o.log;
  EXPECT_NE(o.log.find("cannot reach the rendezvous store"), std::string::npos) << o.log;
  fs::remove_all(d);
}

TEST(Faults, StoreThatDisappearsDuringRendezvous) {
  fs::path d = temp_dir();
  int port = free_port();
  pid_t store = start("train-store --port " + std::to_string(port) + " --world-size 2 --timeout-s 60", d / "store.log");
  ASSERT_TRUE(wait_for_line(d / "store.log", "serving", 60)) << "the store did not start";
  auto t0 = Clock::now();
  pid_t rank = start("train " + kRun + " --timeout-s 20 --external-store true --rank 0 --world-size 2 --master-port " +
                         std::to_string(port),
                     d / "rank.log");
  bool joined = wait_for_line(d / "rank.log", "reached the store", 60);  // rank 0 waits for rank 1 now
  ::kill(store, SIGKILL);
  ::waitpid(store, nullptr, 0);
  Outcome o = finish(rank, d / "rank.log", t0, 60 + 20 + 25);
  ASSERT_TRUE(joined) << o.log;
  ASSERT_FALSE(o.hung) << o.log;
  EXPECT_EQ(exit_code(o), 2) << o.log;
  EXPECT_NE(o.log.find("terngrad train: error: rank 0 of 2: rendezvous of 2 ranks"), std::string::npos)
      << o.log;
  EXPECT_EQ(o.log.find("frame #"), std::string::npos) << o.log;
  std::printf("store killed: rank 0 exited after %.1f s: %s", o.seconds, o.log.c_str());
  fs::remove_all(d);
}
