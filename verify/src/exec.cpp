// terngrad-bench: the external-codec samplers (`--impl exec:CMD`, and `serve:CMD`, one process for
// the whole run). For each request the battery writes the gradient as a float32 .npy file and runs
//   CMD --input IN.npy --output OUT.npy --seed S --worker W --tensor T --step K --steps N
//       --clip none|clip|saturate --c C [--scalar S]
// and reads OUT.npy: float32, shape (N, d), row j = the decoded g~ at step K + j. Protocol and
// example: docs/battery.md, examples/numpy_codec.py.
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include <poll.h>
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

// Text from a program, made one printable line: line breaks become " | " (so a message cut at its first line
// still carries the last lines, where a traceback ends with the error), other control bytes and bytes >= 0x7f
// are written \xNN.
std::string printable_line(const std::string& s) {
  std::string o;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(s[i]);
    if (ch == '\n') {
      o += " | ";
    } else if (ch == '\r') {
      continue;
    } else if (ch == '\t') {
      o += ' ';
    } else if (ch < 0x20 || ch >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      o += buf;
    } else {
      o += static_cast<char>(ch);
    }
  }
  return o;
}

// The last max_chars characters of a program's output (its stderr), as one printable line.
std::string tail_of(const fs::path& path, std::size_t max_chars) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  bool cut = false;
  if (s.size() > max_chars) s = s.substr(s.size() - max_chars), cut = true;
  if (s.empty()) return "(none)";
  return (cut ? "..." : "") + printable_line(s);
}

// Writes the gradient to `in` and returns the protocol's arguments for request r (both forms).
std::string request_args(const DrawRequest& r, const fs::path& in, const fs::path& out) {
  std::error_code ec;
  fs::remove(out, ec);
  write_npy(in, r.g, {r.g.size()});
  char buf[64];
  std::ostringstream a;
  a << "--input " << quote(in.string()) << " --output " << quote(out.string()) << " --seed " << r.key.seed
    << " --worker " << r.key.worker << " --tensor " << r.key.tensor << " --step " << r.key.step << " --steps "
    << r.steps << " --clip " << to_string(r.params.clip);
  std::snprintf(buf, sizeof buf, "%.17g", r.params.c);
  a << " --c " << buf;
  if (r.scalar) {
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(*r.scalar));
    a << " --scalar " << buf;
  }
  return a.str();
}

// Reads the program's answer to request r from `out`; `context` names the command or request.
Draws read_output(const DrawRequest& r, const fs::path& out, const std::string& context) {
  if (!fs::exists(out))
    throw ExternalCodecError("external codec answered but wrote no output file (" + out.string() +
                                                 "); " + context);
  NpyArray a;
  try {
    a = read_npy(out);
  } catch (const Error& e) {
    throw ExternalCodecError(std::string("external codec output: ") + e.what() + "; " + context);
  }
  if (a.shape.size() != 2 || a.shape[0] != r.steps || a.shape[1] != r.g.size()) {
    std::string got = "(";
    for (std::size_t k = 0; k < a.shape.size(); ++k) got += (k ? ", " : "") + std::to_string(a.shape[k]);
    got += a.shape.size() == 1 ? ",)" : ")";
    throw ExternalCodecError("external codec output has shape " + got + ", expected (" +
                                                 std::to_string(r.steps) + ", " + std::to_string(r.g.size()) +
                                                 "); " + context);
  }
  try {
    return draws_from_values(a.data, r.g.size(), r.steps, r.scalar, "external codec output");
  } catch (const Error& e) {
    // A non-finite output: name the request and the gradient's range (an overflow or an underflow shows there)
    throw ExternalCodecError(std::string(e.what()) + " (" + gradient_range_note(r.g) + "); " + context);
  }
}

fs::path make_temp_dir() {
  std::string templ = (fs::temp_directory_path() / "tg-verify-XXXXXX").string();
  if (!::mkdtemp(templ.data()))
    throw Error(ErrorCode::invalid_argument, std::string("cannot create a temporary folder: ") + std::strerror(errno));
  return templ;
}

// The samplers' temporary folder, removed with its contents when the sampler goes: also when the
// sampler's constructor throws (a serve: program that fails the handshake), where no destructor runs.
struct TempDir {
  fs::path path = make_temp_dir();
  TempDir() = default;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path operator/(const char* name) const { return path / name; }
};

// SIGPIPE ignored while a serve: program runs (a program that died must be an error, not our death);
// the previous disposition comes back when the sampler goes, or when its constructor throws.
struct IgnoreSigpipe {
  struct sigaction old {};
  IgnoreSigpipe() {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &old);
  }
  IgnoreSigpipe(const IgnoreSigpipe&) = delete;
  IgnoreSigpipe& operator=(const IgnoreSigpipe&) = delete;
  ~IgnoreSigpipe() { ::sigaction(SIGPIPE, &old, nullptr); }
};

class ExecSampler : public Sampler {
 public:
  ExecSampler(std::string command, ExecOptions options)
      : command_(std::move(command)), options_(options) {}
  std::string name() const override { return "exec:" + command_; }
  std::uint64_t max_request_elements() const override { return std::uint64_t{1} << 24; }

  Draws draw(const DrawRequest& r) override {
    SignalGuard::check();
    fs::path in = dir_ / "g.npy", out = dir_ / "out.npy", err = dir_ / "stderr.txt";
    const std::string args = request_args(r, in, out);
    const std::string cmd = command_ + " " + args;
    seconds_ += run(cmd, err);
    ++requests_;
    return read_output(r, out, "command: " + cmd);
  }

  // An interpreter's start-up is paid once per request here (80 ms for Python with NumPy on one of the project's
  // VMs, 1,054 requests at quick): say what the processes took and that serve: starts one.
  std::string cost_note() const override {
    if (requests_ == 0) return {};
    char b[320];
    std::snprintf(b, sizeof b,
                  "exec: %zu requests, one process each, %.1f s in them (%.0f ms per request); a codec that serves "
                  "every request from one process (--impl serve:'CMD', docs/battery.md) pays its start-up once",
                  requests_, seconds_, 1e3 * seconds_ / static_cast<double>(requests_));
    return b;
  }

 private:
  // Runs one request's process; returns its wall time in seconds.
  double run(const std::string& cmd, const fs::path& err) {
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
      // Exited, not yet reaped (WNOWAIT): its pid, the group's id, cannot be reused until it is, so what it left
      // running in its group (a background child) is stopped here and nothing else can be hit.
      siginfo_t info{};
      info.si_pid = 0;
      const int rc = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
      if (rc == 0 && info.si_pid == pid) {
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      if (rc < 0 && errno != EINTR) throw Error(ErrorCode::invalid_argument, "waitid failed");
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
        throw ExternalCodecError(std::string("external codec timed out after ") + t +
                                                     " s (--exec-timeout); command: " + cmd);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(elapsed < 1.0 ? 2 : 20));
    }
    if (WIFSIGNALED(status))
      throw ExternalCodecError("external codec killed by signal " + std::to_string(WTERMSIG(status)) +
                                                   "; command: " + cmd + "; its output: " + tail_of(err, 600));
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
      throw ExternalCodecError("external codec exited with status " +
                                                   std::to_string(WEXITSTATUS(status)) + "; command: " + cmd +
                                                   "; its output: " + tail_of(err, 600));

    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  SignalGuard signals_;  // first member: constructed first, destroyed last (after dir_ is removed)
  std::string command_;
  ExecOptions options_;
  TempDir dir_;
  std::size_t requests_ = 0;  // answered
  double seconds_ = 0.0;      // wall time of their processes
};


// The persistent form (`--impl serve:CMD`): `CMD --serve` runs for the whole battery. It announces
// itself with the line "terngrad-serve 1", then answers each request line (the one-shot arguments)
// with a line "ok" (OUT.npy written) or "error MESSAGE". The per-request timeout, interruption and
// the clean-up of the temporary folder work as in the one-shot form.
class ServeSampler : public Sampler {
 public:
  ServeSampler(std::string command, ExecOptions options)
      : command_(std::move(command)), options_(options) {
    start();  // a failure stops the program (fail()); the members then restore SIGPIPE and remove the folder
  }
  ~ServeSampler() override { stop(); }  // then the members: SIGPIPE's disposition back, the folder removed
  std::string name() const override { return "serve:" + command_; }
  std::uint64_t max_request_elements() const override { return std::uint64_t{1} << 24; }

  Draws draw(const DrawRequest& r) override {
    SignalGuard::check();
    refuse_unrequested_output();
    fs::path in = dir_ / "g.npy", out = dir_ / "out.npy";
    const std::string args = request_args(r, in, out);
    last_request_ = args;
    const std::string line = args + "\n";
    if (::write(to_child_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      fail("could not send a request (" + std::string(std::strerror(errno)) + ")");
    std::string answer = read_line("request: " + args);
    if (answer.rfind("error", 0) == 0) fail("it answered '" + printable_line(answer) + "' to the request: " + args);
    if (answer != "ok") fail("it answered '" + printable_line(answer.substr(0, 200)) + "' instead of 'ok' or 'error MESSAGE'");
    return read_output(r, out, "request: " + args);
  }

 private:
  void start() {
    int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1};
    auto refuse = [&](const char* what) {  // no descriptor left open
      const std::string why = std::string(what) + " failed: " + std::strerror(errno);
      for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]})
        if (fd >= 0) ::close(fd);
      throw Error(ErrorCode::invalid_argument, why);
    };
    if (::pipe(in_pipe) != 0 || ::pipe(out_pipe) != 0) refuse("pipe");
    const fs::path err = dir_ / "stderr.txt";
    const std::string cmd = command_ + " --serve";
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) refuse("fork");
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::dup2(in_pipe[0], STDIN_FILENO);
      ::dup2(out_pipe[1], STDOUT_FILENO);
      if (!std::freopen(err.c_str(), "w", stderr)) ::_exit(127);
      for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) ::close(fd);
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    to_child_ = in_pipe[1];
    from_child_ = out_pipe[0];
    std::string hello = read_line("the handshake");
    if (hello != "terngrad-serve 1")
      fail("its first line was '" + printable_line(hello.substr(0, 200)) + "', not the handshake 'terngrad-serve 1' (docs/battery.md, serve:)");
  }

  // One answer line per request: a line (or part of one) already written when the next request is due would be
  // taken as that request's answer, so it is refused, naming the request it followed.
  void refuse_unrequested_output() {
    for (;;) {
      pollfd p{from_child_, POLLIN, 0};
      const int ready = ::poll(&p, 1, 0);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0 || !(p.revents & POLLIN)) break;
      char chunk[4096];
      const ssize_t n = ::read(from_child_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // its end of output: the request's read reports it
      buffer_.append(chunk, static_cast<std::size_t>(n));
      if (buffer_.size() > kMaxLine) break;
    }
    if (buffer_.empty()) return;
    const std::string extra = buffer_.substr(0, std::min<std::size_t>(buffer_.find('\n'), 200));
    fail("it wrote '" + printable_line(extra) + "' after its answer to the request: " + last_request_ +
         " (one answer line per request)");
  }

  // One line from the program, within the per-request timeout; interruption and death are errors.
  std::string read_line(const std::string& what) {
    auto start = std::chrono::steady_clock::now();
    for (;;) {
      auto nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        return line;
      }
      if (g_signal) {
        stop();
        SignalGuard::check();
      }
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (elapsed > options_.timeout_s) {
        char t[32];
        std::snprintf(t, sizeof t, "%g", options_.timeout_s);
        fail(std::string("no answer within ") + t + " s (--exec-timeout) to " + what);
      }
      pollfd p{from_child_, POLLIN, 0};
      int ready = ::poll(&p, 1, 50);
      if (ready < 0 && errno != EINTR) fail("poll failed");
      if (ready <= 0) continue;
      char chunk[4096];
      ssize_t n = ::read(from_child_, chunk, sizeof chunk);
      if (n == 0) fail("it exited (end of its output) while the battery waited for " + what);
      if (n < 0 && errno != EINTR) fail("reading its output failed");
      if (n > 0) buffer_.append(chunk, static_cast<std::size_t>(n));
      // an answer is "ok" or "error MESSAGE": a line that never ends is refused, not buffered
      if (buffer_.size() > kMaxLine && buffer_.find('\n') == std::string::npos)
        fail("an answer line longer than " + std::to_string(kMaxLine) + " bytes to " + what);
    }
  }
  static constexpr std::size_t kMaxLine = 64 * 1024;

  [[noreturn]] void fail(const std::string& why) {
    const std::string err = tail_of(dir_ / "stderr.txt", 600);
    stop();
    throw ExternalCodecError("external codec (serve:" + command_ + "): " + why + "; its stderr: " + err);
  }

  // Closes its input (a well-behaved program then exits), waits briefly, then kills its process group.
  void stop() {
    if (to_child_ >= 0) ::close(to_child_), to_child_ = -1;
    if (from_child_ >= 0) ::close(from_child_), from_child_ = -1;
    if (pid_ <= 0) return;
    int status = 0;
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  SignalGuard signals_;  // first member: constructed first, destroyed last
  std::string command_;
  ExecOptions options_;
  TempDir dir_;
  IgnoreSigpipe sigpipe_;
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string buffer_;
  std::string last_request_ = "(none: the handshake)";
};
}  // namespace

std::unique_ptr<Sampler> make_serve_sampler(const std::string& command, const ExecOptions& options) {
  if (!(options.timeout_s > 0.0)) throw Error(ErrorCode::invalid_argument, "exec timeout must be positive");
  return std::make_unique<ServeSampler>(command, options);
}

std::unique_ptr<Sampler> make_exec_sampler(const std::string& command, const ExecOptions& options) {
  if (!(options.timeout_s > 0.0)) throw Error(ErrorCode::invalid_argument, "exec timeout must be positive");
  return std::make_unique<ExecSampler>(command, options);
}

}  // namespace tg::verify
