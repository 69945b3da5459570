// terngrad-bench: checkpoint integrity envelope (see tg/train/checkpoint_file.hpp).
#include "tg/train/checkpoint_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tg/format.hpp"

namespace tg::train {
namespace {

constexpr char kMagic[8] = {'T', 'G', 'C', 'K', 'P', 'T', '0', '1'};
constexpr std::size_t kFooter = 32;

void put(std::string& s, std::uint64_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) s.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
}
std::uint64_t get(const std::string& s, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<std::size_t>(k)]);
  return v;
}
std::uint32_t crc(const std::string& s, std::size_t n) {
  return tg::crc32c({reinterpret_cast<const std::uint8_t*>(s.data()), n});
}
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

std::string seal_checkpoint(const std::string& archive, const CheckpointManifest& m) {
  std::ostringstream man;
  man << "format " << kCheckpointFormat << "\n";
  man << "fingerprint " << one_line(m.fingerprint) << "\n";
  man << "step " << m.step << "\n";
  for (const auto& [name, shape] : m.tensors) man << "tensor " << one_line(name) << " " << one_line(shape) << "\n";
  std::string out = archive;
  std::string mt = man.str();
  out += mt;
  std::uint32_t c = crc(out, out.size());
  out.append(kMagic, 8);
  put(out, mt.size(), 8);
  put(out, archive.size(), 8);
  put(out, c, 4);
  put(out, 0, 4);
  return out;
}

std::string open_checkpoint(const std::string& path, const CheckpointManifest& expect, long* step) {
  auto bad = [&](const std::string& why) { return std::invalid_argument("checkpoint " + path + " refused: " + why); };
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::invalid_argument("cannot open checkpoint " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw bad("not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > kCheckpointMaxBytes) {
    ::close(fd);
    throw bad(std::to_string(st.st_size) + " bytes, over the limit of " + std::to_string(kCheckpointMaxBytes));
  }
  std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got != bytes.size()) throw bad("short read (" + std::to_string(got) + " of " + std::to_string(bytes.size()) + " bytes)");
  if (bytes.size() < kFooter || std::memcmp(bytes.data() + bytes.size() - kFooter, kMagic, 8) != 0)
    throw bad("no terngrad integrity footer (not a checkpoint of this program, format " +
              std::to_string(kCheckpointFormat) + ", or truncated)");
  const std::size_t f = bytes.size() - kFooter;
  std::uint64_t man_len = get(bytes, f + 8, 8), zip_len = get(bytes, f + 16, 8);
  std::uint32_t want_crc = static_cast<std::uint32_t>(get(bytes, f + 24, 4));
  if (man_len > f || zip_len != f - man_len) throw bad("footer lengths do not match the file size (truncated or altered)");
  if (get(bytes, f + 28, 4) != 0) throw bad("footer's reserved bytes are not zero (altered)");
  std::uint32_t have_crc = crc(bytes, f);
  if (have_crc != want_crc) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "CRC32C of the contents is %08x, the footer says %08x (corrupted)", have_crc, want_crc);
    throw bad(buf);
  }
  std::istringstream man(bytes.substr(static_cast<std::size_t>(zip_len), static_cast<std::size_t>(man_len)));
  std::string line;
  CheckpointManifest got_m;
  int format = -1;
  bool have_step = false;
  while (std::getline(man, line)) {
    auto sp = line.find(' ');
    std::string key = line.substr(0, sp), value = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key == "format") format = std::atoi(value.c_str());
    else if (key == "fingerprint") got_m.fingerprint = value;
    else if (key == "step") {
      got_m.step = std::atol(value.c_str());
      have_step = true;
    } else if (key == "tensor") {
      auto sp2 = value.find(' ');
      got_m.tensors.emplace_back(value.substr(0, sp2), sp2 == std::string::npos ? "" : value.substr(sp2 + 1));
    }
  }
  if (format != kCheckpointFormat)
    throw bad("format version " + std::to_string(format) + ", this program reads " + std::to_string(kCheckpointFormat));
  if (!have_step || got_m.step < 0) throw bad("the manifest has no step");
  if (got_m.fingerprint != expect.fingerprint)
    throw bad("written by a run with other settings (" + got_m.fingerprint + "), this run is (" + expect.fingerprint + ")");
  for (std::size_t i = 0; i < std::max(got_m.tensors.size(), expect.tensors.size()); ++i) {
    if (i >= got_m.tensors.size()) throw bad("lacks tensor " + expect.tensors[i].first);
    if (i >= expect.tensors.size()) throw bad("has tensor " + got_m.tensors[i].first + ", which this model lacks");
    if (got_m.tensors[i] != expect.tensors[i])
      throw bad("tensor " + std::to_string(i) + " is " + got_m.tensors[i].first + " " + got_m.tensors[i].second +
                ", this model has " + expect.tensors[i].first + " " + expect.tensors[i].second);
  }
  if (step) *step = got_m.step;
  bytes.resize(static_cast<std::size_t>(zip_len));
  return bytes;
}

}  // namespace tg::train
