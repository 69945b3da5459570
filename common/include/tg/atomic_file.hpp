// terngrad-bench: the old name of the project's output writer (tg/output_file.hpp). Every output
// goes through tg::write_output: temp + fsync + rename for a regular file or a new path, the resolved
// target of a symlink, in place for a character device or FIFO, refused for other special files.
//   tg::write_file_atomic("reports/out.json", text);   // throws tg::OutputError naming the path
#pragma once

#include "tg/output_file.hpp"

namespace tg {

inline void write_file_atomic(const std::filesystem::path& path, std::string_view contents) {
  write_output(path, contents);
}

}  // namespace tg
