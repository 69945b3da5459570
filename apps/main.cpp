// terngrad-bench: the `terngrad` command-line program (one binary, subcommands).
//   terngrad --help            lists the subcommands
//   terngrad demo --elements 1000000  encodes one gradient and checks the variance identity by Monte-Carlo
// Exit codes: 0 pass, 1 a check failed, 2 usage or input error.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <iostream>
#include <typeinfo>

#include <cxxabi.h>
#include <signal.h>
#include <unistd.h>

#include "commands.hpp"
#include "tg_version.hpp"

namespace {

// The last line of defence: an exception that escapes a thread the program does not own (LibTorch's
// store daemon when a peer sends garbage: a length from the network used as an allocation size)
// would call std::terminate and abort (SIGABRT, exit 134, a core). It becomes one line and exit 2.
[[noreturn]] void on_terminate() {
  const char* type = "unknown";
  std::string what = "no exception (std::terminate called)";
  if (std::exception_ptr p = std::current_exception()) {
    if (std::type_info* t = abi::__cxa_current_exception_type()) type = t->name();
    try {
      std::rethrow_exception(p);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
      what = "not a std::exception";
    }
    int status = 0;
    char* demangled = abi::__cxa_demangle(type, nullptr, nullptr, &status);
    if (status == 0 && demangled) type = demangled;
  }
  std::string line = what.substr(0, what.find('\n')).substr(0, 300);
  std::fprintf(stderr, "terngrad: fatal: uncaught %s: %s (malformed input from a peer or a file; nothing more was done)\n",
               type, line.c_str());
  std::fflush(stderr);
  ::_exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(on_terminate);
  // A file size limit (RLIMIT_FSIZE) must end in a failed write (EFBIG), which the output writer turns
  // into one line and exit 2 with the previous file intact, not in SIGXFSZ's core dump.
  ::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"terngrad: test bench for the TernGrad stochastic ternary gradient codec"};
  app.require_subcommand(0, 1);  // an unknown word is then named: "argument was not expected: X"
  app.failure_message([](const CLI::App*, const CLI::Error& e) {  // one line per error
    return std::string("terngrad: ") + e.what() + " (see --help)\n";
  });
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.option_defaults()->always_capture_default();  // every --help shows each option's default
  app.set_version_flag("--version", std::string("terngrad ") + tg::kToolVersion + " (source " + tg::kSourceCommit + ")");
  std::vector<tg::app::Command> commands = tg::app::all_commands();
  for (auto& c : commands) c.add(app);
  tg::app::strict_numbers(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {  // prints the version; exit 0
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  // Every subcommand runs inside the one exception guard: one line on stderr and exit 2.
  for (auto& c : commands)
    if (c.selected()) return tg::app::guarded(c.sub->get_name().c_str(), [&] { return c.run(); });
  std::fprintf(stderr, "terngrad: a subcommand is required (see terngrad --help)\n");
  return 2;
}
