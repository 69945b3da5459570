// terngrad-bench: printf into a std::string of whatever length the text needs. Messages and report lines
// carry names, paths and lists of any length; a fixed buffer would cut them off without a word (the
// battery's collision detail once ended at 1,023 characters). Header-only, no dependency.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace tg {

inline std::string vstrf(const char* format, std::va_list args) {
  std::va_list again;
  va_copy(again, args);
  const int size = std::vsnprintf(nullptr, 0, format, again);
  va_end(again);
  if (size <= 0) return {};
  std::string out(static_cast<std::size_t>(size) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), format, args);
  out.resize(static_cast<std::size_t>(size));
  return out;
}

__attribute__((format(printf, 1, 2))) inline std::string strf(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  std::string out = vstrf(format, args);
  va_end(args);
  return out;
}

}  // namespace tg
