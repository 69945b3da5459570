// terngrad-bench: .npy float32 parser and writer (see tg/verify/npy.hpp).
#include "tg/verify/npy.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iterator>
#include <limits>
#include <sstream>

#include "tg/atomic_file.hpp"
#include "tg/error.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

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

NpyHeader parse_npy_header(std::span<const std::uint8_t> bytes, std::uint64_t max_elements) {
  static const std::uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (bytes.size() < 10) fail("file of " + std::to_string(bytes.size()) + " bytes is shorter than the 10-byte preamble");
  if (std::memcmp(bytes.data(), magic, 6) != 0) fail("missing the \\x93NUMPY magic");
  unsigned major = bytes[6], minor = bytes[7];
  if (minor != 0 || major < 1 || major > 3)
    fail("unsupported format version " + std::to_string(major) + "." + std::to_string(minor));
  std::size_t pre = major == 1 ? 10 : 12;
  if (bytes.size() < pre) fail("file too short for a version " + std::to_string(major) + " preamble");
  std::uint64_t hlen = major == 1 ? read_le(bytes, 8, 2) : read_le(bytes, 8, 4);
  if (hlen > kNpyMaxHeaderBytes)
    fail("header length " + std::to_string(hlen) + " exceeds the limit of " + std::to_string(kNpyMaxHeaderBytes) + " bytes");
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
      c.expect('}', "to close it");
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
  for (std::uint64_t dim : shape)  // also with a zero entry: (1e9, 0) would size per-row buffers
    if (dim > max_elements)
      fail("shape entry " + std::to_string(dim) + " exceeds the limit of " + std::to_string(max_elements) + " elements");
  if (count > max_elements)
    fail("shape has " + std::to_string(count) + " elements, over the limit of " + std::to_string(max_elements));
  std::size_t nontrivial = 0;
  for (std::uint64_t dim : shape) nontrivial += dim > 1 ? 1 : 0;
  if (fortran && nontrivial > 1) fail("fortran_order arrays with more than one non-trivial dimension are not accepted");
  NpyHeader h;
  h.shape = std::move(shape);
  h.count = count;
  h.data_offset = pre + hlen;
  return h;
}

NpyArray parse_npy(std::span<const std::uint8_t> bytes) {
  NpyHeader h = parse_npy_header(bytes);
  std::uint64_t data_bytes = bytes.size() - h.data_offset;
  if (data_bytes != h.count * 4)
    fail("data section has " + std::to_string(data_bytes) + " bytes, shape needs " + std::to_string(h.count * 4));
  NpyArray out;
  out.shape = h.shape;
  out.data.resize(static_cast<std::size_t>(h.count));
  const std::uint8_t* p = bytes.data() + h.data_offset;
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

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly n bytes (or up to EOF when !exact); the deadline bounds waits on pipes and devices.
std::size_t read_some(int fd, std::uint8_t* dst, std::size_t n, const std::string& what,
                      std::chrono::steady_clock::time_point deadline, bool exact) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, dst + got, n - got);
    if (r > 0) {
      got += static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0) break;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) throw Error(ErrorCode::invalid_argument, what + ": no data within the time limit");
      pollfd p{fd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
      continue;
    }
    throw Error(ErrorCode::invalid_argument, what + ": " + std::strerror(errno));
  }
  if (exact && got < n)
    throw Error(ErrorCode::invalid_argument, what + ": malformed .npy: the file ends after " + std::to_string(got) +
                                                 " bytes of a section of " + std::to_string(n));
  return got;
}

const char* kind_of(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISDIR(m)) return "a folder";
  return "not a regular file";
}

}  // namespace

NpyArray read_npy(const std::filesystem::path& path) { return read_npy(path, NpyReadLimits{}); }

NpyArray read_npy(const std::filesystem::path& path, const NpyReadLimits& limits) {
  const std::string what = path.string();
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);  // a FIFO's open must not block
  if (f.fd < 0) throw Error(ErrorCode::invalid_argument, "cannot open " + what + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw Error(ErrorCode::invalid_argument, "cannot stat " + what + ": " + std::strerror(errno));
  const bool regular = S_ISREG(st.st_mode);
  if (!regular && !limits.allow_special)
    throw Error(ErrorCode::invalid_argument, what + " is " + kind_of(st.st_mode) + ", not a regular .npy file");
  if (S_ISDIR(st.st_mode)) throw Error(ErrorCode::invalid_argument, what + " is a folder, not a .npy file");
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long long>(limits.timeout_s * 1000.0));
  try {
    // The preamble and the header first (at most kNpyMaxHeaderBytes), then the sizes are checked
    // against the file and the limits before the data are allocated and read.
    std::vector<std::uint8_t> head(12);
    std::size_t got = read_some(f.fd, head.data(), head.size(), what, deadline, false);
    head.resize(got);
    if (got >= 10) {
      unsigned major = head[6];
      std::size_t pre = major == 1 ? 10 : 12;
      std::uint64_t hlen = major == 1 ? read_le(head, 8, 2) : (got >= 12 ? read_le(head, 8, 4) : 0);
      if (hlen <= kNpyMaxHeaderBytes && got >= pre) {
        std::size_t want = pre + static_cast<std::size_t>(hlen);
        std::size_t have = head.size();
        head.resize(std::max(want, have));
        if (want > have) head.resize(have + read_some(f.fd, head.data() + have, want - have, what, deadline, false));
      }
    }
    NpyHeader h = parse_npy_header(head, limits.max_elements);
    const std::uint64_t need = h.count * 4;
    if (regular) {
      std::uint64_t data_bytes = static_cast<std::uint64_t>(st.st_size) > h.data_offset
                                     ? static_cast<std::uint64_t>(st.st_size) - h.data_offset : 0;
      if (data_bytes != need)
        fail("data section has " + std::to_string(data_bytes) + " bytes, shape needs " + std::to_string(need));
      ::fcntl(f.fd, F_SETFL, ::fcntl(f.fd, F_GETFL) & ~O_NONBLOCK);
    }
    // Bytes read past the header in the first chunk (a header shorter than 2 bytes of preamble).
    std::vector<std::uint8_t> extra(head.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(h.data_offset, head.size())), head.end());
    if (extra.size() > need) fail("data section is longer than the shape needs");
    NpyArray out;
    out.shape = h.shape;
    out.data.resize(static_cast<std::size_t>(h.count));
    auto* dst = reinterpret_cast<std::uint8_t*>(out.data.data());
    if (!extra.empty()) std::memcpy(dst, extra.data(), extra.size());  // memcpy from null (no extra bytes) is UB
    read_some(f.fd, dst + extra.size(), static_cast<std::size_t>(need) - extra.size(), what, deadline, true);
    std::uint8_t probe;
    if (read_some(f.fd, &probe, 1, what, deadline, false) != 0) fail("data section is longer than the shape needs");
    if constexpr (std::endian::native != std::endian::little) {
      for (auto& x : out.data) {
        std::uint32_t v;
        std::memcpy(&v, &x, 4);
        v = __builtin_bswap32(v);
        std::memcpy(&x, &v, 4);
      }
    }
    return out;
  } catch (const Error& e) {
    std::string m = e.what();
    if (m.rfind(what, 0) == 0) throw;
    throw Error(e.code(), what + ": " + m);
  }
}

void write_npy(const std::filesystem::path& path, std::span<const float> data,
               const std::vector<std::uint64_t>& shape) {
  auto bytes = make_npy(data, shape);
  tg::write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace tg::verify
