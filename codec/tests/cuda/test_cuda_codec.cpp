// terngrad-bench: GPU tests of the CUDA codec: Philox known answers in a one-thread kernel, byte
// equality with tg::reference_codec() for every kernel version (edge sizes, packings, clipping modes,
// seeds), errors, layers, aggregation, unaligned device pointers. Without a usable GPU every test but
// the detection test skips with the reason.   ctest -R tg_cuda_tests   (CudaSmall.* is the memcheck case)
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "../test_util.hpp"
#include "philox_kernel.hpp"
#include "tg/codec.hpp"
#include "tg/cuda.hpp"
#include "tiles.hpp"

namespace {

// Edges of a Philox block and a 2bit byte (4), a base3 byte (5), a warp (32) and a pack tile.
const std::vector<std::size_t> kEdgeSizes = tg::test::edge_sizes({4, 5, 32, tg::cuda::detail::kPackTile});

#define REQUIRE_GPU()                                                        \
  do {                                                                       \
    std::string why_;                                                        \
    if (!tg::cuda::device_available(&why_)) GTEST_SKIP() << "no GPU: " << why_; \
  } while (0)

// Seeds: TG_TEST_SEED overrides the first one (printed with every failure).
std::vector<std::uint64_t> seeds(int count) {
  std::uint64_t first = 0x5eed5eedull;
  if (const char* s = std::getenv("TG_TEST_SEED")) first = std::strtoull(s, nullptr, 0);
  std::vector<std::uint64_t> out;
  for (int i = 0; i < count; ++i) out.push_back(first + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i));
  return out;
}

using tg::test::all_params;

std::string describe(std::size_t n, std::uint64_t seed, const tg::Params& p) {
  std::ostringstream s;
  s << "n=" << n << " seed=0x" << std::hex << seed << std::dec << " clip=" << tg::to_string(p.clip)
    << " packing=" << tg::to_string(p.packing);
  return s.str();
}

// ---- runs everywhere --------------------------------------------------------------------------------

TEST(CudaDevice, DetectionNeverCrashesAndExplainsItself) {
  std::string why = "unset";
  bool ok = tg::cuda::device_available(&why);
  EXPECT_EQ(tg::cuda::device_available(nullptr), ok);
  if (ok) {
    EXPECT_TRUE(why.empty()) << why;
    EXPECT_NO_THROW(tg::cuda::make_codec());
  } else {
    EXPECT_FALSE(why.empty());
    EXPECT_NE(why, "unset");
    std::cout << "[ INFO     ] no usable GPU: " << why << "\n";
    EXPECT_THROW(tg::cuda::make_codec(), tg::cuda::CudaError);
  }
  EXPECT_THROW(tg::cuda::make_codec("v9-imaginary"), tg::Error);
  ASSERT_GE(tg::cuda::kernel_versions().size(), 2u);
}

// ---- GPU tests ----------------------------------------------------------------------------------------

TEST(CudaPhilox, PublishedKnownAnswersInOneThreadKernel) {
  REQUIRE_GPU();
  std::vector<tg::PhiloxBlock> ctr, want, got;
  std::vector<std::uint32_t> keys;
  for (const auto& k : tg::test::read_philox_kat()) {
    ctr.push_back(k.counter);
    want.push_back(k.want);
    keys.push_back(k.key[0]);
    keys.push_back(k.key[1]);
  }
  ASSERT_EQ(ctr.size(), 3u);
  ASSERT_EQ(tg::cuda::test::philox_raw_on_device(ctr, keys, got), "");
  for (std::size_t i = 0; i < want.size(); ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(got[i].v[j], want[i].v[j]) << "vector " << i << " word " << j;
}

TEST(CudaPhilox, StreamKeysMatchHost) {
  REQUIRE_GPU();
  std::vector<tg::StreamKey> keys = {{0, 0, 0, 0}, {0x1122334455667788ull, 7, 9, 11}, {~0ull, ~0u, ~0u, ~0u}};
  std::vector<std::uint32_t> blocks = {0, 5, 0xffffffffu};
  std::vector<tg::PhiloxBlock> got;
  ASSERT_EQ(tg::cuda::test::philox_stream_on_device(keys, blocks, got), "");
  for (std::size_t i = 0; i < keys.size(); ++i) {
    tg::PhiloxBlock want = tg::philox_block(keys[i], blocks[i]);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(got[i].v[j], want.v[j]) << "key " << i << " word " << j;
  }
}

TEST(CudaCodec, SameBytesAsReferenceAtEdgeSizesEveryVersion) {
  REQUIRE_GPU();
  auto table = tg::cuda::cuda_codecs();
  for (std::size_t n : kEdgeSizes) {
    for (std::uint64_t seed : seeds(n > 100000 ? 2 : 8)) {
      auto g = tg::test::awkward(n, seed);
      for (const auto& p : all_params()) {
        tg::StreamKey key{seed + n, 3, 17, static_cast<std::uint32_t>(seed)};
        auto want = tg::encode(tg::reference_codec(), g, p, key);
        auto dref = tg::decode(tg::reference_codec(), want);
        for (const auto& entry : table) {
          // the tg::Codec path (max_abs, moments, encode_body on the device) ...
          ASSERT_EQ(tg::encode(*entry.codec, g, p, key), want) << entry.name << " " << describe(n, seed, p);
          // ... the fused device encode ...
          std::string version = entry.name.substr(5);
          ASSERT_EQ(tg::cuda::encode_payload(g, p, key, version), want) << "fused " << entry.name << " "
                                                                         << describe(n, seed, p);
          // ... and decode / unpack back.
          auto d = tg::decode(*entry.codec, want);
          ASSERT_EQ(std::memcmp(d.values.data(), dref.values.data(), 4 * n), 0) << entry.name << " decode "
                                                                                 << describe(n, seed, p);
          ASSERT_EQ(tg::decode_trits(*entry.codec, want), tg::decode_trits(tg::reference_codec(), want))
              << entry.name << " " << describe(n, seed, p);
        }
      }
    }
  }
}

// The golden payloads of the independent Python implementation (scripts/make_golden.py).
TEST(CudaCodec, ReproducesGoldenPayloads) {
  REQUIRE_GPU();
  auto cases = tg::test::read_golden();
  ASSERT_GE(cases.size(), 8u);
  for (const auto& c : cases) {
    for (const auto& entry : tg::cuda::cuda_codecs()) {
      EXPECT_EQ(tg::test::hex(tg::encode(*entry.codec, c.input, c.params, c.key)), tg::test::hex(c.payload))
          << entry.name << " case " << c.name;
      EXPECT_EQ(tg::test::hex(tg::cuda::encode_payload(c.input, c.params, c.key, entry.name.substr(5))),
                tg::test::hex(c.payload))
          << "fused " << entry.name << " case " << c.name;
    }
  }
}

TEST(CudaCodec, TernarizeMomentsAndMaxMatchReference) {
  REQUIRE_GPU();
  for (std::size_t n : {1ul, 2047ul, 2048ul, 2049ul, 100000ul, 1000003ul}) {
    auto g = tg::test::gaussian(n, n, 3.0f);
    for (auto& x : g) x += 1000.0f;  // a large mean: the two passes must follow the canonical order exactly
    tg::Moments want = tg::reference_codec().moments(g);
    tg::ScalarRule rule = tg::own_rule(tg::reference_codec(), g, {}, 0);
    std::vector<std::int8_t> tw(n);
    tg::reference_codec().ternarize(g, rule, {9, 8, 7, 6}, tw);
    for (const auto& entry : tg::cuda::cuda_codecs()) {
      tg::Moments got = entry.codec->moments(g);
      EXPECT_EQ(std::memcmp(&got.mean, &want.mean, 8), 0)
          << entry.name << " n=" << n << std::hexfloat << " " << got.mean << " vs " << want.mean;
      EXPECT_EQ(std::memcmp(&got.sigma, &want.sigma, 8), 0)
          << entry.name << " n=" << n << std::hexfloat << " " << got.sigma << " vs " << want.sigma;
      EXPECT_EQ(entry.codec->max_abs(g, 0), tg::reference_codec().max_abs(g, 0)) << entry.name;
      std::vector<std::int8_t> t(n, 0x5a);
      entry.codec->ternarize(g, rule, {9, 8, 7, 6}, t);
      EXPECT_EQ(t, tw) << entry.name << " n=" << n;
    }
  }
}

TEST(CudaCodec, NonFiniteIsATypedErrorNamingTheFirstIndex) {
  REQUIRE_GPU();
  auto codec = tg::cuda::make_codec();
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    for (std::size_t where : {0ul, 6ul, 200000ul, 999999ul}) {
      auto g = tg::test::gaussian(1000000, 1);
      g[where] = bad;
      g[999999] = bad;
      for (auto clip : {tg::ClipMode::none, tg::ClipMode::clip}) {
        tg::Params p;
        p.clip = clip;
        for (int path = 0; path < 2; ++path) {
          try {
            if (path == 0)
              tg::encode(*codec, g, p, {0, 0, 42, 0});
            else
              tg::cuda::encode_payload(g, p, {0, 0, 42, 0});
            ADD_FAILURE() << "accepted a non-finite value (path " << path << ")";
          } catch (const tg::NonFiniteError& e) {
            EXPECT_EQ(e.tensor(), 42u);
            EXPECT_EQ(e.index(), where) << "path " << path;
          }
        }
      }
    }
  }
}

TEST(CudaCodec, InvalidBodiesAreRejectedLikeTheReference) {
  REQUIRE_GPU();
  auto g = tg::test::gaussian(1003, 2);
  for (auto packing : {tg::Packing::two_bit, tg::Packing::base3}) {
    tg::Params p;
    p.packing = packing;
    auto good = tg::encode(tg::reference_codec(), g, p, {1, 0, 0, 0});
    std::size_t nb = good.size() - tg::kHeaderBytes;
    std::vector<std::pair<std::size_t, std::uint8_t>> defects = {{10, packing == tg::Packing::base3 ? 243 : 0x0f},
                                                                 {nb - 1, packing == tg::Packing::base3 ? 242 : 0x40}};
    for (auto [j, v] : defects) {
      auto body = std::vector<std::uint8_t>(good.begin() + tg::kHeaderBytes, good.end());
      body[j] = v;
      std::string want_msg;
      std::vector<float> out(1003);
      try {
        tg::reference_codec().decode_body(packing, body, 1.0f, out);
      } catch (const tg::Error& e) {
        want_msg = e.what();
      }
      ASSERT_FALSE(want_msg.empty()) << "the reference accepted the defect";
      for (const auto& entry : tg::cuda::cuda_codecs()) {
        try {
          entry.codec->decode_body(packing, body, 1.0f, out);
          ADD_FAILURE() << entry.name << " accepted an invalid body";
        } catch (const tg::Error& e) {
          EXPECT_EQ(e.code(), tg::ErrorCode::invalid_code);
          EXPECT_EQ(std::string(e.what()), want_msg) << entry.name;
        }
        std::vector<std::int8_t> trits(1003);
        EXPECT_THROW(entry.codec->unpack(packing, body, trits), tg::Error) << entry.name;
      }
    }
  }
}

TEST(CudaCodec, SharedScalarLayersAndAggregation) {
  REQUIRE_GPU();
  auto codec = tg::cuda::make_codec();
  const std::uint32_t workers = 5;
  for (auto packing : {tg::Packing::two_bit, tg::Packing::base3}) {
    tg::Params p;
    p.packing = packing;
    p.clip = tg::ClipMode::clip;
    std::vector<std::vector<float>> grads;
    std::vector<float> scalars;
    for (std::uint32_t w = 0; w < workers; ++w) {
      grads.push_back(tg::test::gaussian(100003, 100 + w, 1.0f + w));
      scalars.push_back(tg::tensor_scalar(*codec, grads.back(), p, 7));
      EXPECT_EQ(scalars.back(), tg::tensor_scalar(tg::reference_codec(), grads.back(), p, 7));
    }
    float s = tg::shared_scalar(scalars);
    std::vector<std::vector<std::uint8_t>> payloads;
    for (std::uint32_t w = 0; w < workers; ++w) {
      auto want = tg::encode_with_scalar(tg::reference_codec(), grads[w], p, {5, w, 7, 1}, s);
      ASSERT_EQ(tg::encode_with_scalar(*codec, grads[w], p, {5, w, 7, 1}, s), want) << "worker " << w;
      payloads.push_back(want);
    }
    std::vector<std::span<const std::uint8_t>> views(payloads.begin(), payloads.end());
    tg::Aggregate want = tg::aggregate(tg::reference_codec(), views);
    tg::Aggregate got = tg::cuda::aggregate_payloads(views);
    EXPECT_EQ(got.scalar, want.scalar);
    EXPECT_EQ(got.workers, want.workers);
    EXPECT_EQ(got.sums, want.sums);
    ASSERT_EQ(got.mean.size(), want.mean.size());
    EXPECT_EQ(std::memcmp(got.mean.data(), want.mean.data(), 4 * want.mean.size()), 0);
    tg::Aggregate via_codec = tg::aggregate(*codec, views);
    EXPECT_EQ(via_codec.sums, want.sums);
  }
  // Layers: empty, tiny, float-threshold and multi-tile tensors in one launch sequence.
  std::vector<std::vector<float>> layers = {tg::test::gaussian(500, 1, 0.01f), {}, tg::test::gaussian(17, 2),
                                            tg::test::awkward(30001, 3), tg::test::gaussian(3, 4, 100.0f),
                                            tg::test::gaussian(10240, 5)};
  std::vector<std::span<const float>> spans(layers.begin(), layers.end());
  for (const auto& p0 : all_params()) {
    for (std::uint64_t float_below : {0ull, 10ull}) {
      tg::Params p = p0;
      p.float_below = float_below;
      tg::StreamKey key{11, 2, 10, 5};
      auto want = tg::encode_layers(tg::reference_codec(), spans, p, key);
      for (const auto& version : tg::cuda::kernel_versions())
        EXPECT_EQ(tg::cuda::encode_layers_payloads(spans, p, key, version), want)
            << version << " clip=" << tg::to_string(p.clip) << " packing=" << tg::to_string(p.packing)
            << " float_below=" << float_below;
    }
  }
}

// Device API directly: unaligned input and output pointers, a poisoned body border, no writes past it.
TEST(CudaDeviceApi, UnalignedPointersAndBordersEveryVersion) {
  REQUIRE_GPU();
  const std::size_t n = 40961;
  auto g = tg::test::awkward(n, 8);
  for (const auto& version : tg::cuda::kernel_versions()) {
    for (auto packing : {tg::Packing::two_bit, tg::Packing::base3}) {
      tg::Params p;
      p.packing = packing;
      p.clip = tg::ClipMode::saturate;
      tg::StreamKey key{3, 1, 4, 1};
      auto want = tg::encode(tg::reference_codec(), g, p, key);
      std::size_t nb = want.size() - tg::kHeaderBytes;
      for (std::size_t offset = 0; offset < 5; ++offset) {
        float* dg = nullptr;
        std::uint8_t* db = nullptr;
        void* ws = nullptr;
        tg::cuda::TensorResult* dr = nullptr;
        std::size_t wsb = tg::cuda::encode_workspace_bytes(1, n);
        ASSERT_EQ(cudaMalloc(&dg, 4 * (n + 8)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&db, nb + 16), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&ws, wsb), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&dr, sizeof(tg::cuda::TensorResult)), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dg + offset, g.data(), 4 * n, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemset(db, 0xCA, nb + 16), cudaSuccess);
        tg::cuda::encode(ws, wsb, dg + offset, n, p, key, db + offset, dr, nullptr, nullptr, version);
        std::vector<std::uint8_t> body(nb + 16);
        tg::cuda::TensorResult r;
        ASSERT_EQ(cudaMemcpy(body.data(), db, nb + 16, cudaMemcpyDeviceToHost), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(&r, dr, sizeof r, cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_TRUE(std::equal(want.begin() + tg::kHeaderBytes, want.end(), body.begin() + offset))
            << version << " " << tg::to_string(packing) << " offset " << offset;
        for (std::size_t k = 0; k < offset; ++k) EXPECT_EQ(body[k], 0xCA) << "wrote before the body";
        for (std::size_t k = offset + nb; k < body.size(); ++k) EXPECT_EQ(body[k], 0xCA) << "wrote past the body";
        EXPECT_EQ(r.first_bad, tg::cuda::kNone);
        EXPECT_EQ(r.scalar, tg::decode(tg::reference_codec(), want).header.scalar);
        // decode into an unaligned float buffer with poisoned neighbours
        float* dout = nullptr;
        std::uint64_t* dbad = nullptr;
        ASSERT_EQ(cudaMalloc(&dout, 4 * (n + 8)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&dbad, 8), cudaSuccess);
        ASSERT_EQ(cudaMemset(dout, 0xCA, 4 * (n + 8)), cudaSuccess);
        tg::cuda::decode(packing, db + offset, n, r.scalar, dout + offset, dbad, nullptr, version);
        std::vector<float> out(n + 8);
        std::uint64_t bad = 0;
        ASSERT_EQ(cudaMemcpy(out.data(), dout, 4 * (n + 8), cudaMemcpyDeviceToHost), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(&bad, dbad, 8, cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_EQ(bad, tg::cuda::kNone);
        auto dref = tg::decode(tg::reference_codec(), want);
        EXPECT_EQ(std::memcmp(out.data() + offset, dref.values.data(), 4 * n), 0) << version << " offset " << offset;
        std::uint32_t poison;
        std::memset(&poison, 0xCA, 4);
        for (std::size_t k = 0; k < offset; ++k) EXPECT_EQ(std::memcmp(&out[k], &poison, 4), 0);
        for (std::size_t k = offset + n; k < n + 8; ++k) EXPECT_EQ(std::memcmp(&out[k], &poison, 4), 0);
        cudaFree(dg);
        cudaFree(db);
        cudaFree(ws);
        cudaFree(dr);
        cudaFree(dout);
        cudaFree(dbad);
      }
    }
  }
}

TEST(CudaDeviceApi, BadArgumentsAreTypedErrors) {
  REQUIRE_GPU();
  tg::Params p;
  EXPECT_THROW(tg::cuda::encode(nullptr, 0, nullptr, 10, p, {}, nullptr, nullptr, nullptr), tg::Error);
  p.c = -1.0;
  EXPECT_THROW(tg::cuda::encode(nullptr, 0, nullptr, 10, p, {}, nullptr, nullptr, nullptr), tg::Error);
  EXPECT_THROW(tg::cuda::decode(tg::Packing::float32, nullptr, 10, 1.0f, nullptr, nullptr, nullptr), tg::Error);
  EXPECT_THROW(tg::cuda::encode(nullptr, 0, nullptr, (1ull << 34) + 1, {}, {}, nullptr, nullptr, nullptr), tg::Error);

  // A layer table whose sizes disagree with total_elements: kBadTable for every tensor, no body written.
  float* dg = nullptr;
  std::uint8_t* db = nullptr;
  tg::cuda::DeviceTensor* dt = nullptr;
  tg::cuda::TensorResult* dr = nullptr;
  void* ws = nullptr;
  std::size_t wsb = tg::cuda::encode_workspace_bytes(2, 25);
  ASSERT_EQ(cudaMalloc(&dg, 4 * 30), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&db, 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dt, 2 * sizeof(tg::cuda::DeviceTensor)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dr, 2 * sizeof(tg::cuda::TensorResult)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ws, wsb), cudaSuccess);
  std::vector<float> g(30, 1.0f);
  ASSERT_EQ(cudaMemcpy(dg, g.data(), 4 * 30, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(db, 0xCA, 16), cudaSuccess);
  tg::cuda::DeviceTensor table[2] = {{dg, 10, db, 0, 0}, {dg + 10, 20, db + 3, 1, 0}};  // 30 elements, not 25
  ASSERT_EQ(cudaMemcpy(dt, table, sizeof table, cudaMemcpyHostToDevice), cudaSuccess);
  tg::cuda::encode_layers(ws, wsb, dt, 2, 25, {}, {}, dr, nullptr);
  tg::cuda::TensorResult r[2];
  std::uint8_t body[16];
  ASSERT_EQ(cudaMemcpy(r, dr, sizeof r, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(body, db, 16, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(r[0].first_bad, tg::cuda::kBadTable);
  EXPECT_EQ(r[1].first_bad, tg::cuda::kBadTable);
  for (std::uint8_t b : body) EXPECT_EQ(b, 0xCA);
  for (void* p : {static_cast<void*>(dg), static_cast<void*>(db), static_cast<void*>(dt), static_cast<void*>(dr), ws})
    cudaFree(p);
}

// The case compute-sanitizer memcheck runs (scripts/gpu-check.sh): every path once, small sizes.
TEST(CudaSmall, EveryPathOnSmallTensors) {
  REQUIRE_GPU();
  for (std::size_t n : {0ul, 1ul, 5ul, 17ul, 33ul, 2049ul, 10241ul}) {
    auto g = tg::test::awkward(n, 1);
    for (const auto& p : all_params()) {
      auto want = tg::encode(tg::reference_codec(), g, p, {1, 2, 3, 4});
      for (const auto& entry : tg::cuda::cuda_codecs()) {
        EXPECT_EQ(tg::encode(*entry.codec, g, p, {1, 2, 3, 4}), want) << entry.name << " n=" << n;
        EXPECT_EQ(tg::cuda::encode_payload(g, p, {1, 2, 3, 4}, entry.name.substr(5)), want) << entry.name;
        auto d = tg::decode(*entry.codec, want);
        EXPECT_EQ(d.values, tg::decode(tg::reference_codec(), want).values);
      }
      std::vector<std::span<const std::uint8_t>> views = {want, want};
      EXPECT_EQ(tg::cuda::aggregate_payloads(views).sums, tg::aggregate(tg::reference_codec(), views).sums);
    }
  }
  std::vector<std::vector<float>> layers = {tg::test::gaussian(5, 1), {}, tg::test::gaussian(10241, 2)};
  std::vector<std::span<const float>> spans(layers.begin(), layers.end());
  tg::Params p;
  p.clip = tg::ClipMode::clip;
  EXPECT_EQ(tg::cuda::encode_layers_payloads(spans, p, {1, 0, 0, 0}), tg::encode_layers(tg::reference_codec(), spans, p, {1, 0, 0, 0}));
}

}  // namespace
