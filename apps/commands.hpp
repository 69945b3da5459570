// terngrad-bench: registry of the `terngrad` subcommands. Each subcommand lives in its own file
// apps/cmd_<name>.cpp and registers itself with a RegisterCommands object: how to add its options to
// the parser, and what to run. apps/CMakeLists.txt compiles a cmd_*.cpp only when the library it
// drives is built, so the list of subcommands is the list of files compiled in (no #ifdef, no list).
#pragma once

#include <CLI/CLI.hpp>

#include <atomic>
#include <cerrno>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "tg/output_file.hpp"
#include "tg/split.hpp"

namespace tg::app {

struct Command {
  std::function<CLI::App*(CLI::App&)> add_fn;
  std::function<int()> run_fn;
  CLI::App* sub = nullptr;
  void add(CLI::App& app) { sub = add_fn(app); }
  bool selected() const { return sub && sub->parsed(); }
  int run() const { return run_fn(); }
};

// A number option's value in [lo, hi], its form checked before CLI11 converts it, with one message that
// says what the option takes: "must be a whole number in [1, 4096], got '1.5'", "must be a number in
// [1e-12, 0.5], got 1e-400". CLI::Range said "Value abc not in range 1 to 4096" for a word, printed
// 1e-12 as 0.000000, and let a fraction or an exponent through to "Could not convert". A whole number is
// decimal digits (a leading '-' only where lo < 0); a number is what strtod reads whole, finite.
namespace detail {
inline std::string bound_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}
template <typename T>
std::string bound_text(T v) requires std::is_integral_v<T> { return std::to_string(v); }
}  // namespace detail

template <typename T>
CLI::Validator in_range(T lo, T hi) {
  static_assert(std::is_arithmetic_v<T>);
  const std::string range = "[" + detail::bound_text(lo) + ", " + detail::bound_text(hi) + "]";
  const std::string what = std::is_integral_v<T> ? "must be a whole number in " + range : "must be a number in " + range;
  return CLI::Validator(
      [lo, hi, what](std::string& text) {
        const std::string shown = text.substr(0, 40);
        const std::string quoted = "'" + shown + "'";
        errno = 0;
        if constexpr (std::is_integral_v<T>) {
          bool ok = !text.empty() && text.size() <= 21;
          for (std::size_t i = 0; i < text.size() && ok; ++i)
            ok = (text[i] >= '0' && text[i] <= '9') || (i == 0 && text[i] == '-' && text.size() > 1 && lo < 0);
          if (!ok) return what + ", got " + quoted;
          bool in = false;
          if (text[0] == '-') {
            const long long v = std::strtoll(text.c_str(), nullptr, 10);
            in = errno != ERANGE && static_cast<long double>(v) >= static_cast<long double>(lo) &&
                 static_cast<long double>(v) <= static_cast<long double>(hi);
          } else {
            const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
            in = errno != ERANGE && static_cast<long double>(v) >= static_cast<long double>(lo) &&
                 static_cast<long double>(v) <= static_cast<long double>(hi);
          }
          return in ? std::string() : what + ", got " + shown;
        } else {
          char* end = nullptr;
          const double v = std::strtod(text.c_str(), &end);
          if (text.empty() || end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0])))
            return what + ", got " + quoted;
          if (!std::isfinite(v) && errno != ERANGE) return what + ", got " + quoted;  // nan, inf
          // an overflow is out of range; an underflow (1e-400) reads as the subnormal or 0 it rounds to
          if ((errno == ERANGE && std::fabs(v) > 1.0) || !(v >= static_cast<double>(lo) && v <= static_cast<double>(hi)))
            return what + ", got " + shown;
          return std::string();
        }
      },
      std::string(CLI::detail::type_name<T>()) + " in " + range);
}


// ---- output paths ----------------------------------------------------------------------------
// Every subcommand checks each output it will write (--json, --junit, --output, --csv, --checkpoint,
// --out) after its other options and before it loads data or runs anything, so that an output that
// cannot be written fails at the start, naming it, not after the work. The checks create nothing: a
// folder that does not exist yet is made by the writer (tg::write_output) right before the first file
// goes into it, so a usage error leaves no empty folder behind.
namespace output_paths {

// "" when entries can be created in the existing folder dir, else why not. A probe folder is made and
// removed at once: access() says yes to root on a read-only or special file system (/proc).
inline std::string probe_folder(const std::filesystem::path& dir) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = ".tg-probe-";
    name += std::to_string(::getpid());
    name += "-";
    name += std::to_string(counter.fetch_add(1));
    const std::filesystem::path probe = dir / name;
    if (::mkdir(probe.c_str(), 0700) == 0) {
      ::rmdir(probe.c_str());
      return "";
    }
    if (errno != EEXIST) return std::strerror(errno);
  }
  return "no free name for a probe";
}

// The nearest folder at or above path that exists ("." for a relative path with none), and why entries
// cannot be made under it ("" when they can).
struct Ancestor {
  std::filesystem::path dir;
  std::string problem;
};
inline Ancestor nearest_folder(const std::filesystem::path& path) {
  std::filesystem::path cur = path;
  for (;;) {
    const std::filesystem::path shown = cur.empty() ? std::filesystem::path(".") : cur;
    struct stat st {};
    if (::stat(shown.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return {shown, shown.string() + " is not a folder"};
      std::string why = probe_folder(shown);
      return {shown, why.empty() ? why : "cannot write into " + shown.string() + ": " + why};
    }
    if (errno != ENOENT && errno != ENOTDIR) return {shown, shown.string() + ": " + std::strerror(errno)};
    if (cur.empty() || cur == cur.parent_path()) return {shown, shown.string() + " does not exist"};
    cur = cur.parent_path();
  }
}

}  // namespace output_paths

// An output folder (--out): an existing folder that can be written into, or one that can be made there.
inline void check_output_folder(const std::string& option, const std::string& dir) {
  if (dir.empty()) return;
  output_paths::Ancestor a = output_paths::nearest_folder(dir);
  if (!a.problem.empty()) throw std::invalid_argument(option + ": cannot create output folder " + dir + ": " + a.problem);
}

// An output file: a file (replaced through a temporary file in its folder) or a new path whose folder can be
// made, a character device or a FIFO (written in place), or "-" (stdout) where dash_is_stdout. A folder, a
// block device or a socket is refused, as the writer refuses them.
inline void check_output_file(const std::string& option, const std::string& file, bool dash_is_stdout = true) {
  namespace fs = std::filesystem;
  if (file.empty() || (dash_is_stdout && file == "-")) return;
  auto fail = [&](const std::string& why) { throw std::invalid_argument(option + " " + file + why); };
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) fail(" is a folder, not a file (give a file name)");
    if (S_ISBLK(st.st_mode)) fail(" is a block device (outputs go to files, character devices or FIFOs)");
    if (S_ISSOCK(st.st_mode)) fail(" is a socket (outputs go to files, character devices or FIFOs)");
    if (!S_ISREG(st.st_mode) || tg::output_detail::is_proc_fd(file)) return;  // written in place
    std::error_code ec;
    fs::path real = fs::canonical(file, ec);  // a symlink's target is replaced, in its own folder
    fs::path dir = (ec ? fs::path(file) : real).parent_path();
    if (dir.empty()) dir = ".";
    std::string why = output_paths::probe_folder(dir);
    if (!why.empty()) fail(": cannot write into folder " + dir.string() + ": " + why);
    return;
  }
  if (errno != ENOENT && errno != ENOTDIR) fail(std::string(": ") + std::strerror(errno));
  const fs::path parent = fs::path(file).parent_path();
  output_paths::Ancestor a = output_paths::nearest_folder(parent);
  if (a.problem.empty()) return;
  if (a.dir == (parent.empty() ? fs::path(".") : parent)) fail(": " + a.problem);
  fail(": cannot create folder " + parent.string() + ": " + a.problem);
}

// At most `room` characters of s: its start and its end, " ... " between them where it is longer (the end of a
// message holds what an external program said last, such as the exception that ended it; a path echoed whole
// would fill the screen).
std::string elide_middle(const std::string& s, std::size_t room);

// The file a path will name once the run has made its missing folders: absolute, the part that exists with its
// links resolved, and ".", ".." lexically resolved in the rest (a folder the run makes is a real folder, so
// "new/../x" is "x"); then once more, for links in what the ".." led back to ("new/../link.npy"). Made absolute
// first: weakly_canonical leaves a relative path relative when its first part does not exist, so
// "new/../x/g.npy" and "./a" would not compare equal to "x/g.npy" and "a".
inline std::filesystem::path resolved_path(const std::string& p, std::error_code& ec) {
  const std::filesystem::path abs = std::filesystem::absolute(p, ec);
  if (ec) return {};
  const std::filesystem::path once = std::filesystem::weakly_canonical(abs, ec).lexically_normal();
  if (ec) return {};
  return std::filesystem::weakly_canonical(once, ec).lexically_normal();
}

// Whether paths a and b name one file: by device and inode where both exist (a hard link, a path through a
// symbolic link), else by resolved_path.
inline bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  std::error_code ea, eb;
  const std::filesystem::path pa = resolved_path(a, ea), pb = resolved_path(b, eb);
  return a == b || (!ea && !eb && pa == pb);
}

// Two outputs of one command must not be one file (one would silently replace the other, same_file) nor both stdout.
inline void check_distinct_outputs(const std::string& option_a, const std::string& a, const std::string& option_b,
                                   const std::string& b) {
  if (a.empty() || b.empty()) return;
  if (a == "-" || b == "-") {
    if (a == b) throw std::invalid_argument(option_a + " - and " + option_b + " - cannot both go to stdout");
    return;
  }
  if (same_file(a, b))
    throw std::invalid_argument(option_a + " and " + option_b + " name the same file, " + a +
                                ": one would replace the other (give two file names)");
}

// An output must not be one of the run's inputs, nor a file the run writes into its --out folder: the report
// would replace the data it was made from (verify --samples G V --json G), or one output the other (same_file).
inline void check_output_not_input(const std::string& option_out, const std::string& out, const std::string& option_in,
                                   const std::string& in) {
  if (out.empty() || out == "-" || in.empty() || in == "-") return;
  if (same_file(out, in))
    throw std::invalid_argument(option_out + " " + out + " is the input file given to " + option_in + ": the output would replace it " +
                                "(give the output another name)");
}
inline void check_output_not_in_folder(const std::string& option_out, const std::string& out, const std::string& folder_option,
                                       const std::string& folder, std::initializer_list<const char*> names) {
  if (out.empty() || out == "-" || folder.empty()) return;
  for (const char* name : names)
    if (same_file(out, (std::filesystem::path(folder) / name).string()))
      throw std::invalid_argument(option_out + " " + out + " is the file " + name + " that " + folder_option + " " + folder +
                                  " receives: one would replace the other (give the output another name)");
}

// An output option given an empty value (an unset shell variable, say) is an error, not "no output".
inline CLI::Validator non_empty_path() {
  return CLI::Validator(
      [](std::string& path) {
        return path.empty() ? std::string("is empty: give a file or folder name (an unset variable?)") : std::string();
      },
      "PATH", "non-empty path");
}

// The seeds first .. first + count - 1 of a run over several seeds, refused when they pass 2^64 - 1
// instead of wrapping around to 0.
inline void check_seed_range(std::uint64_t first, std::uint64_t count) {
  if (count > 0 && first > std::numeric_limits<std::uint64_t>::max() - (count - 1))
    throw std::invalid_argument("--seed " + std::to_string(first) + " with --seeds " + std::to_string(count) +
                                ": the seeds would pass 2^64 - 1 = 18446744073709551615 (the largest first seed "
                                "for this --seeds is " +
                                std::to_string(std::numeric_limits<std::uint64_t>::max() - (count - 1)) + ")");
}

// A CLI11 check for an input file that must be a regular file (not a FIFO, device or folder, which
// would block or never end) of at most max_bytes (0: any size).
inline CLI::Validator regular_file(std::uintmax_t max_bytes = 0) {
  return CLI::Validator(
      [max_bytes](std::string& path) {
        std::error_code ec;
        auto st = std::filesystem::status(path, ec);
        if (ec || !std::filesystem::exists(st)) return "file not found: " + path;
        if (!std::filesystem::is_regular_file(st)) return path + " is not a regular file (a FIFO, device or folder is refused)";
        if (max_bytes > 0) {
          auto size = std::filesystem::file_size(path, ec);
          if (!ec && size > max_bytes)
            return path + " has " + std::to_string(size) + " bytes, over the limit of " + std::to_string(max_bytes);
        }
        return std::string();
      },
      "FILE");
}

// An old option name kept working, listed apart under "Old names" in --help: `alias` writes into the same variable as the
// option that replaced it (the vocabulary table in README.md lists the current names). Returned so that
// the caller gives it the same checks as the current option.
template <class T>
CLI::Option* hidden_alias(CLI::App* sub, const std::string& alias, T& variable, const std::string& current) {
  return sub->add_option(alias, variable, "old name of " + current)->group("Old names");
}
template <>
inline CLI::Option* hidden_alias<bool>(CLI::App* sub, const std::string& alias, bool& variable,
                                       const std::string& current) {
  return sub->add_flag(alias, variable, "old name of " + current)->group("Old names");
}

// Numbers mean what they say, for every option of every subcommand (called once in main, after the
// subcommands are added): an unsigned option (seeds, counts) takes exactly a decimal integer in
// [0, 2^64), so "-1" and "18446744073709551616" are refused instead of becoming 2^64-1; a signed one
// exactly a decimal integer ("1.5" and "1e3" are refused, naming the option); a floating option refuses
// NaN and +-Inf (none of the program's options has a meaning for them). An option narrower than 64 bits
// states its range with in_range; main() words any conversion CLI11 still refuses as "cannot take".
void strict_numbers(CLI::App& app);
// "" when no comma-separated option of the parsed subcommand names an item twice (--skip cross,cross ran as one
// skip, converge --methods tern,tern twice) and no flag is given twice (compare --no-shared --no-shared), else
// the message.
std::string repeated_item(const CLI::App& sub);
// An option given where the run does not use it is refused, not ignored. only_with(sub, "--gamma",
// "--schedule const", [o] { return o->schedule == "const"; }) says that --gamma of `sub` is used only when
// applies() holds (called after the parse); main() refuses it, given in a run where applies() is false:
// "--gamma is used only with --schedule const; this run would ignore it". ignored_option returns that
// message for the parsed subcommand, or "".
void only_with(CLI::App* sub, const std::string& option, std::string when, std::function<bool()> applies);
std::string ignored_option(const CLI::App& sub);
// "" when no comma-separated option is given an empty item, else the error line ("terngrad SUB: ...").
// CLI11 drops empty items ("--methods float,,tern" ran float and tern, "--workers 4," ran 4), so this
// reads the arguments themselves (args: argv[1..]), before the parse: "--opt a,,b", "--opt=a,", "--opt ''".
// Also a list option given twice (CLI11 merged "--workers 1 --workers 2" into one list), and an empty value
// of any other option or an empty positional argument (an unset variable: "--profile $P", "compare $A $B").
std::string empty_argument(const CLI::App& app, const std::vector<std::string>& args);
// An implementation run as another program (exec:CMD, serve:CMD): the one that --exec-timeout bounds.
inline bool external_impl(const std::string& impl) { return impl.rfind("exec:", 0) == 0 || impl.rfind("serve:", 0) == 0; }
// Every item of a comma-separated list, empty ones included (common/include/tg/split.hpp).
using tg::split_commas;

// The first line of `terngrad model --csv`; also how a file at that path is known as a report of an
// earlier run (registry.cpp).
inline constexpr const char* kModelCsvHeader =
    "config,net,topology,scheme,workers,batch_per_worker,payload_bytes,compute_s,encode_s,comm_s,decode_s,step_s,"
    "images_per_s";

// Runs fn, turning every exception (tg::Error, std::exception, anything else) into one line on stderr
// (the first line of its message) and exit code 2. main() runs every subcommand through it: the one
// place where exceptions end.
int guarded(const char* command, const std::function<int()>& fn);

// Reports of an earlier run must not outlive a run that ends in an error: a pipeline that reads --json
// after a failed run would take the old result for this one's. The report options a command was given
// (--json, --junit, --csv, --output; not --checkpoint, not a folder) are noted once it is parsed;
// retire_reports() removes the regular files at those paths (a symbolic link's target, which the
// writer would have replaced) when the command ends with exit 2 or is interrupted. FIFOs, devices and
// stdout ("-") are left alone. Each removal is said on stderr.
void note_reports(const CLI::App& sub);
// A file a command writes into its --out folder, retired as those reports are (converge's summary.json and
// curves.csv: a run interrupted or ended in an error must not leave an earlier run's results there looking
// like its own). first_line: the file's first line, by which it is known as one (empty: a JSON object).
// Noted when the command's options are parsed (a parse callback), before the signal handler is set up.
void note_folder_report(const std::string& path, const std::string& first_line = "");
void retire_reports(const char* command, const char* why = "ended in an error");
// From here to the end of the process, SIGINT, SIGTERM and SIGHUP remove the noted reports (as retire_reports,
// in the handler: stat and unlink only), say so on stderr, and end the process by the same signal. A command that
// stops its own work on a signal (verify of an external program, train) puts its handler in place of this one
// while it runs and retires the reports itself.
void retire_reports_on_signal(const char* command);
// Said instead of "no report written" in the line a signal writes ("terngrad train: interrupted; ..."): what a
// command leaves behind anyway (train: the run folder as of its last write). Call before the work starts.
// if_exists: said only when that path exists at the signal (a folder the run writes into as it goes: an
// early signal finds none, and the plain line is said).
void note_on_interrupt(const std::string& note, const std::string& if_exists = "");

// Registers the commands made by `make` at static initialisation; `order` sorts them in --help.
struct RegisterCommands {
  RegisterCommands(int order, std::function<std::vector<Command>()> make);
};

// Every registered command, in `order`.
std::vector<Command> all_commands();

}  // namespace tg::app
