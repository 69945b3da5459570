// terngrad-bench: the one writer of every output file of the project (reports, JSON, JUnit, CSV,
// checkpoints, weights; the C++ programs and, through the bindings, the Python package).
//   tg::write_output("reports/out.json", text);   // throws tg::OutputError, one line naming the path
//
// What happens at the path:
//   - nothing there, or a regular file: the contents go to a new temporary file in the same folder
//     (created with O_EXCL, mode 0666 & ~umask, or the old file's mode), fsync, rename over the path,
//     fsync of the folder. An interrupted run or a full disk (ENOSPC, EIO, EFBIG) leaves the previous
//     file intact and no temporary file behind;
//   - a symlink: the same, at the file the link resolves to (the link stays a link); a dangling link
//     creates its target;
//   - a character device (/dev/null, a terminal), a FIFO, /dev/stdout, /dev/stderr or /proc/self/fd/N:
//     written directly, never replaced (a FIFO with no reader is waited for at most
//     kFifoOpenTimeoutMs, then refused);
//   - a folder, a block device, a socket: refused, nothing written.
// Header-only, no codec dependency (common/ depends on nothing).
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tg {

/// An output could not be written; what() is one line naming the path and the reason.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A FIFO at an output path must get its reader within this bound.
inline constexpr int kFifoOpenTimeoutMs = 500;

namespace output_detail {

[[noreturn]] inline void fail(const std::filesystem::path& path, const std::string& why) {
  throw OutputError("cannot write " + path.string() + ": " + why);
}

inline bool write_all(int fd, std::string_view contents) {
  const char* p = contents.data();
  std::size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = EIO;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

// A character device or a FIFO: written in place, never replaced.
inline void write_direct(const std::filesystem::path& path, std::string_view contents, bool fifo) {
  int fd = -1;
  if (fifo) {  // open(O_WRONLY) on a FIFO blocks until a reader comes: bounded
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kFifoOpenTimeoutMs);
    for (;;) {
      fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0 || errno != ENXIO) break;
      if (std::chrono::steady_clock::now() >= deadline)
        fail(path, "a FIFO with no reader after " + std::to_string(kFifoOpenTimeoutMs) + " ms");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  } else {
    fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  }
  if (fd < 0) fail(path, std::strerror(errno));
  bool ok = write_all(fd, contents);
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) fail(path, std::strerror(err));
}

inline void write_replacing(const std::filesystem::path& path, std::string_view contents) {
  namespace fs = std::filesystem;
  fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw OutputError("cannot create folder " + dir.string() + ": " + ec.message());
  mode_t mode = 0666;  // the umask applies at open
  struct stat old {};
  bool had_old = ::stat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode);
  static std::atomic<unsigned> counter{0};
  fs::path tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    std::string name = ".";  // appended piecewise: GCC 12 warns (-Wrestrict) on the chained form
    name += path.filename().string();
    name += ".tmp-";
    name += std::to_string(::getpid());
    name += "-";
    name += std::to_string(counter.fetch_add(1));
    tmp = dir / name;
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0 && errno != EEXIST) fail(path, std::string("cannot create a temporary file in ") + dir.string() + ": " + std::strerror(errno));
  }
  if (fd < 0) fail(path, "no free temporary file name in " + dir.string());
  if (had_old) (void)::fchmod(fd, old.st_mode & 07777);
  bool ok = write_all(fd, contents);
  int err = errno;
  if (ok && ::fsync(fd) != 0) {
    ok = false;
    err = errno;
  }
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    fail(path, std::string(std::strerror(err)) + " (nothing written; the previous file, if any, is intact)");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    fail(path, std::string("rename: ") + std::strerror(err));
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

inline bool is_proc_fd(const std::string& p) {
  return p.rfind("/proc/", 0) == 0 || p.rfind("/dev/fd/", 0) == 0 || p == "/dev/stdout" || p == "/dev/stderr";
}

}  // namespace output_detail

/// Writes `contents` to `path` as described at the top of this file. Throws tg::OutputError.
inline void write_output(const std::filesystem::path& path, std::string_view contents) {
  namespace fs = std::filesystem;
  using namespace output_detail;
  if (path.empty()) throw OutputError("cannot write an output to an empty path");
  if (is_proc_fd(path.string())) {  // the process's own descriptors: write in place
    struct stat st {};
    bool fifo = ::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
    write_direct(path, contents, fifo);
    return;
  }
  fs::path p = path;
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) return write_replacing(p, contents);  // a new path (or a dangling link's target)
      fail(path, std::strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) {
      if (hops >= 40) fail(path, "too many levels of symbolic links");
      char buf[4096];
      ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
      if (n < 0) fail(path, std::string("readlink: ") + std::strerror(errno));
      fs::path target(std::string(buf, static_cast<std::size_t>(n)));
      if (target.is_relative()) target = p.parent_path() / target;
      if (is_proc_fd(target.string())) {
        struct stat fst {};
        bool fifo = ::stat(path.c_str(), &fst) == 0 && S_ISFIFO(fst.st_mode);
        write_direct(path, contents, fifo);
        return;
      }
      p = target;
      continue;
    }
    if (S_ISREG(st.st_mode)) return write_replacing(p, contents);
    if (S_ISCHR(st.st_mode)) return write_direct(p, contents, false);
    if (S_ISFIFO(st.st_mode)) return write_direct(p, contents, true);
    if (S_ISDIR(st.st_mode)) fail(path, "it is a folder");
    if (S_ISBLK(st.st_mode)) fail(path, "it is a block device (refused: outputs go to files, character devices or FIFOs)");
    if (S_ISSOCK(st.st_mode)) fail(path, "it is a socket (refused: outputs go to files, character devices or FIFOs)");
    fail(path, "not a regular file, character device or FIFO");
  }
}

}  // namespace tg
