// terngrad-bench: tests of the Section 6 performance model: the size tables against the published
// parameter counts, payload sizes and collective times against cases computed by hand here, and the
// paper's qualitative result under --preset paper. Run: ctest -R tg_model_tests
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "tg/model/nets.hpp"
#include "tg/model/perf.hpp"

using namespace tg::model;

namespace {

std::uint64_t numel_of(const NetSpec& n, const std::string& name) {
  for (const auto& t : n.tensors)
    if (t.name == name) return t.numel;
  ADD_FAILURE() << "no tensor " << name << " in " << n.name;
  return 0;
}

Network plain(Topology t, double bandwidth, double latency) {
  Network n;
  n.topology = t;
  n.bandwidth_Bps = bandwidth;
  n.latency_s = latency;
  n.gpus_per_node = 1;
  return n;
}

}  // namespace

// Totals from the literature (AlexNet 60,965,224 for BVLC AlexNet with 1000 classes; VGG-A 132,863,336)
// and by hand for LeNet on 28x28 (500+20 + 25000+50 + 400000+500 + 5000+10).
TEST(ModelNets, ParameterCountsMatchHandCounts) {
  EXPECT_EQ(net("lenet").parameters(), 431080u);
  EXPECT_EQ(net("alexnet").parameters(), 60965224u);
  EXPECT_EQ(net("vgga").parameters(), 132863336u);
  EXPECT_EQ(net("alexnet").tensors.size(), 16u);
  EXPECT_EQ(net("vgga").tensors.size(), 22u);
  // GoogLeNet: 3 stem convolutions, 9 inception modules of 6 convolutions, the classifier: 58 x 2 tensors.
  EXPECT_EQ(net("googlenet").tensors.size(), 116u);
  // fc6 of AlexNet: 9216 x 4096; conv2 grouped by 2: 256 x 48 x 5 x 5.
  EXPECT_EQ(numel_of(net("alexnet"), "fc6.weight"), 9216u * 4096u);
  EXPECT_EQ(numel_of(net("alexnet"), "conv2.weight"), 256u * 48u * 25u);
  // inception_3a's 5x5 branch: 32 x 16 x 5 x 5; its input has 192 channels.
  EXPECT_EQ(numel_of(net("googlenet"), "inception_3a.5x5.weight"), 32u * 16u * 25u);
  EXPECT_EQ(numel_of(net("googlenet"), "inception_3a.1x1.weight"), 64u * 192u);
  // CifarNet on 24x24 crops: two stride-2 SAME pools give 6x6, local3 = 64*36 x 384.
  EXPECT_EQ(numel_of(net("cifarnet"), "local3.weight"), 2304u * 384u);
  EXPECT_EQ(numel_of(net("cifarnet", 1, 24, 24, 10), "conv1.weight"), 64u * 25u);
  EXPECT_THROW(net("resnet"), std::invalid_argument);
  EXPECT_THROW(net("alexnet", 3, 224, 224, 1000), std::invalid_argument);
}

// LeNet bodies by hand: 2-bit is ceil(n/4) bytes: 125+5+6250+13+100000+125+1250+3 = 107771; every tensor
// has a 32-byte header, and the worker's buffer a 4-byte loss.
TEST(ModelPayload, LenetBytesByHand) {
  Payload f = float_payload(net("lenet"));
  EXPECT_EQ(f.bytes, 4u + 8u * 32u + 4u * 431080u);
  Payload t = terngrad_payload(net("lenet"), 0);
  EXPECT_EQ(t.bytes, 4u + 8u * 32u + 107771u);
  EXPECT_EQ(t.ternary_tensors, 8u);
  // float_below 1000 keeps the four biases and conv1.weight (500) as float32: 20+50+500+10 + 500 elements.
  Payload tb = terngrad_payload(net("lenet"), 1000);
  EXPECT_EQ(tb.float_elements, 20u + 50u + 500u + 10u + 500u);
  EXPECT_EQ(tb.bytes, 4u + 8u * 32u + 4u * 1080u + 6250u + 100000u + 1250u);
  // base-3: ceil(n/5): 100+4+5000+10+80000+100+1000+2 = 86216
  EXPECT_EQ(terngrad_payload(net("lenet"), 0, true).bytes, 4u + 8u * 32u + 86216u);
}

TEST(ModelCollectives, RingAllgatherAndAllreduceByHand) {
  Network n = plain(Topology::ring, 1e8, 1e-4);
  EXPECT_DOUBLE_EQ(allgather_s(n, 1, 1e6), 0.0);
  EXPECT_NEAR(allgather_s(n, 4, 1e6), 3 * (1e-4 + 0.01), 1e-12);          // (N-1)(alpha + S/B)
  EXPECT_NEAR(allreduce_s(n, 4, 4e6), 6 * (1e-4 + 0.01), 1e-12);          // 2(N-1)(alpha + S/(N B))
  Network s = plain(Topology::shared, 1e8, 1e-4);
  EXPECT_NEAR(allgather_s(s, 4, 1e6), 3e-4 + 12 * 0.01, 1e-12);          // N(N-1) S over one link
  EXPECT_NEAR(allreduce_s(s, 4, 4e6), 6e-4 + 2 * 3 * 0.04, 1e-12);       // 2(N-1) S over one link
}

// 16 workers as 4 nodes of 4: the ring forwards 4-payload blocks between nodes, each worker takes in 15
// payloads over the intra-node link; allreduce: 2*3 steps of S/4 inside, 2*3 steps of S/4 across.
TEST(ModelCollectives, HierarchicalByHand) {
  Network n = plain(Topology::ring, 1e8, 1e-4);
  n.gpus_per_node = 4;
  n.intra_bandwidth_Bps = 1e9;
  n.intra_latency_s = 1e-5;
  double S = 1e6;
  EXPECT_NEAR(allgather_s(n, 16, S), 3 * (1e-4 + 4e6 / 1e8) + (3 * 1e-5 + 15e6 / 1e9), 1e-12);
  EXPECT_NEAR(allreduce_s(n, 16, S), 6 * (1e-5 + 0.25e6 / 1e9) + 6 * (1e-4 + 0.25e6 / 1e8), 1e-12);
  // 2 workers on one node: no network term
  EXPECT_NEAR(allgather_s(n, 2, S), 1e-5 + 1e6 / 1e9, 1e-12);
}

// Parameter server, 8 one-worker nodes, 1 MB up and down at 100 MB/s: one shard receives 8 MB (0.08 s)
// and sends 8 MB; a shard on every node: each link carries 1 MB each way.
TEST(ModelCollectives, ParameterServerByHand) {
  Network n = plain(Topology::ps, 1e8, 0);
  n.ps_shards = 1;
  EXPECT_NEAR(ps_exchange_s(n, 8, 1e6, 1e6, true), 0.16, 1e-12);
  n.ps_shards = 0;
  EXPECT_NEAR(ps_exchange_s(n, 8, 1e6, 1e6, true), 0.02, 1e-12);
  // 4 workers per node, TernGrad payloads not summed in the node: a node pushes 4 MB
  n.gpus_per_node = 4;
  n.intra_bandwidth_Bps = 0;  // unlimited
  EXPECT_NEAR(ps_exchange_s(n, 16, 1e6, 1e6, false), 0.04 + 0.01, 1e-12);
  EXPECT_NEAR(ps_exchange_s(n, 16, 1e6, 1e6, true), 0.01 + 0.01, 1e-12);
}

// A whole step by hand: LeNet, 2 workers on a shared 100 Mbit/s link, compute 0.05 s, batch 32.
TEST(ModelPredict, StepAndThroughputByHand) {
  Inputs in;
  in.net = net("lenet");
  in.batch = 32;
  in.compute_s = 0.05;
  in.network = plain(Topology::shared, 12.5e6, 0);
  double sf = 1724580, st = 108031;
  Prediction f = predict(in, Scheme::float_allgather, 2);
  EXPECT_NEAR(f.comm_s, 2 * sf / 12.5e6, 1e-12);
  EXPECT_NEAR(f.step_s, 0.05 + 2 * sf / 12.5e6, 1e-12);
  EXPECT_NEAR(f.images_per_s, 64 / (0.05 + 2 * sf / 12.5e6), 1e-9);
  Prediction t = predict(in, Scheme::terngrad_allgather, 2);
  // the allreduce(max) of 8 scalars: 2(N-1) x 32 bytes over the link, then the allgather
  EXPECT_NEAR(t.comm_s, 2 * 32 / 12.5e6 + 2 * st / 12.5e6, 1e-12);
  // codec terms: encode n/E (+ float tensors n/F); every worker decodes N payloads
  in.rates = CodecRates{1e8, 4e8, 1e9, 5e8, "test"};
  t = predict(in, Scheme::terngrad_allgather, 2);
  EXPECT_NEAR(t.encode_s, 431080 / 1e8, 1e-15);
  EXPECT_NEAR(t.decode_s, 2 * 431080 / 4e8, 1e-15);
  f = predict(in, Scheme::float_allgather, 2);
  EXPECT_NEAR(f.encode_s, 431080 / 1e9, 1e-15);
  EXPECT_NEAR(f.decode_s, 2 * 431080 / 5e8, 1e-15);
  // one worker: no communication, throughput = batch / (compute + codec)
  Prediction one = predict(in, Scheme::float_allreduce, 1);
  EXPECT_DOUBLE_EQ(one.comm_s, 0.0);
  EXPECT_NEAR(one.images_per_s, 32 / 0.05, 1e-9);
  EXPECT_THROW(predict(in, Scheme::float_allgather, 0), std::invalid_argument);
  in.network.bandwidth_Bps = 0;
  EXPECT_THROW(predict(in, Scheme::float_allgather, 2), std::invalid_argument);
}

// The paper's result (Section 6): TernGrad's speedup grows with the workers on 1 GbE, stays small on
// InfiniBand, and is larger for the nets with large fully-connected layers (AlexNet, VGG-A) than for
// GoogLeNet.
TEST(ModelPaperPreset, SpeedupGrowsOnEthernetSmallOnInfiniband) {
  auto speedup = [](const Inputs& in, int w) {
    return predict(in, Scheme::terngrad_ps, w).images_per_s / predict(in, Scheme::float_ps, w).images_per_s;
  };
  std::map<std::string, double> at512;
  auto configs = paper_preset();
  ASSERT_EQ(configs.size(), 6u);
  for (const auto& c : configs) {
    double previous = 0;
    for (int w : default_worker_counts()) {
      double s = speedup(c.inputs, w);
      EXPECT_GE(s, 1.0) << c.label << " at " << w;
      if (c.network == "1GbE") {
        EXPECT_GE(s, previous * 0.98) << c.label << ": speedup falls from " << previous << " to " << s << " at " << w;
        previous = std::max(previous, s);
      }
    }
    at512[c.label] = speedup(c.inputs, 512);
    if (c.network == "1GbE") {  // grows: more at 8 GPUs (2 nodes) than at 4 (one node), more at 4 than at 1
      EXPECT_GT(speedup(c.inputs, 8), 1.5 * speedup(c.inputs, 4)) << c.label;
      EXPECT_GT(speedup(c.inputs, 4), speedup(c.inputs, 1)) << c.label;
    }
  }
  for (const char* n : {"alexnet", "googlenet", "vgga"}) {
    std::string gbe = std::string(n) + ", 1GbE", ib = std::string(n) + ", InfiniBand";
    EXPECT_GT(at512[gbe], 2.0) << gbe;
    EXPECT_LT(at512[ib], 1.6) << ib;
    EXPECT_GT(at512[gbe], 1.5 * at512[ib]) << n;
  }
  EXPECT_GT(at512["alexnet, 1GbE"], at512["googlenet, 1GbE"]);
  EXPECT_GT(at512["vgga, 1GbE"], at512["googlenet, 1GbE"]);
  // one worker: nothing to exchange, no speedup
  EXPECT_NEAR(speedup(configs[0].inputs, 1), 1.0, 1e-12);
}

TEST(ModelInputs, StepsCsvMedianAndErrors) {
  auto dir = std::filesystem::temp_directory_path() / ("tg_model_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "steps.csv").string();
  {
    std::ofstream out(path);
    out << "step,loss,lr,compute_s,encode_s,comm_s,decode_s,optimizer_s,payload_bytes,float_bytes\n";
    out << "0,2.3,0.01,9.0,0,0,0,1.0,1,1\n";  // warm-up, left out
    out << "1,2.3,0.01,0.10,0,0,0,0.01,1,1\n";
    out << "2,2.3,0.01,0.30,0,0,0,0.02,1,1\n";
    out << "3,2.3,0.01,0.20,0,0,0,0.03,1,1\n";
  }
  // medians of 0.11, 0.32, 0.23 -> 0.23
  EXPECT_NEAR(compute_from_steps_csv(path, 1), 0.23, 1e-12);
  EXPECT_THROW(compute_from_steps_csv(path, 10), std::runtime_error);
  {
    std::ofstream out(path);
    out << "step,loss\n0,1\n";
  }
  EXPECT_THROW(compute_from_steps_csv(path, 0), std::runtime_error);
  EXPECT_THROW(compute_from_steps_csv((dir / "missing.csv").string(), 0), std::runtime_error);
  auto write = [&](const char* text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
  };
  // CRLF line ends: the last column's name and cells carry no '\r'
  write("step,compute_s,optimizer_s\r\n1,0.10,0.01\r\n2,0.20,0.02\r\n3,0.30,0.03\r\n");
  EXPECT_NEAR(compute_from_steps_csv(path, 0), 0.22, 1e-12);
  // a cell is exactly one decimal number: a trailing word, hexadecimal, an empty cell are refused
  for (const char* cell : {"0.2abc", "0x10", "", " 0.1", "nan", "inf", "-0.1"}) {
    write((std::string("step,compute_s,optimizer_s\n1,0.1,") + cell + "\n").c_str());
    EXPECT_THROW(compute_from_steps_csv(path, 0), std::runtime_error) << "cell '" << cell << "'";
  }
  // every step taking 0 s is no compute time (the model would predict 0 img/s)
  write("step,compute_s,optimizer_s\n1,0,0\n2,0,0\n");
  EXPECT_THROW(compute_from_steps_csv(path, 0), std::runtime_error);
  std::filesystem::remove_all(dir);
}

TEST(ModelInputs, RunJsonLayers) {
  auto dir = std::filesystem::temp_directory_path() / "tg_model_test_json";
  std::filesystem::create_directories(dir);
  auto path = (dir / "run.json").string();
  {
    std::ofstream out(path);
    out << R"({"config": {"model": "lenet"}, "layers": [{"name": "a.weight", "numel": 10}, {"name": "a.bias", "numel": 2}]})";
  }
  NetSpec n = read_run_layers(path);
  EXPECT_EQ(n.name, "lenet");
  EXPECT_EQ(n.parameters(), 12u);
  {
    std::ofstream out(path);
    out << R"({"layers": [{"name": "a.weight"}]})";
  }
  EXPECT_THROW(read_run_layers(path), std::runtime_error);
  std::filesystem::remove_all(dir);
}

// The measured rates are positive and finite (their size depends on the machine).
TEST(ModelCodecRates, MeasuredRatesArePositive) {
  CodecRates r = measure_codec_rates("optimized", 1, 1 << 14, 1, 0.001);
  for (double v : {r.ternary_encode, r.ternary_aggregate, r.float_encode, r.float_decode}) {
    EXPECT_GT(v, 0);
    EXPECT_TRUE(std::isfinite(v));
  }
}
