// terngrad-bench: libFuzzer target for the rendezvous store's message parser
// (experiments/train/include/tg/train/store_protocol.hpp, header only: no LibTorch, no sockets).
// The first byte picks the side (even: requests as the server reads them, odd: answers as a client
// reads them); the rest is a stream of frames. Properties on every input:
//   - parse_frame/decode_* return or throw StoreProtocolError, nothing else (no length_error, no
//     bad_alloc: the -malloc_limit_mb of scripts/fuzz.sh catches an allocation of a claimed size);
//   - a frame is never reported complete beyond the bytes given, and never larger than the limit;
//   - every decoded message re-encodes to exactly the bytes it was read from (nothing is guessed).
//   bash scripts/fuzz.sh 60 fuzz_store
//   build/fuzz/fuzz/fuzz_store fuzz/corpus/store -max_total_time=60
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <span>

#include "tg/train/store_protocol.hpp"

namespace ts = tg::train::store;

namespace {
[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz_store: property violated: %s\n", what);
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool answer = data[0] & 1;
  std::span<const std::uint8_t> rest(data + 1, size - 1);
  try {
    while (!rest.empty()) {
      auto f = ts::parse_frame(rest, answer);
      if (!f) break;  // incomplete: the reader waits for more bytes
      if (f->size > rest.size() || f->size > ts::kFrameHeader + ts::kMaxBody || f->body.size() + ts::kFrameHeader != f->size)
        violated("frame size past the input or the limit");
      std::span<const std::uint8_t> raw = rest.first(f->size);
      std::vector<std::uint8_t> again;
      if (answer) {
        ts::Answer a = ts::decode_answer(*f);
        again = ts::encode_answer(a);
      } else {
        ts::Request r = ts::decode_request(*f);
        if (r.keys.size() > ts::kMaxKeys || r.value.size() > ts::kMaxValue || r.desired.size() > ts::kMaxValue)
          violated("a decoded field over its limit");
        again = ts::encode_request(r);
      }
      if (again.size() != raw.size() || std::memcmp(again.data(), raw.data(), raw.size()) != 0)
        violated("re-encoding differs from the bytes read");
      rest = rest.subspan(f->size);
    }
  } catch (const ts::StoreProtocolError&) {
    // typed refusal: the reader closes the connection
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_store: untyped exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}
