// terngrad-bench: the wire format of the rendezvous store (tg/train/store.hpp), header only so that
// the fuzz target (fuzz/fuzz_store.cpp) parses exactly what the store parses, without LibTorch.
//
// Every message, request or answer, is one frame:  [u8 op][u32 LE body length][body]
// A body is a sequence of fields: a string is [u32 LE length][bytes], a number [i64 LE], a flag [u8 0/1].
//   request  SET key value | GET key | ADD key i64 | CHECK n key*n | WAIT n key*n | DELETE key
//            | NUM_KEYS | COMPARE_SET key expected desired
//   answer   op | 0x80 with: SET -, GET value, ADD i64, CHECK flag, WAIT -, DELETE flag, NUM_KEYS i64,
//            COMPARE_SET value; or ERROR (0xFF) message.
// Limits, checked before anything is allocated: a body <= kMaxBody, a key <= kMaxKey bytes, a value
// <= kMaxValue bytes, at most kMaxKeys keys per CHECK/WAIT. Anything else (unknown op, a length past the
// body or the limits, trailing bytes, a flag other than 0/1) is a StoreProtocolError naming it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace tg::train::store {

inline constexpr std::size_t kMaxKey = 1024;
inline constexpr std::size_t kMaxValue = std::size_t{1} << 20;  // 1 MiB (Gloo's addresses are ~100 bytes)
inline constexpr std::size_t kMaxKeys = 1024;
inline constexpr std::size_t kMaxBody = 3 * (kMaxValue + 4) + kMaxKey + 64;  // COMPARE_SET is the largest
inline constexpr std::size_t kFrameHeader = 5;

enum class Op : std::uint8_t {
  set = 1, get = 2, add = 3, check = 4, wait = 5, del = 6, num_keys = 7, compare_set = 8,
  error = 0xFF,
};
inline constexpr std::uint8_t kAnswer = 0x80;

/// A store message that breaks the format or its limits (typed, so a caller can tell it from a timeout
/// or a closed connection).
class StoreProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Request {
  Op op = Op::num_keys;
  std::vector<std::string> keys;  // one key, or CHECK/WAIT's list
  std::vector<std::uint8_t> value, desired;  // SET value / COMPARE_SET expected, desired
  std::int64_t number = 0;                   // ADD
  bool operator==(const Request&) const = default;
};

struct Answer {
  Op op = Op::num_keys;  // the request's op (answers carry op | kAnswer on the wire), or Op::error
  std::vector<std::uint8_t> value;  // GET, COMPARE_SET
  std::int64_t number = 0;          // ADD, NUM_KEYS
  bool flag = false;                // CHECK, DELETE
  std::string message;              // ERROR
  bool operator==(const Answer&) const = default;
};

struct Frame {
  std::uint8_t op = 0;
  std::span<const std::uint8_t> body;
  std::size_t size = 0;  // header + body bytes
};

inline bool known_op(std::uint8_t op) { return op >= 1 && op <= 8; }

inline std::string op_text(std::uint8_t op) {
  static const char* names[] = {"?", "SET", "GET", "ADD", "CHECK", "WAIT", "DELETE", "NUM_KEYS", "COMPARE_SET"};
  if (op == 0xFF) return "ERROR answer";
  std::uint8_t base = static_cast<std::uint8_t>(op & 0x7F);
  if (base < 1 || base > 8) return "op " + std::to_string(op);
  return std::string(names[base]) + ((op & kAnswer) ? " answer" : "");
}

/// The first frame of buf: std::nullopt while incomplete (more bytes needed); StoreProtocolError when
/// the header already breaks the format (so a peer cannot make the reader wait for, or buffer, more
/// than kFrameHeader + kMaxBody bytes).
inline std::optional<Frame> parse_frame(std::span<const std::uint8_t> buf, bool answer) {
  if (buf.empty()) return std::nullopt;
  std::uint8_t op = buf[0];
  bool ok = answer ? (op == 0xFF || ((op & kAnswer) && known_op(op & 0x7F))) : known_op(op);
  if (!ok) throw StoreProtocolError("store message with unknown " + std::string(answer ? "answer" : "request") +
                                    " code " + std::to_string(op));
  if (buf.size() < kFrameHeader) return std::nullopt;
  std::uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= static_cast<std::uint32_t>(buf[1 + i]) << (8 * i);
  if (len > kMaxBody)
    throw StoreProtocolError("store " + op_text(op) + " message of " + std::to_string(len) +
                             " bytes, over the limit of " + std::to_string(kMaxBody));
  if (buf.size() - kFrameHeader < len) return std::nullopt;
  return Frame{op, buf.subspan(kFrameHeader, len), kFrameHeader + len};
}

namespace detail {

class Reader {
 public:
  Reader(std::span<const std::uint8_t> b, std::uint8_t op) : b_(b), op_(op) {}
  std::uint32_t u32(const char* what) {
    need(4, what);
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(b_[at_ + i]) << (8 * i);
    at_ += 4;
    return v;
  }
  std::int64_t i64(const char* what) {
    need(8, what);
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(b_[at_ + i]) << (8 * i);
    at_ += 8;
    return static_cast<std::int64_t>(v);
  }
  bool flag(const char* what) {
    need(1, what);
    std::uint8_t v = b_[at_++];
    if (v > 1) fail(std::string(what) + " flag is " + std::to_string(v) + ", not 0 or 1");
    return v == 1;
  }
  std::span<const std::uint8_t> bytes(const char* what, std::size_t limit) {
    std::uint32_t n = u32(what);
    if (n > limit)
      fail(std::string(what) + " of " + std::to_string(n) + " bytes, over the limit of " + std::to_string(limit));
    need(n, what);
    auto s = b_.subspan(at_, n);
    at_ += n;
    return s;
  }
  std::string key() {
    auto s = bytes("key", kMaxKey);
    return std::string(s.begin(), s.end());
  }
  std::vector<std::uint8_t> value(const char* what = "value") {
    auto s = bytes(what, kMaxValue);
    return std::vector<std::uint8_t>(s.begin(), s.end());
  }
  void end() {
    if (at_ != b_.size()) fail(std::to_string(b_.size() - at_) + " bytes after the last field");
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw StoreProtocolError("malformed store " + op_text(op_) + " message: " + why);
  }

 private:
  void need(std::size_t n, const char* what) const {
    if (b_.size() - at_ < n)
      fail(std::string(what) + " needs " + std::to_string(n) + " bytes, " + std::to_string(b_.size() - at_) + " left");
  }
  std::span<const std::uint8_t> b_;
  std::size_t at_ = 0;
  std::uint8_t op_;
};

class Writer {
 public:
  explicit Writer(std::uint8_t op) { out_ = {op, 0, 0, 0, 0}; }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void i64(std::int64_t v) {
    auto u = static_cast<std::uint64_t>(v);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<std::uint8_t>(u >> (8 * i)));
  }
  void flag(bool v) { out_.push_back(v ? 1 : 0); }
  void bytes(const void* p, std::size_t n, std::size_t limit, const char* what) {
    if (n > limit)
      throw std::invalid_argument(std::string("store ") + what + " of " + std::to_string(n) +
                                  " bytes is over the limit of " + std::to_string(limit));
    u32(static_cast<std::uint32_t>(n));
    const auto* b = static_cast<const std::uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void key(const std::string& k) { bytes(k.data(), k.size(), kMaxKey, "key"); }
  void value(const std::vector<std::uint8_t>& v) { bytes(v.data(), v.size(), kMaxValue, "value"); }
  std::vector<std::uint8_t> finish() {
    std::size_t len = out_.size() - kFrameHeader;
    for (int i = 0; i < 4; ++i) out_[1 + i] = static_cast<std::uint8_t>(len >> (8 * i));
    return std::move(out_);
  }

 private:
  std::vector<std::uint8_t> out_;
};

}  // namespace detail

inline std::vector<std::uint8_t> encode_request(const Request& r) {
  detail::Writer w(static_cast<std::uint8_t>(r.op));
  auto one_key = [&] {
    if (r.keys.size() != 1) throw std::invalid_argument("store " + op_text(static_cast<std::uint8_t>(r.op)) + " takes one key");
    w.key(r.keys[0]);
  };
  switch (r.op) {
    case Op::set: one_key(); w.value(r.value); break;
    case Op::get: case Op::del: one_key(); break;
    case Op::add: one_key(); w.i64(r.number); break;
    case Op::check: case Op::wait:
      if (r.keys.size() > kMaxKeys)
        throw std::invalid_argument("store " + op_text(static_cast<std::uint8_t>(r.op)) + " of " +
                                    std::to_string(r.keys.size()) + " keys is over the limit of " + std::to_string(kMaxKeys));
      w.u32(static_cast<std::uint32_t>(r.keys.size()));
      for (const auto& k : r.keys) w.key(k);
      break;
    case Op::num_keys: break;
    case Op::compare_set: one_key(); w.value(r.value); w.value(r.desired); break;
    default: throw std::invalid_argument("not a store request");
  }
  return w.finish();
}

inline Request decode_request(const Frame& f) {
  detail::Reader in(f.body, f.op);
  Request r;
  r.op = static_cast<Op>(f.op);
  switch (r.op) {
    case Op::set: r.keys = {in.key()}; r.value = in.value(); break;
    case Op::get: case Op::del: r.keys = {in.key()}; break;
    case Op::add: r.keys = {in.key()}; r.number = in.i64("amount"); break;
    case Op::check: case Op::wait: {
      std::uint32_t n = in.u32("key count");
      if (n > kMaxKeys) in.fail("key count " + std::to_string(n) + " over the limit of " + std::to_string(kMaxKeys));
      if (n > f.body.size() / 4) in.fail("key count " + std::to_string(n) + " does not fit in the message");
      r.keys.reserve(n);
      for (std::uint32_t i = 0; i < n; ++i) r.keys.push_back(in.key());
      break;
    }
    case Op::num_keys: break;
    case Op::compare_set: r.keys = {in.key()}; r.value = in.value("expected value"); r.desired = in.value("new value"); break;
    default: in.fail("unknown request");
  }
  in.end();
  return r;
}

inline std::vector<std::uint8_t> encode_answer(const Answer& a) {
  if (a.op == Op::error) {
    detail::Writer w(0xFF);
    std::string m = a.message.substr(0, kMaxKey);
    w.bytes(m.data(), m.size(), kMaxKey, "message");
    return w.finish();
  }
  detail::Writer w(static_cast<std::uint8_t>(static_cast<std::uint8_t>(a.op) | kAnswer));
  switch (a.op) {
    case Op::set: case Op::wait: break;
    case Op::get: case Op::compare_set: w.value(a.value); break;
    case Op::add: case Op::num_keys: w.i64(a.number); break;
    case Op::check: case Op::del: w.flag(a.flag); break;
    default: throw std::invalid_argument("not a store answer");
  }
  return w.finish();
}

inline Answer decode_answer(const Frame& f) {
  detail::Reader in(f.body, f.op);
  Answer a;
  if (f.op == 0xFF) {
    a.op = Op::error;
    auto m = in.bytes("message", kMaxKey);
    a.message.assign(m.begin(), m.end());
  } else {
    a.op = static_cast<Op>(f.op & 0x7F);
    switch (a.op) {
      case Op::set: case Op::wait: break;
      case Op::get: case Op::compare_set: a.value = in.value(); break;
      case Op::add: case Op::num_keys: a.number = in.i64("number"); break;
      case Op::check: case Op::del: a.flag = in.flag("answer"); break;
      default: in.fail("unknown answer");
    }
  }
  in.end();
  return a;
}

}  // namespace tg::train::store
