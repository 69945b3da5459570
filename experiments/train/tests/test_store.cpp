// terngrad-bench: the rendezvous store (tg/train/store.hpp) against peers that send garbage (issue 16:
// with c10d::TCPStore, a length read from the network became an allocation size and a rank aborted).
// Fake peers are plain sockets on loopback; every case is bounded by a timeout of at most 2 s.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>

#include "tg/train/store.hpp"

namespace ts = tg::train::store;
namespace {

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  return fd;
}

void send_all(int fd, const std::vector<std::uint8_t>& b) {
  std::size_t at = 0;
  while (at < b.size()) {
    ssize_t n = ::send(fd, b.data() + at, b.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return;  // the server may close first
    at += static_cast<std::size_t>(n);
  }
}

// What the server sends back before it closes the connection (at most 2 s).
std::vector<std::uint8_t> read_until_closed(int fd) {
  std::vector<std::uint8_t> got;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    std::uint8_t buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return got;
    got.insert(got.end(), buf, buf + n);
  }
  ADD_FAILURE() << "the server kept the connection open for 2 s";
  return got;
}

std::vector<std::uint8_t> frame(std::uint8_t op, std::uint32_t len, const std::vector<std::uint8_t>& body = {}) {
  std::vector<std::uint8_t> f;
  f.reserve(5 + body.size());
  f.push_back(op);
  for (int i = 0; i < 4; ++i) f.push_back(static_cast<std::uint8_t>(len >> (8 * i)));
  for (std::uint8_t b : body) f.push_back(b);
  return f;
}

std::vector<std::uint8_t> u32le(std::uint32_t v) {
  return {static_cast<std::uint8_t>(v), static_cast<std::uint8_t>(v >> 8), static_cast<std::uint8_t>(v >> 16),
          static_cast<std::uint8_t>(v >> 24)};
}

long max_rss_kb() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

}  // namespace

TEST(Store, SetGetWaitAddBetweenClients) {
  ts::StoreServer server("127.0.0.1", 0);
  ts::StoreClient a("127.0.0.1", server.port(), 2.0), b("127.0.0.1", server.port(), 2.0);
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    a.set("rank_1", {1, 2, 3});
  });
  EXPECT_EQ(b.get("rank_1"), (std::vector<std::uint8_t>{1, 2, 3}));  // waits for the key
  later.join();
  b.wait({"rank_1"}, 1.0);
  EXPECT_TRUE(b.check({"rank_1"}));
  EXPECT_FALSE(b.check({"rank_1", "nope"}));
  EXPECT_EQ(a.add("n", 5), 5);
  EXPECT_EQ(b.add("n", -2), 3);
  EXPECT_EQ(a.num_keys(), 2);
  EXPECT_EQ(a.compare_set("c", {}, {7}), (std::vector<std::uint8_t>{7}));
  EXPECT_EQ(a.compare_set("c", {8}, {9}), (std::vector<std::uint8_t>{7}));
  EXPECT_TRUE(a.del("c"));
  EXPECT_FALSE(a.del("c"));
  EXPECT_EQ(server.rejected(), 0u);
}

TEST(Store, WaitAndGetAreBoundedByTheTimeout) {
  ts::StoreServer server("127.0.0.1", 0);
  ts::StoreClient c("127.0.0.1", server.port(), 0.3);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(c.get("never"), ts::StoreTimeout);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(s, 0.29);
  EXPECT_LT(s, 1.5);
  ts::StoreClient d("127.0.0.1", server.port(), 2.0);
  EXPECT_THROW(d.wait({"never"}, 0.2), ts::StoreTimeout);
}

// A peer sends garbage to the server: each connection is answered with ERROR and closed; the server
// allocates nothing near the claimed sizes and keeps serving the others.
TEST(Store, ServerClosesGarbageConnectionsAndKeepsServing) {
  ts::StoreServer server("127.0.0.1", 0);
  ts::StoreClient good("127.0.0.1", server.port(), 2.0);
  good.set("k", {42});
  long rss0 = max_rss_kb();
  std::vector<std::vector<std::uint8_t>> garbage = {
      frame(1, 0xFFFFFFFFu),                                   // SET claiming a 4 GiB body
      [] { auto b = u32le(0xFFFFFFF0u); b.resize(64, 0);
           return frame(1, 64, b); }(),                           // SET whose key claims 4 GiB
      [] { auto b = u32le(1); b.push_back('k'); auto v = u32le(0x7FFFFFFF); b.insert(b.end(), v.begin(), v.end());
           return frame(1, static_cast<std::uint32_t>(b.size()), b); }(),  // value length 2^31-1
      frame(5, 4, u32le(0xFFFFFFFFu)),                         // WAIT for 2^32-1 keys
      frame(0, 0), frame(0x81, 0), frame(0xFF, 0), frame(9, 0), // unknown request codes
      frame(7, 3, {1, 2, 3}),                                  // NUM_KEYS with trailing bytes
      std::vector<std::uint8_t>(4096, 0xFF),                   // 0xff bytes
  };
  std::mt19937 rng(7);
  for (int i = 0; i < 20; ++i) {  // random bytes
    std::vector<std::uint8_t> b(1 + rng() % 300);
    for (auto& x : b) x = static_cast<std::uint8_t>(rng());
    if (b[0] >= 1 && b[0] <= 8) b[0] = 0xEE;  // a known code could wait for its body: make it garbage
    garbage.push_back(b);
  }
  for (const auto& g : garbage) {
    int fd = connect_to(server.port());
    send_all(fd, g);
    auto reply = read_until_closed(fd);
    ::close(fd);
    ASSERT_FALSE(reply.empty()) << "no ERROR answer";
    EXPECT_EQ(reply[0], 0xFF);
  }
  EXPECT_EQ(server.rejected(), garbage.size());
  EXPECT_LT(max_rss_kb() - rss0, 64 * 1024) << "the server grew by more than 64 MB";
  EXPECT_EQ(good.get("k"), (std::vector<std::uint8_t>{42}));  // still serving
}

// A fake store answers the client with garbage: a typed StoreProtocolError (or a closed connection),
// within the timeout, never an allocation of the claimed size or an abort.
TEST(Store, ClientGetsTypedErrorsFromAGarbageStore) {
  struct Case {
    const char* name;
    std::vector<std::uint8_t> reply;
    bool protocol;  // StoreProtocolError, else StoreConnectionError (the fake closes)
  };
  auto value_claim = [] {
    auto b = u32le(0xFFFFFFF0u);
    return frame(0x82, static_cast<std::uint32_t>(b.size()), b);
  }();
  std::vector<Case> cases = {
      {"0xff bytes", std::vector<std::uint8_t>(64, 0xFF), true},
      {"GET answer claiming a 4 GiB body", frame(0x82, 0xFFFFFFFFu), true},
      {"GET answer whose value claims 4 GiB", value_claim, true},
      {"answer to another request", frame(0x87, 8, std::vector<std::uint8_t>(8, 0)), true},
      {"unknown answer code", frame(0x13, 0), true},
      {"truncated answer, then close", {0x82, 10, 0}, false},
  };
  for (const auto& c : cases) {
    int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    ASSERT_EQ(::listen(lfd, 1), 0);
    socklen_t len = sizeof sa;
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len);
    std::thread fake([&] {
      int fd = ::accept(lfd, nullptr, nullptr);
      std::uint8_t buf[256];
      (void)::recv(fd, buf, sizeof buf, 0);  // the request
      send_all(fd, c.reply);
      if (!c.protocol) ::shutdown(fd, SHUT_RDWR);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::close(fd);
    });
    long rss0 = max_rss_kb();
    auto t0 = std::chrono::steady_clock::now();
    ts::StoreClient client("127.0.0.1", ntohs(sa.sin_port), 1.0);
    if (c.protocol)
      EXPECT_THROW(client.get("rank_0"), ts::StoreProtocolError) << c.name;
    else
      EXPECT_THROW(client.get("rank_0"), ts::StoreConnectionError) << c.name;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0) << c.name;
    EXPECT_LT(max_rss_kb() - rss0, 64 * 1024) << c.name;
    EXPECT_THROW(client.get("again"), ts::StoreConnectionError) << "the connection is closed after garbage";
    fake.join();
    ::close(lfd);
  }
}

TEST(StoreProtocol, RoundTripAndLimits) {
  ts::Request r{ts::Op::compare_set, {"key"}, {1, 2}, {3}, 0};
  auto bytes = ts::encode_request(r);
  auto f = ts::parse_frame(bytes, false);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->size, bytes.size());
  EXPECT_EQ(ts::decode_request(*f), r);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut)  // every prefix: incomplete, not an error
    EXPECT_FALSE(ts::parse_frame(std::span<const std::uint8_t>(bytes).first(cut), false));
  EXPECT_THROW(ts::encode_request({ts::Op::set, {std::string(ts::kMaxKey + 1, 'k')}, {}, {}, 0}), std::invalid_argument);
  EXPECT_THROW(ts::parse_frame(frame(2, static_cast<std::uint32_t>(ts::kMaxBody + 1)), false), ts::StoreProtocolError);
}

// The seeds of fuzz_store (fuzz/corpus/store) are valid streams: every frame decodes and re-encodes to
// its bytes, so the fuzzer starts from messages the store accepts.
TEST(StoreProtocol, FuzzSeedsAreValidStreams) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TG_STORE_CORPUS)) {
    std::ifstream f(entry.path(), std::ios::binary);
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(bytes.empty()) << entry.path();
    const bool answer = bytes[0] & 1;
    std::span<const std::uint8_t> rest(bytes.data() + 1, bytes.size() - 1);
    int frames = 0;
    while (!rest.empty()) {
      auto fr = ts::parse_frame(rest, answer);
      ASSERT_TRUE(fr) << entry.path() << ": incomplete frame";
      auto again = answer ? ts::encode_answer(ts::decode_answer(*fr)) : ts::encode_request(ts::decode_request(*fr));
      EXPECT_TRUE(std::equal(again.begin(), again.end(), rest.begin(), rest.begin() + fr->size) && again.size() == fr->size)
          << entry.path();
      rest = rest.subspan(fr->size);
      ++frames;
    }
    EXPECT_GT(frames, 0) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 7);
}

// Requests pipelined behind a wait: B waits for k2 with "SET k1" already sent behind it; when C sets k2,
// B's wait ends, its SET runs, and A (waiting for k1) is answered at once, not at some later change.
TEST(Store, PipelinedSetBehindAWaitWakesOthers) {
  ts::StoreServer server("127.0.0.1", 0);
  ts::StoreClient a("127.0.0.1", server.port(), 2.0), c("127.0.0.1", server.port(), 2.0);
  int b = connect_to(server.port());
  auto wait_k2 = ts::encode_request({ts::Op::wait, {"k2"}, {}, {}, 0});
  auto set_k1 = ts::encode_request({ts::Op::set, {"k1"}, {5}, {}, 0});
  std::vector<std::uint8_t> both(wait_k2);
  both.insert(both.end(), set_k1.begin(), set_k1.end());
  send_all(b, both);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // B is waiting, its SET buffered
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    c.set("k2", {1});
  });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(a.get("k1"), (std::vector<std::uint8_t>{5}));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  setter.join();
  ::close(b);
  EXPECT_EQ(server.rejected(), 0u);
}
