// terngrad-bench: registry of the `terngrad` subcommands. Each subcommand lives in its own file
// apps/cmd_<name>.cpp and registers itself with a RegisterCommands object: how to add its options to
// the parser, and what to run. apps/CMakeLists.txt compiles a cmd_*.cpp only when the library it
// drives is built, so the list of subcommands is the list of files compiled in (no #ifdef, no list).
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace tg::app {

struct Command {
  std::function<CLI::App*(CLI::App&)> add_fn;
  std::function<int()> run_fn;
  CLI::App* sub = nullptr;
  void add(CLI::App& app) { sub = add_fn(app); }
  bool selected() const { return sub && sub->parsed(); }
  int run() const { return run_fn(); }
};

// CLI11 checks for a finite number > 0, or >= 0, whose message names the value (CLI::PositiveNumber and
// CLI::NonNegativeNumber print the whole of DBL_MAX as the range's end).
inline CLI::Validator finite_number_check(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& text) {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v) || v < 0 || (v == 0 && !zero_allowed))
          return std::string("must be a finite number ") + (zero_allowed ? ">= 0" : "> 0") + ", got " + text;
        return std::string();
      },
      zero_allowed ? "NONNEGATIVE" : "POSITIVE");
}
inline CLI::Validator positive_finite() { return finite_number_check(false); }
inline CLI::Validator non_negative_finite() { return finite_number_check(true); }

// Creates the output folder dir (and its parents) of a long run before the run, so that a path that cannot
// be a folder fails at the start, naming it, not at the first write.
inline void make_output_folder(const std::string& option, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec && !std::filesystem::is_directory(dir, ec)) ec = std::make_error_code(std::errc::not_a_directory);
  if (ec) throw std::invalid_argument(option + ": cannot create output folder " + dir + ": " + ec.message());
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
// [0, 2^64), so "-1" and "18446744073709551616" are refused instead of becoming 2^64-1; a floating
// option refuses NaN and +-Inf (none of the program's options has a meaning for them).
void strict_numbers(CLI::App& app);

// Runs fn, turning every exception (tg::Error, std::exception, anything else) into one line on stderr
// (the first line of its message) and exit code 2. main() runs every subcommand through it: the one
// place where exceptions end.
int guarded(const char* command, const std::function<int()>& fn);

// Registers the commands made by `make` at static initialisation; `order` sorts them in --help.
struct RegisterCommands {
  RegisterCommands(int order, std::function<std::vector<Command>()> make);
};

// Every registered command, in `order`.
std::vector<Command> all_commands();

}  // namespace tg::app
