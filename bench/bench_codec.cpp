// terngrad-bench: codec throughput against memcpy of the same bytes, in the same binary and run.
//   build/default/bench/tg_bench --benchmark_filter='/16777216' --benchmark_min_time=0.5
// Throughput is GB/s of float32 input (encode) or float32 output (decode). scripts/bench-table.py
// turns the JSON output into the table of ratios to memcpy in reports/codec-throughput.md.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <thread>

#include "tg/codec.hpp"

namespace {

std::vector<float> gradient(std::size_t n) {
  std::mt19937_64 rng(n);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& x : g) x = dist(rng);
  return g;
}

// The codecs the benchmark walks: reference, optimized 1 thread, optimized all threads.
std::shared_ptr<const tg::Codec> codec_for(int which) {
  static auto ref = std::shared_ptr<const tg::Codec>(&tg::reference_codec(), [](const tg::Codec*) {});
  static std::shared_ptr<const tg::Codec> one = tg::make_optimized_codec(1);
  static std::shared_ptr<const tg::Codec> all = tg::make_optimized_codec(0);
  return which == 0 ? ref : (which == 1 ? one : all);
}

void BM_Memcpy(benchmark::State& state) {
  std::size_t n = static_cast<std::size_t>(state.range(0));
  auto src = gradient(n);
  std::vector<float> dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), 4 * n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 4 * n);
}

// Full encode: scalar pass (max|g| + finiteness check), ternarize, 2bit pack, header + CRC32C.
void BM_Encode(benchmark::State& state, int which) {
  std::size_t n = static_cast<std::size_t>(state.range(0));
  auto g = gradient(n);
  auto codec = codec_for(which);
  tg::Params p;
  std::uint32_t step = 0;
  for (auto _ : state) {
    auto payload = tg::encode(*codec, g, p, {1, 0, 0, step++});
    benchmark::DoNotOptimize(payload.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 4 * n);
  state.SetLabel(codec->name());
}

// Decode of a 2bit payload into a preallocated float buffer (validation + unpack + scale).
void BM_Decode(benchmark::State& state, int which) {
  std::size_t n = static_cast<std::size_t>(state.range(0));
  auto g = gradient(n);
  auto codec = codec_for(which);
  auto payload = tg::encode(*codec, g, {}, {1, 0, 0, 0});
  std::vector<float> out(n);
  for (auto _ : state) {
    tg::Header h = tg::parse_header(payload);
    codec->decode_body(h.packing, std::span(payload).subspan(tg::kHeaderBytes), h.scalar, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 4 * n);
  state.SetLabel(codec->name());
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int e = 10; e <= 26; e += 2) b->Arg(std::int64_t{1} << e);
  b->Unit(benchmark::kMicrosecond);
}
void sizes_reference(benchmark::internal::Benchmark* b) {  // the reference is slow: stop at 2^24
  for (int e = 10; e <= 24; e += 2) b->Arg(std::int64_t{1} << e);
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Memcpy)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Encode, reference, 0)->Apply(sizes_reference);
BENCHMARK_CAPTURE(BM_Encode, optimized_1thread, 1)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Encode, optimized_allthreads, 2)->Apply(sizes)->UseRealTime();
BENCHMARK_CAPTURE(BM_Decode, reference, 0)->Apply(sizes_reference);
BENCHMARK_CAPTURE(BM_Decode, optimized_1thread, 1)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Decode, optimized_allthreads, 2)->Apply(sizes)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
