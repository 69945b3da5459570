// terngrad-bench: .npy float32 parser and writer (see tg/verify/npy.hpp).
#include "tg/verify/npy.hpp"

#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

#include "tg/atomic_file.hpp"
#include "tg/error.hpp"

namespace tg::verify {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw Error(ErrorCode::invalid_argument, "malformed .npy: " + what);
}

// A cursor over the header dictionary text (Python literal syntax, as numpy writes it).
struct Cursor {
  std::string_view s;
  std::size_t i = 0;
  void skip_ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool eat(char c) {
    skip_ws();
    if (i < s.size() && s[i] == c) { ++i; return true; }
    return false;
  }
  void expect(char c, const char* where) {
    if (!eat(c)) fail(std::string("expected '") + c + "' " + where + " in the header");
  }
  std::string quoted() {
    skip_ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) fail("expected a quoted string in the header");
    char q = s[i++];
    std::size_t start = i;
    while (i < s.size() && s[i] != q) ++i;
    if (i >= s.size()) fail("unterminated string in the header");
    std::string out(s.substr(start, i - start));
    ++i;
    return out;
  }
  std::uint64_t integer() {
    skip_ws();
    if (i >= s.size() || s[i] < '0' || s[i] > '9') fail("expected a nonnegative integer in the shape");
    std::uint64_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      unsigned digit = static_cast<unsigned>(s[i] - '0');
      if (v > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) fail("shape entry overflows 64 bits");
      v = v * 10 + digit;
      ++i;
    }
    if (i < s.size() && s[i] == 'L') ++i;  // Python 2 long suffix
    return v;
  }
  std::string word() {
    skip_ws();
    std::size_t start = i;
    while (i < s.size() && ((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z'))) ++i;
    return std::string(s.substr(start, i - start));
  }
};

std::uint32_t read_le(std::span<const std::uint8_t> b, std::size_t off, int bytes) {
  std::uint32_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | b[off + static_cast<std::size_t>(k)];
  return v;
}

}  // namespace

NpyArray parse_npy(std::span<const std::uint8_t> bytes) {
  static const std::uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (bytes.size() < 10) fail("file of " + std::to_string(bytes.size()) + " bytes is shorter than the 10-byte preamble");
  if (std::memcmp(bytes.data(), magic, 6) != 0) fail("missing the \\x93NUMPY magic");
  unsigned major = bytes[6], minor = bytes[7];
  if (minor != 0 || major < 1 || major > 3)
    fail("unsupported format version " + std::to_string(major) + "." + std::to_string(minor));
  std::size_t pre = major == 1 ? 10 : 12;
  if (bytes.size() < pre) fail("file too short for a version " + std::to_string(major) + " preamble");
  std::uint64_t hlen = major == 1 ? read_le(bytes, 8, 2) : read_le(bytes, 8, 4);
  if (hlen > bytes.size() - pre)
    fail("header length " + std::to_string(hlen) + " runs past the end of the file (" +
         std::to_string(bytes.size()) + " bytes)");
  std::string_view header(reinterpret_cast<const char*>(bytes.data() + pre), static_cast<std::size_t>(hlen));
  for (char ch : header)
    if (static_cast<unsigned char>(ch) >= 0x80 || (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != ' '))
      fail("header contains a non-printable byte");
  Cursor c{header};
  c.expect('{', "at the start");
  bool have_descr = false, have_order = false, have_shape = false;
  std::string descr;
  bool fortran = false;
  std::vector<std::uint64_t> shape;
  while (!c.eat('}')) {
    std::string key = c.quoted();
    c.expect(':', "after a key");
    if (key == "descr") {
      if (have_descr) fail("duplicate key 'descr'");
      descr = c.quoted();
      have_descr = true;
    } else if (key == "fortran_order") {
      if (have_order) fail("duplicate key 'fortran_order'");
      std::string w = c.word();
      if (w == "True") fortran = true;
      else if (w == "False") fortran = false;
      else fail("fortran_order must be True or False");
      have_order = true;
    } else if (key == "shape") {
      if (have_shape) fail("duplicate key 'shape'");
      c.expect('(', "to open the shape");
      while (!c.eat(')')) {
        shape.push_back(c.integer());
        if (shape.size() > 32) fail("more than 32 dimensions");
        if (!c.eat(',')) {
          c.expect(')', "to close the shape");
          break;
        }
      }
      have_shape = true;
    } else {
      fail("unknown key '" + key + "' in the header");
    }
    if (!c.eat(',')) {
      c.expect('}', "to close the header");
      break;
    }
  }
  c.skip_ws();
  if (c.i != header.size()) fail("unexpected text after the header dictionary");
  if (!have_descr || !have_order || !have_shape) fail("header lacks one of 'descr', 'fortran_order', 'shape'");
  if (descr != "<f4" && descr != "=f4")
    fail("dtype is '" + descr + "', expected float32 little-endian '<f4'");
  std::uint64_t count = 1;
  for (std::uint64_t dim : shape) {
    if (dim != 0 && count > std::numeric_limits<std::uint64_t>::max() / 4 / dim) fail("shape product overflows");
    count *= dim;
  }
  std::size_t nontrivial = 0;
  for (std::uint64_t dim : shape) nontrivial += dim > 1 ? 1 : 0;
  if (fortran && nontrivial > 1) fail("fortran_order arrays with more than one non-trivial dimension are not accepted");
  std::uint64_t data_bytes = bytes.size() - pre - hlen;
  if (data_bytes != count * 4)
    fail("data section has " + std::to_string(data_bytes) + " bytes, shape needs " + std::to_string(count * 4));
  NpyArray out;
  out.shape = shape;
  out.data.resize(static_cast<std::size_t>(count));
  const std::uint8_t* p = bytes.data() + pre + hlen;
  for (std::size_t k = 0; k < out.data.size(); ++k) {
    std::uint32_t v = read_le({p + 4 * k, 4}, 0, 4);
    std::memcpy(&out.data[k], &v, 4);
  }
  return out;
}

std::vector<std::uint8_t> make_npy(std::span<const float> data, const std::vector<std::uint64_t>& shape) {
  std::uint64_t count = 1;
  for (auto d : shape) count *= d;
  if (count != data.size())
    throw Error(ErrorCode::invalid_argument, "npy shape does not match the data size");
  std::ostringstream h;
  h << "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (k > 0) h << " ";
    h << shape[k];
    if (shape.size() == 1 || k + 1 < shape.size()) h << ",";
  }
  h << "), }";
  std::string header = h.str();
  std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::vector<std::uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.push_back(static_cast<std::uint8_t>(header.size() & 0xff));
  out.push_back(static_cast<std::uint8_t>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  std::size_t off = out.size();
  out.resize(off + 4 * data.size());
  for (std::size_t k = 0; k < data.size(); ++k) {
    std::uint32_t v;
    std::memcpy(&v, &data[k], 4);
    for (int b = 0; b < 4; ++b) out[off + 4 * k + static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(v >> (8 * b));
  }
  return out;
}

NpyArray read_npy(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::invalid_argument, "cannot open " + path.string());
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    return parse_npy(bytes);
  } catch (const Error& e) {
    throw Error(e.code(), path.string() + ": " + e.what());
  }
}

void write_npy(const std::filesystem::path& path, std::span<const float> data,
               const std::vector<std::uint64_t>& shape) {
  auto bytes = make_npy(data, shape);
  tg::write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace tg::verify
