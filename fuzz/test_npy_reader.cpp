// terngrad-bench: read_npy's allocation and blocking paths (issue 16): tiny files claiming huge shapes,
// a header length of 2^31, a FIFO with no writer, /dev/zero, a sparse file larger than its header says.
// Each must be refused with a tg::Error naming the problem, fast, before any large allocation.
#include <gtest/gtest.h>

#ifdef TG_HAVE_NPY
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include "tg/error.hpp"
#include "tg/verify/npy.hpp"

namespace fs = std::filesystem;

namespace {

std::string header_file(const std::string& shape) {
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
  h.push_back('\n');
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h;
}

struct Tmp {
  fs::path dir;
  Tmp() {
    std::string t = (fs::temp_directory_path() / "tg-npy-XXXXXX").string();
    dir = ::mkdtemp(t.data());
  }
  ~Tmp() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path file(const std::string& name, const std::string& bytes) {
    fs::path p = dir / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
};

// read_npy(path) must throw a tg::Error containing `needle`, within a second.
void expect_refused(const fs::path& p, const std::string& needle) {
  auto t0 = std::chrono::steady_clock::now();
  try {
    tg::verify::read_npy(p);
    ADD_FAILURE() << p << " was accepted";
  } catch (const tg::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0) << p;
}

}  // namespace

TEST(NpyReader, HugeShapesRefusedBeforeAllocating) {
  Tmp t;
  expect_refused(t.file("a.npy", header_file("(1000000000, 0)")), "limit");
  expect_refused(t.file("b.npy", header_file("(4294967295, 0)")), "limit");
  expect_refused(t.file("c.npy", header_file("(1099511627776, 8)")), "limit");
  std::string v2 = "\x93NUMPY";
  v2 += '\x02';
  v2 += std::string(1, '\0') + std::string("\x00\x00\x00\x80{", 5);
  expect_refused(t.file("d.npy", v2), "header length");
}

TEST(NpyReader, SpecialFilesRefusedWithoutBlocking) {
  Tmp t;
  fs::path fifo = t.dir / "fifo.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_refused(fifo, "FIFO");
  expect_refused("/dev/zero", "character device");
  expect_refused(t.dir, "folder");
}

TEST(NpyReader, SparseFileLargerThanItsHeaderRefused) {
  Tmp t;
  fs::path p = t.file("sparse.npy", header_file("(64, 8)"));
  fs::resize_file(p, std::uintmax_t{6} << 30);  // 6 GiB, sparse
  expect_refused(p, "data section");
}

TEST(NpyReader, ValidFileStillRead) {
  Tmp t;
  std::vector<float> v = {1.0f, -2.0f, 0.5f};
  tg::verify::write_npy(t.dir / "ok.npy", v, {3});
  auto a = tg::verify::read_npy(t.dir / "ok.npy");
  EXPECT_EQ(a.shape, std::vector<std::uint64_t>{3});
  EXPECT_EQ(a.data, v);
}
#endif
