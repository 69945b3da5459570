// terngrad-bench: the CUDA codec's kernels and its device API (tg/cuda.hpp). Layers, CUB style:
// public function -> run_encode / dispatch (launch configuration chosen in launch_for only) -> kernel.
// Kernel versions side by side (kernel_versions()): v1-bytewise (one thread per body byte, a Philox
// block per element), v2-block (one thread per Philox block or base3 word, vector loads/stores) and
// v3-unrolled (v2 with four 2bit blocks loaded per thread before any is used). The decode of v3 is v2's.
// Per-element work lives in tiles.hpp (host-tested); bits match the reference because the rules are
// the shared headers and this file is built with -fmad=false and IEEE division/sqrt (CMakeLists.txt).
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dispatch.hpp"
#include "tiles.hpp"

namespace tg::cuda {
namespace detail {
namespace {

constexpr unsigned kThreads = 256;

// ---- launch configuration (the one place it is chosen) ---------------------------------------------

int sm_count() {
  static std::array<std::atomic<int>, 64> cache{};
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  if (device < 64 && cache[device].load() > 0) return cache[device].load();
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  if (device < 64) cache[device].store(sms);
  return sms;
}

// Blocks of kThreads for `items` work items of `per_block` items each, capped at 16 blocks per SM
// (kernels loop grid-stride over the rest, so any grid size gives the same bytes).
unsigned launch_for(std::uint64_t items, std::uint64_t per_block) {
  std::uint64_t blocks = (items + per_block - 1) / per_block;
  std::uint64_t cap = static_cast<std::uint64_t>(sm_count()) * 16;
  return static_cast<unsigned>(std::max<std::uint64_t>(1, std::min(blocks, cap)));
}

void check_launch(const char* what) { check(cudaGetLastError(), what); }

// ---- device helpers ----------------------------------------------------------------------------

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
}

// Block-wide max of a nonnegative float and min of an index; the results are valid in thread 0.
__device__ void block_reduce(float& m, unsigned long long& bad) {
  __shared__ float smax[32];
  __shared__ unsigned long long sbad[32];
  for (int off = 16; off > 0; off /= 2) {
    m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, off));
    bad = min(bad, __shfl_down_sync(0xffffffffu, bad, off));
  }
  unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) smax[warp] = m, sbad[warp] = bad;
  __syncthreads();
  if (warp == 0) {
    unsigned warps = blockDim.x / 32;
    m = lane < warps ? smax[lane] : 0.0f;
    bad = lane < warps ? sbad[lane] : kNoneU;
    for (int off = 16; off > 0; off /= 2) {
      m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, off));
      bad = min(bad, __shfl_down_sync(0xffffffffu, bad, off));
    }
  }
  __syncthreads();  // the shared arrays are reused by the next tile
}

// ---- encode pipeline kernels ---------------------------------------------------------------------

// One thread: prepare_layers (tiles.hpp).
__global__ void prepare_kernel(Workspace ws, const DeviceTensor* table, DeviceTensor single, std::uint32_t count,
                               unsigned long long total_elements, bool has_rule, ScalarRule rule) {
  if (threadIdx.x == 0 && blockIdx.x == 0) prepare_layers(ws, table, single, count, total_elements, has_rule, rule);
}

// max |g| and the first non-finite index of every tensor over packing tile t, by one block.
__device__ void max_tile(const Workspace& ws, std::uint32_t count, std::uint64_t t) {
  std::uint64_t begin, end;
  std::uint32_t L = tile_range(ws, count, t, &begin, &end);
  DeviceTensor d = ws.tensors[L];
  MaxScan s;
  scan_tile(d.g, begin, end, aligned16(d.g), threadIdx.x, blockDim.x, s);
  float m = s.max;
  unsigned long long bad = s.first_bad;
  block_reduce(m, bad);
  if (threadIdx.x == 0) {
    atomicMax(&ws.states[L].max_bits, __float_as_uint(m));
    if (bad != kNoneU) atomicMin(&ws.states[L].first_bad, bad);
  }
}

// The max pass: one block per packing tile.
__global__ void max_kernel(Workspace ws, std::uint32_t count) {
  for (std::uint64_t t = blockIdx.x; t < ws.tile_begin[count]; t += gridDim.x) max_tile(ws, count, t);
}

// Canonical chunk totals (tg/reduce.hpp): thread i is lane i % 8 of global chunk i / 8; the 8 lanes of
// a chunk sit in one aligned group of a warp and combine in the canonical tree by shuffles.
__global__ void chunk_sum_kernel(Workspace ws, std::uint32_t count, bool square) {
  std::uint64_t chunks = ws.chunk_begin[count];
  std::uint64_t items = chunks * kReduceLanes;
  std::uint64_t rounded = (items + 31) & ~std::uint64_t{31};  // whole warps iterate together
  std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rounded; i += stride) {
    std::uint64_t c = i / kReduceLanes;
    unsigned lane = static_cast<unsigned>(i % kReduceLanes);
    double sum = c < chunks ? chunk_lane_sum(ws, count, c, lane, square) : 0.0;
    // ((L0 + L1) + (L2 + L3)) + ((L4 + L5) + (L6 + L7)), exactly combine_lanes.
    double pair = sum + __shfl_down_sync(0xffffffffu, sum, 1);
    double quad = pair + __shfl_down_sync(0xffffffffu, pair, 2);
    double all = quad + __shfl_down_sync(0xffffffffu, quad, 4);
    if (lane == 0 && c < chunks) ws.totals[c] = all;
  }
}

// Tensor totals (tensor_total: chunk totals added in chunk order from 0.0), then set_mean or set_sigma:
// blocks below `chain_blocks` take one tensor at a time. The additions are one dependent chain, so they
// stay in thread 0; the block's other warps stage the totals in shared memory ahead of it
// (double-buffered), as a one-thread loop over global memory waits on every load (on an H200, 2^26
// elements with clipping took 9x the plain encode that way). Blocks from `chain_blocks` on do the max
// pass meanwhile (max_tile), on the SMs the chains leave idle: the clipping pipeline runs its max pass
// beside the mean's chains (rule needs max, mean and sigma; nothing before it needs max).
constexpr unsigned kStage = 1024;
__global__ void total_kernel(Workspace ws, std::uint32_t count, bool variance, unsigned chain_blocks) {
  __shared__ __align__(16) double stage[2][kStage];  // read as double2
  if (blockIdx.x >= chain_blocks) {
    for (std::uint64_t t = blockIdx.x - chain_blocks; t < ws.tile_begin[count]; t += gridDim.x - chain_blocks)
      max_tile(ws, count, t);
    return;
  }
  if (!*ws.table_ok) return;  // chunk_begin is not whole; set_mean and set_sigma would ignore it anyway
  // Warp 0 adds; the other warps load (thread 0 never waits on a global load).
  unsigned loader = threadIdx.x - 32, loaders = blockDim.x - 32;
  bool loads = threadIdx.x >= 32;
  for (std::uint32_t L = blockIdx.x; L < count; L += chain_blocks) {
    std::uint64_t begin = ws.chunk_begin[L], chunks = ws.chunk_begin[L + 1] - begin;
    std::uint64_t tiles = (chunks + kStage - 1) / kStage;
    if (loads)
      for (std::uint64_t k = loader; k < kStage && k < chunks; k += loaders) stage[0][k] = ws.totals[begin + k];
    __syncthreads();
    double total = 0.0;
    for (std::uint64_t t = 0; t < tiles; ++t) {
      std::uint64_t next = (t + 1) * kStage;
      if (loads)
        for (std::uint64_t k = loader; k < kStage && next + k < chunks; k += loaders)
          stage[(t + 1) & 1][k] = ws.totals[begin + next + k];
      if (threadIdx.x == 0) {
        const double2* in = reinterpret_cast<const double2*>(stage[t & 1]);
        unsigned m = static_cast<unsigned>(chunks - t * kStage < kStage ? chunks - t * kStage : kStage);
#pragma unroll 8
        for (unsigned k = 0; k < m / 2; ++k) {
          double2 v = in[k];
          total = total + v.x;
          total = total + v.y;
        }
        if (m % 2) total = total + stage[t & 1][m - 1];
      }
      __syncthreads();  // buffer t & 1 is loaded again in step t + 1
    }
    if (threadIdx.x == 0) variance ? set_sigma(ws, L, total) : set_mean(ws, L, total);
  }
}

// One thread per tensor: sigma, clip bound, scalar and rule; writes the caller's results.
__global__ void rule_kernel(Workspace ws, std::uint32_t count, bool clipping, double c, const float* shared_scalar,
                            TensorResult* results) {
  for (std::uint32_t L = blockIdx.x * blockDim.x + threadIdx.x; L < count; L += gridDim.x * blockDim.x)
    results[L] = finish_rule(ws, L, clipping, c, shared_scalar);
}

// Packing, one block per tile; the per-thread work is pack_tile_* (tiles.hpp). One instantiation per
// version, so each gets its own register allocation.
template <int version>
__global__ void pack_kernel(Workspace ws, std::uint32_t count, StreamKey key, bool base3) {
  std::uint64_t tiles = ws.tile_begin[count];
  for (std::uint64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    std::uint64_t begin, end;
    std::uint32_t L = tile_range(ws, count, t, &begin, &end);
    if (ws.states[L].first_bad != kNoneU) continue;  // non-finite input: nothing written
    DeviceTensor d = ws.tensors[L];
    ScalarRule rule = ws.states[L].rule;
    key.tensor = d.tensor;
    if constexpr (version == 0)
      pack_tile_bytewise(d.g, d.n, d.body, begin, end, rule, key, base3, threadIdx.x, blockDim.x);
    else if constexpr (version == 1)
      pack_tile_block(d.g, d.n, d.body, begin, end, aligned16(d.g), rule, key, base3, threadIdx.x, blockDim.x);
    else
      pack_tile_unrolled(d.g, d.n, d.body, begin, end, aligned16(d.g), rule, key, base3, threadIdx.x, blockDim.x);
  }
}

// ---- ternarize, unpack, decode, aggregate ------------------------------------------------------------

#define TG_GRID_STRIDE(i, count)                                                                  \
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (count); \
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)

__global__ void ternarize_kernel(const float* g, std::uint64_t n, ScalarRule rule, StreamKey key, std::int8_t* trits) {
  bool vec = aligned16(g);
  TG_GRID_STRIDE(b, (n + 3) / 4) {
    int t[4];
    int valid = trits_of_block(g, n, b, vec, rule, key, t);
    for (int m = 0; m < valid; ++m) trits[4 * b + m] = static_cast<std::int8_t>(t[m]);
  }
}

// v1-bytewise decode (and unpack to trits): one thread per body byte.
__global__ void decode_bytewise_kernel(const std::uint8_t* body, std::uint64_t n, bool base3, float scalar,
                                       float* out, std::int8_t* trits, unsigned long long* first_bad) {
  TG_GRID_STRIDE(j, base3 ? packed_bytes_base3(n) : packed_bytes_2bit(n)) {
    std::uint64_t bad = decode_byte_item(body, n, base3, j, scalar, out, trits);
    if (bad != kNoByte) atomicMin(first_bad, static_cast<unsigned long long>(bad));
  }
}

// v2-block decode: 2bit one byte -> one float4 store; base3 four bytes -> five float4 stores.
__global__ void decode_block_kernel(const std::uint8_t* body, std::uint64_t n, bool base3, float scalar,
                                    float* out, unsigned long long* first_bad) {
  bool vec = aligned16(out);
  TG_GRID_STRIDE(it, decode_block_items(n, base3)) {
    std::uint64_t bad = decode_block_item(body, n, base3, it, scalar, out, vec);
    if (bad != kNoByte) atomicMin(first_bad, static_cast<unsigned long long>(bad));
  }
}

__global__ void aggregate_kernel(const std::uint8_t* const* bodies, std::uint32_t workers, bool base3,
                                 std::uint64_t n, float scalar, std::int32_t* sums, float* mean,
                                 unsigned long long* first_bad) {
  TG_GRID_STRIDE(j, base3 ? packed_bytes_base3(n) : packed_bytes_2bit(n)) {
    std::uint64_t bad = aggregate_item(bodies, workers, base3, n, j, scalar, sums, mean);
    if (bad != kNoByte) atomicMin(first_bad, static_cast<unsigned long long>(bad));
  }
}

void check_count(std::uint64_t n) {
  if (n > kMaxElements)
    throw Error(ErrorCode::length_overflow,
                "tensor of " + std::to_string(n) + " elements exceeds the maximum of 2^34");
}

}  // namespace

void check(int status, const char* what) {
  if (status == 0) return;
  auto e = static_cast<cudaError_t>(status);
  throw CudaError(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e),
                  status);
}

std::string missing_kernel_image() {
  // The runtime loads a module for the current device on first use: no matching SASS and no PTX it
  // can compile shows up here as cudaErrorNoKernelImageForDevice (or a similar load error).
  cudaFuncAttributes attributes;
  cudaError_t err = cudaFuncGetAttributes(&attributes, max_kernel);
  if (err == cudaSuccess) return "";
  cudaGetLastError();  // clear it so later calls do not see it
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

int version_index(const std::string& name) {
  const auto& v = kernel_versions();
  if (name.empty()) return static_cast<int>(v.size()) - 1;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] == name) return static_cast<int>(i);
  std::string known;
  for (const auto& s : v) known += (known.empty() ? "" : ", ") + s;
  throw Error(ErrorCode::invalid_argument, "unknown CUDA kernel version '" + name + "' (known: " + known + ")");
}

void run_encode(void* d_workspace, std::size_t workspace_bytes, const EncodeRun& run, TensorResult* d_results,
                cudaStream_t stream) {
  if (!run.has_rule) validate(run.params);
  bool pack = run.last == Step::pack;
  if (pack && run.params.packing != Packing::two_bit && run.params.packing != Packing::base3)
    throw Error(ErrorCode::invalid_argument, "CUDA encode: packing must be 2bit or base3");
  if (!run.d_table) check_count(run.total_elements);
  if (run.count == 0) return;
  if (!run.d_table && run.count != 1)
    throw Error(ErrorCode::invalid_argument, "CUDA encode: a single tensor needs count 1");
  Layout l = layout(run.count, run.total_elements);
  if (!d_workspace || workspace_bytes < l.bytes)
    throw Error(ErrorCode::invalid_argument, "CUDA encode: workspace of " + std::to_string(workspace_bytes) +
                                                 " bytes, need " + std::to_string(l.bytes) +
                                                 " (encode_workspace_bytes)");
  if (!run.has_rule && !d_results) throw Error(ErrorCode::invalid_argument, "CUDA encode: results pointer is null");
  int version = run.version < 0 ? static_cast<int>(kernel_versions().size()) - 1 : run.version;
  Workspace ws = carve(d_workspace, l);
  std::uint64_t max_tiles = run.total_elements / kPackTile + run.count;
  unsigned tile_blocks = launch_for(max_tiles, 1);
  unsigned layer_blocks = launch_for(run.count, kThreads);

  prepare_kernel<<<1, 32, 0, stream>>>(ws, run.d_table, run.single, run.count, run.total_elements, run.has_rule, run.rule);
  check_launch("prepare_kernel launch");
  if (!run.has_rule) {
    bool clipping = run.params.clip != ClipMode::none;
    if (!clipping) {
      max_kernel<<<tile_blocks, kThreads, 0, stream>>>(ws, run.count);
      check_launch("max_kernel launch");
      if (run.last == Step::max) return;
    } else {
      // mean: chunk sums, then the chains with the max pass beside them; sigma: chunk sums, chains.
      unsigned sum_blocks = launch_for(l.chunk_capacity * kReduceLanes, kThreads);
      unsigned chain_blocks = launch_for(run.count, 1);
      for (bool variance : {false, true}) {
        chunk_sum_kernel<<<sum_blocks, kThreads, 0, stream>>>(ws, run.count, variance);
        check_launch("chunk_sum_kernel launch");
        if (run.last == (variance ? Step::sigma_chunks : Step::mean_chunks)) return;
        total_kernel<<<chain_blocks + (variance ? 0 : tile_blocks), kThreads, 0, stream>>>(ws, run.count, variance,
                                                                                           chain_blocks);
        check_launch("total_kernel launch");
        if (run.last == (variance ? Step::sigma_total : Step::mean_total) || (!variance && run.last == Step::max))
          return;
      }
    }
    rule_kernel<<<layer_blocks, kThreads, 0, stream>>>(ws, run.count, clipping, run.params.c, run.d_shared_scalar,
                                                       d_results);
    check_launch("rule_kernel launch");
  }
  if (!pack) return;
  bool base3 = run.params.packing == Packing::base3;
  if (version == 0)
    pack_kernel<0><<<tile_blocks, kThreads, 0, stream>>>(ws, run.count, run.key, base3);
  else if (version == 1)
    pack_kernel<1><<<tile_blocks, kThreads, 0, stream>>>(ws, run.count, run.key, base3);
  else
    pack_kernel<2><<<tile_blocks, kThreads, 0, stream>>>(ws, run.count, run.key, base3);
  check_launch("pack_kernel launch");
}

}  // namespace detail

using namespace detail;

const std::vector<std::string>& kernel_versions() {
  static const std::vector<std::string> v = {"v1-bytewise", "v2-block", "v3-unrolled"};
  return v;
}

std::size_t encode_workspace_bytes(std::uint32_t tensors, std::uint64_t total_elements) {
  return layout(tensors, total_elements).bytes;
}

void encode(void* d_workspace, std::size_t workspace_bytes, const float* d_g, std::uint64_t n, const Params& params,
            const StreamKey& key, std::uint8_t* d_body, TensorResult* d_result, cudaStream_t stream,
            const float* d_shared_scalar, const std::string& version) {
  EncodeRun run;
  run.single = DeviceTensor{d_g, n, d_body, key.tensor, 0};
  run.total_elements = n;
  run.params = params;
  run.key = key;
  run.d_shared_scalar = d_shared_scalar;
  run.version = version_index(version);
  run_encode(d_workspace, workspace_bytes, run, d_result, stream);
}

void encode_layers(void* d_workspace, std::size_t workspace_bytes, const DeviceTensor* d_tensors, std::uint32_t count,
                   std::uint64_t total_elements, const Params& params, const StreamKey& key, TensorResult* d_results,
                   cudaStream_t stream, const std::string& version) {
  if (count > 0 && !d_tensors) throw Error(ErrorCode::invalid_argument, "CUDA encode_layers: tensor table is null");
  EncodeRun run;
  run.d_table = d_tensors;
  run.count = count;
  run.total_elements = total_elements;
  run.params = params;
  run.key = key;
  run.version = version_index(version);
  run_encode(d_workspace, workspace_bytes, run, d_results, stream);
}

void ternarize(const float* d_g, std::uint64_t n, const ScalarRule& rule, const StreamKey& key, std::int8_t* d_trits,
               cudaStream_t stream) {
  check_count(n);
  ternarize_kernel<<<launch_for((n + 3) / 4, kThreads), kThreads, 0, stream>>>(d_g, n, rule, key, d_trits);
  check_launch("ternarize_kernel launch");
}

namespace {
void check_ternary(Packing packing) {
  if (packing != Packing::two_bit && packing != Packing::base3)
    throw Error(ErrorCode::bad_packing, "CUDA decode: packing must be 2bit or base3");
}
}  // namespace

void decode(Packing packing, const std::uint8_t* d_body, std::uint64_t n, float scalar, float* d_out,
            std::uint64_t* d_first_bad, cudaStream_t stream, const std::string& version) {
  check_ternary(packing);
  check_count(n);
  int v = version_index(version);
  auto* bad = reinterpret_cast<unsigned long long*>(d_first_bad);
  check(cudaMemsetAsync(bad, 0xff, sizeof(*bad), stream), "cudaMemsetAsync (decode flag)");
  bool base3 = packing == Packing::base3;
  std::uint64_t bytes = base3 ? packed_bytes_base3(n) : packed_bytes_2bit(n);
  if (v == 0) {
    decode_bytewise_kernel<<<launch_for(bytes, kThreads), kThreads, 0, stream>>>(d_body, n, base3, scalar, d_out,
                                                                                 nullptr, bad);
  } else {
    decode_block_kernel<<<launch_for(decode_block_items(n, base3), kThreads), kThreads, 0, stream>>>(
        d_body, n, base3, scalar, d_out, bad);
  }
  check_launch("decode kernel launch");
}

void unpack(Packing packing, const std::uint8_t* d_body, std::uint64_t n, std::int8_t* d_trits,
            std::uint64_t* d_first_bad, cudaStream_t stream) {
  check_ternary(packing);
  check_count(n);
  auto* bad = reinterpret_cast<unsigned long long*>(d_first_bad);
  check(cudaMemsetAsync(bad, 0xff, sizeof(*bad), stream), "cudaMemsetAsync (unpack flag)");
  bool base3 = packing == Packing::base3;
  std::uint64_t bytes = base3 ? packed_bytes_base3(n) : packed_bytes_2bit(n);
  decode_bytewise_kernel<<<launch_for(bytes, kThreads), kThreads, 0, stream>>>(d_body, n, base3, 0.0f, nullptr,
                                                                               d_trits, bad);
  check_launch("unpack kernel launch");
}

void aggregate(const std::uint8_t* const* d_bodies, std::uint32_t workers, Packing packing, std::uint64_t n,
               float scalar, std::int32_t* d_sums, float* d_mean, std::uint64_t* d_first_bad, cudaStream_t stream) {
  check_ternary(packing);
  check_count(n);
  if (workers == 0) throw Error(ErrorCode::invalid_argument, "aggregate of zero payloads");
  auto* bad = reinterpret_cast<unsigned long long*>(d_first_bad);
  check(cudaMemsetAsync(bad, 0xff, sizeof(*bad), stream), "cudaMemsetAsync (aggregate flag)");
  bool base3 = packing == Packing::base3;
  std::uint64_t bytes = base3 ? packed_bytes_base3(n) : packed_bytes_2bit(n);
  aggregate_kernel<<<launch_for(bytes, kThreads), kThreads, 0, stream>>>(d_bodies, workers, base3, n, scalar, d_sums,
                                                                         d_mean, bad);
  check_launch("aggregate_kernel launch");
}

}  // namespace tg::cuda
