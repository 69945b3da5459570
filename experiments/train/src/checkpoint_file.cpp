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

std::string fingerprint_difference(const std::string& got, const std::string& want) {
  // the fields of fingerprint() (trainer.cpp), in its order; then tagged extras ("qsgd-levels 3", "own-scalars")
  static const char* const kFields[] = {"--model", "--data", "--train-limit", "--codec", "--packing", "--layerwise",
                                        "--clip", "--c", "--float-below", "--quantize-last", "--optimizer", "--lr",
                                        "--momentum", "--weight-decay", "--lr-policy", "--gamma", "--power",
                                        "--step-size", "--batch", "--workers", "--seed", "--weight-decay-in"};
  constexpr std::size_t kNamed = sizeof kFields / sizeof kFields[0];
  auto split = [](const std::string& s) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (std::size_t bar; (bar = s.find('|', start)) != std::string::npos; start = bar + 1)
      parts.push_back(s.substr(start, bar - start));
    parts.push_back(s.substr(start));
    return parts;
  };
  const std::vector<std::string> a = split(got), b = split(want);
  std::string out;
  auto add = [&out](const std::string& text) { out += (out.empty() ? "" : "; ") + text; };
  for (std::size_t i = 0; i < kNamed; ++i) {
    const std::string x = i < a.size() ? a[i] : "(none)", y = i < b.size() ? b[i] : "(none)";
    if (x != y) add(std::string(kFields[i]) + " is " + x + " in the checkpoint, " + y + " in this run");
  }
  // the extras: those of one side only
  const std::vector<std::string> ea(a.begin() + static_cast<std::ptrdiff_t>(std::min(kNamed, a.size())), a.end()),
      eb(b.begin() + static_cast<std::ptrdiff_t>(std::min(kNamed, b.size())), b.end());
  for (const std::string& x : ea)
    if (std::find(eb.begin(), eb.end(), x) == eb.end()) add("the checkpoint's run had " + x + ", this run has not");
  for (const std::string& y : eb)
    if (std::find(ea.begin(), ea.end(), y) == ea.end()) add("this run has " + y + ", the checkpoint's run had not");
  return out.empty() ? "the settings differ" : out;
}

std::string seal_checkpoint(const std::string& archive, const CheckpointManifest& m, const Residuals* residuals) {
  std::string section;
  if (m.residual_workers > 0) {
    if (!residuals || residuals->size() != m.residual_workers)
      throw std::logic_error("seal_checkpoint: the residuals do not hold the manifest's " + std::to_string(m.residual_workers) + " workers");
    std::size_t bytes = 0;
    for (std::size_t n : m.residual_numel) bytes += 8 + 4 * n;
    section.reserve(bytes * m.residual_workers);
    for (std::size_t w = 0; w < residuals->size(); ++w) {
      const auto& worker = (*residuals)[w];
      if (worker.size() != m.residual_numel.size())
        throw std::logic_error("seal_checkpoint: worker " + std::to_string(w) + " has " + std::to_string(worker.size()) +
                               " residuals, the manifest " + std::to_string(m.residual_numel.size()));
      for (std::size_t t = 0; t < worker.size(); ++t) {
        if (worker[t].size() != m.residual_numel[t])
          throw std::logic_error("seal_checkpoint: the residual of worker " + std::to_string(w) + ", tensor " + std::to_string(t) +
                                 " has " + std::to_string(worker[t].size()) + " elements, the manifest " +
                                 std::to_string(m.residual_numel[t]));
        put(section, worker[t].size(), 8);
        for (float v : worker[t]) {
          std::uint32_t bits;
          std::memcpy(&bits, &v, 4);
          put(section, bits, 4);
        }
      }
    }
  } else if (residuals) {
    throw std::logic_error("seal_checkpoint: residuals given, but the manifest declares none");
  }
  std::ostringstream man;
  man << "format " << kCheckpointFormat << "\n";
  man << "fingerprint " << one_line(m.fingerprint) << "\n";
  man << "step " << m.step << "\n";
  for (const auto& [name, shape] : m.tensors) man << "tensor " << one_line(name) << " " << one_line(shape) << "\n";
  if (m.residual_workers > 0)
    man << "residuals " << m.residual_workers << " " << m.residual_numel.size() << " " << section.size() << "\n";
  std::string out = archive;
  std::string mt = man.str();
  out += section;
  out += mt;
  std::uint32_t c = crc(out, out.size());
  out.append(kMagic, 8);
  put(out, mt.size(), 8);
  put(out, archive.size(), 8);
  put(out, c, 4);
  put(out, 0, 4);
  return out;
}

std::string open_checkpoint(const std::string& path, const CheckpointManifest& expect, long* step, Residuals* residuals) {
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
  if (man_len > f || zip_len > f - man_len) throw bad("footer lengths do not match the file size (truncated or altered)");
  const std::size_t section_len = static_cast<std::size_t>(f - man_len - zip_len);  // the residual section
  if (get(bytes, f + 28, 4) != 0) throw bad("footer's reserved bytes are not zero (altered)");
  std::uint32_t have_crc = crc(bytes, f);
  if (have_crc != want_crc) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "CRC32C of the contents is %08x, the footer says %08x (corrupted)", have_crc, want_crc);
    throw bad(buf);
  }
  std::istringstream man(bytes.substr(static_cast<std::size_t>(f - man_len), static_cast<std::size_t>(man_len)));
  std::string line;
  CheckpointManifest got_m;
  int format = -1;
  bool have_step = false;
  bool have_residuals = false;
  std::uint64_t res_workers = 0, res_tensors = 0, res_bytes = 0;
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
    } else if (key == "residuals") {
      std::istringstream v(value);
      std::string rest;
      if (have_residuals || !(v >> res_workers >> res_tensors >> res_bytes) || (v >> rest) || res_workers == 0)
        throw bad("malformed residuals line '" + one_line(value) + "' in the manifest");
      have_residuals = true;
    }
  }
  if (format < 1 || format > kCheckpointFormat)
    throw bad("format version " + std::to_string(format) + ", this program reads 1 to " + std::to_string(kCheckpointFormat));
  if (format < 2 && (have_residuals || section_len != 0))
    throw bad("footer lengths do not match the file size (truncated or altered)");
  if (section_len != (have_residuals ? res_bytes : 0))
    throw bad("the residual section is " + std::to_string(section_len) + " bytes, the manifest says " +
              std::to_string(have_residuals ? res_bytes : 0) + " (altered)");
  if (!have_step || got_m.step < 0) throw bad("the manifest has no step");
  if (got_m.fingerprint != expect.fingerprint)
    throw bad("written by a run with other settings: " + fingerprint_difference(got_m.fingerprint, expect.fingerprint));
  for (std::size_t i = 0; i < std::max(got_m.tensors.size(), expect.tensors.size()); ++i) {
    if (i >= got_m.tensors.size()) throw bad("lacks tensor " + expect.tensors[i].first);
    if (i >= expect.tensors.size()) throw bad("has tensor " + got_m.tensors[i].first + ", which this model lacks");
    if (got_m.tensors[i] != expect.tensors[i])
      throw bad("tensor " + std::to_string(i) + " is " + got_m.tensors[i].first + " " + got_m.tensors[i].second +
                ", this model has " + expect.tensors[i].first + " " + expect.tensors[i].second);
  }
  if (expect.residual_workers == 0 && have_residuals)
    throw bad("holds error-feedback residuals, which this run (fingerprint " + expect.fingerprint + ") does not keep");
  if (expect.residual_workers > 0) {
    if (!have_residuals)
      throw bad("holds no error-feedback residuals (format " + std::to_string(format) +
                ", written before checkpoints kept them); EF-SignSGD cannot continue without every worker's residual");
    if (res_workers != expect.residual_workers)
      throw bad("its residual section holds " + std::to_string(res_workers) + " workers, this run has " +
                std::to_string(expect.residual_workers));
    if (res_tensors != expect.residual_numel.size())
      throw bad("its residual section holds " + std::to_string(res_tensors) + " tensors per worker, this model has " +
                std::to_string(expect.residual_numel.size()));
    Residuals got_r(expect.residual_workers);
    std::size_t at = static_cast<std::size_t>(zip_len);
    const std::size_t end = at + section_len;
    for (std::size_t w = 0; w < expect.residual_workers; ++w)
      for (std::size_t t = 0; t < expect.residual_numel.size(); ++t) {
        const std::string where = "worker " + std::to_string(w) + ", tensor " + std::to_string(t);
        if (end - at < 8) throw bad("its residual section ends before the residual of " + where + " (truncated or altered)");
        std::uint64_t n = get(bytes, at, 8);
        at += 8;
        if (n != expect.residual_numel[t])
          throw bad("the residual of " + where + " has " + std::to_string(n) + " elements, this model's tensor has " +
                    std::to_string(expect.residual_numel[t]));
        if ((end - at) / 4 < n) throw bad("its residual section ends inside the residual of " + where + " (truncated or altered)");
        std::vector<float> values(static_cast<std::size_t>(n));
        for (std::size_t k = 0; k < values.size(); ++k, at += 4) {
          auto v = static_cast<std::uint32_t>(get(bytes, at, 4));
          std::memcpy(&values[k], &v, 4);
        }
        got_r[w].push_back(std::move(values));
      }
    if (at != end) throw bad("its residual section has " + std::to_string(end - at) + " bytes after the last residual (altered)");
    if (residuals) *residuals = std::move(got_r);
  }
  if (step) *step = got_m.step;
  bytes.resize(static_cast<std::size_t>(zip_len));
  return bytes;
}

}  // namespace tg::train
