// terngrad-bench: word wrapping for text columns (the battery's table, terngrad's --help). Header-only, no
// dependency.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace tg {

// The lines of `text` (one line, no '\n') of at most `width` characters: broken at the last space that fits
// (the space dropped). A word longer than `width` is broken after the last of ",;/-." that fits, else at
// `width`, when break_words is true; otherwise it stays whole on a line of its own.
inline std::vector<std::string> wrap_line(const std::string& text, std::size_t width, bool break_words = true) {
  std::vector<std::string> lines;
  std::string rest = text;
  width = std::max<std::size_t>(width, 1);
  while (rest.size() > width) {
    std::size_t cut = rest.rfind(' ', width);
    std::size_t next = cut + 1;
    if (cut == std::string::npos || cut == 0) {
      if (break_words) {
        cut = rest.find_last_of(",;/-.", width - 1);
        if (cut == std::string::npos || cut == 0) cut = width - 1;
        next = ++cut;
      } else {  // the long word whole, then the rest
        cut = rest.find(' ', width);
        if (cut == std::string::npos) break;
        next = cut + 1;
      }
    }
    std::string line = rest.substr(0, cut);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    lines.push_back(line);
    rest = rest.substr(std::min(next, rest.size()));
    rest.erase(0, std::min(rest.find_first_not_of(' '), rest.size()));
  }
  if (!rest.empty() || lines.empty()) lines.push_back(rest);
  return lines;
}

// Every line of `text` wrapped as wrap_line (words kept whole), joined by '\n'; the text's own line breaks
// and a trailing '\n' are kept.
inline std::string wrap_text(const std::string& text, std::size_t width) {
  std::string out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t nl = text.find('\n', start);
    const std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    const std::vector<std::string> parts = wrap_line(line, width, false);
    for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? "\n" : "") + parts[i];
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
  }
  return out;
}

}  // namespace tg
