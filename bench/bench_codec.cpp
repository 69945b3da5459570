// terngrad-bench: codec throughput against memcpy of the same bytes, in the same binary and run, with
// the roofline of docs/performance.md printed beside every encode row.
//   build/cpu/bench/tg_bench --benchmark_filter='/16777216' --benchmark_repetitions=5
// Throughput is GB/s of float32 input (encode) or float32 output (decode). Counters:
//   x_memcpy  memcpy's time for the same n / this row's time (1 = memcpy's rate). 1-thread rows
//             compare process CPU time (robust on a shared machine), multi-thread rows wall time;
//   of_bound  the roofline's best time for a plain encode of n elements at this row's thread count
//             / this row's time (1 = at the bound; clipping rows are compared with the plain bound);
//   ns_per_el the per-element cost (roofline rows).
// BM_EncodeVsMemcpy times the 1-thread encode and memcpy in pairs, iteration by iteration; its x_memcpy is
// the median of the pairs' ratios (encode_ms and memcpy_ms the medians of each).
// The roofline rows (BM_Roofline_*) run first, memcpy second: every later row uses the medians of
// what they measured earlier in the same run. The roofline rows call the library's internal kernels
// (codec/src/cpu/kernels.hpp), as codec/tests/test_kernels.cpp does.
#include <benchmark/benchmark.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels.hpp"
#include "tg/codec.hpp"

namespace {

std::vector<float> gradient(std::size_t n) {
  std::mt19937_64 rng(n);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& x : g) x = dist(rng);
  return g;
}

// ---- per-run measurements shared between rows ------------------------------------------------------
// Google Benchmark calls a row's function more than once per repetition: first with a few iterations to
// size the run, then with enough to fill --benchmark_min_time, and reports only the last call. Every call
// records here, so each value carries the time its loop ran as a weight, and median_of is the weighted
// median: the short sizing calls (one iteration of an 8 us loop, timed by a process clock whose own cost
// is ~1 us) weigh next to nothing, and the value is that of the reported calls.
std::map<std::string, std::vector<std::pair<double, double>>>& records() {
  static std::map<std::string, std::vector<std::pair<double, double>>> r;
  return r;
}
void record(const std::string& key, double v, double weight) { records()[key].emplace_back(v, weight); }
double median_of(const std::string& key) {
  auto it = records().find(key);
  if (it == records().end() || it->second.empty()) return 0.0;
  std::vector<std::pair<double, double>> v = it->second;
  std::sort(v.begin(), v.end());
  double total = 0.0;
  for (const auto& [value, w] : v) total += w;
  double below = 0.0;
  for (const auto& [value, w] : v) {
    below += w;
    if (below >= total / 2) return value;
  }
  return v.back().first;
}
double loop_s(const benchmark::State& state, double per_iteration) {
  return per_iteration * static_cast<double>(state.iterations());
}

double process_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
double wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Times the benchmark loop itself: seconds per iteration, CPU (process) and wall.
struct LoopTimer {
  double c0 = process_cpu_s(), w0 = wall_s();
  void finish(const benchmark::State& state, double* cpu, double* wall) const {
    double it = static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
    *cpu = (process_cpu_s() - c0) / it;
    *wall = (wall_s() - w0) / it;
  }
};

const tg::cpu::KernelSet* best_set() {
  const tg::cpu::KernelSet* best = nullptr;
  for (const auto& s : tg::cpu::compiled_kernel_sets())
    if (s.cpu_runs()) best = &s;
  return best;
}

// ---- roofline ------------------------------------------------------------------------------------

// Philox4x32-10 alone, per ISA: blocks generated in registers and XORed together (no loads, no
// stores); ns per element = ns per block / 4.
void BM_Roofline_Philox(benchmark::State& state, std::size_t set_index) {
  const auto& set = tg::cpu::compiled_kernel_sets()[set_index];
  if (!set.cpu_runs()) return state.SkipWithError("CPU lacks this ISA");
  const std::size_t blocks = 1 << 16;
  std::uint32_t step = 0, sink = 0;
  LoopTimer t;
  for (auto _ : state) sink ^= set.kernels()->philox_fold({1, 0, 0, step++}, 0, blocks);
  benchmark::DoNotOptimize(sink);
  double cpu, wall;
  t.finish(state, &cpu, &wall);
  double ns = 1e9 * cpu / (4.0 * blocks);
  record(std::string("philox/") + set.name, ns, loop_s(state, cpu));
  state.counters["ns_per_el"] = ns;
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 4 * blocks));
}

// Ternarize + 2bit pack of a tensor that stays in L1/L2 (2^14 elements, 64 KiB), per ISA: the
// encode's compute floor (Philox + decision + pack, no memory traffic).
void BM_Roofline_EncodeInCache(benchmark::State& state, std::size_t set_index) {
  const auto& set = tg::cpu::compiled_kernel_sets()[set_index];
  if (!set.cpu_runs()) return state.SkipWithError("CPU lacks this ISA");
  const std::size_t n = 1 << 14;
  auto g = gradient(n);
  float m = 0.0f;
  for (float x : g) m = std::max(m, std::fabs(x));
  tg::ScalarRule rule = tg::make_rule(m, m);
  std::vector<std::uint8_t> body(n / 4);
  std::uint32_t step = 0;
  LoopTimer t;
  for (auto _ : state) {
    set.kernels()->encode_2bit(g.data(), 0, n, rule, {1, 0, 0, step++}, body.data());
    benchmark::DoNotOptimize(body.data());
  }
  double cpu, wall;
  t.finish(state, &cpu, &wall);
  double ns = 1e9 * cpu / static_cast<double>(n);
  record(std::string("incache/") + set.name, ns, loop_s(state, cpu));
  state.counters["ns_per_el"] = ns;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 4 * n);
}

// The single-pass kernel (decisions with the running maximum, candidates stored) in cache, per ISA
// that has one: its compute cost against the plain ternarize + pack above.
void BM_Roofline_RunningInCache(benchmark::State& state, std::size_t set_index) {
  const auto& set = tg::cpu::compiled_kernel_sets()[set_index];
  if (!set.cpu_runs()) return state.SkipWithError("CPU lacks this ISA");
  const std::size_t n = 1 << 14;
  auto g = gradient(n);
  std::vector<std::uint8_t> body(n / 4);
  std::vector<std::uint32_t> cp(n + tg::cpu::kCandidateSlack), cu(n + tg::cpu::kCandidateSlack);
  std::vector<float> ca(n + tg::cpu::kCandidateSlack);
  // As the codec runs a piece in the middle of a large tensor: the running maximum already near the final
  // scalar (here the maximum of the first half, as it stands halfway through) and the guard R twice it,
  // above max|g|, so that the candidates the guard leaves open are stored (0.076 per element in the codec
  // at 2^24; the row's stored_per_el says how many here).
  // Seeded with g[0] alone, the guard would lie below max|g| and prove every keep: nothing would be stored
  // (docs/performance.md, "Thirteenth round").
  float seed = 0.0f, top = 0.0f;
  for (std::size_t k = 0; k < n; ++k) {
    top = std::max(top, std::fabs(g[k]));
    if (k < n / 2) seed = top;
  }
  if (!(2.0f * seed >= top)) return state.SkipWithError("the guard lies below max|g|: pick another gradient");
  std::uint32_t step = 0;
  std::size_t stored = 0;
  LoopTimer t;
  for (auto _ : state) {
    tg::cpu::RunningPass st;
    st.m = seed;
    set.kernels()->encode_2bit_running(g.data(), 0, n, 2.0f * seed, {1, 0, 0, step++}, body.data(), cp.data(),
                                       cu.data(), ca.data(), &st);
    stored = st.count;
    benchmark::DoNotOptimize(body.data());
  }
  double cpu, wall;
  t.finish(state, &cpu, &wall);
  state.counters["ns_per_el"] = 1e9 * cpu / static_cast<double>(n);
  state.counters["stored_per_el"] = static_cast<double>(stored) / static_cast<double>(n);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 4 * n);
}

// Read bandwidth at size n and `threads` threads: the codec's max|g| pass (reads 4 bytes/element,
// writes nothing). Its time is the memory side of the roofline.
void BM_Roofline_Read(benchmark::State& state, unsigned threads) {
  std::size_t n = static_cast<std::size_t>(state.range(0));
  auto g = gradient(n);
  auto codec = tg::make_optimized_codec(threads);
  LoopTimer t;
  for (auto _ : state) benchmark::DoNotOptimize(codec->max_abs(g, 0));
  double cpu, wall;
  t.finish(state, &cpu, &wall);
  record("read/t" + std::to_string(threads) + "/" + std::to_string(n), threads == 1 ? cpu : wall, loop_s(state, wall));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 4 * n);
}

// The best time for a plain encode of n elements with `threads` threads: one read of g (4 bytes) and
// one write of the body (1/4 byte) per element at the read rate measured at this size, or the
// in-cache compute rate of the best ISA divided over the threads, whichever is slower.
double bound_s(std::size_t n, unsigned threads) {
  double read = median_of("read/t" + std::to_string(threads) + "/" + std::to_string(n));
  double compute_ns = median_of(std::string("incache/") + best_set()->name);
  if (read <= 0.0 || compute_ns <= 0.0) return 0.0;
  double memory = read * (4.25 / 4.0);
  double compute = 1e-9 * compute_ns * static_cast<double>(n) / threads;
  return std::max(memory, compute);
}

// ---- memcpy and the codec ------------------------------------------------------------------------

void BM_Memcpy(benchmark::State& state) {
  std::size_t n = static_cast<std::size_t>(state.range(0));
  auto src = gradient(n);
  std::vector<float> dst(n);
  LoopTimer t;
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), 4 * n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  double cpu, wall;
  t.finish(state, &cpu, &wall);
  record("memcpy/cpu/" + std::to_string(n), cpu, loop_s(state, wall));
  record("memcpy/wall/" + std::to_string(n), wall, loop_s(state, wall));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 4 * n);
}

enum class Variant { reference, opt1, opt2, twopass1, single1, twopass2, single2 };

// The codecs the benchmark walks. twopass1: the best ISA's kernels without the single-pass and
// fused-statistics kernels (the previous max_abs + moments + encode_body path), one thread;
// single1: the single pass at every size; twopass2 / single2: the best ISA's kernels (fused clipping
// statistics included) with the single pass never / always, two threads.
std::shared_ptr<const tg::Codec> codec_for(Variant v) {
  static auto ref = std::shared_ptr<const tg::Codec>(&tg::reference_codec(), [](const tg::Codec*) {});
  static std::shared_ptr<const tg::Codec> one = tg::make_optimized_codec(1);
  static std::shared_ptr<const tg::Codec> two = tg::make_optimized_codec(2);
  static tg::cpu::Kernels plain = [] {
    tg::cpu::Kernels k = *best_set()->kernels();
    k.encode_2bit_running = nullptr;
    k.chunk_stats = nullptr;
    return k;
  }();
  static std::shared_ptr<const tg::Codec> twopass =
      tg::cpu::make_optimized_codec_with(1, &plain, tg::cpu::default_min_per_thread(), 0);
  static std::shared_ptr<const tg::Codec> single =
      tg::cpu::make_optimized_codec_with(1, best_set()->kernels(), tg::cpu::default_min_per_thread(), 0);
  static std::shared_ptr<const tg::Codec> twopass_2 = tg::cpu::make_optimized_codec_with(
      2, best_set()->kernels(), tg::cpu::default_min_per_thread(), std::numeric_limits<std::size_t>::max());
  static std::shared_ptr<const tg::Codec> single_2 =
      tg::cpu::make_optimized_codec_with(2, best_set()->kernels(), tg::cpu::default_min_per_thread(), 0);
  switch (v) {
    case Variant::reference: return ref;
    case Variant::twopass2: return twopass_2;
    case Variant::single2: return single_2;
    case Variant::opt1: return one;
    case Variant::opt2: return two;
    case Variant::single1: return single;
    default: return twopass;
  }
}
unsigned threads_of(Variant v) {
  return v == Variant::opt2 || v == Variant::twopass2 || v == Variant::single2 ? 2 : 1;
}

void set_ratios(benchmark::State& state, std::size_t n, unsigned threads, double cpu, double wall) {
  double t = threads == 1 ? cpu : wall;
  double mc = median_of(std::string("memcpy/") + (threads == 1 ? "cpu/" : "wall/") + std::to_string(n));
  if (mc > 0.0 && t > 0.0) state.counters["x_memcpy"] = mc / t;
  double b = bound_s(n, threads);
  if (b > 0.0 && t > 0.0) state.counters["of_bound"] = b / t;
}

// Full encode: scalar pass(es), ternarize, 2bit pack, header + CRC32C; clip: ClipMode::clip at c = 2.5.
// reuse: tg::encode_into one buffer kept across iterations (a training loop's buffer per tensor; memcpy's
// destination is kept too) instead of tg::encode's new, zero-filled payload per call.
void BM_Encode(benchmark::State& state, Variant v, bool clip, bool reuse) {
  std::size_t n = static_cast<std::size_t>(state.range(0));
  auto g = gradient(n);
  auto codec = codec_for(v);
  tg::Params p;
  if (clip) p.clip = tg::ClipMode::clip;
  std::uint32_t step = 0;
  std::vector<std::uint8_t> kept;
  LoopTimer t;
  for (auto _ : state) {
    if (reuse) {
      tg::encode_into(*codec, g, p, {1, 0, 0, step++}, kept);
      benchmark::DoNotOptimize(kept.data());
    } else {
      auto payload = tg::encode(*codec, g, p, {1, 0, 0, step++});
      benchmark::DoNotOptimize(payload.data());
    }
  }
  double cpu, wall;
  t.finish(state, &cpu, &wall);
  set_ratios(state, n, threads_of(v), cpu, wall);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 4 * n);
  // the default codecs measure their path at >= 2^24 elements without clipping: the label says which won
  const bool measured = (v == Variant::opt1 || v == Variant::opt2) && !clip && n >= tg::cpu::default_single_pass_from();
  state.SetLabel(codec->name() + (measured ? std::string(", ") + tg::cpu::chosen_path(*codec) : std::string()));
}

// The 1-thread encode (tg::encode, the default codec, no clipping) and memcpy of the same bytes, timed in
// pairs: each iteration times one memcpy and one encode back to back (process CPU time; the order
// alternates), so both see the same memory. x_memcpy is the median over the pairs of memcpy's time / the
// encode's; of_bound the roofline bound / the median encode time. On a VM whose memory speed drifts from
// second to second the ratio of two medians taken seconds apart (the BM_Encode rows) moves with the drift;
// this one moves less.
void BM_EncodeVsMemcpy(benchmark::State& state) {
  std::size_t n = static_cast<std::size_t>(state.range(0));
  auto g = gradient(n);
  std::vector<float> dst(n);
  auto codec = codec_for(Variant::opt1);
  std::vector<double> ratio, encode_s, memcpy_s;
  std::uint32_t step = 0;
  for (auto _ : state) {
    double t_copy = 0.0, t_encode = 0.0;
    for (int half = 0; half < 2; ++half) {
      const bool copy = (half == 0) == (step % 2 == 0);
      const double c0 = process_cpu_s();
      if (copy) {
        std::memcpy(dst.data(), g.data(), 4 * n);
        benchmark::DoNotOptimize(dst.data());
        benchmark::ClobberMemory();
        t_copy = process_cpu_s() - c0;
      } else {
        auto payload = tg::encode(*codec, g, {}, {1, 0, 0, step});
        benchmark::DoNotOptimize(payload.data());
        t_encode = process_cpu_s() - c0;
      }
    }
    ++step;
    ratio.push_back(t_copy / t_encode);
    encode_s.push_back(t_encode);
    memcpy_s.push_back(t_copy);
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  if (ratio.empty()) return;
  state.counters["x_memcpy"] = median(ratio);
  state.counters["encode_ms"] = 1e3 * median(encode_s);
  state.counters["memcpy_ms"] = 1e3 * median(memcpy_s);
  state.counters["pairs"] = static_cast<double>(ratio.size());
  double b = bound_s(n, 1);
  if (b > 0.0) state.counters["of_bound"] = b / median(encode_s);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 4 * n);
  state.SetLabel(codec->name() + ", paired with memcpy");
}

// Decode of a 2bit payload into a preallocated float buffer (validation + unpack + scale).
void BM_Decode(benchmark::State& state, Variant v) {
  std::size_t n = static_cast<std::size_t>(state.range(0));
  auto g = gradient(n);
  auto codec = codec_for(v);
  auto payload = tg::encode(*codec, g, {}, {1, 0, 0, 0});
  std::vector<float> out(n);
  LoopTimer t;
  for (auto _ : state) {
    tg::Header h = tg::parse_header(payload);
    codec->decode_body(h.packing, std::span(payload).subspan(tg::kHeaderBytes), h.scalar, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  double cpu, wall;
  t.finish(state, &cpu, &wall);
  double tt = threads_of(v) == 1 ? cpu : wall;
  double mc = median_of(std::string("memcpy/") + (threads_of(v) == 1 ? "cpu/" : "wall/") + std::to_string(n));
  if (mc > 0.0 && tt > 0.0) state.counters["x_memcpy"] = mc / tt;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 4 * n);
  state.SetLabel(codec->name());
}

// Thread start-up: one std::thread started and joined around an empty body (what parallel_ranges
// pays per extra part), and the plain encode at sizes around the threshold with 2 threads forced
// (no minimum per thread) against 1 thread.
void BM_ThreadStartJoin(benchmark::State& state) {
  for (auto _ : state) {
    std::thread t([] {});
    t.join();
  }
}
// cold: each call comes 1 ms after the last one (not timed), longer than the pool's workers poll before they
// sleep (kSpin in optimized.cpp): the first tensor of a step, where back-to-back calls time the others.
void BM_EncodeThreads(benchmark::State& state, unsigned threads, bool cold) {
  std::size_t n = static_cast<std::size_t>(state.range(0));
  auto g = gradient(n);
  auto codec = tg::cpu::make_optimized_codec_with(threads, best_set()->kernels(), 4096,
                                                  tg::cpu::default_single_pass_from());
  std::uint32_t step = 0;
  std::vector<std::uint8_t> payload;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      state.ResumeTiming();
    }
    tg::encode_into(*codec, g, {}, {1, 0, 0, step++}, payload);
    benchmark::DoNotOptimize(payload.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 4 * n);
  state.SetLabel(codec->name() + " min/thread 4096");
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int e = 10; e <= 26; e += 2) b->Arg(std::int64_t{1} << e);
  // the odd powers around the caches of the project's VM (2 MiB L2 per core = 2^19 floats; its last
  // level holds 2^23 floats but not 2^24): where the single pass and the two passes cross
  for (int e = 19; e <= 25; e += 2) b->Arg(std::int64_t{1} << e);
  b->Unit(benchmark::kMicrosecond);
}
void sizes_reference(benchmark::internal::Benchmark* b) {  // the reference is slow: stop at 2^24
  for (int e = 10; e <= 24; e += 2) b->Arg(std::int64_t{1} << e);
  b->Unit(benchmark::kMicrosecond);
}
void threshold_sizes(benchmark::internal::Benchmark* b) {
  for (int e = 14; e <= 22; ++e) b->Arg(std::int64_t{1} << e);
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

int register_roofline = [] {
  auto sets = tg::cpu::compiled_kernel_sets();
  for (std::size_t i = 0; i < sets.size(); ++i) {
    benchmark::RegisterBenchmark((std::string("BM_Roofline_Philox/") + sets[i].name).c_str(), BM_Roofline_Philox, i)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("BM_Roofline_EncodeInCache/") + sets[i].name).c_str(),
                                 BM_Roofline_EncodeInCache, i)
        ->Unit(benchmark::kMicrosecond);
    if (sets[i].kernels && sets[i].cpu_runs() && sets[i].kernels()->encode_2bit_running)
      benchmark::RegisterBenchmark((std::string("BM_Roofline_RunningInCache/") + sets[i].name).c_str(),
                                   BM_Roofline_RunningInCache, i)
          ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("BM_Roofline_Read/t1", BM_Roofline_Read, 1u)->Apply(sizes);
  benchmark::RegisterBenchmark("BM_Roofline_Read/t2", BM_Roofline_Read, 2u)->Apply(sizes)->UseRealTime();
  benchmark::RegisterBenchmark("BM_Memcpy", BM_Memcpy)->Apply(sizes);
  benchmark::RegisterBenchmark("BM_Encode/reference", BM_Encode, Variant::reference, false, false)->Apply(sizes_reference);
  benchmark::RegisterBenchmark("BM_Encode/optimized_1thread", BM_Encode, Variant::opt1, false, false)->Apply(sizes);
  benchmark::RegisterBenchmark("BM_Encode/twopass_1thread", BM_Encode, Variant::twopass1, false, false)->Apply(sizes);
  benchmark::RegisterBenchmark("BM_Encode/singlepass_1thread", BM_Encode, Variant::single1, false, false)->Apply(sizes);
  benchmark::RegisterBenchmark("BM_Encode/optimized_2threads", BM_Encode, Variant::opt2, false, false)
      ->Apply(sizes)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_Encode/twopass_2threads", BM_Encode, Variant::twopass2, false, false)
      ->Apply(sizes)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_Encode/singlepass_2threads", BM_Encode, Variant::single2, false, false)
      ->Apply(sizes)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_EncodeInto/optimized_1thread", BM_Encode, Variant::opt1, false, true)->Apply(sizes);
  benchmark::RegisterBenchmark("BM_EncodeVsMemcpy/optimized_1thread", BM_EncodeVsMemcpy)
      ->Arg(std::int64_t{1} << 22)
      ->Arg(std::int64_t{1} << 24)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_EncodeInto/optimized_2threads", BM_Encode, Variant::opt2, false, true)
      ->Apply(sizes)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_EncodeClip/optimized_1thread", BM_Encode, Variant::opt1, true, false)->Apply(sizes);
  benchmark::RegisterBenchmark("BM_EncodeClip/twopass_1thread", BM_Encode, Variant::twopass1, true, false)->Apply(sizes);
  benchmark::RegisterBenchmark("BM_EncodeClip/optimized_2threads", BM_Encode, Variant::opt2, true, false)
      ->Apply(sizes)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_Decode/reference", BM_Decode, Variant::reference)->Apply(sizes_reference);
  benchmark::RegisterBenchmark("BM_Decode/optimized_1thread", BM_Decode, Variant::opt1)->Apply(sizes);
  benchmark::RegisterBenchmark("BM_Decode/optimized_2threads", BM_Decode, Variant::opt2)->Apply(sizes)->UseRealTime();
  benchmark::RegisterBenchmark("BM_ThreadStartJoin", BM_ThreadStartJoin)->UseRealTime();
  benchmark::RegisterBenchmark("BM_EncodeThreads/t1", BM_EncodeThreads, 1u, false)->Apply(threshold_sizes);
  benchmark::RegisterBenchmark("BM_EncodeThreads/t2", BM_EncodeThreads, 2u, false)->Apply(threshold_sizes);
  benchmark::RegisterBenchmark("BM_EncodeThreadsCold/t1", BM_EncodeThreads, 1u, true)->Apply(threshold_sizes);
  benchmark::RegisterBenchmark("BM_EncodeThreadsCold/t2", BM_EncodeThreads, 2u, true)->Apply(threshold_sizes);
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
