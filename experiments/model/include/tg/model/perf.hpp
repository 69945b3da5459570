// terngrad-bench: the Section 6 performance model. Step time = compute + encode + communicate + decode,
// each from a measured or stated input; throughput = workers x per-worker batch / step time. The formulas
// are written out in docs/model.md; `terngrad model --help` runs them.
//   auto p = tg::model::predict(inputs, tg::model::Scheme::terngrad_allgather, 16);   // p.images_per_s
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tg/model/nets.hpp"

namespace tg::model {

/// What one worker puts on the wire per step, in the exchange of experiments/train/src/exchange.cpp:
/// [4-byte loss][per tensor: 32-byte header + body], body = 4 n bytes (float32) or the packed trits.
struct Payload {
  std::uint64_t bytes = 0;
  std::uint64_t ternary_elements = 0, float_elements = 0;
  std::size_t tensors = 0, ternary_tensors = 0;
};

/// float32: every tensor as float32. terngrad: tensors with numel >= float_below (0: all) packed as
/// 2-bit trits (4 per byte), or base-3 (5 per byte) when base3 is set; the others float32.
Payload float_payload(const NetSpec& net);
Payload terngrad_payload(const NetSpec& net, std::uint64_t float_below, bool base3 = false);

/// How workers are connected.
enum class Topology {
  ring,    // every node has its own full-duplex link of `bandwidth` to a non-blocking switch; ring collectives
  ps,      // the same links; a parameter server sharded over `ps_shards` nodes (0: one shard on every node)
  shared,  // one link of `bandwidth` carries every byte any worker sends (a hub, or a loopback shaped by one qdisc)
};
const char* to_string(Topology t);
Topology parse_topology(const std::string& text);  // throws std::invalid_argument naming the choices

struct Network {
  Topology topology = Topology::ring;
  double bandwidth_Bps = 125e6;      // bytes/s of one node's link (each direction)
  double latency_s = 50e-6;          // per message
  int gpus_per_node = 1;             // workers sharing one node's link
  double intra_bandwidth_Bps = 0;    // bytes/s of the link inside a node (0: infinitely fast)
  double intra_latency_s = 0;
  int ps_shards = 0;                 // parameter-server shards (0: one on every node)
  bool ps_float_downlink = false;    // TernGrad over a parameter server: the pull is float32 (true) or
                                     // the codec's payload size (false: the server sends ternarized values)
};

/// Codec speeds, in elements per second on one worker; 0 means "not modeled" (no time).
struct CodecRates {
  double ternary_encode = 0;     // tg::encode of a large tensor (scalar + ternarize + pack + CRC)
  double ternary_aggregate = 0;  // tg::aggregate, per element of each worker's payload
  double float_encode = 0;       // a float32 payload (copy + CRC)
  double float_decode = 0;       // decode a float32 payload and add it into a double sum, per element per worker
  std::string source;            // where the rates came from ("measured in-process: ...", "--codec-rates", "none")
};

/// Measures the rates of `codec_name` (tg::make_codec with `threads`) on `elements` normal floats,
/// best of `repeats`, each repeat at least min_seconds long.
CodecRates measure_codec_rates(const std::string& codec_name = "optimized", unsigned threads = 1,
                               std::size_t elements = 1 << 20, int repeats = 3, double min_seconds = 0.05);

/// Compute time per step in seconds from a measured run's steps.csv (`terngrad train --out`): the median
/// of compute_s + optimizer_s over the steps after the first `skip` (warm-up). Throws std::runtime_error
/// naming the file and the problem.
double compute_from_steps_csv(const std::string& path, int skip = 3);

/// The number a text is, read whole in decimal notation; nullopt for anything else: an empty text, leading
/// space, trailing characters ("0.2abc"), hexadecimal ("0x10", which strtod reads as 16). nan and inf are
/// returned as such, for the caller's range check.
std::optional<double> read_decimal(const std::string& text);

enum class Scheme {
  float_allgather,     // float32 payloads, allgather, each worker sums: today's `--codec float` exchange
  terngrad_allgather,  // allreduce(max) of the scalars, allgather of TernGrad payloads: today's `--codec terngrad`
  float_allreduce,     // ring allreduce of float32 gradients (analytical baseline)
  float_ps,            // parameter server: push float32 gradients, pull float32
  terngrad_ps,         // parameter server: push TernGrad payloads, pull float32 or ternary (Network::ps_float_downlink)
};
const char* to_string(Scheme s);
/// The schemes a topology compares: ring and shared: float_allgather, float_allreduce, terngrad_allgather;
/// ps: float_ps, terngrad_ps.
std::vector<Scheme> schemes_for(Topology t);

struct Inputs {
  NetSpec net;
  std::uint64_t float_below = 0;  // TernGrad: tensors below this stay float32
  bool base3 = false;
  int batch = 64;                 // per worker
  double compute_s = 0;           // forward + backward + optimizer per step on one worker
  CodecRates rates;
  Network network;
};

struct Prediction {
  Scheme scheme = Scheme::float_allgather;
  int workers = 1;
  std::uint64_t payload_bytes = 0;  // per worker per step
  double compute_s = 0, encode_s = 0, comm_s = 0, decode_s = 0, step_s = 0;
  double images_per_s = 0;
};

/// Time of the collectives alone (seconds), for bytes per worker, on `workers` workers.
double allgather_s(const Network& n, int workers, double bytes);
double allreduce_s(const Network& n, int workers, double bytes);
double ps_exchange_s(const Network& n, int workers, double push_bytes, double pull_bytes, bool node_sums);

/// One scheme at one worker count (workers >= 1). Throws std::invalid_argument on inputs it cannot use.
Prediction predict(const Inputs& in, Scheme scheme, int workers);

/// The paper's Section 6 setting: AlexNet, GoogLeNet, VGG-A (per-GPU batch 128 / 64 / 32) on 128 nodes of
/// 4 GPUs, 1 Gbps Ethernet with a PCI switch in the node, or 100 Gbps InfiniBand with NVLink. What the
/// paper does not give is this bench's assumption, listed in docs/model.md: latencies, intra-node
/// bandwidths, a parameter server with a shard on every node and a ternary pull, GPU step times; codec
/// time not modeled (rates 0).
struct PresetConfig {
  std::string label;  // "alexnet, 1GbE"
  std::string network;  // "1GbE" or "InfiniBand"
  Inputs inputs;
};
std::vector<PresetConfig> paper_preset();

/// 1, 2, 4, ..., 512.
std::vector<int> default_worker_counts();

}  // namespace tg::model
