// terngrad-bench: the multi-process launcher (fork + exec of `terngrad train --rank r ...`), see launcher.hpp.
#include "tg/train/launcher.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace tg::train {
namespace {

volatile sig_atomic_t g_interrupted = 0;
void on_signal(int) { g_interrupted = 1; }

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int s = WTERMSIG(status);
    const char* name = sigdescr_np(s);
    return "was killed by signal " + std::to_string(s) + (name ? std::string(" (") + name + ")" : "");
  }
  return "ended with status " + std::to_string(status);
}

}  // namespace

int free_port(const std::string& addr) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("cannot open a socket: ") + std::strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  if (::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) {
    ::close(fd);
    throw std::invalid_argument("address '" + addr + "' is not an IPv4 address");
  }
  socklen_t len = sizeof sa;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    int e = errno;
    ::close(fd);
    throw std::runtime_error("cannot find a free port on " + addr + ": " + std::strerror(e));
  }
  ::close(fd);
  return ntohs(sa.sin_port);
}

int launch(const LaunchOptions& o) {
  if (o.nproc < 1 || o.nproc > 256) throw std::invalid_argument("--nproc " + std::to_string(o.nproc) + " is not in [1, 256]");
  for (const auto& a : o.train_args)
    if (a == "--rank" || a == "--world-size" || a == "--master-port" || a == "--master-addr")
      throw std::invalid_argument("option " + a + " is set by the launcher; remove it from the train options");
  std::string exe = o.exe.empty() ? std::string("/proc/self/exe") : o.exe;
  int port = o.port > 0 ? o.port : free_port(o.addr);
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  auto rank_args = [&](int r) {
    std::vector<std::string> args = {"terngrad", "train"};
    args.insert(args.end(), o.train_args.begin(), o.train_args.end());
    for (const auto& extra : {std::string("--rank"), std::to_string(r), std::string("--world-size"), std::to_string(o.nproc),
                              std::string("--master-addr"), o.addr, std::string("--master-port"), std::to_string(port)})
      args.push_back(extra);
    return args;
  };
  const pid_t launcher = ::getpid();
  auto start = [&](std::vector<std::string> args, int stderr_to = -1) {  // -1: fork failed
    pid_t pid = ::fork();
    if (pid == 0) {
      if (stderr_to >= 0) ::dup2(stderr_to, STDERR_FILENO);
      // A rank never outlives its launcher: SIGKILL when the launcher dies, however it dies (kept
      // across execv). Checked once more in case the launcher died before prctl.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) ::_exit(128 + SIGKILL);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(exe.c_str(), argv.data());
      std::fprintf(stderr, "terngrad launch: cannot run %s: %s\n", exe.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    return pid;
  };

  // The train options are checked once, by rank 0's command line with --check-options (parsed and checked, nothing
  // run): a refused option is said once, in the launcher's own error line, not by every rank.
  {
    std::vector<std::string> args = rank_args(0);
    args.push_back("--check-options");
    int err[2];
    if (::pipe(err) != 0) throw std::runtime_error(std::string("cannot open a pipe: ") + std::strerror(errno));
    const pid_t pid = start(args, err[1]);
    ::close(err[1]);
    std::string said;
    char buf[4096];
    for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      if (said.size() < 4096) said.append(buf, static_cast<std::size_t>(n));
    }
    ::close(err[0]);
    if (pid < 0) throw std::runtime_error(std::string("cannot start a process: ") + std::strerror(errno));
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
      for (std::size_t at; (at = said.find('\n')) != std::string::npos;) said.replace(at, 1, " | ");
      throw std::invalid_argument("no rank was started: " + (said.empty() ? "the train options were refused (" +
                                                                              describe(status) + ")"
                                                                        : said));
    }
  }
  std::fprintf(stderr, "terngrad launch: %d ranks, store on %s:%d\n", o.nproc, o.addr.c_str(), port);

  std::vector<pid_t> pids;
  for (int r = 0; r < o.nproc; ++r) {
    pid_t pid = start(rank_args(r));
    if (pid < 0) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      throw std::runtime_error(std::string("cannot start a rank: ") + std::strerror(errno));
    }
    pids.push_back(pid);
  }

  using Clock = std::chrono::steady_clock;
  std::vector<bool> running(pids.size(), true);
  int left = o.nproc, failures = 0;
  bool deadline_set = false, forwarded = false;
  Clock::time_point deadline;
  while (left > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (std::size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] != pid || !running[r]) continue;
        running[r] = false;
        --left;
        bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok) {
          ++failures;
          std::fprintf(stderr, "terngrad launch: rank %zu %s\n", r, describe(status).c_str());
          if (!deadline_set) {
            deadline_set = true;
            deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(o.grace_s * 1000.0));
          }
        }
      }
      continue;
    }
    if (g_interrupted && !forwarded) {
      forwarded = true;
      for (std::size_t r = 0; r < pids.size(); ++r)
        if (running[r]) ::kill(pids[r], SIGTERM);
      deadline_set = true;
      deadline = Clock::now() + std::chrono::seconds(5);
    }
    if (deadline_set && Clock::now() > deadline) {
      for (std::size_t r = 0; r < pids.size(); ++r)
        if (running[r]) {
          std::fprintf(stderr, "terngrad launch: rank %zu did not exit within %.0f s of the first failure; killing it\n", r,
                       o.grace_s);
          ::kill(pids[r], SIGKILL);
        }
      deadline_set = false;  // the killed ranks are reaped on the next turns
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (failures == 0 && !g_interrupted) return 0;
  std::fprintf(stderr, "terngrad launch: %d of %d ranks failed\n", failures, o.nproc);
  return 2;
}

}  // namespace tg::train
