// terngrad-bench: the CUDA codec's per-thread work items, __host__ __device__ (tg/config.hpp), so the
// host test codec/tests/cuda/test_cuda_tiles.cpp checks every one against the reference without a GPU; the
// kernels in kernels.cu only map thread indexes onto these items.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tg/cuda.hpp"
#include "tg/element.hpp"
#include "tg/philox.hpp"
#include "tg/reduce.hpp"

namespace tg::cuda::detail {

/// Elements per packing tile: a multiple of 4 (2bit byte, Philox block), 5 (base3 byte), 20 and 2048
/// (reduction chunk), so tiles never split a byte, a Philox block or a chunk.
inline constexpr std::uint64_t kPackTile = 5 * kReduceChunk;  // 10240

/// Per-tensor state the kernels share through the workspace.
struct LayerState {
  unsigned int max_bits;          // max |g| as float bits (order-preserving for nonnegative floats)
  unsigned int reserved;
  unsigned long long first_bad;   // first non-finite index (atomicMin), ~0 when none
  double mean;
  double sigma;
  ScalarRule rule;
};

/// The layer L with begins[L] <= item < begins[L + 1] (begins has count + 1 nondecreasing entries,
/// begins[0] == 0, item < begins[count]); empty layers (equal begins) are skipped.
TG_HD_INLINE std::uint32_t find_layer(const std::uint64_t* begins, std::uint32_t count, std::uint64_t item) {
  std::uint32_t lo = 0, hi = count;  // invariant: begins[lo] <= item < begins[hi]
  while (hi - lo > 1) {
    std::uint32_t mid = lo + (hi - lo) / 2;
    if (begins[mid] <= item)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/// Loads 4 floats; p must be 16-byte aligned when `vector` is true.
TG_HD_INLINE void load4(const float* p, bool vector, float* v) {
#if defined(__CUDA_ARCH__)
  if (vector) {
    float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    return;
  }
#else
  (void)vector;
#endif
  v[0] = p[0], v[1] = p[1], v[2] = p[2], v[3] = p[3];
}

/// Stores 4 floats; p must be 16-byte aligned when `vector` is true.
TG_HD_INLINE void store4(float* p, bool vector, const float* v) {
#if defined(__CUDA_ARCH__)
  if (vector) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    return;
  }
#else
  (void)vector;
#endif
  p[0] = v[0], p[1] = v[1], p[2] = v[2], p[3] = v[3];
}

// ---- scalar pass ---------------------------------------------------------------------------------

/// Running max |g| and first non-finite index over elements [begin, end) (inputs may be NaN/Inf).
struct MaxScan {
  float max = 0.0f;
  std::uint64_t first_bad = ~std::uint64_t{0};
};
TG_HD_INLINE void scan_element(float x, std::uint64_t k, MaxScan& s) {
  float a = abs_float(x);
  // a - a is 0 for finite a and NaN for Inf or NaN.
  if (!(a - a == 0.0f)) {
    if (k < s.first_bad) s.first_bad = k;
    return;
  }
  if (a > s.max) s.max = a;
}

/// Thread `tid` of `threads` scans its share of the tile [begin, end) (begin a multiple of 4). With
/// `vector` (g 16-byte aligned) it keeps four float4 loads in flight before using any of them.
TG_HD_INLINE void scan_tile(const float* g, std::uint64_t begin, std::uint64_t end, bool vector, unsigned tid,
                            unsigned threads, MaxScan& s) {
  if (!vector) {
    for (std::uint64_t k = begin + tid; k < end; k += threads) scan_element(g[k], k, s);
    return;
  }
  std::uint64_t full = (end - begin) / 4;  // whole float4s of the tile
  std::uint64_t f = tid;
  for (; f + 3 * static_cast<std::uint64_t>(threads) < full; f += 4 * static_cast<std::uint64_t>(threads)) {
    float v[4][4];
    for (int u = 0; u < 4; ++u) load4(g + begin + 4 * (f + u * threads), true, v[u]);
    for (int u = 0; u < 4; ++u)
      for (int m = 0; m < 4; ++m) scan_element(v[u][m], begin + 4 * (f + u * threads) + m, s);
  }
  for (; f < full; f += threads) {
    float v[4];
    load4(g + begin + 4 * f, true, v);
    for (int m = 0; m < 4; ++m) scan_element(v[m], begin + 4 * f + m, s);
  }
  for (std::uint64_t k = begin + 4 * full + tid; k < end; k += threads) scan_element(g[k], k, s);
}

/// Sum of one lane of one reduction chunk (tg/reduce.hpp): lane l of chunk c adds, in increasing
/// index order from 0.0, term(g[k]) for k = c*2048 + l + 8j < n; term = g (square false) or
/// (g - mean)^2 (square true, d * d without contraction).
TG_HD_INLINE double lane_sum(const float* g, std::uint64_t n, std::uint64_t chunk, unsigned lane,
                             bool square, double mean) {
  std::uint64_t begin = chunk * kReduceChunk;
  std::uint64_t end = begin + kReduceChunk < n ? begin + kReduceChunk : n;
  double sum = 0.0;
  for (std::uint64_t k = begin + lane; k < end; k += kReduceLanes) {
    double x = static_cast<double>(g[k]);
    if (square) {
      double d = x - mean;
      sum = sum + d * d;
    } else {
      sum = sum + x;
    }
  }
  return sum;
}

/// The rule of one tensor from its max, clip bound and optional shared scalar (codec/src/common/api.cpp:
/// own_rule uses s = min(max, bound), encode_with_scalar uses make_rule(shared, bound)).
TG_HD_INLINE ScalarRule rule_for(float max_abs, float bound, const float* shared_scalar) {
  if (shared_scalar) return make_rule(*shared_scalar, bound);
  float s = bound < max_abs ? bound : max_abs;
  return make_rule(s, s);
}

// ---- ternarize and pack --------------------------------------------------------------------------

/// Trits of Philox block b (elements 4b .. 4b+3, those below n); returns how many are valid.
TG_HD_INLINE int trits_of_block(const float* g, std::uint64_t n, std::uint64_t b, bool vector,
                                const ScalarRule& rule, const StreamKey& key, int* trit) {
  std::uint64_t first = 4 * b;
  int valid = n - first >= 4 ? 4 : static_cast<int>(n - first);
  float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (valid == 4)
    load4(g + first, vector, v);
  else
    for (int m = 0; m < 4; ++m) v[m] = m < valid ? g[first + m] : 0.0f;  // constant bounds: registers
  PhiloxBlock u = philox_block(key, static_cast<std::uint32_t>(b));
  for (int m = 0; m < 4; ++m) trit[m] = m < valid ? ternarize_element(v[m], rule, u.v[m]) : 0;
  return valid;
}

/// 2bit byte b (= Philox block b): element 4b+m in bits 2m, padding 0.
TG_HD_INLINE std::uint8_t encode_2bit_block(const float* g, std::uint64_t n, std::uint64_t b, bool vector,
                                            const ScalarRule& rule, const StreamKey& key) {
  int t[4];
  trits_of_block(g, n, b, vector, rule, key, t);
  return static_cast<std::uint8_t>(code_2bit(t[0]) | (code_2bit(t[1]) << 2) | (code_2bit(t[2]) << 4) |
                                   (code_2bit(t[3]) << 6));
}

/// base3 bytes 4q .. 4q+3 (elements 20q .. 20q+19 = Philox blocks 5q .. 5q+4) into out[0..4);
/// returns how many of the four bytes exist (the body has ceil(n/5) bytes).
TG_HD_INLINE int encode_base3_quad(const float* g, std::uint64_t n, std::uint64_t q, bool vector,
                                   const ScalarRule& rule, const StreamKey& key, std::uint8_t* out) {
  int t[20];
  for (int i = 0; i < 5; ++i) {
    std::uint64_t b = 5 * q + i;
    if (4 * b < n)
      trits_of_block(g, n, b, vector, rule, key, t + 4 * i);
    else
      t[4 * i] = t[4 * i + 1] = t[4 * i + 2] = t[4 * i + 3] = 0;
  }
  for (int j = 0; j < 4; ++j) {
    const int* d = t + 5 * j;
    out[j] = static_cast<std::uint8_t>(digit_base3(d[0]) + 3 * digit_base3(d[1]) + 9 * digit_base3(d[2]) +
                                       27 * digit_base3(d[3]) + 81 * digit_base3(d[4]));
  }
  std::uint64_t bytes = packed_bytes_base3(n) - 4 * q;
  return bytes >= 4 ? 4 : static_cast<int>(bytes);
}

/// One body byte j computed element by element (the plain version: a Philox block per element).
TG_HD_INLINE std::uint8_t encode_byte_plain(const float* g, std::uint64_t n, std::uint64_t j, bool base3,
                                            const ScalarRule& rule, const StreamKey& key) {
  unsigned per = base3 ? 5u : 4u, value = 0, weight = 1;
  for (unsigned m = 0; m < per; ++m) {
    std::uint64_t i = per * j + m;
    int trit = 0;
    if (i < n) trit = ternarize_element(g[i], rule, philox_block(key, static_cast<std::uint32_t>(i / 4)).v[i % 4]);
    if (base3) {
      value += digit_base3(trit) * weight;
      weight *= 3;
    } else {
      value |= static_cast<unsigned>(code_2bit(trit)) << (2 * m);
    }
  }
  return static_cast<std::uint8_t>(value);
}

// ---- unpack and decode ---------------------------------------------------------------------------

/// Trits of body byte j of an n-element body (4 for 2bit, 5 for base3; those past n are padding and
/// must be 0). Returns false for an invalid byte (2bit code 11, base3 byte > 242, nonzero padding).
TG_HD_INLINE bool unpack_byte(std::uint8_t byte, std::uint64_t j, std::uint64_t n, bool base3, int* trit) {
  unsigned per = base3 ? 5u : 4u;
  unsigned value = byte;
  if (base3 && value > kBase3MaxByte) return false;
  bool ok = true;
  for (unsigned m = 0; m < per; ++m) {
    unsigned code;
    if (base3) {
      code = value % 3;
      value /= 3;
    } else {
      code = (value >> (2 * m)) & 3u;
    }
    if (code == 3 || (per * j + m >= n && code != 0)) ok = false;
    trit[m] = trit_of_code(static_cast<std::uint8_t>(code));
  }
  return ok;
}

// ---- work items of the kernels (thread `tid` of `threads`, any count gives the same bytes) ---------

inline constexpr std::uint64_t kNoByte = ~std::uint64_t{0};

/// Stores `bytes` (<= 4) bytes; one 32-bit store on the device when all four exist and dst is aligned.
TG_HD_INLINE void store_bytes(std::uint8_t* dst, const std::uint8_t* v, int bytes) {
#if defined(__CUDA_ARCH__)
  if (bytes == 4 && (reinterpret_cast<std::uintptr_t>(dst) & 3u) == 0) {
    *reinterpret_cast<unsigned*>(dst) = v[0] | (unsigned(v[1]) << 8) | (unsigned(v[2]) << 16) | (unsigned(v[3]) << 24);
    return;
  }
#endif
  for (int j = 0; j < 4; ++j)
    if (j < bytes) dst[j] = v[j];
}

/// v2-block packing of the tile [begin, end) (begin a multiple of kPackTile): thread `tid` of
/// `threads` writes 2bit bytes (one Philox block each) or base3 words (20 elements, 4 bytes each).
TG_HD_INLINE void pack_tile_block(const float* g, std::uint64_t n, std::uint8_t* body, std::uint64_t begin,
                                  std::uint64_t end, bool vector, const ScalarRule& rule, const StreamKey& key,
                                  bool base3, unsigned tid, unsigned threads) {
  if (!base3) {
    for (std::uint64_t b = begin / 4 + tid; 4 * b < end; b += threads)
      body[b] = encode_2bit_block(g, n, b, vector, rule, key);
  } else {
    for (std::uint64_t q = begin / 20 + tid; 20 * q < end; q += threads) {
      std::uint8_t out[4];
      int bytes = encode_base3_quad(g, n, q, vector, rule, key, out);
      store_bytes(body + 4 * q, out, bytes);
    }
  }
}

/// 2bit byte of four loaded elements (zeros past the tensor's end give code 00) and their Philox words.
TG_HD_INLINE std::uint8_t byte_2bit(const float* v, const PhiloxBlock& u, const ScalarRule& rule) {
  return static_cast<std::uint8_t>(code_2bit(ternarize_element(v[0], rule, u.v[0])) |
                                   (code_2bit(ternarize_element(v[1], rule, u.v[1])) << 2) |
                                   (code_2bit(ternarize_element(v[2], rule, u.v[2])) << 4) |
                                   (code_2bit(ternarize_element(v[3], rule, u.v[3])) << 6));
}

/// v3-unrolled packing of the tile [begin, end): as v2-block, but for 2bit each thread first loads four
/// Philox blocks (b, b + threads, b + 2 threads, b + 3 threads: coalesced across the block) and only then
/// computes and stores, so four loads are in flight per thread (byte stores could alias the input, so
/// the compiler may not hoist the loads of v2's loop itself). base3 uses the v2 work item.
TG_HD_INLINE void pack_tile_unrolled(const float* g, std::uint64_t n, std::uint8_t* body, std::uint64_t begin,
                                     std::uint64_t end, bool vector, const ScalarRule& rule, const StreamKey& key,
                                     bool base3, unsigned tid, unsigned threads) {
  if (base3) {
    pack_tile_block(g, n, body, begin, end, vector, rule, key, true, tid, threads);
    return;
  }
  std::uint64_t b_end = (end + 3) / 4;
  std::uint64_t step = threads;
  for (std::uint64_t base = begin / 4 + tid; base < b_end; base += 4 * step) {
    float v[4][4];
    for (int u = 0; u < 4; ++u) {
      std::uint64_t b = base + u * step;
      if (b >= b_end) break;
      std::uint64_t first = 4 * b;
      if (first + 4 <= n) {
        load4(g + first, vector, v[u]);
      } else {
        for (std::uint64_t m = 0; m < 4; ++m) v[u][m] = first + m < n ? g[first + m] : 0.0f;
      }
    }
    for (int u = 0; u < 4; ++u) {
      std::uint64_t b = base + u * step;
      if (b >= b_end) break;
      body[b] = byte_2bit(v[u], philox_block(key, static_cast<std::uint32_t>(b)), rule);
    }
  }
}

/// v1-bytewise packing of the tile [begin, end): thread `tid` of `threads` writes whole bytes.
TG_HD_INLINE void pack_tile_bytewise(const float* g, std::uint64_t n, std::uint8_t* body, std::uint64_t begin,
                                     std::uint64_t end, const ScalarRule& rule, const StreamKey& key, bool base3,
                                     unsigned tid, unsigned threads) {
  std::uint64_t per = base3 ? 5 : 4;
  for (std::uint64_t j = begin / per + tid; per * j < end; j += threads)
    body[j] = encode_byte_plain(g, n, j, base3, rule, key);
}

/// Decodes body byte j (v1): floats scalar * trit to out and/or trits; returns j if the byte is
/// invalid (nothing written), kNoByte otherwise.
TG_HD_INLINE std::uint64_t decode_byte_item(const std::uint8_t* body, std::uint64_t n, bool base3, std::uint64_t j,
                                            float scalar, float* out, std::int8_t* trits) {
  unsigned per = base3 ? 5 : 4;
  int t[5];
  if (!unpack_byte(body[j], j, n, base3, t)) return j;
  for (unsigned m = 0; m < per && per * j + m < n; ++m) {
    if (out) out[per * j + m] = scalar * static_cast<float>(t[m]);
    if (trits) trits[per * j + m] = static_cast<std::int8_t>(t[m]);
  }
  return kNoByte;
}

/// Items of the v2 decode: 2bit one byte (4 floats), base3 four bytes (20 floats).
TG_HD_INLINE std::uint64_t decode_block_items(std::uint64_t n, bool base3) {
  return base3 ? (packed_bytes_base3(n) + 3) / 4 : packed_bytes_2bit(n);
}

/// v2 decode of item `it` with float4 stores when `vector` (out 16-byte aligned); returns the first
/// invalid byte of the item (its floats are then not all written) or kNoByte.
TG_HD_INLINE std::uint64_t decode_block_item(const std::uint8_t* body, std::uint64_t n, bool base3, std::uint64_t it,
                                             float scalar, float* out, bool vector) {
  if (!base3) {
    int t[4];
    if (!unpack_byte(body[it], it, n, false, t)) return it;
    float v[4] = {scalar * static_cast<float>(t[0]), scalar * static_cast<float>(t[1]),
                  scalar * static_cast<float>(t[2]), scalar * static_cast<float>(t[3])};
    if (4 * it + 4 <= n)
      store4(out + 4 * it, vector, v);
    else
      for (int m = 0; m < 4; ++m)  // constant bounds: v stays in registers on the device
        if (4 * it + m < n) out[4 * it + m] = v[m];
    return kNoByte;
  }
  std::uint64_t bytes = packed_bytes_base3(n);
  float v[20];
  for (int jj = 0; jj < 4; ++jj) {  // constant bounds: v stays in registers on the device
    std::uint64_t j = 4 * it + jj;
    int t[5] = {0, 0, 0, 0, 0};
    if (j < bytes && !unpack_byte(body[j], j, n, true, t)) return j;
    for (int m = 0; m < 5; ++m) v[5 * jj + m] = scalar * static_cast<float>(t[m]);
  }
  std::uint64_t first = 20 * it;
  if (first + 20 <= n) {
    for (int q = 0; q < 5; ++q) store4(out + first + 4 * q, vector, v + 4 * q);
  } else {
    for (int m = 0; m < 20; ++m)
      if (first + m < n) out[first + m] = v[m];
  }
  return kNoByte;
}

/// Aggregation of body byte j over `workers` bodies: sums and means of its elements; returns the
/// flat index w * body_bytes + j of the first worker whose byte j is invalid, or kNoByte.
TG_HD_INLINE std::uint64_t aggregate_item(const std::uint8_t* const* bodies, std::uint32_t workers, bool base3,
                                          std::uint64_t n, std::uint64_t j, float scalar, std::int32_t* sums,
                                          float* mean) {
  unsigned per = base3 ? 5 : 4;
  std::uint64_t bytes = base3 ? packed_bytes_base3(n) : packed_bytes_2bit(n);
  int s[5] = {0, 0, 0, 0, 0};
  for (std::uint32_t w = 0; w < workers; ++w) {
    int t[5];
    if (!unpack_byte(bodies[w][j], j, n, base3, t)) return static_cast<std::uint64_t>(w) * bytes + j;
    for (unsigned m = 0; m < per; ++m) s[m] += t[m];
  }
  for (unsigned m = 0; m < per && per * j + m < n; ++m) {
    sums[per * j + m] = s[m];
    mean[per * j + m] = static_cast<float>(static_cast<double>(scalar) * s[m] / static_cast<double>(workers));
  }
  return kNoByte;
}

// ---- the encode pipeline's workspace and per-tensor steps --------------------------------------------

inline constexpr unsigned long long kNoneU = ~0ull;
inline constexpr unsigned long long kBadTableU = kNoneU - 1;

/// Workspace of one encode (device memory; host memory in the host replay test).
struct Workspace {
  DeviceTensor* tensors;
  LayerState* states;
  std::uint64_t* tile_begin;   // count + 1: first packing tile of each tensor, [count] = total tiles
  std::uint64_t* chunk_begin;  // count + 1: first reduction chunk of each tensor
  double* totals;              // one per reduction chunk
  unsigned* table_ok;          // 0 when the table's element count disagrees with total_elements
  std::uint64_t chunk_capacity;
};

/// Byte offsets of the workspace parts (each 256-byte aligned) and its size.
struct Layout {
  std::size_t tensors, states, tile_begin, chunk_begin, totals, table_ok, bytes;
  std::uint64_t chunk_capacity;
};

inline std::size_t align_up(std::size_t x) { return (x + 255) & ~std::size_t{255}; }

inline Layout layout(std::uint32_t count, std::uint64_t total_elements) {
  Layout l;
  l.chunk_capacity = total_elements / kReduceChunk + count;  // each tensor adds at most one short chunk
  l.tensors = 0;
  l.states = align_up(l.tensors + sizeof(DeviceTensor) * count);
  l.tile_begin = align_up(l.states + sizeof(LayerState) * count);
  l.chunk_begin = align_up(l.tile_begin + sizeof(std::uint64_t) * (count + 1));
  l.totals = align_up(l.chunk_begin + sizeof(std::uint64_t) * (count + 1));
  l.table_ok = align_up(l.totals + sizeof(double) * l.chunk_capacity);
  l.bytes = align_up(l.table_ok + sizeof(unsigned));
  return l;
}

inline Workspace carve(void* base, const Layout& l) {
  auto* p = static_cast<unsigned char*>(base);
  return {reinterpret_cast<DeviceTensor*>(p + l.tensors), reinterpret_cast<LayerState*>(p + l.states),
          reinterpret_cast<std::uint64_t*>(p + l.tile_begin), reinterpret_cast<std::uint64_t*>(p + l.chunk_begin),
          reinterpret_cast<double*>(p + l.totals), reinterpret_cast<unsigned*>(p + l.table_ok),
          l.chunk_capacity};
}

/// One thread: copies the table (or the single tensor), computes tile and chunk offsets, resets the
/// state. A table that disagrees with total_elements (or a tensor over 2^34) gets zero tiles and
/// chunks, so nothing reads or writes out of bounds, and table_ok = 0.
TG_HD_INLINE void prepare_layers(const Workspace& ws, const DeviceTensor* table, const DeviceTensor& single,
                                 std::uint32_t count, std::uint64_t total_elements, bool has_rule,
                                 const ScalarRule& rule) {
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

/// Packing tile t (t < tile_begin[count]): its tensor and element range [begin, end).
TG_HD_INLINE std::uint32_t tile_range(const Workspace& ws, std::uint32_t count, std::uint64_t t, std::uint64_t* begin,
                                      std::uint64_t* end) {
  std::uint32_t L = find_layer(ws.tile_begin, count, t);
  std::uint64_t n = ws.tensors[L].n;
  *begin = (t - ws.tile_begin[L]) * kPackTile;
  *end = *begin + kPackTile < n ? *begin + kPackTile : n;
  return L;
}

/// Lane `lane` of global chunk c (c < chunk_begin[count]): 0.0 for a tensor with a non-finite value.
TG_HD_INLINE double chunk_lane_sum(const Workspace& ws, std::uint32_t count, std::uint64_t c, unsigned lane,
                                   bool square) {
  std::uint32_t L = find_layer(ws.chunk_begin, count, c);
  if (ws.states[L].first_bad != kNoneU) return 0.0;
  const DeviceTensor& d = ws.tensors[L];
  return lane_sum(d.g, d.n, c - ws.chunk_begin[L], lane, square, ws.states[L].mean);
}

/// Chunk totals of tensor L added in chunk order from 0.0 (tg/reduce.hpp).
TG_HD_INLINE double tensor_total(const Workspace& ws, std::uint32_t L) {
  double total = 0.0;
  for (std::uint64_t c = ws.chunk_begin[L]; c < ws.chunk_begin[L + 1]; ++c) total = total + ws.totals[c];
  return total;
}

/// mean = total / n of tensor L, total being its chunk totals of the first pass added in chunk order
/// (tensor_total; the device adds them in one block, staged through shared memory).
TG_HD_INLINE void set_mean(const Workspace& ws, std::uint32_t L, double total) {
  std::uint64_t n = ws.tensors[L].n;
  if (n == 0 || ws.states[L].first_bad != kNoneU || !*ws.table_ok) return;
  ws.states[L].mean = total / static_cast<double>(n);
}

/// sigma = sqrt(total / n) of tensor L, total being its chunk totals of the second (squared) pass
/// added in chunk order.
TG_HD_INLINE void set_sigma(const Workspace& ws, std::uint32_t L, double total) {
  std::uint64_t n = ws.tensors[L].n;
  if (n == 0 || ws.states[L].first_bad != kNoneU || !*ws.table_ok) return;
  ws.states[L].sigma = ::sqrt(total / static_cast<double>(n));
}

TG_HD_INLINE float positive_infinity() {
  std::uint32_t bits = 0x7f800000u;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Clip bound c*sigma as float (sigma set by set_sigma when clipping), scalar and rule of tensor L;
/// returns the caller's result (codec/src/common/api.cpp: own_rule, encode_with_scalar).
TG_HD_INLINE TensorResult finish_rule(const Workspace& ws, std::uint32_t L, bool clipping, double c,
                                      const float* shared_scalar) {
  LayerState& s = ws.states[L];
  float bound = positive_infinity();
  if (clipping) bound = static_cast<float>(c * s.sigma);
  float max_abs;
  std::memcpy(&max_abs, &s.max_bits, 4);
  s.rule = rule_for(max_abs, bound, shared_scalar);
  TensorResult r;
  r.scalar = s.first_bad == kNoneU ? s.rule.scalar : 0.0f;
  r.bound = bound;
  r.first_bad = *ws.table_ok ? s.first_bad : kBadTableU;
  // A tensor with a non-finite value reports 0 for both: on the device its mean may have been set from
  // NaN sums before the max pass (beside the mean's chains) found the value.
  r.mean = s.first_bad == kNoneU ? s.mean : 0.0;
  r.sigma = s.first_bad == kNoneU ? s.sigma : 0.0;
  return r;
}

}  // namespace tg::cuda::detail
