// terngrad-bench: the CUDA codec's kernels and its device API (tg/cuda.hpp). Layers, CUB style:
// public function -> run_encode / dispatch (launch configuration chosen in launch_for only) -> kernel.
// Kernel versions side by side (kernel_versions()): v1-bytewise (one thread per body byte, a Philox
// block per element) and v2-block (one thread per Philox block or base3 word, vector loads/stores).
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
constexpr unsigned long long kNoneU = ~0ull;
constexpr unsigned long long kBadTableU = kNoneU - 1;

// Workspace layout (each part 256-byte aligned).
struct Workspace {
  DeviceTensor* tensors;
  LayerState* states;
  std::uint64_t* tile_begin;   // count + 1: first packing tile of each tensor, [count] = total tiles
  std::uint64_t* chunk_begin;  // count + 1: first reduction chunk of each tensor
  double* totals;              // one per reduction chunk
  unsigned* table_ok;          // 0 when the table's element count disagrees with total_elements
  std::uint64_t chunk_capacity;
};

std::size_t align_up(std::size_t x) { return (x + 255) & ~std::size_t{255}; }

struct Layout {
  std::size_t tensors, states, tile_begin, chunk_begin, totals, table_ok, bytes;
  std::uint64_t chunk_capacity;
};

Layout layout(std::uint32_t count, std::uint64_t total_elements) {
  Layout l;
  l.chunk_capacity = total_elements / kReduceChunk + count;
  l.tensors = 0;
  l.states = align_up(l.tensors + sizeof(DeviceTensor) * count);
  l.tile_begin = align_up(l.states + sizeof(LayerState) * count);
  l.chunk_begin = align_up(l.tile_begin + sizeof(std::uint64_t) * (count + 1));
  l.totals = align_up(l.chunk_begin + sizeof(std::uint64_t) * (count + 1));
  l.table_ok = align_up(l.totals + sizeof(double) * l.chunk_capacity);
  l.bytes = align_up(l.table_ok + sizeof(unsigned));
  return l;
}

Workspace carve(void* base, const Layout& l) {
  auto* p = static_cast<unsigned char*>(base);
  return {reinterpret_cast<DeviceTensor*>(p + l.tensors), reinterpret_cast<LayerState*>(p + l.states),
          reinterpret_cast<std::uint64_t*>(p + l.tile_begin), reinterpret_cast<std::uint64_t*>(p + l.chunk_begin),
          reinterpret_cast<double*>(p + l.totals), reinterpret_cast<unsigned*>(p + l.table_ok),
          l.chunk_capacity};
}

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
__device__ __forceinline__ bool aligned4(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 3u) == 0;
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

// One thread: copies the table (or the single tensor), computes tile and chunk offsets, resets state.
__global__ void prepare_kernel(Workspace ws, const DeviceTensor* table, DeviceTensor single, std::uint32_t count,
                               unsigned long long total_elements, bool has_rule, ScalarRule rule) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  std::uint64_t tiles = 0, chunks = 0, elements = 0;
  bool sizes_ok = true;
  for (std::uint32_t i = 0; i < count; ++i) {
    DeviceTensor t = table ? table[i] : single;
    if (t.n > kMaxElements) sizes_ok = false;
    ws.tensors[i] = t;
    ws.tile_begin[i] = tiles;
    ws.chunk_begin[i] = chunks;
    tiles += (t.n + kPackTile - 1) / kPackTile;
    chunks += (t.n + kReduceChunk - 1) / kReduceChunk;
    elements += t.n;
    LayerState s;
    s.max_bits = 0;
    s.reserved = 0;
    s.first_bad = kNoneU;
    s.mean = 0.0;
    s.sigma = 0.0;
    s.rule = has_rule ? rule : ScalarRule{};
    ws.states[i] = s;
  }
  bool ok = sizes_ok && elements == total_elements && chunks <= ws.chunk_capacity;
  ws.tile_begin[count] = ok ? tiles : 0;
  ws.chunk_begin[count] = ok ? chunks : 0;
  *ws.table_ok = ok ? 1u : 0u;
}

// max |g| and the first non-finite index of every tensor; one block per packing tile.
__global__ void max_kernel(Workspace ws, std::uint32_t count) {
  std::uint64_t tiles = ws.tile_begin[count];
  for (std::uint64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    std::uint32_t L = find_layer(ws.tile_begin, count, t);
    DeviceTensor d = ws.tensors[L];
    std::uint64_t begin = (t - ws.tile_begin[L]) * kPackTile;
    std::uint64_t end = min(begin + kPackTile, d.n);
    MaxScan s;
    if (aligned16(d.g)) {
      for (std::uint64_t k = begin + 4 * threadIdx.x; k < end; k += 4 * blockDim.x) {
        if (k + 4 <= end) {
          float v[4];
          load4(d.g + k, true, v);
          for (int m = 0; m < 4; ++m) scan_element(v[m], k + m, s);
        } else {
          for (std::uint64_t i = k; i < end; ++i) scan_element(d.g[i], i, s);
        }
      }
    } else {
      for (std::uint64_t k = begin + threadIdx.x; k < end; k += blockDim.x) scan_element(d.g[k], k, s);
    }
    float m = s.max;
    unsigned long long bad = s.first_bad;
    block_reduce(m, bad);
    if (threadIdx.x == 0) {
      atomicMax(&ws.states[L].max_bits, __float_as_uint(m));
      if (bad != kNoneU) atomicMin(&ws.states[L].first_bad, bad);
    }
  }
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
    double sum = 0.0;
    if (c < chunks) {
      std::uint32_t L = find_layer(ws.chunk_begin, count, c);
      if (ws.states[L].first_bad == kNoneU) {
        DeviceTensor d = ws.tensors[L];
        sum = lane_sum(d.g, d.n, c - ws.chunk_begin[L], lane, square, ws.states[L].mean);
      }
    }
    // ((L0 + L1) + (L2 + L3)) + ((L4 + L5) + (L6 + L7)), exactly combine_lanes.
    double pair = sum + __shfl_down_sync(0xffffffffu, sum, 1);
    double quad = pair + __shfl_down_sync(0xffffffffu, pair, 2);
    double all = quad + __shfl_down_sync(0xffffffffu, quad, 4);
    if (lane == 0 && c < chunks) ws.totals[c] = all;
  }
}

// One thread per tensor: adds its chunk totals in chunk order from 0.0.
__device__ double tensor_total(const Workspace& ws, std::uint32_t L) {
  double total = 0.0;
  for (std::uint64_t c = ws.chunk_begin[L]; c < ws.chunk_begin[L + 1]; ++c) total = total + ws.totals[c];
  return total;
}

__global__ void mean_kernel(Workspace ws, std::uint32_t count) {
  for (std::uint32_t L = blockIdx.x * blockDim.x + threadIdx.x; L < count; L += gridDim.x * blockDim.x) {
    std::uint64_t n = ws.tensors[L].n;
    if (n == 0 || ws.states[L].first_bad != kNoneU || !*ws.table_ok) continue;
    ws.states[L].mean = tensor_total(ws, L) / static_cast<double>(n);
  }
}

// One thread per tensor: sigma, clip bound, scalar and rule; writes the caller's results.
__global__ void rule_kernel(Workspace ws, std::uint32_t count, bool clipping, double c, const float* shared_scalar,
                            TensorResult* results) {
  for (std::uint32_t L = blockIdx.x * blockDim.x + threadIdx.x; L < count; L += gridDim.x * blockDim.x) {
    LayerState& s = ws.states[L];
    std::uint64_t n = ws.tensors[L].n;
    float bound = __int_as_float(0x7f800000);  // +inf
    if (clipping) {
      if (n > 0 && s.first_bad == kNoneU && *ws.table_ok) s.sigma = sqrt(tensor_total(ws, L) / static_cast<double>(n));
      bound = static_cast<float>(c * s.sigma);
    }
    s.rule = rule_for(__uint_as_float(s.max_bits), bound, shared_scalar);
    TensorResult r;
    r.scalar = s.first_bad == kNoneU ? s.rule.scalar : 0.0f;
    r.bound = bound;
    r.first_bad = *ws.table_ok ? s.first_bad : kBadTableU;
    r.mean = s.mean;
    r.sigma = s.sigma;
    results[L] = r;
  }
}

// v2-block: one thread per Philox block (2bit byte) or per base3 word (20 elements, 4 bytes).
__global__ void pack_block_kernel(Workspace ws, std::uint32_t count, StreamKey key, bool base3) {
  std::uint64_t tiles = ws.tile_begin[count];
  for (std::uint64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    std::uint32_t L = find_layer(ws.tile_begin, count, t);
    if (ws.states[L].first_bad != kNoneU) continue;  // uniform in the block
    DeviceTensor d = ws.tensors[L];
    ScalarRule rule = ws.states[L].rule;
    key.tensor = d.tensor;
    std::uint64_t begin = (t - ws.tile_begin[L]) * kPackTile;
    std::uint64_t end = min(begin + kPackTile, d.n);
    bool vec = aligned16(d.g);
    if (!base3) {
      for (std::uint64_t b = begin / 4 + threadIdx.x; 4 * b < end; b += blockDim.x)
        d.body[b] = encode_2bit_block(d.g, d.n, b, vec, rule, key);
    } else {
      for (std::uint64_t q = begin / 20 + threadIdx.x; 20 * q < end; q += blockDim.x) {
        std::uint8_t out[4];
        int bytes = encode_base3_quad(d.g, d.n, q, vec, rule, key, out);
        std::uint8_t* dst = d.body + 4 * q;
        if (bytes == 4 && aligned4(dst)) {
          *reinterpret_cast<unsigned*>(dst) =
              out[0] | (unsigned(out[1]) << 8) | (unsigned(out[2]) << 16) | (unsigned(out[3]) << 24);
        } else {
          for (int j = 0; j < bytes; ++j) dst[j] = out[j];
        }
      }
    }
  }
}

// v1-bytewise: one thread per body byte, a Philox block computed per element.
__global__ void pack_bytewise_kernel(Workspace ws, std::uint32_t count, StreamKey key, bool base3) {
  std::uint64_t tiles = ws.tile_begin[count];
  std::uint64_t per = base3 ? 5 : 4;
  for (std::uint64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    std::uint32_t L = find_layer(ws.tile_begin, count, t);
    if (ws.states[L].first_bad != kNoneU) continue;
    DeviceTensor d = ws.tensors[L];
    ScalarRule rule = ws.states[L].rule;
    key.tensor = d.tensor;
    std::uint64_t begin = (t - ws.tile_begin[L]) * kPackTile;
    std::uint64_t end = min(begin + kPackTile, d.n);
    for (std::uint64_t j = begin / per + threadIdx.x; per * j < end; j += blockDim.x)
      d.body[j] = encode_byte_plain(d.g, d.n, j, base3, rule, key);
  }
}

// ---- ternarize, unpack, decode, aggregate ------------------------------------------------------------

__global__ void ternarize_kernel(const float* g, std::uint64_t n, ScalarRule rule, StreamKey key, std::int8_t* trits) {
  std::uint64_t blocks = (n + 3) / 4;
  bool vec = aligned16(g);
  for (std::uint64_t b = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
       b += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    int t[4];
    int valid = trits_of_block(g, n, b, vec, rule, key, t);
    for (int m = 0; m < valid; ++m) trits[4 * b + m] = static_cast<std::int8_t>(t[m]);
  }
}

// One thread per body byte; out (floats, scalar * trit) and/or trits; invalid bytes recorded.
__global__ void decode_bytewise_kernel(const std::uint8_t* body, std::uint64_t n, bool base3, float scalar,
                                       float* out, std::int8_t* trits, unsigned long long* first_bad) {
  unsigned per = base3 ? 5 : 4;
  std::uint64_t bytes = base3 ? packed_bytes_base3(n) : packed_bytes_2bit(n);
  for (std::uint64_t j = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < bytes;
       j += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    int t[5];
    if (!unpack_byte(body[j], j, n, base3, t)) {
      atomicMin(first_bad, static_cast<unsigned long long>(j));
      continue;
    }
    for (unsigned m = 0; m < per && per * j + m < n; ++m) {
      if (out) out[per * j + m] = scalar * static_cast<float>(t[m]);
      if (trits) trits[per * j + m] = static_cast<std::int8_t>(t[m]);
    }
  }
}

// v2-block decode: 2bit one byte -> one float4 store; base3 four bytes -> five float4 stores.
__global__ void decode_block_kernel(const std::uint8_t* body, std::uint64_t n, bool base3, float scalar,
                                    float* out, unsigned long long* first_bad) {
  std::uint64_t bytes = base3 ? packed_bytes_base3(n) : packed_bytes_2bit(n);
  std::uint64_t per_item = base3 ? 4 : 1;  // bytes per thread item
  std::uint64_t items = (bytes + per_item - 1) / per_item;
  bool vec = aligned16(out);
  for (std::uint64_t it = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; it < items;
       it += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    if (!base3) {
      int t[4];
      if (!unpack_byte(body[it], it, n, false, t)) {
        atomicMin(first_bad, static_cast<unsigned long long>(it));
        continue;
      }
      float v[4] = {scalar * static_cast<float>(t[0]), scalar * static_cast<float>(t[1]),
                    scalar * static_cast<float>(t[2]), scalar * static_cast<float>(t[3])};
      if (4 * it + 4 <= n)
        store4(out + 4 * it, vec, v);
      else
        for (std::uint64_t m = 0; 4 * it + m < n; ++m) out[4 * it + m] = v[m];
    } else {
      float v[20];
      bool ok = true;
      for (std::uint64_t j = 4 * it; j < 4 * it + 4; ++j) {
        int t[5] = {0, 0, 0, 0, 0};
        if (j < bytes && !unpack_byte(body[j], j, n, true, t)) {
          atomicMin(first_bad, static_cast<unsigned long long>(j));
          ok = false;
          break;
        }
        for (int m = 0; m < 5; ++m) v[5 * (j - 4 * it) + m] = scalar * static_cast<float>(t[m]);
      }
      if (!ok) continue;
      std::uint64_t first = 20 * it;
      if (first + 20 <= n) {
        for (int q = 0; q < 5; ++q) store4(out + first + 4 * q, vec, v + 4 * q);
      } else {
        for (std::uint64_t m = 0; first + m < n; ++m) out[first + m] = v[m];
      }
    }
  }
}

__global__ void aggregate_kernel(const std::uint8_t* const* bodies, std::uint32_t workers, bool base3,
                                 std::uint64_t n, float scalar, std::int32_t* sums, float* mean,
                                 unsigned long long* first_bad) {
  unsigned per = base3 ? 5 : 4;
  std::uint64_t bytes = base3 ? packed_bytes_base3(n) : packed_bytes_2bit(n);
  for (std::uint64_t j = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < bytes;
       j += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    int s[5] = {0, 0, 0, 0, 0};
    for (std::uint32_t w = 0; w < workers; ++w) {
      int t[5];
      if (!unpack_byte(bodies[w][j], j, n, base3, t)) {
        atomicMin(first_bad, static_cast<unsigned long long>(w) * bytes + j);
        break;
      }
      for (unsigned m = 0; m < per; ++m) s[m] += t[m];
    }
    for (unsigned m = 0; m < per && per * j + m < n; ++m) {
      sums[per * j + m] = s[m];
      mean[per * j + m] = static_cast<float>(static_cast<double>(scalar) * s[m] / static_cast<double>(workers));
    }
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
  if (run.pack && run.params.packing != Packing::two_bit && run.params.packing != Packing::base3)
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
    max_kernel<<<tile_blocks, kThreads, 0, stream>>>(ws, run.count);
    check_launch("max_kernel launch");
    bool clipping = run.params.clip != ClipMode::none;
    if (clipping) {
      unsigned sum_blocks = launch_for(l.chunk_capacity * kReduceLanes, kThreads);
      chunk_sum_kernel<<<sum_blocks, kThreads, 0, stream>>>(ws, run.count, false);
      check_launch("chunk_sum_kernel (mean) launch");
      mean_kernel<<<layer_blocks, kThreads, 0, stream>>>(ws, run.count);
      check_launch("mean_kernel launch");
      chunk_sum_kernel<<<sum_blocks, kThreads, 0, stream>>>(ws, run.count, true);
      check_launch("chunk_sum_kernel (variance) launch");
    }
    rule_kernel<<<layer_blocks, kThreads, 0, stream>>>(ws, run.count, clipping, run.params.c, run.d_shared_scalar,
                                                       d_results);
    check_launch("rule_kernel launch");
  }
  if (!run.pack) return;
  bool base3 = run.params.packing == Packing::base3;
  if (version == 0)
    pack_bytewise_kernel<<<tile_blocks, kThreads, 0, stream>>>(ws, run.count, run.key, base3);
  else
    pack_block_kernel<<<tile_blocks, kThreads, 0, stream>>>(ws, run.count, run.key, base3);
  check_launch("pack kernel launch");
}

}  // namespace detail

using namespace detail;

const std::vector<std::string>& kernel_versions() {
  static const std::vector<std::string> v = {"v1-bytewise", "v2-block"};
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
    std::uint64_t items = base3 ? (bytes + 3) / 4 : bytes;
    decode_block_kernel<<<launch_for(items, kThreads), kThreads, 0, stream>>>(d_body, n, base3, scalar, d_out, bad);
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
