// terngrad-bench: the external-codec sampler (`--impl exec:CMD`). For each request the battery
// writes the gradient as a float32 .npy file and runs
//   CMD --input IN.npy --output OUT.npy --seed S --worker W --tensor T --step K --steps N
//       --clip none|clip|saturate --c C [--scalar S]
// and reads OUT.npy: float32, shape (N, d), row j = the decoded g~ at step K + j. Protocol and
// example: docs/battery.md, examples/numpy_codec.py.
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tg/verify/npy.hpp"
#include "tg/verify/sampler.hpp"

namespace tg::verify {

Interrupted::Interrupted(int signal_number)
    : std::runtime_error("interrupted by signal " + std::to_string(signal_number) + " (" +
                         ::strsignal(signal_number) + ")"),
      signal_(signal_number) {}

namespace {
namespace fs = std::filesystem;

// The signal that arrived while an ExecSampler was alive (0: none). Set by the handler only.
volatile std::sig_atomic_t g_signal = 0;
extern "C" void note_signal(int sig) { g_signal = sig; }

// Installs note_signal for SIGINT/SIGTERM/SIGHUP for its lifetime, then puts the old handlers back.
class SignalGuard {
 public:
  SignalGuard() {
    g_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = note_signal;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < kCount; ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~SignalGuard() {
    for (std::size_t i = 0; i < kCount; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  static void check() {
    if (int sig = g_signal) throw Interrupted(sig);
  }

 private:
  static constexpr std::size_t kCount = 3;
  static constexpr int kSignals[kCount] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[kCount];
};

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string tail_of(const fs::path& path, std::size_t max_chars) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.size() > max_chars) s = "..." + s.substr(s.size() - max_chars);
  return s.empty() ? "(none)" : s;
}

class ExecSampler : public Sampler {
 public:
  ExecSampler(std::string command, ExecOptions options) : command_(std::move(command)), options_(options) {
    std::string templ = (fs::temp_directory_path() / "tg-verify-XXXXXX").string();
    if (!::mkdtemp(templ.data()))
      throw Error(ErrorCode::invalid_argument, std::string("cannot create a temporary folder: ") + std::strerror(errno));
    dir_ = templ;
  }
  ~ExecSampler() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string name() const override { return "exec:" + command_; }
  std::uint64_t max_request_elements() const override { return std::uint64_t{1} << 24; }

  Draws draw(const DrawRequest& r) override {
    SignalGuard::check();
    fs::path in = dir_ / "g.npy", out = dir_ / "out.npy", err = dir_ / "stderr.txt";
    std::error_code ec;
    fs::remove(out, ec);
    write_npy(in, r.g, {r.g.size()});
    char buf[64];
    std::ostringstream cmd;
    cmd << command_ << " --input " << quote(in.string()) << " --output " << quote(out.string())
        << " --seed " << r.key.seed << " --worker " << r.key.worker << " --tensor " << r.key.tensor
        << " --step " << r.key.step << " --steps " << r.steps << " --clip " << to_string(r.params.clip);
    std::snprintf(buf, sizeof buf, "%.17g", r.params.c);
    cmd << " --c " << buf;
    if (r.scalar) {
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(*r.scalar));
      cmd << " --scalar " << buf;
    }
    run(cmd.str(), err);
    if (!fs::exists(out))
      throw Error(ErrorCode::invalid_argument, "external codec exited 0 but wrote no output file (" + out.string() +
                                                   "); command: " + cmd.str());
    NpyArray a;
    try {
      a = read_npy(out);
    } catch (const Error& e) {
      throw Error(ErrorCode::invalid_argument, std::string("external codec output: ") + e.what());
    }
    if (a.shape.size() != 2 || a.shape[0] != r.steps || a.shape[1] != r.g.size()) {
      std::string got = "(";
      for (std::size_t k = 0; k < a.shape.size(); ++k) got += (k ? ", " : "") + std::to_string(a.shape[k]);
      got += a.shape.size() == 1 ? ",)" : ")";
      throw Error(ErrorCode::invalid_argument, "external codec output has shape " + got + ", expected (" +
                                                   std::to_string(r.steps) + ", " + std::to_string(r.g.size()) + ")");
    }
    return draws_from_values(a.data, r.g.size(), r.steps, r.scalar, "external codec output");
  }

 private:
  void run(const std::string& cmd, const fs::path& err) {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) throw Error(ErrorCode::invalid_argument, std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);
      std::FILE* e = std::freopen(err.c_str(), "w", stderr);
      if (e) ::dup2(::fileno(stderr), STDOUT_FILENO);
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    auto start = std::chrono::steady_clock::now();
    int status = 0;
    for (;;) {
      pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      if (w < 0 && errno != EINTR) throw Error(ErrorCode::invalid_argument, "waitpid failed");
      if (g_signal) {  // stop the program's whole process group, then report (the destructor cleans up)
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        SignalGuard::check();
      }
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (elapsed > options_.timeout_s) {
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        char t[32];
        std::snprintf(t, sizeof t, "%g", options_.timeout_s);
        throw Error(ErrorCode::invalid_argument, std::string("external codec timed out after ") + t +
                                                     " s (--exec-timeout); command: " + cmd);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(elapsed < 1.0 ? 2 : 20));
    }
    if (WIFSIGNALED(status))
      throw Error(ErrorCode::invalid_argument, "external codec killed by signal " + std::to_string(WTERMSIG(status)) +
                                                   "; command: " + cmd + "; its output: " + tail_of(err, 600));
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
      throw Error(ErrorCode::invalid_argument, "external codec exited with status " +
                                                   std::to_string(WEXITSTATUS(status)) + "; command: " + cmd +
                                                   "; its output: " + tail_of(err, 600));
  }

  SignalGuard signals_;  // first member: constructed first, destroyed last (after dir_ is removed)
  std::string command_;
  ExecOptions options_;
  fs::path dir_;
};

}  // namespace

std::unique_ptr<Sampler> make_exec_sampler(const std::string& command, const ExecOptions& options) {
  if (!(options.timeout_s > 0.0)) throw Error(ErrorCode::invalid_argument, "exec timeout must be positive");
  return std::make_unique<ExecSampler>(command, options);
}

}  // namespace tg::verify
