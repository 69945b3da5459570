// terngrad-bench: the optimized CPU codec: one kernel set (AVX-512, AVX2 or portable, kernels.hpp)
// chosen once when the codec is made, and threads for large tensors. Work is split on boundaries that are multiples of 10240 elements
// (Philox blocks of 4, 2bit bytes of 4, base3 bytes of 5, reduction chunks of 2048), so the bytes
// never depend on the thread count.
#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <ratio>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "kernels.hpp"

namespace tg {
namespace {

constexpr std::size_t kAlign = 5 * kReduceChunk;  // 10240: multiple of 4, 5, 8 and 2048
// Elements per thread below which the codec does not use threads. Chosen where starting and joining one
// thread cost ~28 us wall (BM_ThreadStartJoin, docs/performance.md): at ~1.2 ns per element a second thread
// saves n/2 * 1.2 ns, so it paid from ~50k elements, and 204800 per thread kept a margin of ~4x. The workers
// are now kept between calls (WorkerPool); this threshold is for workers asleep, whose wake-up cost ~190 us on
// the VM of run 10 (two threads won there from ~2^21 elements), and kWarmShare below sets the one for workers
// that poll ("Threads" in docs/performance.md).
constexpr std::size_t kMinPerThread = 20 * kAlign;
// Tensors from this size on take the single-pass encode; smaller ones the two passes (max_abs, then
// encode_2bit). The single pass reads g once but computes more (candidates guarded, a few stored and
// re-decided: ~0.96 against ~0.72 ns per element in cache, AVX-512); the two passes read g twice, the
// second time backwards, so the part of g the last-level cache still holds comes from there. Measured 1
// thread, CPU time (docs/performance.md, "The single-pass threshold"): interleaved A/Bs on the loaded
// machine had the two passes faster at 2^22, either one within the spread at 2^23 and 2^24, the single
// pass faster at 2^25 (49.6 against 54.3 ms, ranges apart) and 2^26 (88.5 against 111.4 ms); run 7 on
// the quiet machine had the single pass faster at 2^24 too (24.58-24.78 against 25.83-26.43 ms over 5
// repetitions) and the two passes at 2^22 (3.95 against 4.80 ms).
// Which of the two is faster from that size on depends on the machine: on the VM of run 7 (Xeon, read
// pass alone 7.6 ms at 2^24) the single pass; on the AMD EPYC VM of run 8 (read pass 2.5 ms) the two
// passes, at 2^24 (12.9 against 15.8 ms CPU) and 2^26 (53-54 against 59-60 ms). So the default codec
// measures: its first kTrials tensors of at least kSinglePassFrom elements alternate between the two
// (the same bytes), timed by the steady clock, and every later one takes the path with the lower least
// time per element (PathChooser). A codec made with an explicit threshold (make_optimized_codec_with)
// takes the single pass from it, without measuring.
constexpr std::size_t kSinglePassFrom = std::size_t{1} << 24;
constexpr unsigned kTrials = 4;
// Tensors from this size on write the 2bit body with non-temporal stores (Kernels::encode_2bit_stream)
// in the two-pass encode. Measured 1 thread, CPU time, interleaved A/B (docs/performance.md, "Third
// round"): 0.97x the time of the cached stores at 2^24 elements, but 1.03x at 2^20 and 1.2x at 2^12,
// where the CRC32C then reads the body back from memory; 2^21..2^23 not measured.
constexpr std::size_t kStreamFrom = std::size_t{1} << 24;
// How long a pool thread polls for the next call (or the caller for its workers) before it sleeps; see
// WorkerPool::spin_until.
constexpr std::chrono::microseconds kSpin{50};
// The share of kMinPerThread (and of the other per-thread thresholds) a thread needs while the pool's workers
// poll (OptimizedCodec::parts_for): measured on the VM of run 10 with the workers polling, two threads beat one
// from 2^14 elements (8 against 10.5 us), so 25,600 per thread keeps a margin; asleep, from ~2^21.
constexpr std::size_t kWarmShare = 8;
// Bytes per thread below which a checksum runs on one thread: CRC32C runs at ~25 GB/s per core here
// (crc32 instructions in three chains), so 1 MiB takes ~40 us.
constexpr std::size_t kCrcPerThread = std::size_t{1} << 20;
// Pieces of the single-pass encode: candidate buffers grow by at most this many slots per call, and
// each piece has its own guard (below). A stored candidate's position is its offset in its piece.
constexpr std::size_t kPassPiece = 65536;  // multiple of 64 (AVX-512 groups) and 4 (Philox blocks)
// The single pass starts its running maximum at the maximum of one element per kSeedStride (64 KiB):
// any element is <= the final scalar s, so this is exact, and with the maximum high from the start
// few candidates are decided with a maximum far below s. Each sampled element costs a cache and TLB
// miss: one per 4 KiB took ~1.3 ms at 2^24 elements (perf, ~5% of the encode) and saved one redone
// piece against one per 64 KiB on the benchmark's gradient (docs/performance.md, "Fourth round").
constexpr std::size_t kSeedStride = 16384;
// A piece whose running maximum is m at its start gets the guard R = kGuard * m (as a float): a
// candidate kept under R is kept under every final s <= R and is not stored. The fraction of the
// candidates stored is about 1 - m/R; a piece with R < s is encoded again. See encode_single_pass.
// Measured (docs/performance.md, "Fourth round"): 2 and 1.5 alike at 2^24 and 2^25 elements, 2 faster
// at 2^26 (88-90 against 102 ms, though it stores more: 0.071 against 0.047 candidates per element).
constexpr float kGuard = 2.0f;

// Candidate buffers of the single-pass encode, one per part, kept by the calling thread from one
// encode to the next (a fresh buffer per call would pay a page fault per 4 KiB it touches).
struct CandidateBuffer {
  std::unique_ptr<std::uint32_t[]> pos;
  std::unique_ptr<std::uint32_t[]> u;
  std::unique_ptr<float[]> a;
  std::size_t capacity = 0;
  void reserve(std::size_t need, std::size_t used) {
    if (need <= capacity) return;
    std::size_t cap = std::max(need, 2 * capacity);
    auto np = std::make_unique_for_overwrite<std::uint32_t[]>(cap);
    auto nu = std::make_unique_for_overwrite<std::uint32_t[]>(cap);
    auto na = std::make_unique_for_overwrite<float[]>(cap);
    if (used) {
      std::memcpy(np.get(), pos.get(), 4 * used);
      std::memcpy(nu.get(), u.get(), 4 * used);
      std::memcpy(na.get(), a.get(), 4 * used);
    }
    pos = std::move(np);
    u = std::move(nu);
    a = std::move(na);
    capacity = cap;
  }
};

// max |g| over g[0], g[stride], g[2 stride], ..., non-finite values skipped (the pass that follows
// finds and reports them).
float strided_max(std::span<const float> g, std::size_t stride) {
  float m = 0.0f;
  for (std::size_t k = 0; k < g.size(); k += stride) {
    std::uint32_t bits;
    std::memcpy(&bits, &g[k], 4);
    bits &= 0x7fffffffu;
    if (bits >= 0x7f800000u) continue;
    float a;
    std::memcpy(&a, &bits, 4);
    m = std::max(m, a);
  }
  return m;
}

// The clip bound static_cast<float>(c * sigma) of the canonical sigma (tg/reduce.hpp), found
// without the canonical second pass when that is possible: from the canonical mean and the shifted
// sums q1 = sum (g - shift), q2 = sum (g - shift)^2 of the fused pass, sum (g - mean)^2 is
// q2 - 2 d q1 + n d^2 (d = mean - shift) up to rounding errors bounded below; the canonical total
// of (g - mean)^2 lies within relative gamma of that exact sum (nonnegative terms, additions at most
// `depth` deep). sqrt, / n, * c and the conversion to float are monotone, so when both ends of the
// interval give the same float, that float is the canonical bound. Returns false otherwise (the caller
// then runs the canonical sigma pass). The error terms carry a factor 8 of margin.
bool clip_bound_from_sums(double c, std::size_t count, std::size_t chunks, double mean, float shift, double q1,
                          double q2, float* bound) {
  const double n = static_cast<double>(count);
  const double unit = 0x1p-53;
  const double depth = 2048.0 + 64.0 + static_cast<double>(chunks);  // >= every addition chain, + 3 per term
  const double gam = 4.0 * depth * unit;                              // >= 2 gamma_depth
  const double d = mean - static_cast<double>(shift);
  const double v = q2 - 2.0 * d * q1 + n * d * d;
  const double a1 = std::sqrt(n * q2 * (1.0 + gam));  // >= sum |g - shift| (Cauchy-Schwarz)
  const double mag = q2 + 2.0 * std::fabs(d) * (std::fabs(q1) + a1) + n * d * d;
  const double err = 16.0 * gam * mag + 1e-290;
  if (!std::isfinite(v) || !std::isfinite(err) || !(n > 0)) return false;
  double lo = (v - err) * (1.0 - gam), hi = (v + err) * (1.0 + gam);
  if (!(lo > 0.0)) lo = 0.0;
  // the canonical formulas: sigma = sqrt(total / n); bound = float(c * sigma)
  float b_lo = static_cast<float>(c * std::sqrt(lo / n));
  float b_hi = static_cast<float>(c * std::sqrt(hi / n));
  if (b_lo != b_hi) return false;
  *bound = b_lo;
  return true;
}

// Worker threads kept from one parallel call to the next: starting and joining a thread costs 38-124 us wall
// on the project's VMs (BM_ThreadStartJoin, reports/codec-throughput.md), as much as encoding 60,000-200,000
// elements. Workers are started when a call first needs them and wait for the next call; one call uses the
// pool at a time, and a call that finds it in use (another thread encoding with the same codec) starts threads
// of its own instead. A process forked from the one that made the pool (Python's multiprocessing, say) has
// none of its workers and may hold its locks as they were at the fork: there the pool is never touched, every
// call starts its own threads, and the pool's memory is left as it is.
class WorkerPool {
 public:
  WorkerPool() = default;
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool() {
    if (::getpid() != owner_) {  // a forked child: no workers to join, and waiters recorded in the condition
      (void)st_.release();       // variables that would make their destruction wait forever
      return;
    }
    {
      std::lock_guard<std::mutex> lock(st_->m);
      st_->stop = true;
    }
    st_->wake.notify_all();
    for (auto& t : st_->workers) t.join();
  }

  // Whether at least `workers` workers are polling for the next call now (WorkerPool::spin_until), so that a
  // call made at once finds them without waking a sleeping core.
  bool awake(std::size_t workers) const {
    return ::getpid() == owner_ && st_->spinning.load(std::memory_order_relaxed) >= workers;
  }

  // Wakes (starting them if needed) `workers` workers without giving them anything to run, so that they poll
  // for the calls that follow; returns at once. Does nothing while a wake-up is on its way or a call holds the
  // pool.
  void wake_up(std::size_t workers) {
    if (::getpid() != owner_) return;
    State& st = *st_;
    if (st.waking.exchange(true, std::memory_order_relaxed)) return;
    std::unique_lock<std::mutex> busy(st.busy, std::try_to_lock);
    if (!busy.owns_lock()) {
      st.waking.store(false, std::memory_order_relaxed);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(st.m);
      start_workers(st, workers + 1);
      st.job = nullptr;
      st.parts = 0;  // nothing to run: every worker goes back to polling
      st.pending = 0;
      ++st.generation;
    }
    st.wake.notify_all();
  }

  // Runs job(p) for every p in [1, parts) on the workers and job(0) on the calling thread, and returns when
  // all have returned (job must not throw). Returns false, having run nothing, when another call holds the
  // pool or the process is not the one that made it.
  bool try_run(std::size_t parts, const std::function<void(std::size_t)>& job) {
    if (::getpid() != owner_) return false;
    State& st = *st_;
    std::unique_lock<std::mutex> busy(st.busy, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(st.m);
      start_workers(st, parts);
      st.job = &job;
      st.parts = parts;
      st.pending = parts - 1;
      ++st.generation;
    }
    st.wake.notify_all();
    job(0);
    spin_until([&st] { return st.pending.load(std::memory_order_acquire) == 0; });
    std::unique_lock<std::mutex> lock(st.m);
    st.done.wait(lock, [&st] { return st.pending == 0; });
    st.job = nullptr;
    return true;
  }

 private:
  struct State {
    std::mutex busy;  // held by the call that uses the pool
    std::mutex m;     // guards what follows
    std::condition_variable wake, done;
    std::vector<std::thread> workers;  // worker i - 1 runs part i
    const std::function<void(std::size_t)>* job = nullptr;
    std::size_t parts = 0;
    // written under m; also read without it while spinning (spin_until), so atomic
    std::atomic<std::size_t> pending{0};
    std::atomic<std::uint64_t> generation{0};  // calls so far
    std::atomic<bool> stop{false};
    std::atomic<std::size_t> spinning{0};  // workers polling (awake)
    std::atomic<bool> waking{false};       // a wake_up not yet answered by a polling worker
  };

  // Workers for calls of up to `parts` parts (the caller runs part 0); st.m held.
  static void start_workers(State& st, std::size_t parts) {
    while (st.workers.size() + 1 < parts) {
      const std::size_t id = st.workers.size() + 1;
      st.workers.emplace_back([&st, id, seen = st.generation.load()] { work(st, id, seen); });
    }
  }

  // Polls ready() for up to kSpin before the caller blocks on a condition variable: a worker that went to
  // sleep costs 100-200 us to wake on the project's VMs (a halted vCPU), while the passes of one encode, and the
  // encodes of consecutive tensors, follow each other within microseconds. ready() only says whether
  // blocking is worth it; what it reports is read again under the lock.
  template <typename Ready>
  static void spin_until(Ready ready) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (unsigned k = 1; !ready(); ++k) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      if (k % 64 == 0 && std::chrono::steady_clock::now() >= until) return;
    }
  }

  // Worker `id` runs part id of every call with more than id parts; `seen` is the last call it has looked at.
  static void work(State& st, std::size_t id, std::uint64_t seen) {
    std::unique_lock<std::mutex> lock(st.m);
    for (;;) {
      if (!st.stop && st.generation == seen) {  // nothing new: poll a while before sleeping
        lock.unlock();
        st.spinning.fetch_add(1, std::memory_order_relaxed);
        st.waking.store(false, std::memory_order_relaxed);
        spin_until([&] { return st.stop.load(std::memory_order_relaxed) || st.generation.load(std::memory_order_relaxed) != seen; });
        st.spinning.fetch_sub(1, std::memory_order_relaxed);
        lock.lock();
      }
      st.wake.wait(lock, [&] { return st.stop || st.generation != seen; });
      if (st.stop) return;
      seen = st.generation;
      if (id >= st.parts) continue;
      const std::function<void(std::size_t)>* job = st.job;
      lock.unlock();
      (*job)(id);
      lock.lock();
      if (--st.pending == 0) st.done.notify_one();
    }
  }

  const pid_t owner_ = ::getpid();
  std::unique_ptr<State> st_ = std::make_unique<State>();
};

// Splits [0, n) into `parts` contiguous ranges (OptimizedCodec::parts_for) whose inner boundaries are multiples of
// `align`, and runs fn(begin, end, part) on each: part 0 on the calling thread, the others on the pool's
// workers (or on threads started for this call when the pool is in use).
template <typename Fn>
void parallel_ranges(WorkerPool& pool, std::size_t n, std::size_t align, std::size_t parts, Fn fn) {
  if (parts <= 1) {
    fn(std::size_t{0}, n, std::size_t{0});
    return;
  }
  std::size_t units = (n + align - 1) / align;
  std::vector<std::size_t> bounds(parts + 1, n);
  bounds[0] = 0;
  for (std::size_t p = 1; p < parts; ++p) bounds[p] = std::min(n, (units * p / parts) * align);
  std::vector<std::exception_ptr> errors(parts);
  const std::function<void(std::size_t)> job = [&](std::size_t p) {
    try {
      fn(bounds[p], bounds[p + 1], p);
    } catch (...) {
      errors[p] = std::current_exception();
    }
  };
  if (!pool.try_run(parts, job)) {
    std::vector<std::thread> own;
    own.reserve(parts - 1);
    for (std::size_t p = 1; p < parts; ++p) own.emplace_back(job, p);
    job(0);
    for (auto& t : own) t.join();
  }
  for (auto& e : errors)  // the lowest range's error, so the message does not depend on timing
    if (e) std::rethrow_exception(e);
}

[[noreturn]] void throw_invalid_code(Packing packing, const std::uint8_t* body, std::size_t j) {
  throw Error(ErrorCode::invalid_code, std::string("invalid ") + to_string(packing) + " body: byte " +
                                           std::to_string(j) + " holds " + std::to_string(body[j]));
}

// The measured choice between the single pass and the two passes (see kSinglePassFrom). Thread-safe:
// concurrent encodes may both measure; the choice, once made, is read with one atomic load.
class PathChooser {
 public:
  enum Path : int { measuring = 0, two_passes = 1, single_pass = 2 };
  Path path() const { return static_cast<Path>(chosen_.load(std::memory_order_acquire)); }
  // The path of the next measured encode: two passes first, then alternating.
  Path next_trial() { return trials_.fetch_add(1, std::memory_order_relaxed) % 2 ? single_pass : two_passes; }
  void record(Path p, std::chrono::steady_clock::duration t, std::size_t n) {
    const std::uint64_t ps_per_element =
        static_cast<std::uint64_t>(std::chrono::duration<double, std::pico>(t).count() / static_cast<double>(n));
    std::atomic<std::uint64_t>& best = best_[p == single_pass];
    for (std::uint64_t cur = best.load(); ps_per_element < cur && !best.compare_exchange_weak(cur, ps_per_element);) {
    }
    if (done_.fetch_add(1) + 1 == kTrials)
      chosen_.store(best_[1].load() < best_[0].load() ? single_pass : two_passes, std::memory_order_release);
  }

 private:
  std::atomic<int> chosen_{measuring};
  std::atomic<unsigned> trials_{0}, done_{0};
  std::atomic<std::uint64_t> best_[2] = {UINT64_MAX, UINT64_MAX};  // two passes, single pass
};

class OptimizedCodec final : public Codec {
 public:
  // measure_path: the default codec's measured choice between the passes (kSinglePassFrom).
  OptimizedCodec(unsigned threads, const cpu::Kernels* kernels, std::size_t min_per_thread = kMinPerThread,
                 std::size_t single_pass_from = kSinglePassFrom, bool measure_path = true)
      : threads_(threads ? threads : std::max(1u, std::thread::hardware_concurrency())), kernels_(kernels),
        min_per_thread_(min_per_thread), single_pass_from_(single_pass_from), measure_path_(measure_path) {}

  // The path the measured choice settled on: "single pass", "two passes", or "measuring" (also for a
  // codec that does not measure).
  const char* chosen_path() const {
    switch (chooser_.path()) {
      case PathChooser::single_pass: return "single pass";
      case PathChooser::two_passes: return "two passes";
      default: return "measuring";
    }
  }

  // Parallel calls that only the polling threshold allowed (parts_for).
  std::size_t polled_calls() const { return polled_calls_.load(std::memory_order_relaxed); }

  // One tensor's encode in fewer passes over g than the default (max_abs, moments, encode_body):
  //  * own scalar, no clipping, 2bit, at least single_pass_from_ elements: one pass (encode_single_pass);
  //  * clipping: max |g|, the canonical mean and the shifted sums in one pass, the canonical sigma
  //    pass only when the bound is not pinned by them (clip_bound_from_sums), then encode_body.
  // The bytes are those of the default path; the kernel sets without these kernels take it.
  ScalarRule encode_tensor(std::span<const float> g, const Params& params, const StreamKey& key,
                           const float* shared_scalar, std::span<std::uint8_t> body) const override {
    if (g.empty()) return Codec::encode_tensor(g, params, key, shared_scalar, body);
    if (params.clip == ClipMode::none) {
      if (!shared_scalar && params.packing == Packing::two_bit && kernels_->encode_2bit_running &&
          g.size() >= single_pass_from_) {
        if (!measure_path_) return encode_single_pass(g, key, body);
        PathChooser::Path path = chooser_.path();
        if (path == PathChooser::single_pass) return encode_single_pass(g, key, body);
        if (path == PathChooser::two_passes) return Codec::encode_tensor(g, params, key, nullptr, body);
        path = chooser_.next_trial();
        const auto t0 = std::chrono::steady_clock::now();
        ScalarRule rule = path == PathChooser::single_pass ? encode_single_pass(g, key, body)
                                                           : Codec::encode_tensor(g, params, key, nullptr, body);
        chooser_.record(path, std::chrono::steady_clock::now() - t0, g.size());
        return rule;
      }
      return Codec::encode_tensor(g, params, key, shared_scalar, body);
    }
    if (!kernels_->chunk_stats) return Codec::encode_tensor(g, params, key, shared_scalar, body);
    ClipStats st = clip_stats(g, params, key.tensor);
    const float m = st.max_abs, bound = st.bound;
    ScalarRule rule = shared_scalar ? make_rule(*shared_scalar, bound) : make_rule(std::min(m, bound), std::min(m, bound));
    encode_body(g, rule, key, params.packing, body);
    return rule;
  }

  // Clipping: max |g|, the canonical mean and the shifted sums in one pass (fused_clip_bound), the
  // canonical sigma pass only when they do not pin the bound. Otherwise the default (max_abs alone).
  ClipStats clip_stats(std::span<const float> g, const Params& params, std::uint32_t tensor) const override {
    if (g.empty() || params.clip == ClipMode::none || !kernels_->chunk_stats) return Codec::clip_stats(g, params, tensor);
    ClipStats st;
    st.bound = fused_clip_bound(g, params.c, tensor, &st.max_abs);
    return st;
  }

  std::string name() const override {
    return std::string("optimized-") + kernels_->name + "-t" + std::to_string(threads_);
  }

  float max_abs(std::span<const float> g, std::uint32_t tensor) const override {
    const std::size_t parts = parts_for(g.size(), min_per_thread_);
    std::vector<float> maxima(parts, 0.0f);
    std::vector<std::size_t> bad(parts, cpu::kNoBadIndex);
    parallel_ranges(pool_, g.size(), kAlign, parts, [&](std::size_t b, std::size_t e, std::size_t p) {
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
    parallel_ranges(pool_, g.size(), kAlign, parts_for(g.size(), min_per_thread_), [&](std::size_t b, std::size_t e, std::size_t) {
      backwards(b, e, [&](std::size_t cb, std::size_t ce) { kernels_->ternarize(g.data(), cb, ce, rule, key, trits.data()); });
    });
  }

  void encode_body(std::span<const float> g, const ScalarRule& rule, const StreamKey& key,
                   Packing packing, std::span<std::uint8_t> body) const override {
    auto kernel = packing == Packing::two_bit ? kernels_->encode_2bit : kernels_->encode_base3;
    if (packing == Packing::two_bit && kernels_->encode_2bit_stream && g.size() >= kStreamFrom)
      kernel = kernels_->encode_2bit_stream;
    parallel_ranges(pool_, g.size(), kAlign, parts_for(g.size(), min_per_thread_), [&](std::size_t b, std::size_t e, std::size_t) {
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

  // The CRC of each part on its own thread, joined by crc32c_combine (the same value as crc32c(bytes)).
  std::uint32_t checksum(std::span<const std::uint8_t> bytes) const override {
    std::size_t parts = parts_for(bytes.size(), kCrcPerThread);
    if (parts <= 1) return crc32c(bytes);
    std::vector<std::uint32_t> crc(parts);
    std::vector<std::size_t> len(parts);
    parallel_ranges(pool_, bytes.size(), 64, parts, [&](std::size_t b, std::size_t e, std::size_t p) {
      crc[p] = crc32c(bytes.subspan(b, e - b));
      len[p] = e - b;
    });
    std::uint32_t all = crc[0];
    for (std::size_t p = 1; p < parts; ++p) all = crc32c_combine(all, crc[p], len[p]);
    return all;
  }

 private:
  // The parts of a parallel call over `units` (elements, chunks or bytes) of which a thread should have at
  // least min_per_part. The threshold is for a sleeping pool, whose first call pays the wake-up of an idle core
  // (~190 us wall on the VM of run 10); while the workers poll after a call (kSpin), 1/kWarmShare of it is
  // enough. A call between the two thresholds that finds them asleep runs on the calling thread and wakes
  // them for the calls that follow (the tensors of one step come one after another). The parts never change
  // the bytes, only the time.
  std::size_t parts_for(std::size_t units, std::size_t min_per_part) const {
    min_per_part = std::max<std::size_t>(1, min_per_part);
    const std::size_t cold = std::max<std::size_t>(1, std::min<std::size_t>(threads_, units / min_per_part));
    const std::size_t warm_min = std::max<std::size_t>(1, min_per_part / kWarmShare);
    const std::size_t warm = std::max<std::size_t>(1, std::min<std::size_t>(threads_, units / warm_min));
    if (warm <= cold) return cold;
    if (pool_.awake(warm - 1)) {
      polled_calls_.fetch_add(1, std::memory_order_relaxed);
      return warm;
    }
    if (cold <= 1) pool_.wake_up(warm - 1);
    return cold;
  }

  // Single-pass 2bit encode with the tensor's own scalar s = max |g| and no clipping. The running
  // maximum starts at the maximum of a strided sample (strided_max: <= s, so exact). Each part decides
  // its elements with its running maximum (Kernels::encode_2bit_running), which keeps a superset of
  // what s keeps, in pieces of kPassPiece elements; a piece whose running maximum is m at its start
  // gets the guard R = kGuard * m, and only its candidates not kept under R are stored. Once s is
  // known:
  //  * the pieces with R < s are not covered by their guard: they are encoded again with the exact
  //    rule (their stored candidates are skipped). R only rises, so they are a prefix of the part;
  //  * in the other pieces the stored candidates decided before the part's maximum reached s are
  //    decided again with the exact rule and the codes of those s drops are cleared.
  // A part whose stored candidates outgrow half its elements stops collecting them: the rest of it is
  // only scanned for its maximum and encoded again with the exact rule afterwards.
  ScalarRule encode_single_pass(std::span<const float> g, const StreamKey& key, std::span<std::uint8_t> body) const {
    const std::size_t n = g.size();
    const std::size_t parts = parts_for(n, min_per_thread_);
    thread_local std::vector<CandidateBuffer> mine;
    std::vector<CandidateBuffer>& buffers = mine;  // the calling thread's: the name means the worker's own in a worker
    if (buffers.size() < parts) buffers.resize(parts);
    struct Piece {
      std::size_t begin;  // first element
      float guard;        // R
      std::size_t first;  // its first stored candidate
    };
    struct Part {
      cpu::RunningPass st;
      std::size_t begin = 0, end = 0, redo_from = 0;  // redo_from < end: [redo_from, end) encoded afterwards
      std::vector<Piece> pieces;                      // the pieces encode_2bit_running saw, in order
    };
    const float seed = strided_max(g, kSeedStride);
    std::vector<Part> res(parts);
    parallel_ranges(pool_, n, kAlign, parts, [&](std::size_t b, std::size_t e, std::size_t p) {
      Part& r = res[p];
      CandidateBuffer& buf = buffers[p];
      r.begin = b;
      r.end = r.redo_from = e;
      r.st.m = seed;
      r.pieces.reserve((e - b) / kPassPiece + 1);
      const std::size_t most = (e - b) / 2 + kPassPiece;
      for (std::size_t pb = b; pb < e; pb += kPassPiece) {
        std::size_t pe = std::min(e, pb + kPassPiece);
        if (r.st.count + (pe - pb) > most) {  // too many candidates: the maximum of the rest, then redo it
          std::size_t bad = cpu::kNoBadIndex;
          float rest = kernels_->max_abs(g.data(), pb, e, &bad);
          r.st.first_bad = bad;
          r.st.m = std::max(r.st.m, rest);
          r.st.settled = r.st.count;  // the maximum may have risen after the last candidate: check them all
          r.redo_from = pb;
          break;
        }
        buf.reserve(r.st.count + (pe - pb) + cpu::kCandidateSlack, r.st.count);
        const float guard = kGuard * r.st.m;
        r.pieces.push_back({pb, guard, r.st.count});
        kernels_->encode_2bit_running(g.data(), pb, pe, guard, key, body.data(), buf.pos.get(), buf.u.get(),
                                      buf.a.get(), &r.st);
        if (r.st.first_bad != cpu::kNoBadIndex) break;
      }
    });
    for (const Part& r : res)  // the lowest part's first bad value: the first in the tensor
      if (r.st.first_bad != cpu::kNoBadIndex) throw NonFiniteError(key.tensor, r.st.first_bad, g[r.st.first_bad]);
    float s = 0.0f;
    for (const Part& r : res) s = std::max(s, r.st.m);
    const ScalarRule rule = make_rule(s, s);
    for (std::size_t p = 0; p < parts; ++p) {
      const Part& r = res[p];
      const CandidateBuffer& buf = buffers[p];
      // the first piece covered by its guard (the guards rise with the running maximum)
      std::size_t i = 0;
      while (i < r.pieces.size() && r.pieces[i].guard < s) ++i;
      const std::size_t covered_from = i < r.pieces.size() ? r.pieces[i].begin : r.redo_from;
      const std::size_t limit = r.st.m == s ? r.st.settled : r.st.count;
      for (; i < r.pieces.size(); ++i) {
        const std::size_t c0 = r.pieces[i].first;
        if (c0 >= limit) break;  // the rest were decided with s
        const std::size_t c1 = std::min(limit, i + 1 < r.pieces.size() ? r.pieces[i + 1].first : r.st.count);
        if (c0 < c1)
          kernels_->recheck_2bit(body.data(), r.pieces[i].begin, buf.pos.get() + c0, buf.u.get() + c0,
                                 buf.a.get() + c0, c1 - c0, rule);
      }
      if (r.begin < covered_from) kernels_->encode_2bit(g.data(), r.begin, covered_from, rule, key, body.data());
      if (r.redo_from < r.end) kernels_->encode_2bit(g.data(), r.redo_from, r.end, rule, key, body.data());
    }
    return rule;
  }

  // One pass over g for clipping: max |g| (throws NonFiniteError as max_abs), the canonical mean and
  // the shifted sums; returns the clip bound float(c * sigma) of the canonical sigma, from the sums when
  // they pin it, from the canonical sigma pass otherwise.
  float fused_clip_bound(std::span<const float> g, double c, std::uint32_t tensor, float* max_out) const {
    const std::size_t n = g.size();
    const std::size_t chunks = (n + kReduceChunk - 1) / kReduceChunk;
    const std::size_t per_part = min_per_thread_ / kReduceChunk;
    const std::size_t parts = parts_for(chunks, per_part);
    std::vector<double> t1(chunks), q1(chunks), q2(chunks);
    std::vector<float> maxima(parts, 0.0f);
    std::vector<std::size_t> bad(parts, cpu::kNoBadIndex);
    const float shift = g[0];
    parallel_ranges(pool_, chunks, 1, parts, [&](std::size_t c0, std::size_t c1, std::size_t p) {
      maxima[p] = kernels_->chunk_stats(g.data(), n, c0, c1, shift, t1.data() + c0, q1.data() + c0,
                                        q2.data() + c0, &bad[p]);
    });
    for (std::size_t p = 0; p < parts; ++p)
      if (bad[p] != cpu::kNoBadIndex) throw NonFiniteError(tensor, bad[p], g[bad[p]]);
    *max_out = *std::max_element(maxima.begin(), maxima.end());
    double total1 = 0.0, s1 = 0.0, s2 = 0.0;
    for (std::size_t k = 0; k < chunks; ++k) {
      total1 = total1 + t1[k];
      s1 += q1[k];
      s2 += q2[k];
    }
    const double mean = total1 / static_cast<double>(n);  // as moments(): the canonical mean
    float bound;
    if (clip_bound_from_sums(c, n, chunks, mean, shift, s1, s2, &bound)) return bound;
    return static_cast<float>(c * moments(g).sigma);  // as api.cpp's clip bound
  }

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
    parallel_ranges(pool_, chunks, 1, parts_for(chunks, min_per_thread_ / kReduceChunk), [&](std::size_t c0, std::size_t c1, std::size_t) {
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
    const std::size_t parts = parts_for(body.size(), min_per_thread_ / per_byte);
    std::vector<std::size_t> bad(parts, cpu::kNoBadIndex);
    parallel_ranges(pool_, body.size(), 1024, parts, [&](std::size_t b0, std::size_t b1, std::size_t p) {
      bad[p] = kernel(b0, b1);
    });
    for (std::size_t j : bad)
      if (j != cpu::kNoBadIndex) throw_invalid_code(packing, body.data(), j);
  }

  unsigned threads_;
  const cpu::Kernels* kernels_;
  std::size_t min_per_thread_;
  std::size_t single_pass_from_;
  bool measure_path_;
  mutable PathChooser chooser_;
  mutable WorkerPool pool_;
  mutable std::atomic<std::size_t> polled_calls_{0};  // parallel calls that only the polling threshold allowed
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

namespace {
// The widest kernel set this CPU runs (the sets come in increasing width; portable always runs).
const cpu::Kernels* best_kernels() {
  const cpu::Kernels* k = nullptr;
  for (const cpu::KernelSet& set : cpu::compiled_kernel_sets())
    if (set.cpu_runs()) k = set.kernels();
  return k;
}
}  // namespace

std::unique_ptr<Codec> make_optimized_codec_isa(unsigned threads, Isa isa) {
  const cpu::Kernels* kernels = isa == Isa::best ? best_kernels() : nullptr;
  for (const cpu::KernelSet& set : cpu::compiled_kernel_sets()) {
    if (isa == Isa::best || set.isa != isa) continue;
    if (!set.cpu_runs()) throw Error(ErrorCode::invalid_argument, std::string("this CPU has no ") + set.needs);
    kernels = set.kernels();
  }
  if (!kernels)
    throw Error(ErrorCode::invalid_argument, "this build of the codec has no kernels for the requested "
                                             "instruction set (x86 SIMD kernels are built on x86-64 only)");
  return std::make_unique<OptimizedCodec>(threads, kernels);
}

namespace cpu {
std::unique_ptr<Codec> make_optimized_codec_with(unsigned threads, const Kernels* kernels, std::size_t min_per_thread,
                                                 std::size_t single_pass_from, bool measure_path) {
  return std::make_unique<OptimizedCodec>(threads, kernels, min_per_thread, single_pass_from, measure_path);
}
const char* chosen_path(const Codec& codec) {
  const auto* c = dynamic_cast<const OptimizedCodec*>(&codec);
  return c ? c->chosen_path() : "not the optimized codec";
}
std::size_t polled_parallel_calls(const Codec& codec) {
  const auto* c = dynamic_cast<const OptimizedCodec*>(&codec);
  return c ? c->polled_calls() : 0;
}
std::size_t default_min_per_thread() { return kMinPerThread; }
std::size_t default_single_pass_from() { return kSinglePassFrom; }
}  // namespace cpu

void philox_blocks(const StreamKey& key, std::uint32_t first, std::size_t count, PhiloxBlock* out) {
  static const cpu::Kernels* const best = best_kernels();
  best->philox_blocks(key, first, count, out);
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
