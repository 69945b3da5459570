// terngrad-bench: the list of subcommands of `terngrad`, and their shared error handling.
#include <cmath>
#include <cstdio>
#include <exception>

#include "commands.hpp"
#include "tg/error.hpp"

namespace tg::app {

#ifdef TG_HAVE_CMD_VERIFY
Command verify_command();
Command compare_command();
Command calibrate_command();
#endif
#ifdef TG_HAVE_CMD_CONVERGE
Command converge_command();
#endif
#ifdef TG_HAVE_CMD_TRAIN
std::vector<Command> train_commands();  // train, and its multi-process launcher
#endif
#ifdef TG_HAVE_CMD_REPORT
Command report_command();
#endif

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

std::vector<Command> all_commands() {
  std::vector<Command> list;
#ifdef TG_HAVE_CMD_VERIFY
  list.push_back(verify_command());
  list.push_back(compare_command());
  list.push_back(calibrate_command());
#endif
#ifdef TG_HAVE_CMD_CONVERGE
  list.push_back(converge_command());
#endif
#ifdef TG_HAVE_CMD_TRAIN
  for (auto& c : train_commands()) list.push_back(c);
#endif
#ifdef TG_HAVE_CMD_REPORT
  list.push_back(report_command());
#endif
  list.push_back(demo_command());
  return list;
}

}  // namespace tg::app
