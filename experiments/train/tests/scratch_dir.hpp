// terngrad-bench: a test program's scratch folder, <tmp>/<prefix><pid>/<name>, fresh for each call and
// removed with everything in it when the test program ends (a global test environment), so a test run
// leaves nothing in /tmp.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

namespace tg::test {

inline std::filesystem::path scratch_root(const std::string& prefix) {
  return std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()));
}

// A fresh, empty folder `name` under the program's scratch root; the first call registers the removal.
inline std::filesystem::path scratch_dir(const std::string& prefix, const std::string& name) {
  class RemoveScratch : public ::testing::Environment {
   public:
    explicit RemoveScratch(std::filesystem::path root) : root_(std::move(root)) {}
    void TearDown() override {
      std::error_code ec;
      std::filesystem::remove_all(root_, ec);
    }

   private:
    std::filesystem::path root_;
  };
  static const bool registered = (::testing::AddGlobalTestEnvironment(new RemoveScratch(scratch_root(prefix))), true);
  (void)registered;
  const std::filesystem::path d = scratch_root(prefix) / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace tg::test
