// terngrad-bench: CUDA codec throughput next to cudaMemcpy device-to-device of the same bytes, timed with
// CUDA events in the same run; every kernel version is validated against the CPU codec before it is timed.
//   build/cuda/bench/cuda/tg_cuda_bench [--min-exp 20] [--max-exp 28] [--out reports/cuda-bench.md]
// GB/s counts the float32 bytes of the tensor (4n) for encode (scalar pass + ternarize + 2bit pack) and
// decode (2bit unpack + scale); "ratio" divides by the device-to-device copy's GB/s of the same 4n bytes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "tg/atomic_file.hpp"
#include "tg/codec.hpp"
#include "tg/cuda.hpp"

#include "dispatch.hpp"  // detail::run_encode with EncodeRun::last: the pipeline's steps timed one by one

namespace {

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "tg_cuda_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Reproducible values in (-1, 1) with exact zeros every 7th element (splitmix64; fast for 2^28 floats).
std::vector<float> gradient(std::size_t n) {
  std::vector<float> g(n);
  std::uint64_t x = 0x243f6a8885a308d3ull;
  for (std::size_t k = 0; k < n; ++k) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    g[k] = k % 7 == 3 ? 0.0f : static_cast<float>(static_cast<std::int64_t>(z) >> 40) * 0x1p-23f;
  }
  return g;
}

// Median milliseconds of `reps` runs of op on the default stream, after 3 warm-up runs.
double median_ms(int reps, const std::function<void()>& op) {
  for (int i = 0; i < 3; ++i) op();
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) cuda_ok(cudaEventCreate(&e), "cudaEventCreate");
  for (int i = 0; i < reps; ++i) {
    cuda_ok(cudaEventRecord(ev[2 * i], nullptr), "cudaEventRecord");
    op();
    cuda_ok(cudaEventRecord(ev[2 * i + 1], nullptr), "cudaEventRecord");
  }
  cuda_ok(cudaDeviceSynchronize(), "timed runs");
  std::vector<double> ms(reps);
  for (int i = 0; i < reps; ++i) {
    float t = 0;
    cuda_ok(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
    ms[i] = t;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}

struct Row {
  std::string op, version, params;
  int exp;
  double ms, gbs, ratio;
};

// Where the encode's time goes: the pipeline run up to each step (EncodeRun::last), a step's time being
// the difference of two medians; its bytes against the copy's rate of the same run (the copy moves 8n
// bytes, 4n read and 4n written). The totals steps add n/2048 chunk totals in one dependent chain (the
// canonical order, tg/reduce.hpp), so their bound is latency, not bytes: ns per addition is printed too.
std::string step_table(const float* dg, std::size_t n, void* ws, std::size_t wsb, std::uint8_t* dbody,
                       tg::cuda::TensorResult* dres, double copy_ms, int reps) {
  using tg::cuda::detail::Step;
  struct Named {
    Step step;
    const char* name;
    double bytes;  // moved, per element
  };
  const std::vector<Named> none = {{Step::max, "max |g| (after prepare)", 4}, {Step::rule, "rule", 0},
                                   {Step::pack, "ternarize + 2bit pack", 4.25}};
  const std::vector<Named> clip = {{Step::mean_chunks, "mean: chunk sums (after prepare)", 4},
                                   {Step::mean_total, "mean: chunk totals in order; max |g| beside them", 0},
                                   {Step::sigma_chunks, "sigma: chunk sums", 4},
                                   {Step::sigma_total, "sigma: chunk totals in order", 0},
                                   {Step::rule, "rule", 0},
                                   {Step::pack, "ternarize + 2bit pack", 4.25}};
  std::ostringstream md;
  md << "| clip | step | median ms to the end of the step | step ms | fraction of the copy's rate |\n"
     << "|---|---|---|---|---|\n";
  double copy_bytes_per_ms = 8.0 * static_cast<double>(n) / copy_ms;
  double chunks = std::ceil(static_cast<double>(n) / 2048.0);
  for (bool clipping : {false, true}) {
    tg::cuda::detail::EncodeRun run;
    run.single = tg::cuda::DeviceTensor{dg, n, dbody, 1, 0};
    run.total_elements = n;
    run.params.clip = clipping ? tg::ClipMode::clip : tg::ClipMode::none;
    run.key = {2017, 0, 1, 0};
    double before = 0.0;
    for (const auto& s : clipping ? clip : none) {
      run.last = s.step;
      double ms = median_ms(reps, [&] {
        ++run.key.step;
        tg::cuda::detail::run_encode(ws, wsb, run, dres, nullptr);
      });
      double step_ms = ms - before;
      char fraction[96];
      if (s.bytes > 0)
        std::snprintf(fraction, sizeof fraction, "%.3f (%.2f bytes/element)",
                      s.bytes * static_cast<double>(n) / copy_bytes_per_ms / step_ms, s.bytes);
      else if (s.step == Step::rule)
        std::snprintf(fraction, sizeof fraction, "- (one thread)");
      else
        std::snprintf(fraction, sizeof fraction, "- (%.0f dependent additions, %.2f ns each)", chunks,
                      step_ms * 1e6 / chunks);
      char line[256];
      std::snprintf(line, sizeof line, "| %s | %s | %.4f | %.4f | %s |\n", clipping ? "clip" : "none", s.name, ms,
                    step_ms, fraction);
      md << line;
      before = ms;
    }
  }
  return md.str();
}

}  // namespace

int run(int argc, char** argv) {
  int min_exp = 20, max_exp = 28;
  std::string out_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--min-exp" && i + 1 < argc) min_exp = std::atoi(argv[++i]);
    else if (a == "--max-exp" && i + 1 < argc) max_exp = std::atoi(argv[++i]);
    else if (a == "--out" && i + 1 < argc) out_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: tg_cuda_bench [--min-exp E] [--max-exp E] [--out FILE.md] (10 <= E <= 30)\n");
      return 2;
    }
  }
  if (min_exp < 10 || max_exp > 30 || min_exp > max_exp) {
    std::fprintf(stderr, "tg_cuda_bench: exponents must satisfy 10 <= min <= max <= 30\n");
    return 2;
  }
  std::string why;
  if (!tg::cuda::device_available(&why)) {
    std::fprintf(stderr, "tg_cuda_bench: no GPU, nothing measured: %s\n", why.c_str());
    return 2;
  }
  cudaDeviceProp prop;
  cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::ostringstream md;
  md << "device: " << prop.name << ", " << prop.multiProcessorCount << " SMs, "
     << prop.totalGlobalMem / (1 << 20) << " MiB\n\n";
  std::printf("%s", md.str().c_str());

  auto cpu = tg::make_optimized_codec(0);
  std::vector<Row> rows;
  std::string steps;  // at 2^26, the default version
  const auto& versions = tg::cuda::kernel_versions();
  for (int e = min_exp; e <= max_exp; e += 2) {
    std::size_t n = std::size_t{1} << e;
    auto g = gradient(n);
    int reps = static_cast<int>(std::clamp<std::size_t>((std::size_t{1} << 32) / (4 * n), 10, 200));
    float *dg = nullptr, *dcopy = nullptr, *dout = nullptr;
    std::uint8_t* dbody = nullptr;
    tg::cuda::TensorResult* dres = nullptr;
    std::uint64_t* dbad = nullptr;
    void* ws = nullptr;
    std::size_t wsb = tg::cuda::encode_workspace_bytes(1, n);
    std::size_t nb = tg::body_bytes(tg::Packing::two_bit, n);
    cuda_ok(cudaMalloc(&dg, 4 * n), "cudaMalloc");
    cuda_ok(cudaMalloc(&dcopy, 4 * n), "cudaMalloc");
    cuda_ok(cudaMalloc(&dout, 4 * n), "cudaMalloc");
    cuda_ok(cudaMalloc(&dbody, tg::body_bytes(tg::Packing::base3, n) + nb), "cudaMalloc");
    cuda_ok(cudaMalloc(&dres, sizeof(tg::cuda::TensorResult)), "cudaMalloc");
    cuda_ok(cudaMalloc(&dbad, 8), "cudaMalloc");
    cuda_ok(cudaMalloc(&ws, wsb), "cudaMalloc");
    cuda_ok(cudaMemcpy(dg, g.data(), 4 * n, cudaMemcpyHostToDevice), "upload");

    double copy_ms = median_ms(reps, [&] { cudaMemcpyAsync(dcopy, dg, 4 * n, cudaMemcpyDeviceToDevice, nullptr); });
    double copy_gbs = 4.0 * n / (copy_ms * 1e6);
    rows.push_back({"memcpy D2D", "-", "-", e, copy_ms, copy_gbs, 1.0});

    std::vector<tg::Params> cases(1);
    if (e == 26) {  // informative extra rows at the target size
      tg::Params clip;
      clip.clip = tg::ClipMode::clip;
      tg::Params base3;
      base3.packing = tg::Packing::base3;
      cases.push_back(clip);
      cases.push_back(base3);
    }
    for (const auto& p : cases) {
      std::string pname = std::string(tg::to_string(p.clip)) + "/" + tg::to_string(p.packing);
      tg::StreamKey key{2017, 0, 1, 0};
      tg::ScalarRule rule = tg::own_rule(*cpu, g, p, key.tensor);
      std::size_t pb = tg::body_bytes(p.packing, n);
      std::vector<std::uint8_t> want(pb), got(pb);
      cpu->encode_body(g, rule, key, p.packing, want);
      std::vector<float> want_out(n), got_out(n);
      cpu->decode_body(p.packing, want, rule.scalar, want_out);
      for (const auto& v : versions) {
        // validate before timing
        cuda_ok(cudaMemset(dbody, 0xCA, pb), "cudaMemset");
        tg::cuda::encode(ws, wsb, dg, n, p, key, dbody, dres, nullptr, nullptr, v);
        tg::cuda::TensorResult r;
        cuda_ok(cudaMemcpy(&r, dres, sizeof r, cudaMemcpyDeviceToHost), "download");
        cuda_ok(cudaMemcpy(got.data(), dbody, pb, cudaMemcpyDeviceToHost), "download");
        if (std::memcmp(&r.scalar, &rule.scalar, 4) != 0 || got != want) {
          std::fprintf(stderr, "tg_cuda_bench: FAIL: %s encode %s at 2^%d differs from the CPU codec\n", v.c_str(),
                       pname.c_str(), e);
          return 1;
        }
        cuda_ok(cudaMemset(dout, 0xCA, 4 * n), "cudaMemset");
        tg::cuda::decode(p.packing, dbody, n, r.scalar, dout, dbad, nullptr, v);
        std::uint64_t bad = 0;
        cuda_ok(cudaMemcpy(&bad, dbad, 8, cudaMemcpyDeviceToHost), "download");
        cuda_ok(cudaMemcpy(got_out.data(), dout, 4 * n, cudaMemcpyDeviceToHost), "download");
        if (bad != tg::cuda::kNone || std::memcmp(got_out.data(), want_out.data(), 4 * n) != 0) {
          std::fprintf(stderr, "tg_cuda_bench: FAIL: %s decode %s at 2^%d differs from the CPU codec\n", v.c_str(),
                       pname.c_str(), e);
          return 1;
        }
        std::uint32_t step = 0;
        double enc = median_ms(reps, [&] {
          tg::cuda::encode(ws, wsb, dg, n, p, {2017, 0, 1, step++}, dbody, dres, nullptr, nullptr, v);
        });
        rows.push_back({"encode", v, pname, e, enc, 4.0 * n / (enc * 1e6), copy_ms / enc});
        double dec = median_ms(reps, [&] { tg::cuda::decode(p.packing, dbody, n, r.scalar, dout, dbad, nullptr, v); });
        rows.push_back({"decode", v, pname, e, dec, 4.0 * n / (dec * 1e6), copy_ms / dec});
      }
    }
    if (e == 26) steps = step_table(dg, n, ws, wsb, dbody, dres, copy_ms, reps);
    for (void* p : {static_cast<void*>(dg), static_cast<void*>(dcopy), static_cast<void*>(dout),
                    static_cast<void*>(dbody), static_cast<void*>(dres), static_cast<void*>(dbad), ws})
      cudaFree(p);
    std::printf("2^%d done (validated, %d reps)\n", e, reps);
    std::fflush(stdout);
  }
  md << "| n | op | version | clip/packing | median ms | GB/s (4n bytes) | fraction of D2D copy |\n"
     << "|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    char line[256];
    std::snprintf(line, sizeof line, "| 2^%d | %s | %s | %s | %.4f | %.1f | %.3f |\n", r.exp, r.op.c_str(),
                  r.version.c_str(), r.params.c_str(), r.ms, r.gbs, r.ratio);
    md << line;
  }
  if (!steps.empty())
    md << "\nThe encode's steps at 2^26, " << versions.back()
       << " (each step's time is the difference of the medians of the pipeline run to its end and to the "
          "end of the step before; fraction: the step's bytes at the D2D copy's rate over its time):\n\n"
       << steps;
  std::printf("\n%s", md.str().c_str());
  if (!out_path.empty()) tg::write_file_atomic(out_path, md.str());
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tg_cuda_bench: %s\n", e.what());
    return 2;
  }
}
