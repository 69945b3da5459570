// terngrad-bench: the rendezvous store of multi-process runs (no LibTorch): a key-value server on TCP
// and its client, speaking the format of tg/train/store_protocol.hpp. It replaces c10d::TCPStore,
// whose reader took lengths from the network as allocation sizes; here every length is checked
// against a limit before anything is allocated, every wait is bounded, and a peer that sends garbage
// gets its connection closed (server) or a typed error (client), never an abort.
//   StoreServer server("127.0.0.1", 29500);          // serves on its own thread until destroyed
//   StoreClient client("127.0.0.1", 29500, 60.0);    // connects within 60 s; every call bounded by 60 s
//   client.set("k", {1, 2}); client.get("k");
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tg/train/store_protocol.hpp"

namespace tg::train::store {

/// The peer went away or cannot be reached.
class StoreConnectionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// A call did not complete within the client's timeout.
class StoreTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Server limits beyond the message format: total keys and bytes held, connections at once.
inline constexpr std::size_t kMaxStoredKeys = 65536;
inline constexpr std::size_t kMaxStoredBytes = std::size_t{64} << 20;
inline constexpr std::size_t kMaxConnections = 4096;

class StoreServer {
 public:
  /// Listens on addr:port (IPv4; port 0 picks a free one, see port()). Throws StoreConnectionError
  /// when it cannot bind.
  StoreServer(const std::string& addr, int port);
  ~StoreServer();  // stops the thread, closes every connection
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  int port() const { return port_; }
  /// Connections closed because their peer broke the protocol or a limit (each also answered with ERROR).
  std::uint64_t rejected() const { return rejected_.load(); }

 private:
  void serve();
  int listen_fd_ = -1, wake_[2] = {-1, -1}, port_ = 0;
  std::atomic<std::uint64_t> rejected_{0};
  std::thread thread_;
};

class StoreClient {
 public:
  /// Connects to addr:port, retrying until timeout_s (the server may start later).
  StoreClient(const std::string& addr, int port, double timeout_s);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  void set(const std::string& key, const std::vector<std::uint8_t>& value);
  std::vector<std::uint8_t> get(const std::string& key);  // waits for the key (bounded by the timeout)
  std::int64_t add(const std::string& key, std::int64_t amount);
  bool check(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, double timeout_s);
  bool del(const std::string& key);
  std::int64_t num_keys();
  std::vector<std::uint8_t> compare_set(const std::string& key, const std::vector<std::uint8_t>& expected,
                                        const std::vector<std::uint8_t>& desired);
  double timeout_s() const { return timeout_s_; }
  void set_timeout(double timeout_s) { timeout_s_ = timeout_s; }

 private:
  Answer call(const Request& r, double timeout_s);
  std::string where_;
  int fd_ = -1;
  double timeout_s_;
  std::vector<std::uint8_t> in_;
};

}  // namespace tg::train::store
