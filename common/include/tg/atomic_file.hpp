// terngrad-bench: write an output file atomically (temp file in the same folder + rename), so an
// interrupted run never leaves a half-written report, CSV or checkpoint. Header-only, no codec deps.
//   tg::write_file_atomic("reports/out.json", text);   // throws std::runtime_error naming the path
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

#include <unistd.h>

namespace tg {

inline void write_file_atomic(const std::filesystem::path& path, std::string_view contents) {
  namespace fs = std::filesystem;
  fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create folder " + dir.string() + ": " + ec.message());
  std::string tmp_name = ".";  // appended piecewise: GCC 12 warns (-Wrestrict) on the chained form
  tmp_name += path.filename().string();
  tmp_name += ".tmp-";
  tmp_name += std::to_string(::getpid());
  fs::path tmp = dir / tmp_name;
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + tmp.string() + ": " + std::strerror(errno));
  bool ok = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  ok = (std::fflush(f) == 0) && ok;
  ok = (::fsync(::fileno(f)) == 0) && ok;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot write " + path.string() + ": " + std::strerror(errno));
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot rename into " + path.string() + ": " + ec.message());
  }
}

}  // namespace tg
