// terngrad-bench: the output writer (common/include/tg/output_file.hpp) at every kind of path: a new
// path, a regular file, a symlink (relative, absolute, dangling), a character device and a FIFO (in
// place, never replaced), a folder, a block device and a socket (refused), /dev/stdout, and a write
// that fails half-way (EFBIG under RLIMIT_FSIZE, ENOSPC on /dev/full): no partial output, the previous
// file intact, no temporary file left. Device nodes are made with mknod in a private folder (root only;
// skipped with the reason otherwise). Written against the old name write_file_atomic, so it runs
// unchanged against the writer before this one (which replaced every one of these paths).
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tg/atomic_file.hpp"

namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "tg-output-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

mode_t kind(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return 0;
  return st.st_mode & S_IFMT;
}

// Only the files the test made: no temporary file left behind.
std::size_t entries(const fs::path& dir) {
  std::size_t n = 0;
  for (auto it = fs::directory_iterator(dir); it != fs::directory_iterator(); ++it) ++n;
  return n;
}

}  // namespace

TEST(OutputFile, NewPathAndRegularFile) {
  TempDir t;
  fs::path f = t.path / "sub" / "out.json";
  tg::write_file_atomic(f, "one");
  EXPECT_EQ(slurp(f), "one");
  ::chmod(f.c_str(), 0640);
  tg::write_file_atomic(f, "two");
  EXPECT_EQ(slurp(f), "two");
  struct stat st {};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u) << "the old file's mode is kept";
  EXPECT_EQ(entries(t.path / "sub"), 1u);
}

TEST(OutputFile, SymlinkWritesItsTarget) {
  TempDir t;
  fs::create_directories(t.path / "real");
  fs::path target = t.path / "real" / "report.json";
  tg::write_file_atomic(target, "old");
  fs::path rel = t.path / "rel.json", abs = t.path / "abs.json", chain = t.path / "chain.json";
  fs::create_symlink("real/report.json", rel);
  fs::create_symlink(target, abs);
  fs::create_symlink("rel.json", chain);
  tg::write_file_atomic(rel, "via relative link");
  EXPECT_EQ(kind(rel), static_cast<mode_t>(S_IFLNK)) << "the link must stay a link";
  EXPECT_EQ(slurp(target), "via relative link");
  tg::write_file_atomic(abs, "via absolute link");
  EXPECT_EQ(kind(abs), static_cast<mode_t>(S_IFLNK));
  EXPECT_EQ(slurp(target), "via absolute link");
  tg::write_file_atomic(chain, "via a chain");
  EXPECT_EQ(kind(chain), static_cast<mode_t>(S_IFLNK));
  EXPECT_EQ(kind(rel), static_cast<mode_t>(S_IFLNK));
  EXPECT_EQ(slurp(target), "via a chain");
  // A dangling link creates its target.
  fs::path dangling = t.path / "dangling.json";
  fs::create_symlink("real/new.json", dangling);
  tg::write_file_atomic(dangling, "new");
  EXPECT_EQ(kind(dangling), static_cast<mode_t>(S_IFLNK));
  EXPECT_EQ(slurp(t.path / "real" / "new.json"), "new");
}

TEST(OutputFile, CharacterDeviceWrittenInPlace) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod of a character device needs root";
  TempDir t;
  fs::path null = t.path / "null", full = t.path / "full";
  ASSERT_EQ(::mknod(null.c_str(), S_IFCHR | 0666, ::makedev(1, 3)), 0) << std::strerror(errno);
  ASSERT_EQ(::mknod(full.c_str(), S_IFCHR | 0666, ::makedev(1, 7)), 0) << std::strerror(errno);
  tg::write_file_atomic(null, "discarded");
  EXPECT_EQ(kind(null), static_cast<mode_t>(S_IFCHR)) << "the device node was replaced";
  // A symlink to the device: the device is written, the link stays.
  fs::path link = t.path / "link";
  fs::create_symlink("null", link);
  tg::write_file_atomic(link, "discarded");
  EXPECT_EQ(kind(link), static_cast<mode_t>(S_IFLNK));
  EXPECT_EQ(kind(null), static_cast<mode_t>(S_IFCHR));
  // /dev/full: ENOSPC is an error naming the path, the node stays.
  try {
    tg::write_file_atomic(full, "x");
    ADD_FAILURE() << "a write to /dev/full must fail";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(full.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(kind(full), static_cast<mode_t>(S_IFCHR));
  EXPECT_EQ(entries(t.path), 3u) << "no temporary file left";
}

TEST(OutputFile, FifoWrittenInPlace) {
  TempDir t;
  fs::path fifo = t.path / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The reader opens first (non-blocking), so neither side waits; with a writer that replaced the
  // FIFO by a file the reader gets nothing instead of hanging.
  int rfd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(rfd, 0);
  tg::write_file_atomic(fifo, "through the pipe");
  std::string got;
  char buf[256];
  ssize_t n;
  while ((n = ::read(rfd, buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
  ::close(rfd);
  EXPECT_EQ(got, "through the pipe");
  EXPECT_EQ(kind(fifo), static_cast<mode_t>(S_IFIFO)) << "the FIFO was replaced";
}

TEST(OutputFile, DevStdoutWrittenInPlace) {
  // Run in a child whose stdout is a pipe: a link to /proc/self/fd/1 (what /dev/stdout is) must reach
  // the pipe. A private link, never the system's /dev/stdout: a writer that replaces links would
  // replace that one.
  TempDir t;
  fs::path link = t.path / "stdout";
  fs::create_symlink("/proc/self/fd/1", link);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    try {
      tg::write_file_atomic(link, "to stdout");
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(got, "to stdout");
  EXPECT_EQ(kind(link), static_cast<mode_t>(S_IFLNK)) << "the link was replaced";
}

TEST(OutputFile, OtherSpecialFilesRefused) {
  TempDir t;
  fs::create_directories(t.path / "folder");
  EXPECT_THROW(tg::write_file_atomic(t.path / "folder", "x"), std::runtime_error);
  EXPECT_TRUE(fs::is_directory(t.path / "folder"));
  // A socket.
  fs::path sock = t.path / "sock";
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  try {
    tg::write_file_atomic(sock, "x");
    ADD_FAILURE() << "a socket must be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("socket"), std::string::npos) << e.what();
  }
  ::close(s);
  EXPECT_EQ(kind(sock), static_cast<mode_t>(S_IFSOCK)) << "the socket was replaced";
  if (::geteuid() != 0) GTEST_SKIP() << "mknod of a block device needs root";
  fs::path blk = t.path / "loop";
  ASSERT_EQ(::mknod(blk.c_str(), S_IFBLK | 0600, ::makedev(7, 200)), 0) << std::strerror(errno);
  try {
    tg::write_file_atomic(blk, "x");
    ADD_FAILURE() << "a block device must be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("block device"), std::string::npos) << e.what();
  }
  EXPECT_EQ(kind(blk), static_cast<mode_t>(S_IFBLK)) << "the block device node was replaced";
}

TEST(OutputFile, FailedWriteLeavesThePreviousFile) {
  // A child with RLIMIT_FSIZE = 4 KiB (SIGXFSZ ignored, so write fails with EFBIG as on a full disk)
  // tries to replace a small file with 64 KiB.
  TempDir t;
  fs::path f = t.path / "curves.csv";
  tg::write_file_atomic(f, "previous contents\n");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      tg::write_file_atomic(f, std::string(65536, 'x'));
    } catch (const std::runtime_error&) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2) << "the failed write must throw";
  EXPECT_EQ(slurp(f), "previous contents\n");
  EXPECT_EQ(entries(t.path), 1u) << "a temporary file was left behind";
}
