// terngrad-bench: the `terngrad` command-line program (one binary, subcommands).
//   terngrad --help            lists the subcommands
//   terngrad demo --elements 1000000  encodes one gradient and checks the variance identity by Monte-Carlo
// Exit codes: 0 pass, 1 a check failed, 2 usage or input error.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <cxxabi.h>
#include <signal.h>
#include <unistd.h>

#include "commands.hpp"
#include "tg/wrap.hpp"
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
  std::fprintf(stderr, "terngrad: fatal: uncaught %s: %s (nothing more was done)\n", type, line.c_str());
  std::fflush(stderr);
  ::_exit(2);
}

// Levenshtein distance, for "did you mean" on a mistyped option or subcommand.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The closest of `names` to `word`: a known other name for it, or the nearest by edits (below).
std::string closest(const std::string& word, const std::vector<std::string>& names) {
  static const std::vector<std::pair<std::string, std::string>> synonyms = {
      {"net", "model"}, {"network", "model"}, {"arch", "model"}, {"dataset", "data"}, {"n", "elements"},
      {"size", "elements"}, {"workers", "nproc"}, {"output", "out"}, {"codec", "impl"}, {"implementation", "impl"}};
  auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  for (const auto& [from, to] : synonyms)
    if (word == from && has(to)) return to;
  // A name counts as close if it, or its start (a prefix about as long as the word, one edit more), is
  // within max(2, length / 3) edits (1 for words under 4 letters).
  std::string best;
  std::size_t best_d = (word.size() < 4 ? 1 : std::max<std::size_t>(2, word.size() / 3)) + 1;
  for (const auto& n : names) {
    std::size_t d = edit_distance(word, n);
    for (std::size_t len = word.size() > 1 ? word.size() - 1 : 1; len <= word.size() + 2 && len < n.size(); ++len)
      d = std::min(d, edit_distance(word, n.substr(0, len)) + 1);
    if (d < best_d) best_d = d, best = n;
  }
  return best;
}

// "terngrad" or "terngrad SUB": where a parse error happened, for its message and its --help pointer.
std::string where_of(const CLI::App& app) {
  const auto subs = app.get_subcommands();
  return subs.empty() ? "terngrad" : "terngrad " + subs.front()->get_name();
}

// An argument the parser did not expect, named with where it went wrong and what was probably meant:
// "terngrad train: unknown option --net (did you mean --model?); see terngrad train --help".
std::string extras_message(const CLI::App& app) {
  const auto subs = app.get_subcommands();
  const CLI::App* sub = subs.empty() ? nullptr : subs.front();
  const std::string where = where_of(app);
  std::vector<std::string> extras = sub ? sub->remaining() : app.remaining();
  if (extras.empty()) extras = app.remaining(true);
  if (extras.empty()) return where + ": unexpected arguments; see " + where + " --help\n";
  std::string arg = extras.front();
  for (const auto& x : extras)
    if (x.size() > 1 && x[0] == '-') {
      arg = x;
      break;
    }
  std::string msg;
  if (arg.size() > 1 && arg[0] == '-') {
    const std::string word = arg.substr(0, arg.find('=')).substr(arg[1] == '-' ? 2 : 1);
    std::vector<std::string> names;
    for (const CLI::Option* o : (sub ? sub : &app)->get_options())
      for (const auto& n : o->get_lnames()) names.push_back(n);
    const std::string hint = closest(word, names);
    msg = where + ": unknown option " + arg.substr(0, arg.find('=')) + (hint.empty() ? "" : " (did you mean --" + hint + "?)");
  } else if (!sub) {
    std::vector<std::string> names;
    for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
    const std::string hint = closest(arg, names);
    msg = where + ": unknown subcommand '" + arg + "'" + (hint.empty() ? "" : " (did you mean " + hint + "?)");
  } else {
    msg = where + ": unexpected argument '" + arg + "'";
  }
  return msg + "; see " + where + " --help\n";
}

// --help within about kHelpWidth columns: CLI11 prints each description on one line (300 characters for some
// options); here descriptions wrap at spaces, their continuation lines indented under the description column.
// Words are never split, so a search of the help for a phrase works on the text with its whitespace collapsed.
constexpr std::size_t kHelpWidth = 100;
class WrappingFormatter : public CLI::Formatter {
 public:
  std::string make_description(const CLI::App* app) const override {
    return tg::wrap_text(CLI::Formatter::make_description(app), kHelpWidth);
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    return tg::wrap_text(CLI::Formatter::make_option_desc(opt), description_width());
  }
  // An option whose name column overflows the width: its "Excludes: ..." and "Needs: ..." lists go on lines of their
  // own, indented by 4 (the name, type, range and default stay on the first line, as the sweep in
  // fuzz/cli_errors.cmake reads them).
  std::string make_option(const CLI::Option* opt, bool is_positional) const override {
    const std::string left = make_option_name(opt, is_positional) + make_option_opts(opt);
    std::size_t at = std::string::npos;
    for (const char* key : {" Excludes: ", " Needs: "}) at = std::min(at, left.find(key));
    if (left.size() + 2 <= kHelpWidth || at == std::string::npos) return CLI::Formatter::make_option(opt, is_positional);
    std::string name = left.substr(0, at);
    for (const std::string& line : tg::wrap_line(left.substr(at + 1), kHelpWidth - 4, false)) name += "\n    " + line;
    std::stringstream out;
    CLI::detail::format_help(out, name, make_option_desc(opt), get_column_width());
    return out.str();
  }
  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    CLI::detail::format_help(out, sub->get_display_name(true), tg::wrap_text(sub->get_description(), description_width()),
                             get_column_width());
    return out.str();
  }

 private:
  std::size_t description_width() const { return kHelpWidth > get_column_width() + 40 ? kHelpWidth - get_column_width() : 40; }
};

}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(on_terminate);
  // A file size limit (RLIMIT_FSIZE) must end in a failed write (EFBIG), which the output writer turns
  // into one line and exit 2 with the previous file intact, not in SIGXFSZ's core dump.
  ::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"terngrad: test bench for the TernGrad stochastic ternary gradient codec\n"
               "Start with `terngrad verify` (the verification battery on the optimized codec; --impl for yours)."};
  app.formatter(std::make_shared<WrappingFormatter>());  // before the subcommands, which take it from app
  app.require_subcommand(0, 1);  // an unknown word is then named: "argument was not expected: X"
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {  // one line per error, naming the subcommand
    const std::string where = where_of(*a);
    std::string what = e.what();
    // CLI11's "Could not convert: --x = v" (a value that passed the checks but does not fit the option's
    // type) named neither the problem nor the cure
    const std::string prefix = "Could not convert: ";
    if (dynamic_cast<const CLI::ConversionError*>(&e) && what.rfind(prefix, 0) == 0) {
      const std::size_t eq = what.find(" = ", prefix.size());
      if (eq != std::string::npos)
        what = what.substr(prefix.size(), eq - prefix.size()) + ": cannot take '" + what.substr(eq + 3, 40) +
               "' (not a value of the option's type; its type and range are in --help)";
    }
    // CLI11's "--profile: At Most 1 required but received 2": an option given more than once
    const std::string most = ": At Most 1 required but received ";
    if (const std::size_t at = what.find(most); at != std::string::npos)
      what = what.substr(0, at) + " given " + what.substr(at + most.size()) + " times (give it once)";
    // at most 500 characters (a path echoed whole would fill the screen): its start and its end
    return tg::app::elide_middle(where + ": " + what.substr(0, what.find('\n')) + " (see " + where + " --help)", 500) + "\n";
  });
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.option_defaults()->always_capture_default();  // every --help shows each option's default
  app.set_version_flag("--version", std::string("terngrad ") + tg::kToolVersion + " (source " + tg::kSourceCommit + ")");
  std::vector<tg::app::Command> commands = tg::app::all_commands();
  for (auto& c : commands) c.add(app);
  tg::app::strict_numbers(app);
  if (const std::string why = tg::app::empty_argument(app, std::vector<std::string>(argv + 1, argv + argc));
      !why.empty()) {
    std::fputs(tg::app::elide_middle(why, 500).append("\n").c_str(), stderr);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {  // prints the version; exit 0
    return app.exit(e);
  } catch (const CLI::ExtrasError&) {
    std::fputs(extras_message(app).c_str(), stderr);
    return 2;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  // Every subcommand runs inside the one exception guard: one line on stderr and exit 2.
  for (auto& c : commands)
    if (c.selected()) {
      const std::string name = c.sub->get_name();
      std::string why = tg::app::repeated_item(*c.sub);
      if (why.empty()) why = tg::app::ignored_option(*c.sub);
      if (!why.empty()) {
        std::fprintf(stderr, "terngrad %s: %s (see terngrad %s --help)\n", name.c_str(), why.c_str(), name.c_str());
        return 2;
      }
      tg::app::note_reports(*c.sub);
      tg::app::retire_reports_on_signal(name.c_str());
      const int rc = tg::app::guarded(name.c_str(), [&] { return c.run(); });
      if (rc == 2) tg::app::retire_reports(name.c_str());
      return rc;
    }
  std::fprintf(stderr, "terngrad: a subcommand is required (see terngrad --help)\n");
  return 2;
}
