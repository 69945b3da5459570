// terngrad-bench: `terngrad report`: gathers the JSON/CSV that verify, converge, bench and train
// wrote under reports/ and renders reports/index.md (+ index.html) with PNG plots, by running
// `python -m terngrad.report index` (python/terngrad/report/) with the project's Python (build/venv)
// and the package built next to this program. Run: terngrad report [--reports DIR]
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.hpp"

namespace tg::app {
namespace {

namespace fs = std::filesystem;

// The build folder this program sits in (<build>/apps/terngrad): the package is built at
// <build>/python/package, and scripts/setup.sh makes the interpreter build/venv/bin/python next to
// the preset folders. Found at run time, so no path of the build machine is compiled in.
fs::path build_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path().parent_path();
}
std::string package_dir() { return (build_dir() / "python" / "package").string(); }
std::string default_python() {
  if (const char* env = std::getenv("TERNGRAD_PYTHON"); env && *env) return env;
  fs::path venv = build_dir().parent_path() / "venv" / "bin" / "python";
  std::error_code ec;  // a folder this user cannot enter is a venv not found, not an error
  return fs::exists(venv, ec) ? venv.string() : std::string("python3");
}

struct ReportOptions {
  std::string reports = "reports";
  std::string out;  // default: <reports>/index.md
  std::string python = default_python();
  bool no_html = false;
  bool no_live = false;
  int live_draws = 2000;
  std::string title;
  std::string note;
};

// Checks that `python` is a Python 3.8+ interpreter before the renderer runs, so that a wrong
// --python (/bin/false, /bin/true, a script that hangs) is named as such instead of ending in the
// renderer's exit status: it must print a token within 10 s.
void check_interpreter(const std::string& python) {
  const std::string token = "terngrad-python-ok";
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
  std::vector<std::string> args = {python, "-c",
                                   "import sys; sys.stdout.write('" + token + "' if sys.version_info >= (3, 8) else 'old')"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execvp(argv[0], argv.data());
    std::_Exit(127);
  }
  ::close(fds[1]);
  std::string got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool timed_out = false;
  while (got.size() < 64) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    char buf[64];
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got == token && WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  std::string why = timed_out ? "it did not answer within 10 s"
                    : WIFEXITED(status) && WEXITSTATUS(status) == 127 ? "it cannot be run"
                    : WIFEXITED(status) && WEXITSTATUS(status) != 0
                        ? "`" + python + " -c ...` exited with status " + std::to_string(WEXITSTATUS(status))
                    : WIFSIGNALED(status) ? "it was killed by signal " + std::to_string(WTERMSIG(status))
                    : got == "old" ? "it is older than Python 3.8"
                                   : "it did not print what a Python interpreter prints";
  throw std::runtime_error("--python " + python + " is not a working Python 3 interpreter: " + why +
                           " (pass --python PATH or run scripts/setup.sh)");
}

int run_report(const ReportOptions& o) {
  if (o.python.empty())
    throw std::runtime_error(
        "no Python interpreter was configured; run scripts/setup.sh (it creates build/venv), "
        "then reconfigure, or pass --python PATH");
  if (o.python.find('/') != std::string::npos && !fs::exists(o.python))
    throw std::runtime_error("Python interpreter " + o.python +
                             " not found; run scripts/setup.sh (it creates build/venv) or pass --python PATH");
  if (!fs::is_directory(package_dir() + "/terngrad"))
    throw std::runtime_error("the built Python package " + package_dir() +
                             " is missing (build the target tg_python)");
  std::error_code ec;
  if (!fs::is_directory(o.reports, ec))
    throw std::runtime_error(fs::exists(o.reports, ec) ? "--reports " + o.reports + " is not a folder (pass --reports DIR)"
                                                       : "reports folder " + o.reports + " does not exist (pass --reports DIR)");
  // the Markdown file (the renderer writes the HTML and figures/ beside it), before the inputs are read
  check_output_file("--out", o.out.empty() ? (fs::path(o.reports) / "index.md").string() : o.out, false);
  if (!o.out.empty() && fs::path(o.out).extension() != ".md")
    throw std::invalid_argument("--out must name a .md file (the HTML and figures/ go beside it), got " + o.out);
  check_output_not_input("--out", o.out.empty() ? (fs::path(o.reports) / "index.md").string() : o.out, "--note", o.note);

  check_interpreter(o.python);

  // each value joined to its option by '=': a title or a path that starts with '-' is a value, not an option
  std::vector<std::string> args = {o.python, "-m", "terngrad.report", "index", "--reports=" + o.reports};
  if (!o.out.empty()) args.push_back("--out=" + o.out);
  if (o.no_html) args.push_back("--no-html");
  if (o.no_live) args.push_back("--no-live");
  args.push_back("--live-draws=" + std::to_string(o.live_draws));
  if (!o.title.empty()) args.push_back("--title=" + o.title);
  if (!o.note.empty()) args.push_back("--note=" + o.note);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // the renderer is the package built next to this program (its live section uses the bindings)
    std::string pkg = package_dir();
    const char* old = std::getenv("PYTHONPATH");
    std::string value = old && *old ? pkg + ":" + old : pkg;
    ::setenv("PYTHONPATH", value.c_str(), 1);
    ::execvp(argv[0], argv.data());  // a bare name (python3) is looked up on PATH
    std::fprintf(stderr, "terngrad report: error: cannot run %s: %s\n", argv[0], std::strerror(errno));
    std::_Exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
  }
  if (WIFEXITED(status)) {
    int rc = WEXITSTATUS(status);
    if (rc == 0) return 0;
    if (rc == 2) return 2;  // the renderer has said what is wrong, in one line
    // another status (a Python exception ends with 1): this line names the program in case it said nothing
    std::fprintf(stderr, "terngrad report: %s -m terngrad.report index exited with status %d\n", o.python.c_str(), rc);
    return rc == 1 ? 1 : 2;  // 1: a section's input failed its checks; anything else is an error
  }
  throw std::runtime_error(o.python + " -m terngrad.report index was killed by signal " +
                           std::to_string(WTERMSIG(status)));
}

}  // namespace

static Command report_command() {
  auto opts = std::make_shared<ReportOptions>();
  Command c;
  c.add_fn = [opts](CLI::App& app) {
    CLI::App* sub = app.add_subcommand(
        "report", "Render reports/index.md (+ html, PNG plots) from the JSON/CSV the other tools wrote");
    sub->add_option("--reports", opts->reports, "Folder with the tools' outputs (searched recursively)")->check(non_empty_path());
    sub->add_option("--out", opts->out, "Markdown file to write (default: <reports>/index.md)")->check(non_empty_path());
    sub->add_option("--python", opts->python, "Python interpreter with numpy and matplotlib (default: $TERNGRAD_PYTHON, else build/venv/bin/python "
                    "beside this build, else python3 on PATH)")
        ->capture_default_str();
    sub->add_option("--title", opts->title, "Title of the report");
    sub->add_option("--note", opts->note, "Markdown file put under the title (e.g. how the inputs were made)")
        ->check(regular_file(std::uintmax_t{1} << 20));  // also says when the file does not exist
    sub->add_flag("--no-html", opts->no_html, "Write only the Markdown file");
    sub->add_flag("--no-live", opts->no_live,
                  "Do not add the codec section computed live through the Python bindings");
    sub->add_option("--live-draws", opts->live_draws, "Monte-Carlo draws of the live section (at most 200000: 4096 x draws trits stay "
                    "under the bindings' limit of 2^30)")
        ->check(tg::app::in_range(100, 200000))
        ->capture_default_str();
    return sub;
  };
  c.run_fn = [opts] { return run_report(*opts); };
  return c;
}

const RegisterCommands kRegistered{60, [] { return std::vector<Command>{report_command()}; }};

}  // namespace tg::app
