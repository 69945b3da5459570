// terngrad-bench: the one comma splitter of the command-line lists (terngrad's options, and
// --live-check-layers of the training library). Every item is kept, empty ones included, so that the
// caller can refuse "a,,b" and "a," instead of dropping the empty item.
// Header-only, no codec dependency (common/ depends on nothing).
#pragma once

#include <string>
#include <vector>

namespace tg {

// "a,b,,c" -> {"a", "b", "", "c"}; "" -> {""}; "a," -> {"a", ""}.
inline std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const std::size_t comma = list.find(',', start);
    parts.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

}  // namespace tg
