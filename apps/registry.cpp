// terngrad-bench: the list of subcommands of `terngrad`, and their shared error handling.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <new>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tg/error.hpp"
#include "tg/verify/sampler.hpp"

namespace tg::app {

namespace {
// What the signal handler needs, made before it is installed: each noted report's path with its links resolved,
// and the lines it writes (write(2) only).
struct SignalCleanup {
  std::vector<std::string> paths, removed_lines;
  std::string interrupted_line;
  std::string noted_line, noted_path;  // note_on_interrupt: said instead when noted_path exists then
};
SignalCleanup& signal_cleanup() {
  static SignalCleanup s;
  return s;
}
extern "C" void retire_on_signal(int sig) {
  const SignalCleanup& s = signal_cleanup();
  const int saved = errno;
  struct stat noted {};
  const std::string& line = !s.noted_line.empty() && (s.noted_path.empty() || ::stat(s.noted_path.c_str(), &noted) == 0)
                                ? s.noted_line
                                : s.interrupted_line;
  (void)!::write(2, line.data(), line.size());
  for (std::size_t i = 0; i < s.paths.size(); ++i) {
    struct stat st {};
    if (::stat(s.paths[i].c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(s.paths[i].c_str()) == 0)
      (void)!::write(2, s.removed_lines[i].data(), s.removed_lines[i].size());
  }
  errno = saved;
  ::signal(sig, SIG_DFL);
  ::raise(sig);  // delivered when the handler returns: the process ends by the signal
}
}  // namespace

std::string elide_middle(const std::string& s, std::size_t room) {
  if (s.size() <= room) return s;
  const std::size_t head = room / 3, tail = room - head - 5;
  return s.substr(0, head) + " ... " + s.substr(s.size() - tail);
}

namespace {

// One line of at most 500 characters: the first line of a message (LibTorch appends a stack trace
// after a newline).
std::string one_line(const char* what) {
  std::string s = what ? what : "";
  return elide_middle(s.substr(0, s.find('\n')), 500);
}
}  // namespace

namespace {
struct NotedReport {
  std::string option, path;
  std::string first_line;  // a file that a command writes into its folder: known as a report by its first line
};
std::vector<NotedReport>& noted_reports() {
  static std::vector<NotedReport> paths;
  return paths;
}

// Whether the regular file at target reads as what `option` writes: a JSON object (--json), JUnit XML
// (--junit), the model's CSV (--csv), a table of terngrad's (--output). Only such a file is removed as a
// report of an earlier run: a file of another kind at that path (notes, data) stays, though a run that
// succeeds would replace it.
bool reads_as_report(const NotedReport& r, const std::filesystem::path& target) {
  const std::string& option = r.option;
  std::ifstream in(target, std::ios::binary);
  if (!in) return false;
  if (option == "--json") {
    std::error_code ec;
    if (std::filesystem::file_size(target, ec) > (std::uintmax_t{1} << 30) || ec) return false;
    std::stringstream all;
    all << in.rdbuf();
    const std::string text = all.str();
    const std::size_t first = text.find_first_not_of(" \t\r\n");
    return first != std::string::npos && text[first] == '{' && nlohmann::json::accept(text);
  }
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  if (head.find('\0') != std::string::npos) return false;  // a binary file (.npy, a checkpoint)
  if (option == "--junit") return head.rfind("<?xml", 0) == 0 && head.find("<testsuites") != std::string::npos;
  if (option == "--csv") return head.rfind(std::string(kModelCsvHeader) + '\n', 0) == 0;
  if (option == "--output") return head.rfind("terngrad ", 0) == 0;
  if (!r.first_line.empty()) return head.rfind(r.first_line + '\n', 0) == 0;
  return false;
}
}  // namespace

void note_folder_report(const std::string& path, const std::string& first_line) {
  if (!path.empty()) noted_reports().push_back({first_line.empty() ? "--json" : "--out", path, first_line});
}

void note_reports(const CLI::App& sub) {
  for (const char* name : {"--json", "--junit", "--csv", "--output"}) {
    const CLI::Option* o = sub.get_option_no_throw(name);
    if (!o || o->count() == 0) continue;
    const std::string path = o->as<std::string>();
    if (!path.empty() && path != "-") noted_reports().push_back({name, path, ""});
  }
}

namespace {
// Removes the noted reports that exist as regular files (a link's target) and read as reports; returns the
// paths removed.
std::vector<std::string> remove_noted_reports() {
  std::vector<std::string> removed;
  for (const NotedReport& r : noted_reports()) {
    if (tg::output_detail::is_proc_fd(r.path)) continue;
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::canonical(r.path, ec);  // a link's target
    if (ec) continue;                                                                 // nothing there
    struct stat st {};
    if (::stat(target.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // FIFOs and devices stay
    if (!reads_as_report(r, target)) continue;
    if (std::filesystem::remove(target, ec) && !ec) removed.push_back(r.path);
  }
  noted_reports().clear();
  return removed;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? " and " : "") + v[i];
  return s;
}

// Said at the end of the error line: "; removed r.json, a report of an earlier run" (empty if none was there).
std::string retired_suffix() {
  const std::vector<std::string> removed = remove_noted_reports();
  return removed.empty() ? std::string()
                         : "; removed " + joined(removed) + (removed.size() > 1 ? ", reports" : ", a report") +
                               " of an earlier run (this run wrote none)";
}
}  // namespace

void retire_reports(const char* command, const char* why) {
  const std::vector<std::string> removed = remove_noted_reports();
  if (!removed.empty())
    std::fprintf(stderr, "terngrad %s: removed %s, %s of an earlier run (this run %s and wrote none)\n", command,
                 joined(removed).c_str(), removed.size() > 1 ? "reports" : "a report", why);
}

void retire_reports_on_signal(const char* command) {
  SignalCleanup& s = signal_cleanup();
  s.interrupted_line = std::string("terngrad ") + command + ": interrupted; no report written\n";
  for (const NotedReport& r : noted_reports()) {
    if (tg::output_detail::is_proc_fd(r.path)) continue;
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::weakly_canonical(r.path, ec);  // a link's target
    if (ec) continue;
    struct stat st {};  // a file there now that is not a report stays (the handler cannot read it)
    if (::stat(target.c_str(), &st) == 0 && S_ISREG(st.st_mode) && !reads_as_report(r, target)) continue;
    s.paths.push_back(target.string());
    s.removed_lines.push_back(std::string("terngrad ") + command + ": removed " + r.path +
                              ", a report of an earlier run (this run was interrupted and wrote none)\n");
  }
  struct sigaction sa {};
  sa.sa_handler = retire_on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;  // started ignoring it (nohup)
    ::sigaction(sig, &sa, nullptr);
  }
}

void note_on_interrupt(const std::string& note, const std::string& if_exists) {
  SignalCleanup& s = signal_cleanup();
  const std::string& line = s.interrupted_line;
  const std::string tail = "no report written\n";
  if (line.size() >= tail.size() && line.compare(line.size() - tail.size(), tail.size(), tail) == 0) {
    s.noted_line = line.substr(0, line.size() - tail.size()) + note + "\n";
    s.noted_path = if_exists;
  }
}

namespace {
// The error line: the lead ("terngrad verify: error (...): "), the first line of a message and what follows it,
// within 500 characters: the message is shortened in its middle, not the lead or the suffix.
std::string error_line(const std::string& lead, const char* what, const std::string& suffix) {
  const std::size_t fixed = lead.size() + suffix.size();
  const std::size_t room = fixed < 400 ? 500 - fixed : 100;
  return lead + elide_middle(one_line(what), room) + suffix;
}
}  // namespace

int guarded(const char* command, const std::function<int()>& fn) {
  // The error line, with the reports of an earlier run removed at its end (one line on stderr).
  try {
    return fn();
  } catch (const tg::Error& e) {
    // An external program's failure is labelled as such, not by the codec error code it carries.
    const bool external = dynamic_cast<const tg::verify::ExternalCodecError*>(&e) != nullptr;
    const std::string lead = std::string("terngrad ") + command + ": error (" +
                             (external ? "external codec" : tg::to_string(e.code())) + "): ";
    std::fprintf(stderr, "%s\n", error_line(lead, e.what(), retired_suffix()).c_str());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "terngrad %s: error: out of memory (an input or option asks for more memory than this machine gives)%s\n",
                 command, retired_suffix().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", error_line(std::string("terngrad ") + command + ": error: ", e.what(), retired_suffix()).c_str());
  } catch (...) {
    std::fprintf(stderr, "terngrad %s: error: an exception that is not a std::exception%s\n", command,
                 retired_suffix().c_str());
  }
  return 2;
}

namespace {

// Exactly a decimal integer of a 64-bit type: digits only (and a leading '-' when signed), within the type.
CLI::Validator exact_integer(bool is_signed) {
  const std::string range = is_signed ? "[-2^63, 2^63)" : "[0, 2^64)";
  return CLI::Validator(
      [is_signed, range](std::string& text) {
        bool digits = !text.empty() && text.size() <= 20;
        for (std::size_t i = 0; i < text.size() && digits; ++i)
          digits = (text[i] >= '0' && text[i] <= '9') || (is_signed && i == 0 && text[i] == '-' && text.size() > 1);
        if (!digits) return "must be a whole number in " + range + ", got '" + text.substr(0, 40) + "'";
        errno = 0;
        if (is_signed)
          (void)std::strtoll(text.c_str(), nullptr, 10);
        else
          (void)std::strtoull(text.c_str(), nullptr, 10);
        if (errno == ERANGE) return "must be a whole number in " + range + ", got " + text.substr(0, 40) + " (too large)";
        return std::string();
      },
      "");
}

// A number given in hexadecimal ("0x10", which strtod reads as 16) is refused: the help says "a number".
bool hexadecimal(const std::string& text) {
  const std::size_t at = text.find_first_not_of("+- \t");
  return at != std::string::npos && at + 1 < text.size() && text[at] == '0' && (text[at + 1] == 'x' || text[at + 1] == 'X');
}

CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& text) {
        if (hexadecimal(text)) return "must be a decimal number, got '" + text.substr(0, 40) + "'";
        errno = 0;
        char* end = nullptr;
        double v = std::strtod(text.c_str(), &end);
        if (end != text.c_str() && *end == '\0' && !std::isfinite(v) && errno != ERANGE)
          return "must be a finite number, got '" + text.substr(0, 40) + "'";
        if (end != text.c_str() && *end == '\0' && errno == ERANGE && std::fabs(v) > 1.0)
          return "must be a finite number, got " + text.substr(0, 40) + " (out of the double range)";
        return std::string();
      },
      "");
}

// A whole number is read in decimal: CLI11 would read "010" as octal 8 (and refuse "09"), where the help
// says "a whole number" and the Python CLI reads 10. Leading zeros of a text of digits are dropped before
// any check or conversion (a transform runs first); any other text is left for the checks to refuse.
CLI::Validator decimal_digits() {
  return CLI::Validator(
      [](std::string& text) {
        const std::size_t sign = !text.empty() && text[0] == '-' ? 1 : 0;
        if (text.size() <= sign + 1) return std::string();
        for (std::size_t i = sign; i < text.size(); ++i)
          if (text[i] < '0' || text[i] > '9') return std::string();
        const std::size_t first = std::min(text.find_first_not_of('0', sign), text.size() - 1);
        text.erase(sign, first - sign);
        if (text == "-0") text = "0";
        return std::string();
      },
      "");
}

// A true/false option takes a word of either meaning: CLI11 reads any whole number but 0 as true ("2").
CLI::Validator boolean_word() {
  return CLI::Validator(
      [](std::string& text) {
        std::string t = text;
        for (char& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        for (const char* w : {"true", "false", "1", "0", "yes", "no", "on", "off"})
          if (t == w) return std::string();
        return "must be true or false (or 1/0, yes/no, on/off), got '" + text.substr(0, 40) + "'";
      },
      "");
}

void strict_options(CLI::App* app) {
  for (CLI::Option* opt : app->get_options()) {
    const std::string type = opt->get_type_name();
    // get_type_name() is "UINT", "FLOAT", or that followed by the validators' descriptions
    if (type.rfind("UINT", 0) == 0) opt->check(exact_integer(false)), opt->transform(decimal_digits());
    else if (type.rfind("INT", 0) == 0) opt->check(exact_integer(true)), opt->transform(decimal_digits());
    else if (type.rfind("FLOAT", 0) == 0) opt->check(finite_number());
    else if (type.rfind("BOOLEAN", 0) == 0) opt->check(boolean_word());
  }
}

}  // namespace

// An old name and its current name given together would leave one value silently unused: each old name
// ("old name of --elements", group "Old names") excludes its current name.
void old_names_exclude_new(CLI::App* sub) {
  const std::string prefix = "old name of ";
  for (CLI::Option* opt : sub->get_options()) {
    if (opt->get_group() != "Old names") continue;
    const std::string& d = opt->get_description();
    if (d.rfind(prefix, 0) != 0) continue;
    if (CLI::Option* current = sub->get_option_no_throw(d.substr(prefix.size()))) opt->excludes(current);
  }
}

void strict_numbers(CLI::App& app) {
  strict_options(&app);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    strict_options(sub);
    old_names_exclude_new(sub);
  }
}

std::string repeated_item(const CLI::App& sub) {
  for (const CLI::Option* opt : sub.get_options()) {
    // a flag given twice (CLI11 counts it; an option with a value given twice it refuses): refused alike
    if (opt->get_expected_max() == 0 && opt->count() > 1)
      return opt->get_name() + " given " + std::to_string(opt->count()) + " times (give it once)";
    if (opt->get_delimiter() != ',' || opt->count() == 0) continue;
    const std::vector<std::string> items = opt->results();
    for (std::size_t i = 0; i < items.size(); ++i)
      for (std::size_t k = 0; k < i; ++k)
        if (items[k] == items[i])
          return opt->get_name() + " lists '" + items[i].substr(0, 40) + "' twice (give each once)";
  }
  return "";
}

namespace {
struct OnlyWith {
  const CLI::App* sub;
  std::string option, when;
  std::function<bool()> applies;
};
std::vector<OnlyWith>& only_with_rules() {  // a function-local static: safe from any static initialiser
  static std::vector<OnlyWith> rules;
  return rules;
}
}  // namespace

void only_with(CLI::App* sub, const std::string& option, std::string when, std::function<bool()> applies) {
  if (!sub->get_option_no_throw(option)) throw std::logic_error("only_with: no option " + option);
  only_with_rules().push_back({sub, option, std::move(when), std::move(applies)});
}

std::string ignored_option(const CLI::App& sub) {
  for (const OnlyWith& r : only_with_rules()) {
    if (r.sub != &sub) continue;
    const CLI::Option* o = sub.get_option_no_throw(r.option);
    if (o && o->count() > 0 && !r.applies())
      return r.option + " is used only with " + r.when + "; this run would ignore it";
  }
  return "";
}

std::string empty_argument(const CLI::App& app, const std::vector<std::string>& args) {
  // the subcommand: the first argument that names one (the program's own flags come before it)
  const CLI::App* sub = nullptr;
  std::size_t i = 0;
  for (; i < args.size() && !sub; ++i)
    for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
      if (s->get_name() == args[i]) sub = s;
  if (!sub) return "";
  auto named_option = [&](const std::string& name, bool lists_only) -> const CLI::Option* {  // "--workers", "-w"
    for (const CLI::Option* o : sub->get_options()) {
      if (lists_only && o->get_delimiter() != ',') continue;
      for (const auto& l : o->get_lnames())
        if (name == "--" + l) return o;
      for (const auto& s : o->get_snames())
        if (name == "-" + s) return o;
    }
    return nullptr;
  };
  auto has_empty_item = [](const std::string& value) {
    for (const std::string& item : split_commas(value))
      if (item.find_first_not_of(" \t") == std::string::npos) return true;
    return false;
  };
  auto message = [&](const CLI::Option* o, const std::string& value) {
    const std::string where = "terngrad " + sub->get_name();
    const std::string what = value.find_first_not_of(" \t") == std::string::npos
                                 ? " is given an empty value"
                                 : " has an empty item in '" + elide_middle(value, 80) + "'";
    return where + ": " + o->get_name() + what + " (a comma-separated list, no item empty; see " + where + " --help)";
  };
  // Any other option given "" (an unset variable) is named as such, not reported as the value's own problem
  // ("--profile:  not in {quick,ci,full}", "cannot open : No such file"); an empty positional argument too.
  auto empty = [&](const std::string& what) {
    const std::string where = "terngrad " + sub->get_name();
    return where + ": " + what + " (an unset variable?; see " + where + " --help)";
  };
  const CLI::Option* taking = nullptr;  // the list option whose values the next arguments are
  const CLI::Option* value_of = nullptr;  // the option, not a list, whose values the next arguments are
  int values_left = 0;                    // how many (verify --samples G V: two)
  std::vector<const CLI::Option*> given;  // the list options seen so far
  std::size_t positional = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.size() > 1 && a[0] == '-' && !(std::isdigit(static_cast<unsigned char>(a[1])) || a[1] == '.')) {
      const std::size_t eq = a.find('=');
      taking = named_option(a.substr(0, eq), true);
      const CLI::Option* o = named_option(a.substr(0, eq), false);
      value_of = o && !taking && o->get_expected_min() > 0 ? o : nullptr;
      values_left = value_of ? o->get_expected_min() : 0;
      if (value_of && eq != std::string::npos) {
        if (eq + 1 == a.size()) return empty(value_of->get_name() + " is given an empty value");
        if (--values_left == 0) value_of = nullptr;
      }
      // a list given twice was merged into one (--workers 1 --workers 2 ran 1,2); every other option given
      // twice is refused by CLI11 ("given 2 times")
      if (taking && std::find(given.begin(), given.end(), taking) != given.end()) {
        const std::string where = "terngrad " + sub->get_name();
        return where + ": " + taking->get_name() + " is given more than once (give one comma-separated list; see " +
               where + " --help)";
      }
      if (taking) given.push_back(taking);
      if (taking && eq != std::string::npos) {
        if (has_empty_item(a.substr(eq + 1))) return message(taking, a.substr(eq + 1));
        taking = nullptr;
      }
      continue;
    }
    if (taking && has_empty_item(a)) return message(taking, a);
    if (a.empty())
      return empty(value_of ? value_of->get_name() + " is given an empty value"
                            : "argument " + std::to_string(positional + 1) + " (not an option's value) is empty");
    if (!taking && !value_of) ++positional;
    if (value_of && --values_left == 0) value_of = nullptr;
  }
  return "";
}

namespace {
struct Entry {
  int order;
  std::function<std::vector<Command>()> make;
};
std::vector<Entry>& entries() {  // a function-local static: safe from any static initialiser
  static std::vector<Entry> list;
  return list;
}
}  // namespace

RegisterCommands::RegisterCommands(int order, std::function<std::vector<Command>()> make) {
  entries().push_back({order, std::move(make)});
}

std::vector<Command> all_commands() {
  std::vector<Entry> sorted = entries();
  std::stable_sort(sorted.begin(), sorted.end(), [](const Entry& a, const Entry& b) { return a.order < b.order; });
  std::vector<Command> list;
  for (const Entry& e : sorted)
    for (Command& c : e.make()) list.push_back(std::move(c));
  return list;
}

}  // namespace tg::app
