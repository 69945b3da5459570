// terngrad-bench: the list of subcommands of `terngrad`, and their shared error handling.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>

#include "commands.hpp"
#include "tg/error.hpp"

namespace tg::app {

int guarded(const char* command, const std::function<int()>& fn) {
  try {
    return fn();
  } catch (const tg::Error& e) {
    std::fprintf(stderr, "terngrad %s: error (%s): %s\n", command, tg::to_string(e.code()), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "terngrad %s: error: %s\n", command, e.what());
  }
  return 2;
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
