// terngrad-bench: host tests of the CUDA codec's per-thread work items (codec/src/cuda/tiles.hpp), run
// without a GPU: each kernel's work is replayed here for every thread index of several block sizes
// and compared byte for byte with tg::reference_codec().   ctest -R tg_cuda_tiles_tests
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "../test_util.hpp"
#include "tiles.hpp"
#include "tg/codec.hpp"

namespace {

using namespace tg::cuda::detail;

// Edges of a Philox block and a 2bit byte (4), a base3 byte (5), a warp (32) and a pack tile.
const std::vector<std::size_t> kEdgeSizes = tg::test::edge_sizes({4, 5, 32, kPackTile}, 100003);
const std::vector<unsigned> kBlockSizes = {1, 32, 256, 1000};  // results must not depend on these

using tg::test::all_params;

// The body the pack kernel writes: tiles of kPackTile, every thread of a `threads`-thread block.
// version: 0 v1-bytewise, 1 v2-block, 2 v3-unrolled (kernel_versions() order).
std::vector<std::uint8_t> replay_pack(const std::vector<float>& g, const tg::ScalarRule& rule, const tg::StreamKey& key,
                                      tg::Packing packing, int version, unsigned threads) {
  std::vector<std::uint8_t> body(tg::body_bytes(packing, g.size()), 0xCA);
  bool base3 = packing == tg::Packing::base3;
  for (std::uint64_t begin = 0; begin < g.size(); begin += kPackTile) {
    std::uint64_t end = std::min<std::uint64_t>(g.size(), begin + kPackTile);
    for (unsigned tid = 0; tid < threads; ++tid) {
      if (version == 0)
        pack_tile_bytewise(g.data(), g.size(), body.data(), begin, end, rule, key, base3, tid, threads);
      else if (version == 1)
        pack_tile_block(g.data(), g.size(), body.data(), begin, end, false, rule, key, base3, tid, threads);
      else
        pack_tile_unrolled(g.data(), g.size(), body.data(), begin, end, false, rule, key, base3, tid, threads);
    }
  }
  return body;
}

TEST(CudaTiles, PackingMatchesReferenceForEveryVersionAndBlockSize) {
  for (std::size_t n : kEdgeSizes) {
    for (std::uint64_t seed : {1ull, 0xfeedbeefcafef00dull}) {
      auto g = tg::test::awkward(n, n + seed);
      for (const auto& p : all_params()) {
        tg::StreamKey key{seed + n, 3, 17, 123456};
        tg::ScalarRule rule = tg::own_rule(tg::reference_codec(), g, p, key.tensor);
        std::vector<std::uint8_t> want(tg::body_bytes(p.packing, n));
        tg::reference_codec().encode_body(g, rule, key, p.packing, want);
        for (int version = 0; version < 3; ++version)
          for (unsigned threads : kBlockSizes)
            ASSERT_EQ(replay_pack(g, rule, key, p.packing, version, threads), want)
                << "n=" << n << " seed=" << seed << " packing=" << tg::to_string(p.packing)
                << " clip=" << tg::to_string(p.clip) << " version " << version + 1 << " threads=" << threads;
      }
    }
  }
}

TEST(CudaTiles, TernarizeBlocksMatchReference) {
  for (std::size_t n : kEdgeSizes) {
    auto g = tg::test::gaussian(n, n);
    tg::ScalarRule rule = tg::own_rule(tg::reference_codec(), g, {}, 0);
    tg::StreamKey key{42, 1, 2, 3};
    std::vector<std::int8_t> want(n), got(n, 0x5a);
    tg::reference_codec().ternarize(g, rule, key, want);
    for (std::uint64_t b = 0; 4 * b < n; ++b) {
      int t[4];
      int valid = trits_of_block(g.data(), n, b, false, rule, key, t);
      ASSERT_EQ(valid, static_cast<int>(std::min<std::uint64_t>(4, n - 4 * b)));
      for (int m = 0; m < valid; ++m) got[4 * b + m] = static_cast<std::int8_t>(t[m]);
    }
    ASSERT_EQ(got, want) << "n=" << n;
  }
}

// The chunk-sum kernel: lane_sum per (chunk, lane), the canonical tree, then chunk order; the bits of
// mean and sigma must equal the reference's (large mean so that the two passes matter).
TEST(CudaTiles, LaneSumsReproduceReferenceMomentsBitForBit) {
  for (std::size_t n : {1ul, 7ul, 2047ul, 2048ul, 2049ul, 100003ul}) {
    auto g = tg::test::gaussian(n, n, 3.0f);
    for (auto& x : g) x += 1000.0f;
    auto total = [&](bool square, double mean) {
      double sum = 0.0;
      for (std::uint64_t c = 0; c * tg::kReduceChunk < n; ++c) {
        double lane[tg::kReduceLanes];
        for (unsigned l = 0; l < tg::kReduceLanes; ++l) lane[l] = lane_sum(g.data(), n, c, l, square, mean);
        sum = sum + tg::combine_lanes(lane);
      }
      return sum;
    };
    double mean = total(false, 0.0) / static_cast<double>(n);
    double sigma = std::sqrt(total(true, mean) / static_cast<double>(n));
    tg::Moments want = tg::reference_codec().moments(g);
    EXPECT_EQ(std::memcmp(&mean, &want.mean, 8), 0) << "n=" << n << std::hexfloat << " " << mean << " vs " << want.mean;
    EXPECT_EQ(std::memcmp(&sigma, &want.sigma, 8), 0) << "n=" << n << std::hexfloat << " " << sigma << " vs " << want.sigma;
  }
}

TEST(CudaTiles, ScanFindsMaxAndFirstNonFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> g = {0.5f, -3.0f, -0.0f, 2.0f};
  MaxScan s;
  for (std::size_t k = 0; k < g.size(); ++k) scan_element(g[k], k, s);
  EXPECT_EQ(s.max, 3.0f);
  EXPECT_EQ(s.first_bad, ~std::uint64_t{0});
  for (float bad : {std::nanf(""), inf, -inf}) {
    MaxScan t;
    scan_element(1.0f, 0, t);
    scan_element(bad, 7, t);
    scan_element(bad, 5, t);  // threads see indexes out of order: the minimum is kept
    EXPECT_EQ(t.first_bad, 5u) << bad;
    EXPECT_EQ(t.max, 1.0f);
  }
}

// The max kernel: every thread's scan of every tile, combined (max, min index), for both load paths.
TEST(CudaTiles, TileScansGiveMaxAndFirstNonFinite) {
  for (std::size_t n : kEdgeSizes) {
    for (int bad_at : {-1, 0, 3, 10240, 50001}) {
      auto g = tg::test::awkward(n, 11);
      std::uint64_t want_bad = ~std::uint64_t{0};
      if (bad_at >= 0 && static_cast<std::size_t>(bad_at) < n) {
        g[bad_at] = std::nanf("");
        if (n > 1) g[n - 1] = std::numeric_limits<float>::infinity();  // a later one must not win
        want_bad = static_cast<std::uint64_t>(bad_at);
      }
      for (bool vector : {false, true})
        for (unsigned threads : kBlockSizes) {
          MaxScan all;
          for (std::uint64_t begin = 0; begin < n; begin += kPackTile)
            for (unsigned tid = 0; tid < threads; ++tid) {
              MaxScan s;
              scan_tile(g.data(), begin, std::min<std::uint64_t>(n, begin + kPackTile), vector, tid, threads, s);
              all.max = std::max(all.max, s.max);
              all.first_bad = std::min(all.first_bad, s.first_bad);
            }
          ASSERT_EQ(all.first_bad, want_bad) << "n=" << n << " threads=" << threads << " vector=" << vector;
          if (want_bad == ~std::uint64_t{0}) {
            ASSERT_EQ(all.max, tg::reference_codec().max_abs(g, 0)) << "n=" << n << " threads=" << threads;
          }
        }
    }
  }
}

TEST(CudaTiles, RuleMatchesOwnRuleAndSharedScalar) {
  auto g = tg::test::gaussian(5000, 4);
  g[17] = 40.0f;
  for (const auto& p : all_params()) {
    tg::ScalarRule want = tg::own_rule(tg::reference_codec(), g, p, 0);
    float m = tg::reference_codec().max_abs(g, 0);
    float bound = tg::clip_bound(tg::reference_codec(), g, p);
    tg::ScalarRule got = rule_for(m, bound, nullptr);
    EXPECT_EQ(got.scalar, want.scalar);
    EXPECT_EQ(got.cap, want.cap);
    EXPECT_EQ(got.scale, want.scale);
    // encode_with_scalar: make_rule(shared, own bound); the payload bytes must agree.
    float shared = 55.0f;
    tg::ScalarRule r = rule_for(m, bound, &shared);
    std::vector<std::uint8_t> body(tg::body_bytes(p.packing, g.size()));
    tg::reference_codec().encode_body(g, r, {1, 2, 3, 4}, p.packing, body);
    auto payload = tg::encode_with_scalar(tg::reference_codec(), g, p, {1, 2, 3, 4}, shared);
    EXPECT_TRUE(std::equal(body.begin(), body.end(), payload.begin() + tg::kHeaderBytes)) << tg::to_string(p.clip);
  }
}

TEST(CudaTiles, FindLayerSkipsEmptyLayers) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::uint32_t count = 1 + rng() % 12;
    std::vector<std::uint64_t> begins(count + 1, 0);
    for (std::uint32_t i = 0; i < count; ++i) begins[i + 1] = begins[i] + (rng() % 3 == 0 ? 0 : rng() % 5);
    for (std::uint64_t item = 0; item < begins[count]; ++item) {
      std::uint32_t want = 0;
      for (std::uint32_t i = 0; i < count; ++i)
        if (begins[i] <= item && item < begins[i + 1]) want = i;
      ASSERT_EQ(find_layer(begins.data(), count, item), want) << "trial " << trial << " item " << item;
    }
  }
}

// Every byte value at every position class: the same trits or the same rejection as the reference.
TEST(CudaTiles, UnpackAgreesWithReferenceOnEveryByte) {
  for (auto packing : {tg::Packing::two_bit, tg::Packing::base3}) {
    bool base3 = packing == tg::Packing::base3;
    unsigned per = base3 ? 5 : 4;
    for (std::size_t n = per + 1; n <= 2 * per; ++n) {  // byte 1 holds 1 .. per elements
      for (unsigned v = 0; v < 256; ++v) {
        std::vector<std::uint8_t> body = {0, static_cast<std::uint8_t>(v)};
        std::vector<std::int8_t> want(n, 0);
        bool ref_ok = true;
        try {
          tg::reference_codec().unpack(packing, body, want);
        } catch (const tg::Error& e) {
          ASSERT_EQ(e.code(), tg::ErrorCode::invalid_code);
          ref_ok = false;
        }
        std::vector<float> out(n, 7.0f);
        std::vector<std::int8_t> trits(n, 9);
        std::uint64_t bad0 = decode_byte_item(body.data(), n, base3, 0, 2.0f, out.data(), trits.data());
        std::uint64_t bad1 = decode_byte_item(body.data(), n, base3, 1, 2.0f, out.data(), trits.data());
        ASSERT_EQ(bad0, kNoByte);
        ASSERT_EQ(bad1 == kNoByte, ref_ok) << tg::to_string(packing) << " n=" << n << " byte " << v;
        if (ref_ok) {
          ASSERT_EQ(trits, want);
          for (std::size_t k = 0; k < n; ++k) ASSERT_EQ(out[k], 2.0f * want[k]);
        }
        std::vector<float> out2(n, 7.0f);
        std::uint64_t items = decode_block_items(n, base3), bad = kNoByte;
        for (std::uint64_t it = 0; it < items; ++it) bad = std::min(bad, decode_block_item(body.data(), n, base3, it, 2.0f, out2.data(), false));
        ASSERT_EQ(bad == kNoByte, ref_ok);
        if (ref_ok)
          for (std::size_t k = 0; k < n; ++k) ASSERT_EQ(out2[k], 2.0f * want[k]);
        else
          ASSERT_EQ(bad, 1u);
      }
    }
  }
}

TEST(CudaTiles, DecodeItemsMatchReferenceDecode) {
  for (std::size_t n : kEdgeSizes) {
    auto g = tg::test::awkward(n, 3);
    for (auto packing : {tg::Packing::two_bit, tg::Packing::base3}) {
      tg::Params p;
      p.packing = packing;
      auto payload = tg::encode(tg::reference_codec(), g, p, {5, 0, 1, 2});
      auto want = tg::decode(tg::reference_codec(), payload);
      std::span<const std::uint8_t> body(payload.data() + tg::kHeaderBytes, payload.size() - tg::kHeaderBytes);
      bool base3 = packing == tg::Packing::base3;
      std::vector<float> v1(n, -1.0f), v2(n, -1.0f);
      for (std::uint64_t j = 0; j < body.size(); ++j)
        ASSERT_EQ(decode_byte_item(body.data(), n, base3, j, want.header.scalar, v1.data(), nullptr), kNoByte);
      for (std::uint64_t it = 0; it < decode_block_items(n, base3); ++it)
        ASSERT_EQ(decode_block_item(body.data(), n, base3, it, want.header.scalar, v2.data(), false), kNoByte);
      EXPECT_TRUE(n == 0 || std::memcmp(v1.data(), want.values.data(), 4 * n) == 0) << "n=" << n;
      EXPECT_TRUE(n == 0 || std::memcmp(v2.data(), want.values.data(), 4 * n) == 0) << "n=" << n;
    }
  }
}

TEST(CudaTiles, AggregateItemsMatchReferenceAggregate) {
  for (std::size_t n : {0ul, 1ul, 4ul, 5ul, 17ul, 1001ul}) {
    for (auto packing : {tg::Packing::two_bit, tg::Packing::base3}) {
      tg::Params p;
      p.packing = packing;
      std::vector<std::vector<std::uint8_t>> payloads;
      for (std::uint32_t w = 0; w < 5; ++w)
        payloads.push_back(tg::encode_with_scalar(tg::reference_codec(), tg::test::gaussian(n, w), p, {1, w, 7, 0}, 4.0f));
      std::vector<std::span<const std::uint8_t>> views(payloads.begin(), payloads.end());
      tg::Aggregate want = tg::aggregate(tg::reference_codec(), views);
      std::vector<const std::uint8_t*> bodies;
      for (auto& pl : payloads) bodies.push_back(pl.data() + tg::kHeaderBytes);
      std::vector<std::int32_t> sums(n, 99);
      std::vector<float> mean(n, 99.0f);
      bool base3 = packing == tg::Packing::base3;
      for (std::uint64_t j = 0; j < tg::body_bytes(packing, n); ++j)
        ASSERT_EQ(aggregate_item(bodies.data(), 5, base3, n, j, 4.0f, sums.data(), mean.data()), kNoByte);
      EXPECT_EQ(sums, want.sums) << "n=" << n;
      EXPECT_TRUE(n == 0 || std::memcmp(mean.data(), want.mean.data(), 4 * n) == 0) << "n=" << n;
      if (n >= 8) {  // an invalid byte in worker 3 is reported as 3 * body_bytes + j
        std::uint64_t nb = tg::body_bytes(packing, n);
        payloads[3][tg::kHeaderBytes + 1] = base3 ? 250 : 0xff;
        EXPECT_EQ(aggregate_item(bodies.data(), 5, base3, n, 1, 4.0f, sums.data(), mean.data()), 3 * nb + 1);
      }
    }
  }
}

// The whole encode pipeline of kernels.cu replayed on the host: prepare, max (per tile, per thread,
// combined as block_reduce and the atomics do), the two chunk-sum passes with mean in between, rule,
// pack. Only the warp shuffles and atomics themselves are left to the GPU tests.
struct Replay {
  std::vector<tg::cuda::TensorResult> results;
  std::vector<std::vector<std::uint8_t>> bodies;
};

Replay replay_encode_layers(const std::vector<std::vector<float>>& layers, const tg::Params& p,
                            const tg::StreamKey& key, int version, unsigned threads, std::int64_t total_error = 0) {
  std::uint32_t count = static_cast<std::uint32_t>(layers.size());
  std::uint64_t total = 0;
  for (const auto& g : layers) total += g.size();
  total += total_error;
  Layout l = layout(count, total);
  std::vector<double> storage(l.bytes / 8 + 1);
  Workspace ws = carve(storage.data(), l);
  Replay r;
  std::vector<tg::cuda::DeviceTensor> table;
  for (std::uint32_t i = 0; i < count; ++i) r.bodies.emplace_back(tg::body_bytes(p.packing, layers[i].size()), 0xCA);
  for (std::uint32_t i = 0; i < count; ++i)
    table.push_back({layers[i].data(), layers[i].size(), r.bodies[i].data(), key.tensor + i, 0});
  prepare_layers(ws, table.data(), {}, count, total, false, {});
  for (std::uint64_t t = 0; t < ws.tile_begin[count]; ++t) {
    std::uint64_t begin, end;
    std::uint32_t L = tile_range(ws, count, t, &begin, &end);
    for (unsigned tid = 0; tid < threads; ++tid) {
      MaxScan s;
      scan_tile(layers[L].data(), begin, end, false, tid, threads, s);
      std::uint32_t bits;
      std::memcpy(&bits, &s.max, 4);
      ws.states[L].max_bits = std::max(ws.states[L].max_bits, bits);
      ws.states[L].first_bad = std::min<unsigned long long>(ws.states[L].first_bad, s.first_bad);
    }
  }
  bool clipping = p.clip != tg::ClipMode::none;
  if (clipping) {
    for (bool square : {false, true}) {
      for (std::uint64_t c = 0; c < ws.chunk_begin[count]; ++c) {
        double lane[tg::kReduceLanes];
        for (unsigned k = 0; k < tg::kReduceLanes; ++k) lane[k] = chunk_lane_sum(ws, count, c, k, square);
        ws.totals[c] = tg::combine_lanes(lane);
      }
      for (std::uint32_t L = 0; L < count; ++L) {
        double total = tensor_total(ws, L);
        square ? set_sigma(ws, L, total) : set_mean(ws, L, total);
      }
    }
  }
  for (std::uint32_t L = 0; L < count; ++L) r.results.push_back(finish_rule(ws, L, clipping, p.c, nullptr));
  bool base3 = p.packing == tg::Packing::base3;
  for (std::uint64_t t = 0; t < ws.tile_begin[count]; ++t) {
    std::uint64_t begin, end;
    std::uint32_t L = tile_range(ws, count, t, &begin, &end);
    if (ws.states[L].first_bad != kNoneU) continue;
    const auto& d = ws.tensors[L];
    tg::StreamKey k = key;
    k.tensor = d.tensor;
    for (unsigned tid = 0; tid < threads; ++tid) {
      if (version == 0)
        pack_tile_bytewise(d.g, d.n, d.body, begin, end, ws.states[L].rule, k, base3, tid, threads);
      else if (version == 1)
        pack_tile_block(d.g, d.n, d.body, begin, end, false, ws.states[L].rule, k, base3, tid, threads);
      else
        pack_tile_unrolled(d.g, d.n, d.body, begin, end, false, ws.states[L].rule, k, base3, tid, threads);
    }
  }
  return r;
}

TEST(CudaTiles, EncodePipelineReplayMatchesReferenceLayers) {
  std::vector<std::vector<float>> layers = {tg::test::gaussian(500, 1, 0.01f), {}, tg::test::gaussian(17, 2),
                                            tg::test::awkward(30001, 3), tg::test::gaussian(3, 4, 100.0f),
                                            tg::test::gaussian(10240, 5), tg::test::awkward(20481, 6)};
  for (auto& x : layers[5]) x += 50.0f;  // a large mean
  std::vector<std::span<const float>> spans(layers.begin(), layers.end());
  tg::StreamKey key{11, 2, 10, 5};
  for (const auto& p : all_params()) {
    auto want = tg::encode_layers(tg::reference_codec(), spans, p, key);
    for (int version = 0; version < 3; ++version)
      for (unsigned threads : {32u, 256u}) {
        Replay r = replay_encode_layers(layers, p, key, version, threads);
        for (std::size_t i = 0; i < layers.size(); ++i) {
          tg::Header h = tg::parse_header(want[i]);
          EXPECT_EQ(r.results[i].first_bad, tg::cuda::kNone);
          EXPECT_EQ(r.results[i].scalar, h.scalar) << "layer " << i << " clip=" << tg::to_string(p.clip);
          EXPECT_TRUE(std::equal(r.bodies[i].begin(), r.bodies[i].end(), want[i].begin() + tg::kHeaderBytes))
              << "layer " << i << " clip=" << tg::to_string(p.clip) << " packing=" << tg::to_string(p.packing)
              << " version " << version + 1 << " threads=" << threads;
        }
      }
  }
}

TEST(CudaTiles, EncodePipelineReplayReportsBadInputWithoutWriting) {
  std::vector<std::vector<float>> layers = {tg::test::gaussian(100, 1), tg::test::gaussian(30000, 2),
                                            tg::test::gaussian(7, 3)};
  layers[1][12345] = std::numeric_limits<float>::infinity();
  layers[1][20000] = std::nanf("");
  tg::Params p;
  p.clip = tg::ClipMode::clip;
  Replay r = replay_encode_layers(layers, p, {1, 0, 0, 0}, 2, 256);
  EXPECT_EQ(r.results[0].first_bad, tg::cuda::kNone);
  EXPECT_EQ(r.results[1].first_bad, 12345u);
  EXPECT_EQ(r.results[2].first_bad, tg::cuda::kNone);
  for (std::uint8_t b : r.bodies[1]) ASSERT_EQ(b, 0xCA) << "a tensor with Inf was packed";
  // The neighbours are unaffected: same bytes as their own reference encode.
  auto want0 = tg::encode(tg::reference_codec(), layers[0], p, {1, 0, 0, 0});
  EXPECT_TRUE(std::equal(r.bodies[0].begin(), r.bodies[0].end(), want0.begin() + tg::kHeaderBytes));
  // A table whose sizes disagree with total_elements: kBadTable everywhere, nothing written.
  for (std::int64_t error : {-1, 1, 5000}) {
    layers[1][12345] = layers[1][20000] = 0.5f;
    Replay bad = replay_encode_layers(layers, p, {1, 0, 0, 0}, 2, 256, error);
    for (std::size_t i = 0; i < layers.size(); ++i) {
      EXPECT_EQ(bad.results[i].first_bad, tg::cuda::kBadTable) << "error " << error;
      for (std::uint8_t b : bad.bodies[i]) ASSERT_EQ(b, 0xCA);
    }
  }
}

}  // namespace
