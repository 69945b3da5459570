// terngrad-bench: the `terngrad` command-line program (one binary, subcommands).
//   terngrad --help            lists the subcommands
//   terngrad demo --elements 1000000  encodes one gradient and checks the variance identity by Monte-Carlo
// Exit codes: 0 pass, 1 a check failed, 2 usage or input error.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "tg_version.hpp"

int main(int argc, char** argv) {
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  for (auto& c : commands)
    if (c.selected()) return c.run();
  std::fprintf(stderr, "terngrad: a subcommand is required (see terngrad --help)\n");
  return 2;
}
