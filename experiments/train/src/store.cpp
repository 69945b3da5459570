// terngrad-bench: the rendezvous store (see tg/train/store.hpp): one poll() thread serving every
// connection, and a blocking client whose every read is bounded by poll() and its timeout.
#include "tg/train/store.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

namespace tg::train::store {
namespace {

using Clock = std::chrono::steady_clock;

sockaddr_in ipv4(const std::string& addr, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1)
    throw std::invalid_argument("store address '" + addr + "' is not an IPv4 address");
  return sa;
}

std::string errno_text(int e) { return std::strerror(e); }

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

struct Conn {
  int fd = -1;
  std::vector<std::uint8_t> in, out;
  std::optional<Request> pending;  // a GET or WAIT waiting for its keys
  bool closing = false;            // close once out is sent (after an ERROR answer)
};

class Table {
 public:
  // Answers r, or std::nullopt when it must wait for keys (GET, WAIT).
  std::optional<Answer> apply(const Request& r) {
    Answer a;
    a.op = r.op;
    switch (r.op) {
      case Op::set: put(r.keys[0], r.value); break;
      case Op::get: {
        auto it = map_.find(r.keys[0]);
        if (it == map_.end()) return std::nullopt;
        a.value = it->second;
        break;
      }
      case Op::add: {
        std::int64_t v = 0;
        auto it = map_.find(r.keys[0]);
        if (it != map_.end()) v = parse_number(it->second);
        v = static_cast<std::int64_t>(static_cast<std::uint64_t>(v) + static_cast<std::uint64_t>(r.number));
        std::string text = std::to_string(v);
        put(r.keys[0], std::vector<std::uint8_t>(text.begin(), text.end()));
        a.number = v;
        break;
      }
      case Op::check:
        a.flag = all(r.keys);
        break;
      case Op::wait:
        if (!all(r.keys)) return std::nullopt;
        break;
      case Op::del: {
        auto it = map_.find(r.keys[0]);
        a.flag = it != map_.end();
        if (a.flag) {
          bytes_ -= it->first.size() + it->second.size();
          map_.erase(it);
        }
        break;
      }
      case Op::num_keys: a.number = static_cast<std::int64_t>(map_.size()); break;
      case Op::compare_set: {
        auto it = map_.find(r.keys[0]);
        if (it == map_.end()) {
          if (r.value.empty()) {
            put(r.keys[0], r.desired);
            a.value = r.desired;
          } else {
            a.value = r.value;
          }
        } else if (it->second == r.value) {
          put(r.keys[0], r.desired);
          a.value = r.desired;
        } else {
          a.value = it->second;
        }
        break;
      }
      default: throw StoreProtocolError("not a request");
    }
    return a;
  }

 private:
  bool all(const std::vector<std::string>& keys) const {
    for (const auto& k : keys)
      if (!map_.count(k)) return false;
    return true;
  }
  static std::int64_t parse_number(const std::vector<std::uint8_t>& v) {
    std::string s(v.begin(), v.end());
    if (s.empty() || s.size() > 20) throw StoreProtocolError("ADD on a key whose value is not a number");
    std::size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(s, &used);
    } catch (const std::exception&) {
      throw StoreProtocolError("ADD on a key whose value is not a number");
    }
    if (used != s.size()) throw StoreProtocolError("ADD on a key whose value is not a number");
    return n;
  }
  void put(const std::string& k, const std::vector<std::uint8_t>& v) {
    auto it = map_.find(k);
    std::size_t old = it == map_.end() ? 0 : k.size() + it->second.size();
    if (it == map_.end() && map_.size() >= kMaxStoredKeys)
      throw StoreProtocolError("the store holds " + std::to_string(kMaxStoredKeys) + " keys, its limit");
    if (bytes_ - old + k.size() + v.size() > kMaxStoredBytes)
      throw StoreProtocolError("the store would hold more than " + std::to_string(kMaxStoredBytes) + " bytes, its limit");
    bytes_ = bytes_ - old + k.size() + v.size();
    map_[k] = v;
  }
  std::map<std::string, std::vector<std::uint8_t>> map_;
  std::size_t bytes_ = 0;
};

void queue(Conn& c, const Answer& a) {
  auto b = encode_answer(a);
  c.out.insert(c.out.end(), b.begin(), b.end());
}

}  // namespace

StoreServer::StoreServer(const std::string& addr, int port) {
  if (port < 0 || port > 65535) throw std::invalid_argument("store port " + std::to_string(port) + " is not in [0, 65535]");
  sockaddr_in sa = ipv4(addr, port);
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) throw StoreConnectionError("cannot open a socket: " + errno_text(errno));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(listen_fd_, 128) != 0) {
    int e = errno;
    ::close(listen_fd_);
    throw StoreConnectionError("cannot serve the store on " + addr + ":" + std::to_string(port) + ": " + errno_text(e));
  }
  socklen_t len = sizeof sa;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  port_ = ntohs(sa.sin_port);
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    int e = errno;
    ::close(listen_fd_);
    throw StoreConnectionError("cannot make a pipe: " + errno_text(e));
  }
  thread_ = std::thread([this] { serve(); });
}

StoreServer::~StoreServer() {
  char x = 1;
  (void)!::write(wake_[1], &x, 1);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void StoreServer::serve() {
  Table table;
  std::vector<Conn> conns;
  auto reject = [&](Conn& c, const std::string& why) {
    rejected_.fetch_add(1);
    Answer a;
    a.op = Op::error;
    a.message = why;
    c.out.clear();
    queue(c, a);
    c.closing = true;
    c.in.clear();
    c.in.shrink_to_fit();
    c.pending.reset();
  };
  auto serve_pending = [&] {
    for (auto& c : conns) {
      if (!c.pending || c.closing) continue;
      try {
        if (auto a = table.apply(*c.pending)) {
          queue(c, *a);
          c.pending.reset();
        }
      } catch (const std::exception& e) {
        reject(c, e.what());
      }
    }
  };
  // Every complete request buffered on c, until one must wait (GET, WAIT); true when the table changed.
  auto drain = [&](Conn& c) {
    bool changed = false;
    try {
      std::size_t used = 0;
      while (!c.pending) {
        auto f = parse_frame(std::span<const std::uint8_t>(c.in).subspan(used), false);
        if (!f) break;
        Request req = decode_request(*f);
        used += f->size;
        if (auto a = table.apply(req)) {
          queue(c, *a);
          changed = changed || req.op == Op::set || req.op == Op::add || req.op == Op::compare_set;
        } else {
          c.pending = std::move(req);
        }
      }
      c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(used));
    } catch (const std::exception& e) {  // StoreProtocolError, a store limit, bad_alloc
      reject(c, e.what());
    }
    return changed;
  };
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& c : conns)
      fds.push_back({c.fd, static_cast<short>((c.closing || c.pending ? 0 : POLLIN) | (c.out.empty() ? 0 : POLLOUT)), 0});
    int r = ::poll(fds.data(), fds.size(), -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents) return;
    const std::size_t polled = conns.size();  // fds[2 + i] belongs to conns[i] for i < polled
    if (fds[1].revents & POLLIN) {
      for (;;) {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        if (conns.size() >= kMaxConnections) {
          ::close(fd);
          rejected_.fetch_add(1);
          continue;
        }
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        Conn c;
        c.fd = fd;
        conns.push_back(std::move(c));
      }
    }
    bool changed = false;
    for (std::size_t i = 0; i < polled; ++i) {
      Conn& c = conns[i];
      short ev = fds[2 + i].revents;
      if (ev & (POLLERR | POLLNVAL)) {
        c.fd = -c.fd - 1;  // mark dead
        continue;
      }
      if ((ev & POLLIN) && !c.closing) {
        std::uint8_t buf[65536];
        ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          c.fd = -c.fd - 1;
          continue;
        }
        if (n > 0) c.in.insert(c.in.end(), buf, buf + n);
        changed = drain(c) || changed;
      } else if (ev & POLLHUP && c.out.empty()) {
        c.fd = -c.fd - 1;
        continue;
      }
      if (!c.out.empty() && c.fd >= 0) {
        ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) c.out.erase(c.out.begin(), c.out.begin() + n);
        else if (n < 0 && errno != EAGAIN && errno != EINTR) c.fd = -c.fd - 1;
      }
      if (c.fd >= 0 && c.closing && c.out.empty()) c.fd = -c.fd - 1;
    }
    // a change may end waits; a connection whose wait ended may have more requests buffered
    while (changed) {
      serve_pending();
      changed = false;
      for (auto& c : conns)
        if (c.fd >= 0 && !c.pending && !c.closing && !c.in.empty()) changed = drain(c) || changed;
    }
    std::vector<Conn> alive;
    for (auto& c : conns) {
      if (c.fd < 0) ::close(-c.fd - 1);
      else alive.push_back(std::move(c));
    }
    conns.swap(alive);
  }
}

StoreClient::StoreClient(const std::string& addr, int port, double timeout_s)
    : where_(addr + ":" + std::to_string(port)), timeout_s_(timeout_s) {
  if (port < 1 || port > 65535) throw std::invalid_argument("store port " + std::to_string(port) + " is not in [1, 65535]");
  if (!(timeout_s > 0)) throw std::invalid_argument("store timeout must be positive");
  sockaddr_in sa = ipv4(addr, port);
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int last = 0;
  for (;;) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw StoreConnectionError("cannot open a socket: " + errno_text(errno));
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) break;
    last = errno;
    ::close(fd_);
    fd_ = -1;
    if (Clock::now() > deadline)
      throw StoreTimeout("cannot reach the store at " + where_ + " within " + seconds(timeout_s) + ": " +
                         errno_text(last));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

StoreClient::~StoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

Answer StoreClient::call(const Request& r, double timeout_s) {
  if (fd_ < 0) throw StoreConnectionError("the connection to the store at " + where_ + " was closed after an error");
  auto fail = [&](auto error) {
    ::close(fd_);
    fd_ = -1;
    throw error;
  };
  auto msg = encode_request(r);
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  auto ms_left = [&] {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return ms < 0 ? 0 : static_cast<int>(std::min<long long>(ms, 1 << 30));
  };
  const std::string what = "store " + op_text(static_cast<std::uint8_t>(r.op)) + (r.keys.empty() ? "" : " '" + r.keys[0] + "'");
  std::size_t sent = 0;
  while (sent < msg.size()) {
    pollfd p{fd_, POLLOUT, 0};
    int pr = ::poll(&p, 1, ms_left());
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) fail(StoreTimeout(what + " at " + where_ + " not sent within " + seconds(timeout_s)));
    ssize_t n = ::send(fd_, msg.data() + sent, msg.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(StoreConnectionError(what + ": lost the store at " + where_ + ": " + errno_text(errno)));
    sent += static_cast<std::size_t>(n);
  }
  for (;;) {
    try {
      if (auto f = parse_frame(in_, true)) {
        Answer a = decode_answer(*f);
        in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(f->size));
        if (a.op == Op::error) fail(StoreProtocolError(what + ": the store at " + where_ + " refused it: " + a.message));
        if (a.op != r.op)
          fail(StoreProtocolError(what + ": the store at " + where_ + " answered a " +
                                  op_text(static_cast<std::uint8_t>(a.op)) + " instead"));
        return a;
      }
    } catch (const StoreProtocolError& e) {
      if (fd_ >= 0) fail(StoreProtocolError(what + ": " + e.what() + " (from " + where_ + ")"));
      throw;
    }
    pollfd p{fd_, POLLIN, 0};
    int pr = ::poll(&p, 1, ms_left());
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) fail(StoreTimeout(what + ": no answer from the store at " + where_ + " within " + seconds(timeout_s)));
    std::uint8_t buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) fail(StoreConnectionError(what + ": the store at " + where_ + " closed the connection"));
    if (n < 0) fail(StoreConnectionError(what + ": lost the store at " + where_ + ": " + errno_text(errno)));
    in_.insert(in_.end(), buf, buf + n);
  }
}

void StoreClient::set(const std::string& key, const std::vector<std::uint8_t>& value) {
  call(Request{Op::set, {key}, value, {}, 0}, timeout_s_);
}
std::vector<std::uint8_t> StoreClient::get(const std::string& key) {
  return call(Request{Op::get, {key}, {}, {}, 0}, timeout_s_).value;
}
std::int64_t StoreClient::add(const std::string& key, std::int64_t amount) {
  return call(Request{Op::add, {key}, {}, {}, amount}, timeout_s_).number;
}
bool StoreClient::check(const std::vector<std::string>& keys) {
  return call(Request{Op::check, keys, {}, {}, 0}, timeout_s_).flag;
}
void StoreClient::wait(const std::vector<std::string>& keys, double timeout_s) {
  call(Request{Op::wait, keys, {}, {}, 0}, timeout_s);
}
bool StoreClient::del(const std::string& key) { return call(Request{Op::del, {key}, {}, {}, 0}, timeout_s_).flag; }
std::int64_t StoreClient::num_keys() { return call(Request{Op::num_keys, {}, {}, {}, 0}, timeout_s_).number; }
std::vector<std::uint8_t> StoreClient::compare_set(const std::string& key, const std::vector<std::uint8_t>& expected,
                                                   const std::vector<std::uint8_t>& desired) {
  return call(Request{Op::compare_set, {key}, expected, desired, 0}, timeout_s_).value;
}

}  // namespace tg::train::store
