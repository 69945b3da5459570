// terngrad-bench: the preprocessed-tensor image folder (see tensor_data.hpp): tensors.txt, images
// memory-mapped, labels read and checked.
#include "tg/train/tensor_data.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "tg/atomic_file.hpp"

namespace tg::train {
namespace {

constexpr const char* kMagic = "tg-images-u8";

struct Layout {
  std::uint64_t channels = 0, height = 0, width = 0, classes = 0, train = 0, test = 0;
};

std::uint64_t parse_count(const std::string& file, const std::string& key, const std::string& text, std::uint64_t lo,
                          std::uint64_t hi) {
  std::uint64_t v = 0;
  bool ok = !text.empty() && text.size() <= 12;
  for (char ch : text) ok = ok && ch >= '0' && ch <= '9';
  if (ok) v = std::stoull(text);
  if (!ok || v < lo || v > hi)
    throw DataError(file + ": " + key + " '" + text + "' is not an integer in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
  return v;
}

Layout read_layout(const std::string& dir) {
  const std::string file = dir + "/tensors.txt";
  std::ifstream in(file);
  if (!in) throw DataError(file + ": cannot open (a tensor folder needs tensors.txt)");
  std::map<std::string, std::string> kv;
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    if (++lines > 64) throw DataError(file + ": more than 64 lines");
    if (line.empty()) continue;
    std::istringstream ls(line);
    std::string key, value, rest;
    ls >> key >> value;
    if (key == "format") {
      std::string version;
      ls >> version;
      value += " " + version;
    }
    if (ls >> rest) throw DataError(file + ": line " + std::to_string(lines) + " has more than a key and a value");
    if (kv.count(key)) throw DataError(file + ": key '" + key + "' appears twice");
    kv[key] = value;
  }
  static const char* keys[] = {"format", "channels", "height", "width", "classes", "train", "test"};
  for (const char* k : keys)
    if (!kv.count(k)) throw DataError(file + ": key '" + std::string(k) + "' is missing");
  if (kv.size() != std::size(keys)) {
    for (const auto& [k, v] : kv)
      if (std::find(std::begin(keys), std::end(keys), k) == std::end(keys)) throw DataError(file + ": unknown key '" + k + "'");
  }
  if (kv["format"] != std::string(kMagic) + " 1")
    throw DataError(file + ": format '" + kv["format"] + "' is not '" + kMagic + " 1'");
  Layout l;
  l.channels = parse_count(file, "channels", kv["channels"], 1, 16);
  l.height = parse_count(file, "height", kv["height"], 1, 8192);
  l.width = parse_count(file, "width", kv["width"], 1, 8192);
  l.classes = parse_count(file, "classes", kv["classes"], 2, 1u << 24);
  l.train = parse_count(file, "train", kv["train"], 1, std::uint64_t{1} << 32);
  l.test = parse_count(file, "test", kv["test"], 1, std::uint64_t{1} << 32);
  return l;
}

// Maps `path` read-only; its size must be exactly `bytes`.
std::shared_ptr<const std::uint8_t> map_file(const std::string& path, std::uint64_t bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw DataError(path + ": not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) != bytes) {
    ::close(fd);
    throw DataError(path + ": " + std::to_string(st.st_size) + " bytes, expected " + std::to_string(bytes) +
                    " (count x channels x height x width of tensors.txt)");
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw DataError(path + ": cannot map: " + std::strerror(err));
  return std::shared_ptr<const std::uint8_t>(static_cast<const std::uint8_t*>(p),
                                             [bytes](const std::uint8_t* q) { ::munmap(const_cast<std::uint8_t*>(q), bytes); });
}

}  // namespace

ImageSet load_tensor_dir(const std::string& dir, bool train, std::size_t limit) {
  const Layout l = read_layout(dir);
  const std::string split = train ? "train" : "test";
  const std::uint64_t count = train ? l.train : l.test;
  const std::uint64_t per = l.channels * l.height * l.width;
  const std::string images = dir + "/" + split + "-images.u8", labels = dir + "/" + split + "-labels.i32";
  ImageSet set;
  set.channels = static_cast<int>(l.channels);
  set.height = static_cast<int>(l.height);
  set.width = static_cast<int>(l.width);
  set.classes = static_cast<int>(l.classes);
  set.mapped = map_file(images, count * per);
  std::ifstream in(labels, std::ios::binary);
  if (!in) throw DataError(labels + ": cannot open");
  std::error_code ec;
  auto size = std::filesystem::file_size(labels, ec);
  if (ec || size != 4 * count)
    throw DataError(labels + ": " + (ec ? std::string("size unknown") : std::to_string(size) + " bytes") + ", expected " +
                    std::to_string(4 * count) + " (4 per image)");
  set.count = limit > 0 && limit < count ? limit : static_cast<std::size_t>(count);
  std::vector<unsigned char> raw(4 * set.count);
  if (!in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size())))
    throw DataError(labels + ": short read");
  set.labels.resize(set.count);
  for (std::size_t i = 0; i < set.count; ++i) {
    std::uint32_t v = raw[4 * i] | (raw[4 * i + 1] << 8) | (raw[4 * i + 2] << 16) | (static_cast<std::uint32_t>(raw[4 * i + 3]) << 24);
    if (v >= l.classes)
      throw DataError(labels + ": label " + std::to_string(static_cast<std::int32_t>(v)) + " of image " + std::to_string(i) +
                      " is not in [0, " + std::to_string(l.classes) + ")");
    set.labels[i] = static_cast<std::int32_t>(v);
  }
  set.source = images + " (" + std::to_string(set.count) + " of " + std::to_string(count) + " images, " +
               std::to_string(l.channels) + "x" + std::to_string(l.height) + "x" + std::to_string(l.width) + ", " +
               std::to_string(l.classes) + " classes)";
  return set;
}

void write_tensor_dir(const std::string& dir, const ImageSet& train, const ImageSet& test) {
  if (train.channels != test.channels || train.height != test.height || train.width != test.width ||
      train.classes != test.classes)
    throw std::invalid_argument("train and test sets differ in shape or classes");
  std::filesystem::create_directories(dir);
  auto write_split = [&](const std::string& split, const ImageSet& s) {
    const std::uint8_t* p = s.pixel_data();
    tg::write_file_atomic(dir + "/" + split + "-images.u8",
                          std::string(reinterpret_cast<const char*>(p), s.count * s.image_bytes()));
    std::string lab(4 * s.count, '\0');
    for (std::size_t i = 0; i < s.count; ++i)
      for (int b = 0; b < 4; ++b) lab[4 * i + b] = static_cast<char>(static_cast<std::uint32_t>(s.labels[i]) >> (8 * b));
    tg::write_file_atomic(dir + "/" + split + "-labels.i32", lab);
  };
  write_split("train", train);
  write_split("test", test);
  std::ostringstream t;
  t << "format " << kMagic << " 1\nchannels " << train.channels << "\nheight " << train.height << "\nwidth " << train.width
    << "\nclasses " << train.classes << "\ntrain " << train.count << "\ntest " << test.count << "\n";
  tg::write_file_atomic(dir + "/tensors.txt", t.str());
}

}  // namespace tg::train
