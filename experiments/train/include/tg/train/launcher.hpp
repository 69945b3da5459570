// terngrad-bench: `terngrad launch`: starts N local `terngrad train` ranks of one c10d/Gloo run and
// waits for them; when one fails, the others get a bounded grace period before they are killed.
#pragma once

#include <string>
#include <vector>

namespace tg::train {

struct LaunchOptions {
  int nproc = 2;
  std::string addr = "127.0.0.1";
  int port = 0;             // 0: a free port chosen here
  double grace_s = 30.0;    // after a rank fails, how long the others may take to exit on their own
  std::string exe;          // the terngrad binary (default: this process's executable)
  std::vector<std::string> train_args;
};

/// Returns 0 when every rank exits with 0, else 2; prints one line per failed rank on stderr.
int launch(const LaunchOptions& options);

/// A TCP port on `addr` that was free a moment ago.
int free_port(const std::string& addr);

}  // namespace tg::train
