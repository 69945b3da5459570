// terngrad-bench: the Section 6 performance model (see perf.hpp; the formulas with their reasons are in
// docs/model.md, and every line below names the term it computes there).
#include "tg/model/perf.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <span>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "tg/codec.hpp"
#include "tg/format.hpp"
#include "tg/strf.hpp"

namespace tg::model {
namespace {

constexpr double kLossBytes = 4;  // the worker's loss, in front of its payloads

double per(double rate, double elements) { return rate > 0 ? elements / rate : 0.0; }
double over(double bytes, double bandwidth) { return bandwidth > 0 ? bytes / bandwidth : 0.0; }

struct Layout {
  int g = 1;  // workers on a node
  int m = 1;  // nodes
};
Layout layout(const Network& n, int workers) {
  Layout l;
  l.g = std::max(1, std::min(n.gpus_per_node, workers));
  l.m = (workers + l.g - 1) / l.g;
  return l;
}

void check(const Network& n) {
  if (!(n.bandwidth_Bps > 0) || !std::isfinite(n.bandwidth_Bps))
    throw std::invalid_argument("the link bandwidth must be a finite number of bytes/s > 0");
  if (!(n.latency_s >= 0) || !(n.intra_latency_s >= 0) || !(n.intra_bandwidth_Bps >= 0))
    throw std::invalid_argument("latencies and the intra-node bandwidth must be >= 0");
  if (n.gpus_per_node < 1) throw std::invalid_argument("gpus per node must be >= 1");
  if (n.ps_shards < 0) throw std::invalid_argument("parameter-server shards must be >= 0");
}

}  // namespace

Payload float_payload(const NetSpec& net) {
  Payload p;
  p.bytes = static_cast<std::uint64_t>(kLossBytes);
  for (const auto& t : net.tensors) {
    p.bytes += kHeaderBytes + 4 * t.numel;
    p.float_elements += t.numel;
    ++p.tensors;
  }
  return p;
}

Payload terngrad_payload(const NetSpec& net, std::uint64_t float_below, bool base3) {
  Payload p;
  p.bytes = static_cast<std::uint64_t>(kLossBytes);
  for (const auto& t : net.tensors) {
    ++p.tensors;
    if (t.numel >= float_below) {
      p.bytes += kHeaderBytes + body_bytes(base3 ? Packing::base3 : Packing::two_bit, t.numel);
      p.ternary_elements += t.numel;
      ++p.ternary_tensors;
    } else {
      p.bytes += kHeaderBytes + 4 * t.numel;
      p.float_elements += t.numel;
    }
  }
  return p;
}

const char* to_string(Topology t) {
  switch (t) {
    case Topology::ring: return "ring";
    case Topology::ps: return "ps";
    case Topology::shared: return "shared";
  }
  return "?";
}
Topology parse_topology(const std::string& text) {
  if (text == "ring") return Topology::ring;
  if (text == "ps") return Topology::ps;
  if (text == "shared") return Topology::shared;
  throw std::invalid_argument("topology '" + text + "' is not one of: ring, ps, shared");
}

const char* to_string(Scheme s) {
  switch (s) {
    case Scheme::float_allgather: return "float-allgather";
    case Scheme::terngrad_allgather: return "terngrad-allgather";
    case Scheme::float_allreduce: return "float-allreduce";
    case Scheme::float_ps: return "float-ps";
    case Scheme::terngrad_ps: return "terngrad-ps";
  }
  return "?";
}
std::vector<Scheme> schemes_for(Topology t) {
  if (t == Topology::ps) return {Scheme::float_ps, Scheme::terngrad_ps};
  return {Scheme::float_allgather, Scheme::float_allreduce, Scheme::terngrad_allgather};
}

std::vector<int> default_worker_counts() {
  std::vector<int> w;
  for (int n = 1; n <= 512; n *= 2) w.push_back(n);
  return w;
}

std::vector<PresetConfig> paper_preset() {
  struct NetSetting { const char* net; int batch; double compute_s; };
  // GPU step times (forward + backward at the paper's per-GPU batch): assumptions of this bench, of the
  // order of 2016 GPUs; the paper's text does not give them.
  const NetSetting nets[] = {{"alexnet", 128, 0.10}, {"googlenet", 64, 0.25}, {"vgga", 32, 0.30}};
  Network gbe;
  gbe.topology = Topology::ps;
  gbe.bandwidth_Bps = 1e9 / 8;  // 1 Gbps Ethernet
  gbe.latency_s = 50e-6;
  gbe.gpus_per_node = 4;
  gbe.intra_bandwidth_Bps = 10e9;  // a PCIe 3.0 switch shared by the node's GPUs
  gbe.intra_latency_s = 10e-6;
  gbe.ps_shards = 0;
  Network ib = gbe;
  ib.bandwidth_Bps = 100e9 / 8;  // 100 Gbps InfiniBand
  ib.latency_s = 5e-6;
  ib.intra_bandwidth_Bps = 80e9;  // NVLink
  ib.intra_latency_s = 5e-6;
  std::vector<PresetConfig> out;
  for (const auto& ns : nets)
    for (const auto& [name, nw] : {std::pair<const char*, Network>{"1GbE", gbe}, {"InfiniBand", ib}}) {
      PresetConfig c;
      c.label = std::string(ns.net) + ", " + name;
      c.network = name;
      c.inputs.net = net(ns.net);
      c.inputs.batch = ns.batch;
      c.inputs.compute_s = ns.compute_s;
      c.inputs.network = nw;
      out.push_back(c);
    }
  return out;
}

// Allgather: every worker's `bytes` reach every other worker.
double allgather_s(const Network& n, int workers, double bytes) {
  if (workers <= 1) return 0.0;
  if (n.topology == Topology::shared)  // (N-1) rounds; N(N-1) payloads cross the one link
    return (workers - 1) * n.latency_s + over(double(workers) * (workers - 1) * bytes, n.bandwidth_Bps);
  Layout l = layout(n, workers);
  // ring over the nodes, each node forwarding the block of its g workers: (M-1)(alpha + g S / B)
  double inter = l.m > 1 ? (l.m - 1) * (n.latency_s + over(l.g * bytes, n.bandwidth_Bps)) : 0.0;
  // inside a node each worker takes in the other N-1 payloads over its own link
  double intra = l.g > 1 ? (l.g - 1) * n.intra_latency_s + over((workers - 1) * bytes, n.intra_bandwidth_Bps) : 0.0;
  return inter + intra;
}

// Ring allreduce (reduce-scatter + allgather) of `bytes` per worker.
double allreduce_s(const Network& n, int workers, double bytes) {
  if (workers <= 1) return 0.0;
  if (n.topology == Topology::shared)  // every worker sends 2(N-1)/N of its bytes, all over the one link
    return 2.0 * (workers - 1) * n.latency_s + over(2.0 * (workers - 1) * bytes, n.bandwidth_Bps);
  Layout l = layout(n, workers);
  // inside a node first (2(g-1) steps of S/g), then across the nodes (2(M-1) steps of S/M)
  double intra = l.g > 1 ? 2.0 * (l.g - 1) * (n.intra_latency_s + over(bytes / l.g, n.intra_bandwidth_Bps)) : 0.0;
  double inter = l.m > 1 ? 2.0 * (l.m - 1) * (n.latency_s + over(bytes / l.m, n.bandwidth_Bps)) : 0.0;
  return intra + inter;
}

// Parameter server: each worker pushes push_bytes and pulls pull_bytes. node_sums: a node adds its
// workers' gradients before pushing (float32 can, TernGrad payloads travel as they are).
double ps_exchange_s(const Network& n, int workers, double push_bytes, double pull_bytes, bool node_sums) {
  if (workers <= 1) return 0.0;
  if (n.topology == Topology::shared)  // every push and every pull crosses the one link
    return 2.0 * n.latency_s + over(double(workers) * (push_bytes + pull_bytes), n.bandwidth_Bps);
  Layout l = layout(n, workers);
  double node_up = node_sums ? push_bytes : l.g * push_bytes;
  double intra = l.g > 1 ? 2.0 * n.intra_latency_s + over(l.g * push_bytes + pull_bytes, n.intra_bandwidth_Bps) : 0.0;
  if (l.m == 1) return intra;  // the server shard lives on the one node
  double shards = n.ps_shards == 0 ? l.m : n.ps_shards;
  // push: the slower of the node's link (node_up) and a shard's link (M node_up / K); pull alike
  double push = n.latency_s + std::max(over(node_up, n.bandwidth_Bps), over(l.m * node_up / shards, n.bandwidth_Bps));
  double pull = n.latency_s + std::max(over(pull_bytes, n.bandwidth_Bps), over(l.m * pull_bytes / shards, n.bandwidth_Bps));
  return intra + push + pull;
}

Prediction predict(const Inputs& in, Scheme scheme, int workers) {
  if (workers < 1) throw std::invalid_argument("workers must be >= 1");
  if (in.batch < 1) throw std::invalid_argument("batch per worker must be >= 1");
  if (!(in.compute_s >= 0) || !std::isfinite(in.compute_s)) throw std::invalid_argument("compute time must be >= 0");
  if (in.net.tensors.empty()) throw std::invalid_argument("the net has no tensors");
  check(in.network);
  const CodecRates& r = in.rates;
  const Network& nw = in.network;
  Payload pf = float_payload(in.net), pt = terngrad_payload(in.net, in.float_below, in.base3);
  double n_all = double(pf.float_elements), nt = double(pt.ternary_elements), nf = double(pt.float_elements);
  double N = workers;
  Layout l = layout(nw, workers);
  double shards = nw.ps_shards == 0 ? l.m : nw.ps_shards;
  Prediction p;
  p.scheme = scheme;
  p.workers = workers;
  p.compute_s = in.compute_s;
  switch (scheme) {
    case Scheme::float_allgather:
      p.payload_bytes = pf.bytes;
      p.encode_s = per(r.float_encode, n_all);
      p.comm_s = allgather_s(nw, workers, double(pf.bytes));
      p.decode_s = N * per(r.float_decode, n_all);  // every worker decodes and sums all N payloads
      break;
    case Scheme::terngrad_allgather:
      p.payload_bytes = pt.bytes;
      p.encode_s = per(r.ternary_encode, nt) + per(r.float_encode, nf);
      // allreduce(max) of one float scalar per tensor, then the allgather of the payloads
      p.comm_s = allreduce_s(nw, workers, 4.0 * double(pt.tensors)) + allgather_s(nw, workers, double(pt.bytes));
      p.decode_s = N * (per(r.ternary_aggregate, nt) + per(r.float_decode, nf));
      break;
    case Scheme::float_allreduce:
      p.payload_bytes = 4 * pf.float_elements;
      p.comm_s = allreduce_s(nw, workers, 4.0 * n_all);  // the ring's additions are not modeled
      break;
    case Scheme::float_ps: {
      p.payload_bytes = pf.bytes;
      p.encode_s = per(r.float_encode, n_all);
      p.comm_s = ps_exchange_s(nw, workers, double(pf.bytes), double(pf.bytes), true);
      // a shard sums the M pushes of its 1/K share; the worker decodes its pull
      double pushes = l.m > 1 ? l.m : N;
      p.decode_s = pushes * per(r.float_decode, n_all / (l.m > 1 ? shards : 1.0)) + per(r.float_decode, n_all);
      break;
    }
    case Scheme::terngrad_ps: {
      p.payload_bytes = pt.bytes;
      p.encode_s = per(r.ternary_encode, nt) + per(r.float_encode, nf);
      double pull = nw.ps_float_downlink ? double(pf.bytes) : double(pt.bytes);
      p.comm_s = ps_exchange_s(nw, workers, double(pt.bytes), pull, false);
      double share = l.m > 1 ? shards : 1.0;
      // a shard aggregates all N payloads of its share (and re-encodes it for a ternary pull);
      // the worker decodes its pull
      p.decode_s = N * (per(r.ternary_aggregate, nt / share) + per(r.float_decode, nf / share));
      if (!nw.ps_float_downlink) p.decode_s += per(r.ternary_encode, nt / share) + per(r.ternary_aggregate, nt);
      else p.decode_s += per(r.float_decode, nt);
      p.decode_s += per(r.float_decode, nf);
      break;
    }
  }
  p.step_s = p.compute_s + p.encode_s + p.comm_s + p.decode_s;
  p.images_per_s = p.step_s > 0 ? N * in.batch / p.step_s : 0.0;
  return p;
}

CodecRates measure_codec_rates(const std::string& codec_name, unsigned threads, std::size_t elements, int repeats,
                               double min_seconds) {
  using Clock = std::chrono::steady_clock;
  if (elements < 1024) throw std::invalid_argument("codec measurement needs at least 1024 elements");
  auto codec = make_codec(codec_name, threads);
  std::mt19937_64 rng(20170517);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> g(elements);
  for (auto& v : g) v = normal(rng);
  Params tern;
  Params flt;
  flt.float_below = std::numeric_limits<std::uint64_t>::max();
  // best of `repeats`; each repeat runs fn until min_seconds passed; returns seconds per call
  auto time_it = [&](auto&& fn) {
    double best = 1e300;
    for (int rep = 0; rep < repeats; ++rep) {
      int calls = 0;
      auto t0 = Clock::now();
      double s = 0;
      do {
        fn(calls);
        ++calls;
        s = std::chrono::duration<double>(Clock::now() - t0).count();
      } while (s < min_seconds);
      best = std::min(best, s / calls);
    }
    return best;
  };
  const int workers = 4;
  std::vector<std::vector<std::uint8_t>> tp, fp;
  for (int w = 0; w < workers; ++w) {
    StreamKey key{1, static_cast<std::uint32_t>(w), 0, 0};
    tp.push_back(encode_with_scalar(*codec, g, tern, key, tensor_scalar(*codec, g, tern, 0)));
    fp.push_back(encode(*codec, g, flt, key));
  }
  std::vector<std::span<const std::uint8_t>> tspans(tp.begin(), tp.end());
  std::vector<double> sum(elements);
  volatile std::size_t sink = 0;
  CodecRates r;
  double n = double(elements);
  r.ternary_encode = n / time_it([&](int i) {
    sink = sink + encode(*codec, g, tern, StreamKey{1, 0, 0, static_cast<std::uint32_t>(i)}).size();
  });
  r.ternary_aggregate = workers * n / time_it([&](int) { sink = sink + aggregate(*codec, tspans).mean.size(); });
  r.float_encode = n / time_it([&](int i) {
    sink = sink + encode(*codec, g, flt, StreamKey{1, 0, 0, static_cast<std::uint32_t>(i)}).size();
  });
  r.float_decode = workers * n / time_it([&](int) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (const auto& p : fp) {
      Decoded d = decode(*codec, p);
      for (std::size_t k = 0; k < elements; ++k) sum[k] += d.values[k];
    }
    sink = sink + static_cast<std::size_t>(sum[0] != 0);
  });
  std::ostringstream s;
  s << "measured in-process: " << codec->name() << ", " << threads << " thread(s), " << elements
    << " elements, best of " << repeats;
  r.source = s.str();
  return r;
}

std::optional<double> read_decimal(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || text.find_first_of("xX") != std::string::npos)
    return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

double compute_from_steps_csv(const std::string& path, int skip) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::string line;
  if (!std::getline(in, line)) throw std::runtime_error(path + " is empty (expected the steps.csv of `terngrad train --out`)");
  auto split = [](std::string text) {
    if (!text.empty() && text.back() == '\r') text.pop_back();  // a file with CRLF line ends
    std::vector<std::string> cells;
    std::stringstream ss(text);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    return cells;
  };
  auto header = split(line);
  auto col = [&](const char* name) {
    auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end())
      throw std::runtime_error(path + " has no column " + name + " (expected the steps.csv of `terngrad train --out`)");
    return static_cast<std::size_t>(it - header.begin());
  };
  std::size_t c_compute = col("compute_s"), c_opt = col("optimizer_s");
  std::vector<double> times;
  long row = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    auto cells = split(line);
    ++row;
    if (cells.size() != header.size())
      throw std::runtime_error(path + ": row " + std::to_string(row) + " has " + std::to_string(cells.size()) +
                               " cells, the header " + std::to_string(header.size()));
    // each cell exactly one decimal number ("0.2abc" and "0x10" are refused, not read as 0.2 and 16)
    auto number = [&](const std::string& cell, const char* name) {
      const std::optional<double> v = read_decimal(cell);
      if (!v)
        throw std::runtime_error(path + ": row " + std::to_string(row) + ": " + name + " '" + cell.substr(0, 40) +
                                 "' is not a decimal number");
      return *v;
    };
    const double a = number(cells[c_compute], "compute_s"), b = number(cells[c_opt], "optimizer_s");
    if (!(a >= 0) || !(b >= 0) || !std::isfinite(a + b))
      throw std::runtime_error(path + ": row " + std::to_string(row) + " has a negative or non-finite time");
    if (row > skip) times.push_back(a + b);
  }
  if (times.empty())
    throw std::runtime_error(path + " has " + std::to_string(row) + " steps, none after the " + std::to_string(skip) +
                             " warm-up steps");
  std::sort(times.begin(), times.end());
  std::size_t k = times.size();
  const double median = k % 2 ? times[k / 2] : 0.5 * (times[k / 2 - 1] + times[k / 2]);
  if (!(median > 0))
    throw std::runtime_error(path + ": the median compute_s + optimizer_s after the warm-up is 0 (a step takes time)");
  if (median > 1e6)  // as --compute-s's range: a step of over 11 days is a damaged file, not a measurement
    throw std::runtime_error(path + ": the median compute_s + optimizer_s after the warm-up is " + tg::strf("%.3g", median) +
                             " s, beyond 1e6 s (--compute-s takes at most 1e6)");
  return median;
}

}  // namespace tg::model
