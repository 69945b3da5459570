// terngrad-bench: the properties the .npy fuzz target checks (tg::verify::parse_npy and, for the
// allocation path of read_npy, parse_npy_header), shared with the
// regression suite: either a tg::Error naming the problem or an array whose data are exactly the
// last 4 * prod(shape) bytes of the file, and which make_npy / parse_npy round-trip bit for bit.
#pragma once

#include <cstring>
#include <span>
#include <string>

#include "checks.hpp"
#include "tg/verify/npy.hpp"

namespace tg::fuzz {

// The allocation path (issue 16): the header alone decides the sizes read_npy allocates, so every
// accepted header must state at most kNpyMaxElements elements and no entry above it, and nothing past
// kNpyMaxHeaderBytes may be needed to parse it.
inline void check_npy_header(std::span<const std::uint8_t> bytes) {
  verify::NpyHeader h;
  try {
    h = verify::parse_npy_header(bytes);
  } catch (const Error& e) {
    require(std::string(e.what()).size() > 0, "parse_npy_header error without a message");
    return;
  } catch (const std::exception& e) {
    throw PropertyViolation(std::string("parse_npy_header threw a non-tg::Error exception: ") + e.what());
  }
  require(h.count <= verify::kNpyMaxElements, "header accepted above kNpyMaxElements");
  for (std::uint64_t d : h.shape) require(d <= verify::kNpyMaxElements, "shape entry accepted above kNpyMaxElements");
  require(h.data_offset <= bytes.size() && h.data_offset <= 12 + verify::kNpyMaxHeaderBytes, "header past its limit");
}

inline void check_npy(std::span<const std::uint8_t> bytes) {
  check_npy_header(bytes);
  verify::NpyArray a;
  try {
    a = verify::parse_npy(bytes);
  } catch (const Error& e) {
    require(std::string(e.what()).size() > 0, "parse_npy error without a message");
    return;
  } catch (const std::exception& e) {
    throw PropertyViolation(std::string("parse_npy threw a non-tg::Error exception: ") + e.what());
  }
  unsigned __int128 count = 1;
  for (std::uint64_t d : a.shape) count *= d;
  require(count == a.data.size(), "data size is not the product of the shape");
  require(4 * a.data.size() <= bytes.size(), "more data than bytes in the file");
  const std::uint8_t* tail = bytes.data() + bytes.size() - 4 * a.data.size();
  for (std::size_t k = 0; k < a.data.size(); ++k)
    require(bits_of_float(a.data[k]) == load_u32(tail + 4 * k), "value " + std::to_string(k) + " differs from the file");
  verify::NpyArray b = verify::parse_npy(verify::make_npy(a.data, a.shape));
  require(b.shape == a.shape, "make_npy/parse_npy changed the shape");
  require(b.data.size() == a.data.size() &&
              (a.data.empty() || std::memcmp(a.data.data(), b.data.data(), 4 * a.data.size()) == 0),
          "make_npy/parse_npy changed the data");
}

}  // namespace tg::fuzz
