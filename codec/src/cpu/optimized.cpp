// terngrad-bench: the optimized CPU codec: one kernel set (AVX-512, AVX2 or portable, kernels.hpp)
// chosen once when the codec is made, and threads for large tensors. Work is split on boundaries that are multiples of 10240 elements
// (Philox blocks of 4, 2bit bytes of 4, base3 bytes of 5, reduction chunks of 2048), so the bytes
// never depend on the thread count.
#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "kernels.hpp"

namespace tg {
namespace {

constexpr std::size_t kAlign = 5 * kReduceChunk;  // 10240: multiple of 4, 5, 8 and 2048
// Below ~1M elements per thread, starting threads costs more than it saves (reports/codec-throughput.md).
constexpr std::size_t kMinPerThread = 100 * kAlign;

// Splits [0, n) into at most `threads` contiguous ranges whose inner boundaries are multiples of
// `align`, and runs fn(begin, end, part) on each (part 0 on the calling thread).
template <typename Fn>
void parallel_ranges(std::size_t n, std::size_t align, unsigned threads, std::size_t min_per_part, Fn fn) {
  std::size_t parts = std::max<std::size_t>(1, std::min<std::size_t>(threads, n / std::max<std::size_t>(1, min_per_part)));
  if (parts <= 1) {
    fn(std::size_t{0}, n, std::size_t{0});
    return;
  }
  std::size_t units = (n + align - 1) / align;
  std::vector<std::size_t> bounds(parts + 1, n);
  bounds[0] = 0;
  for (std::size_t p = 1; p < parts; ++p) bounds[p] = std::min(n, (units * p / parts) * align);
  std::vector<std::exception_ptr> errors(parts);
  std::vector<std::thread> pool;
  pool.reserve(parts - 1);
  for (std::size_t p = 1; p < parts; ++p)
    pool.emplace_back([&, p] {
      try {
        fn(bounds[p], bounds[p + 1], p);
      } catch (...) {
        errors[p] = std::current_exception();
      }
    });
  try {
    fn(bounds[0], bounds[1], 0);
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (auto& t : pool) t.join();
  for (auto& e : errors)  // the lowest range's error, so the message does not depend on timing
    if (e) std::rethrow_exception(e);
}

[[noreturn]] void throw_invalid_code(Packing packing, const std::uint8_t* body, std::size_t j) {
  throw Error(ErrorCode::invalid_code, std::string("invalid ") + to_string(packing) + " body: byte " +
                                           std::to_string(j) + " holds " + std::to_string(body[j]));
}

class OptimizedCodec final : public Codec {
 public:
  OptimizedCodec(unsigned threads, const cpu::Kernels* kernels)
      : threads_(threads ? threads : std::max(1u, std::thread::hardware_concurrency())), kernels_(kernels) {}

  std::string name() const override {
    return std::string("optimized-") + kernels_->name + "-t" + std::to_string(threads_);
  }

  float max_abs(std::span<const float> g, std::uint32_t tensor) const override {
    std::size_t parts = std::max<std::size_t>(1, std::min<std::size_t>(threads_, g.size() / kMinPerThread));
    std::vector<float> maxima(parts, 0.0f);
    std::vector<std::size_t> bad(parts, cpu::kNoBadIndex);
    parallel_ranges(g.size(), kAlign, threads_, kMinPerThread, [&](std::size_t b, std::size_t e, std::size_t p) {
      maxima[p] = kernels_->max_abs(g.data(), b, e, &bad[p]);
    });
    for (std::size_t p = 0; p < parts; ++p)
      if (bad[p] != cpu::kNoBadIndex) throw NonFiniteError(tensor, bad[p], g[bad[p]]);
    return *std::max_element(maxima.begin(), maxima.end());
  }

  Moments moments(std::span<const float> g) const override {
    Moments m;
    if (g.empty()) return m;
    double n = static_cast<double>(g.size());
    m.mean = total(g, false, 0.0) / n;
    m.sigma = std::sqrt(total(g, true, m.mean) / n);
    return m;
  }

  void ternarize(std::span<const float> g, const ScalarRule& rule, const StreamKey& key,
                 std::span<std::int8_t> trits) const override {
    parallel_ranges(g.size(), kAlign, threads_, kMinPerThread, [&](std::size_t b, std::size_t e, std::size_t) {
      backwards(b, e, [&](std::size_t cb, std::size_t ce) { kernels_->ternarize(g.data(), cb, ce, rule, key, trits.data()); });
    });
  }

  void encode_body(std::span<const float> g, const ScalarRule& rule, const StreamKey& key,
                   Packing packing, std::span<std::uint8_t> body) const override {
    auto kernel = packing == Packing::two_bit ? kernels_->encode_2bit : kernels_->encode_base3;
    parallel_ranges(g.size(), kAlign, threads_, kMinPerThread, [&](std::size_t b, std::size_t e, std::size_t) {
      backwards(b, e, [&](std::size_t cb, std::size_t ce) { kernel(g.data(), cb, ce, rule, key, body.data()); });
    });
  }

  void unpack(Packing packing, std::span<const std::uint8_t> body,
              std::span<std::int8_t> trits) const override {
    auto kernel = packing == Packing::two_bit ? kernels_->unpack_2bit : kernels_->unpack_base3;
    run_bytes(packing, body, [&](std::size_t b0, std::size_t b1) {
      return kernel(body.data(), trits.size(), b0, b1, trits.data());
    });
  }

  void decode_body(Packing packing, std::span<const std::uint8_t> body, float scalar,
                   std::span<float> out) const override {
    auto kernel = packing == Packing::two_bit ? kernels_->decode_2bit : kernels_->decode_base3;
    run_bytes(packing, body, [&](std::size_t b0, std::size_t b1) {
      return kernel(body.data(), out.size(), b0, b1, scalar, out.data());
    });
  }

 private:
  // Runs fn over [b, e) in aligned pieces from the last to the first. The scalar pass has just read
  // the tensor front to back, so its tail is still in the last-level cache: going backwards reads
  // that part from cache instead of memory when the tensor is larger than the cache.
  template <typename Fn>
  static void backwards(std::size_t b, std::size_t e, Fn fn) {
    constexpr std::size_t kPiece = 4 * kAlign;
    if (e - b <= kPiece) {
      fn(b, e);
      return;
    }
    std::size_t last = b + ((e - b - 1) / kPiece) * kPiece;  // start of the last (possibly short) piece
    for (std::size_t start = last + kPiece; start > b;) {
      start -= kPiece;
      fn(start, std::min(e, start + kPiece));
    }
  }

  // Canonical total (tg/reduce.hpp): chunk totals in parallel, then added in chunk order.
  double total(std::span<const float> g, bool square, double mean) const {
    std::size_t chunks = (g.size() + kReduceChunk - 1) / kReduceChunk;
    std::vector<double> totals(chunks);
    parallel_ranges(chunks, 1, threads_, kMinPerThread / kReduceChunk, [&](std::size_t c0, std::size_t c1, std::size_t) {
      kernels_->chunk_totals(g.data(), g.size(), c0, c1, square, mean, totals.data() + c0);
    });
    double sum = 0.0;
    for (double t : totals) sum = sum + t;
    return sum;
  }

  // Runs a byte-range kernel over the body in parallel; throws for the first invalid byte.
  template <typename Kernel>
  void run_bytes(Packing packing, std::span<const std::uint8_t> body, Kernel kernel) const {
    std::size_t per_byte = packing == Packing::two_bit ? 4 : 5;
    std::size_t parts = std::max<std::size_t>(1, std::min<std::size_t>(threads_, body.size() * per_byte / kMinPerThread));
    std::vector<std::size_t> bad(parts, cpu::kNoBadIndex);
    parallel_ranges(body.size(), 1024, threads_, kMinPerThread / per_byte, [&](std::size_t b0, std::size_t b1, std::size_t p) {
      bad[p] = kernel(b0, b1);
    });
    for (std::size_t j : bad)
      if (j != cpu::kNoBadIndex) throw_invalid_code(packing, body.data(), j);
  }

  unsigned threads_;
  const cpu::Kernels* kernels_;
};

}  // namespace

bool cpu_has_avx2() {
#if TG_HAVE_X86_SIMD
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;  // the AVX2 kernels are not compiled for this target
#endif
}

bool cpu_has_avx512() {
#if TG_HAVE_X86_SIMD
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("bmi2");
  return has;
#else
  return false;
#endif
}

namespace cpu {

std::span<const KernelSet> compiled_kernel_sets() {
  static const KernelSet sets[] = {
      {"portable", Isa::portable, 4, "", [] { return true; }, portable_kernels},
#if TG_HAVE_X86_SIMD
      {"avx2", Isa::avx2, 32, "AVX2", cpu_has_avx2, avx2_kernels},
      {"avx512", Isa::avx512, 64, "AVX512F + BMI2", cpu_has_avx512, avx512_kernels},
#endif
  };
  return sets;
}

}  // namespace cpu

std::unique_ptr<Codec> make_optimized_codec_isa(unsigned threads, Isa isa) {
  const cpu::Kernels* kernels = nullptr;
  for (const cpu::KernelSet& set : cpu::compiled_kernel_sets()) {
    if (isa == Isa::best) {
      if (set.cpu_runs()) kernels = set.kernels();  // the sets come in increasing width
    } else if (set.isa == isa) {
      if (!set.cpu_runs())
        throw Error(ErrorCode::invalid_argument, std::string("this CPU has no ") + set.needs);
      kernels = set.kernels();
    }
  }
  if (!kernels)
    throw Error(ErrorCode::invalid_argument, "this build of the codec has no kernels for the requested "
                                             "instruction set (x86 SIMD kernels are built on x86-64 only)");
  return std::make_unique<OptimizedCodec>(threads, kernels);
}

std::unique_ptr<Codec> make_optimized_codec(unsigned threads, bool force_portable) {
  return make_optimized_codec_isa(threads, force_portable ? Isa::portable : Isa::best);
}

std::vector<std::string> codec_names() {
  std::vector<std::string> names = {"reference", "optimized"};
  for (const cpu::KernelSet& set : cpu::compiled_kernel_sets())
    if (set.cpu_runs()) names.push_back(std::string("optimized-") + set.name);
  return names;
}

std::shared_ptr<const Codec> make_codec(const std::string& name, unsigned threads) {
  if (name == "reference") return std::shared_ptr<const Codec>(&reference_codec(), [](const Codec*) {});
  std::string base = name;
  if (auto t = name.rfind("-t"); t != std::string::npos && name.rfind("optimized", 0) == 0 && t + 2 < name.size() &&
                                 name.find_first_not_of("0123456789", t + 2) == std::string::npos) {
    unsigned long n = std::stoul(name.substr(t + 2));
    if (n < 1 || n > 4096) throw Error(ErrorCode::invalid_argument, "thread count in '" + name + "' must be 1..4096");
    threads = static_cast<unsigned>(n);
    base = name.substr(0, t);
  }
  if (base == "optimized") return make_optimized_codec_isa(threads, Isa::best);
  for (const cpu::KernelSet& set : cpu::compiled_kernel_sets())
    if (base == std::string("optimized-") + set.name) return make_optimized_codec_isa(threads, set.isa);
  std::string known;
  for (const cpu::KernelSet& set : cpu::compiled_kernel_sets()) known += std::string(", optimized-") + set.name;
  throw Error(ErrorCode::invalid_argument, "unknown codec '" + name + "' (known: reference, optimized" + known +
                                               ", each optimized one optionally with -t<threads>)");
}

std::vector<CodecEntry> cpu_codecs(unsigned threads) {
  std::vector<CodecEntry> table;
  for (const std::string& name : codec_names()) {
    if (name == "optimized") continue;  // the many-thread entry below
    std::string entry = name == "reference" ? name : name + "-t1";
    table.push_back({entry, make_codec(entry)});
  }
  std::shared_ptr<const Codec> many = make_codec("optimized", threads);
  table.push_back({many->name(), many});
  return table;
}

}  // namespace tg
