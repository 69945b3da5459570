// terngrad-bench: TernGrad's data-parallel exchange on top of the real codec (see exchange.hpp).
// Worker buffer on the wire: [loss float32 LE][payload of tensor 0][payload of tensor 1]...; every
// payload's size depends only on the tensor's size and the options, so all ranks' buffers match.
// Float with allreduce sends no buffer: [every tensor's float32 values][loss] is summed over ranks.
#include "tg/train/exchange.hpp"

#include "tg/train/baselines.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace tg::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr std::size_t kLossBytes = 4;

// The scalars of local_stats (0 for the tensors that are not ternary).
std::vector<float> scalars_of(const std::vector<TensorStats>& stats) {
  std::vector<float> s(stats.size());
  for (std::size_t t = 0; t < stats.size(); ++t) s[t] = stats[t].scalar;
  return s;
}

// Nonzero trits in one byte of each packing (base3 bytes >= 243 are invalid and never counted).
struct NonzeroTables {
  std::array<std::uint8_t, 256> two_bit{}, base3{};
  NonzeroTables() {
    for (unsigned b = 0; b < 256; ++b) {
      unsigned n = 0;
      for (int k = 0; k < 4; ++k) n += ((b >> (2 * k)) & 3u) != 0;
      two_bit[b] = static_cast<std::uint8_t>(n);
      unsigned m = 0, v = b;
      for (int k = 0; k < 5; ++k, v /= 3) m += (v % 3) != 0;
      base3[b] = static_cast<std::uint8_t>(b <= kBase3MaxByte ? m : 0);
    }
  }
};

}  // namespace

GradCodec parse_grad_codec(const std::string& text) {
  if (text == "float") return GradCodec::float32;
  if (text == "terngrad") return GradCodec::terngrad;
  if (text == "qsgd") return GradCodec::qsgd;
  if (text == "signsgd-ef") return GradCodec::signsgd_ef;
  throw std::invalid_argument("codec '" + text + "' is not one of: float, terngrad, qsgd, signsgd-ef");
}

const char* to_string(GradCodec codec) {
  switch (codec) {
    case GradCodec::float32: return "float";
    case GradCodec::terngrad: return "terngrad";
    case GradCodec::qsgd: return "qsgd";
    case GradCodec::signsgd_ef: return "signsgd-ef";
  }
  return "?";
}

FloatExchange parse_float_exchange(const std::string& text) {
  if (text == "allreduce") return FloatExchange::allreduce;
  if (text == "allgather") return FloatExchange::allgather;
  throw std::invalid_argument("float exchange '" + text + "' is not one of: allreduce, allgather");
}

const char* to_string(FloatExchange how) { return how == FloatExchange::allreduce ? "allreduce" : "allgather"; }

WireBytes allgather_bytes(std::uint64_t per_rank, int ranks) {
  if (ranks < 1) throw std::invalid_argument("allgather over fewer than 1 rank");
  return {per_rank, static_cast<std::uint64_t>(ranks - 1) * per_rank};
}

WireBytes ring_allreduce_bytes(std::uint64_t buffer, int ranks) {
  if (ranks < 1) throw std::invalid_argument("allreduce over fewer than 1 rank");
  std::uint64_t n = 2 * static_cast<std::uint64_t>(ranks - 1) * buffer / static_cast<std::uint64_t>(ranks);
  return {n, n};
}

std::uint64_t StepStats::payload_bytes() const {
  std::uint64_t n = 0;
  for (const auto& l : layers) n += l.payload_bytes;
  return n;
}
std::uint64_t StepStats::float_bytes() const {
  std::uint64_t n = 0;
  for (const auto& l : layers) n += l.float_bytes;
  return n;
}

std::uint64_t count_nonzero_trits(Packing packing, std::span<const std::uint8_t> body) {
  static const NonzeroTables tables;
  const auto& table = packing == Packing::base3 ? tables.base3 : tables.two_bit;
  std::uint64_t n = 0;
  for (std::uint8_t b : body) n += table[b];
  return n;
}

GradientExchange::GradientExchange(std::vector<LayerInfo> layers, ExchangeOptions options,
                                   std::shared_ptr<const Codec> codec)
    : layers_(std::move(layers)), options_(options), codec_(std::move(codec)) {
  if (!codec_) throw std::invalid_argument("gradient exchange needs a codec");
  validate(options_.params);
  if (options_.codec == GradCodec::qsgd) {  // validates s and d
    qsgd_bits_per_element(options_.qsgd_levels);
    qsgd_buckets(1, options_.qsgd_bucket);
  }
  for (std::size_t t = 0; t < layers_.size(); ++t) {
    Params p = options_.params;
    bool compressed = options_.codec != GradCodec::float32 && layers_[t].numel >= p.float_below &&
                      (options_.quantize_last || t < options_.last_layer_from);
    bool ternary = compressed && options_.codec == GradCodec::terngrad;
    if (!ternary) p.float_below = std::numeric_limits<std::uint64_t>::max();
    Kind kind = !compressed ? Kind::float32
                : options_.codec == GradCodec::terngrad ? Kind::ternary
                : options_.codec == GradCodec::qsgd     ? Kind::qsgd
                                                        : Kind::sign;
    ternary_.push_back(ternary);
    kind_.push_back(kind);
    layer_params_.push_back(p);
    std::size_t n = layers_[t].numel;
    switch (kind) {
      case Kind::ternary: payload_size_.push_back(kHeaderBytes + body_bytes(p.packing, n)); break;
      case Kind::qsgd: payload_size_.push_back(qsgd_payload_bytes(n, options_.qsgd_levels, options_.qsgd_bucket)); break;
      case Kind::sign: payload_size_.push_back(sign_payload_bytes(n)); break;
      case Kind::float32: payload_size_.push_back(float_allreduce() ? 4 * n : kHeaderBytes + 4 * n); break;
    }
  }
}

bool GradientExchange::float_allreduce() const {
  return options_.codec == GradCodec::float32 && options_.float_exchange == FloatExchange::allreduce;
}

WireBytes GradientExchange::step_bytes(int workers) const {
  if (float_allreduce()) {
    std::uint64_t values = 1;  // the loss rides along
    for (const auto& l : layers_) values += l.numel;
    return ring_allreduce_bytes(4 * values, workers);
  }
  std::uint64_t buffer = kLossBytes;
  for (std::size_t n : payload_size_) buffer += n;
  WireBytes b = allgather_bytes(buffer, workers);
  if (options_.codec == GradCodec::terngrad && options_.shared_scalar) {  // the max-allreduce of one scalar per tensor
    WireBytes s = ring_allreduce_bytes(4 * static_cast<std::uint64_t>(layers_.size()), workers);
    b.uplink += s.uplink;
    b.downlink += s.downlink;
  }
  return b;
}

std::span<const float> GradientExchange::residual(std::size_t worker, std::size_t t) const {
  if (worker >= residual_.size() || residual_[worker].empty()) return {};
  return residual_[worker].at(t);
}

void GradientExchange::set_residuals(std::size_t worker, std::vector<std::vector<float>> values) {
  if (values.size() != layers_.size())
    throw std::invalid_argument("residuals of " + std::to_string(values.size()) + " tensors, the model has " +
                                std::to_string(layers_.size()));
  for (std::size_t t = 0; t < layers_.size(); ++t)
    if (values[t].size() != layers_[t].numel)
      throw std::invalid_argument("residual of " + layers_[t].name + " has " + std::to_string(values[t].size()) +
                                  " elements, expected " + std::to_string(layers_[t].numel));
  if (residual_.size() <= worker) residual_.resize(worker + 1);
  residual_[worker] = std::move(values);
}

std::vector<TensorStats> GradientExchange::local_stats(const std::vector<std::span<const float>>& grads) const {
  if (grads.size() != layers_.size())
    throw std::invalid_argument("worker sent " + std::to_string(grads.size()) + " tensors, the model has " +
                                std::to_string(layers_.size()));
  std::vector<TensorStats> s(layers_.size());
  for (std::size_t t = 0; t < layers_.size(); ++t) {
    if (grads[t].size() != layers_[t].numel)
      throw std::invalid_argument("tensor " + layers_[t].name + " has " + std::to_string(grads[t].size()) +
                                  " elements, expected " + std::to_string(layers_[t].numel));
    if (ternary_[t]) s[t] = tensor_stats(*codec_, grads[t], layer_params_[t], static_cast<std::uint32_t>(t));
  }
  return s;
}

void GradientExchange::finish_scalars(std::vector<float>& shared) const {
  if (options_.layerwise) return;
  float global = 0.0f;
  for (std::size_t t = 0; t < shared.size(); ++t)
    if (ternary_[t]) global = std::max(global, shared[t]);
  for (std::size_t t = 0; t < shared.size(); ++t)
    if (ternary_[t]) shared[t] = global;
}

std::vector<std::uint8_t> GradientExchange::encode_worker(const std::vector<std::span<const float>>& grads,
                                                          float loss, const std::vector<float>& shared,
                                                          const std::vector<TensorStats>& own,
                                                          std::uint32_t worker, std::uint32_t step) {
  std::size_t total = kLossBytes;
  for (std::size_t n : payload_size_) total += n;
  std::vector<std::uint8_t> buf(total);
  std::uint32_t bits;
  std::memcpy(&bits, &loss, 4);
  for (int b = 0; b < 4; ++b) buf[b] = static_cast<std::uint8_t>(bits >> (8 * b));
  std::size_t at = kLossBytes;
  if (options_.codec == GradCodec::signsgd_ef) {
    if (residual_.size() <= worker) residual_.resize(worker + 1);
    if (residual_[worker].empty())
      for (const auto& l : layers_) residual_[worker].emplace_back(l.numel, 0.0f);
  }
  for (std::size_t t = 0; t < layers_.size(); ++t) {
    const auto tensor = static_cast<std::uint32_t>(t);
    if (kind_[t] == Kind::qsgd) {
      StreamKey key{options_.seed, worker, kQsgdTensorBase + tensor, step};
      qsgd_encode(grads[t], options_.qsgd_levels, options_.qsgd_bucket, key, tensor, std::span(buf).subspan(at, payload_size_[t]));
      at += payload_size_[t];
      continue;
    }
    if (kind_[t] == Kind::sign) {
      signsgd_ef_encode(grads[t], residual_[worker][t], tensor, std::span(buf).subspan(at, payload_size_[t]));
      at += payload_size_[t];
      continue;
    }
    StreamKey key{options_.seed, worker, tensor, step};
    // A ternary tensor's own clip bound comes from local_stats (computed once, with its scalar). Each tensor
    // encodes into its own kept buffer: after the first step it has the payload's size and is overwritten,
    // neither reallocated nor cleared.
    if (payloads_.size() != layers_.size()) payloads_.resize(layers_.size());
    std::vector<std::uint8_t>& p = payloads_[t];
    if (ternary_[t]) encode_with_scalar_into(*codec_, grads[t], layer_params_[t], key, shared[t], own[t], p);
    else encode_into(*codec_, grads[t], layer_params_[t], key, p);
    if (p.size() != payload_size_[t])
      throw std::logic_error("payload of tensor " + layers_[t].name + " has " + std::to_string(p.size()) +
                             " bytes, expected " + std::to_string(payload_size_[t]));
    std::memcpy(buf.data() + at, p.data(), p.size());
    at += p.size();
  }
  return buf;
}

std::vector<std::vector<float>> GradientExchange::combine(const std::vector<std::vector<std::uint8_t>>& buffers,
                                                          const std::vector<float>& shared, StepStats* stats) const {
  std::size_t workers = buffers.size();
  std::size_t expected = kLossBytes;
  for (std::size_t n : payload_size_) expected += n;
  for (std::size_t w = 0; w < workers; ++w)
    if (buffers[w].size() != expected)
      throw std::runtime_error("worker " + std::to_string(w) + " sent " + std::to_string(buffers[w].size()) +
                               " bytes, expected " + std::to_string(expected) + " (mismatched model or options)");
  std::vector<std::vector<float>> out(layers_.size());
  if (stats && stats->keep_buffers) stats->buffers = buffers;
  if (stats) {
    stats->layers.assign(layers_.size(), LayerStats{});
    stats->worker_losses.clear();
    for (const auto& b : buffers) {
      std::uint32_t bits = 0;
      for (int k = 3; k >= 0; --k) bits = (bits << 8) | b[k];
      float loss;
      std::memcpy(&loss, &bits, 4);
      stats->worker_losses.push_back(loss);
    }
    double sum = 0.0;
    for (float l : stats->worker_losses) sum += l;
    stats->loss = sum / static_cast<double>(workers);
  }
  std::size_t at = kLossBytes;
  for (std::size_t t = 0; t < layers_.size(); ++t) {
    std::vector<std::span<const std::uint8_t>> payloads;
    for (const auto& b : buffers) payloads.emplace_back(b.data() + at, payload_size_[t]);
    LayerStats ls = layer_sizes(t);
    if (ternary_[t] && options_.shared_scalar) {
      Aggregate agg = aggregate(*codec_, payloads);
      std::uint32_t expect_bits, got_bits;
      std::memcpy(&expect_bits, &shared[t], 4);
      std::memcpy(&got_bits, &agg.scalar, 4);
      if (expect_bits != got_bits)
        throw std::runtime_error("tensor " + layers_[t].name + ": payload scalar differs from the shared scalar");
      out[t] = std::move(agg.mean);
      std::uint64_t nonzero = 0;
      for (const auto& p : payloads) nonzero += count_nonzero_trits(layer_params_[t].packing, p.subspan(kHeaderBytes));
      double total = static_cast<double>(layers_[t].numel) * static_cast<double>(workers);
      ls.sparsity = total > 0 ? 1.0 - static_cast<double>(nonzero) / total : 0.0;
      ls.scalar = shared[t];
    } else {
      // Float, QSGD and sign tensors, and ternary ones with each worker's own scalar: decode, sum in
      // worker order in double, then divide, so every rank gets the same bits.
      std::vector<double> sum(layers_[t].numel, 0.0);
      std::vector<float> values(layers_[t].numel);
      std::uint64_t zeros = 0;
      for (const auto& p : payloads) {
        if (ternary_[t]) {  // own scalars: s_w * trit per worker
          Decoded d = decode(*codec_, p);
          if (d.values.size() != sum.size())
            throw std::runtime_error("tensor " + layers_[t].name + ": ternary payload has the wrong element count");
          for (float v : d.values) zeros += v == 0.0f;
          ls.scalar = std::max(ls.scalar, d.header.scalar);  // reported: the largest worker scalar
          values = std::move(d.values);
        } else if (kind_[t] == Kind::qsgd) {
          qsgd_decode(p, options_.qsgd_levels, options_.qsgd_bucket, values);
          for (float v : values) zeros += v == 0.0f;
        } else if (kind_[t] == Kind::sign) {
          sign_decode(p, values);
        } else {
          Decoded d = decode(*codec_, p);
          if (d.values.size() != sum.size())
            throw std::runtime_error("tensor " + layers_[t].name + ": float payload has the wrong element count");
          values = std::move(d.values);
        }
        for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += values[k];
      }
      if (kind_[t] == Kind::qsgd || ternary_[t]) {  // fraction of zero levels or trits, mean over workers
        double total = static_cast<double>(layers_[t].numel) * static_cast<double>(workers);
        ls.sparsity = total > 0 ? static_cast<double>(zeros) / total : 0.0;
      }
      out[t].resize(sum.size());
      for (std::size_t k = 0; k < sum.size(); ++k) out[t][k] = static_cast<float>(sum[k] / static_cast<double>(workers));
    }
    if (stats) stats->layers[t] = ls;
    at += payload_size_[t];
  }
  return out;
}

std::vector<std::vector<float>> GradientExchange::simulate(const std::vector<std::vector<std::span<const float>>>& grads,
                                                           const std::vector<float>& losses, std::uint32_t step,
                                                           StepStats* stats) {
  if (grads.empty()) throw std::invalid_argument("simulation with zero workers");
  if (losses.size() != grads.size()) throw std::invalid_argument("one loss per worker expected");
  const int workers = static_cast<int>(grads.size());
  auto t0 = Clock::now();
  if (float_allreduce()) {
    // The allreduce's sum, in worker order in float32 (for 2 workers the same bits as any order).
    std::vector<float> sum = flat_floats(grads[0], losses[0]);
    for (std::size_t w = 1; w < grads.size(); ++w) {
      std::vector<float> mine = flat_floats(grads[w], losses[w]);
      for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += mine[k];
    }
    double encode_s = seconds_since(t0);
    auto t1 = Clock::now();
    auto out = unflatten_mean(sum, workers, stats);
    record_step(stats, workers, encode_s, 0.0, 0.0, seconds_since(t1));
    return out;
  }
  std::vector<float> shared(layers_.size(), 0.0f);
  std::vector<std::vector<TensorStats>> worker_stats;  // each worker's statistics
  std::vector<std::vector<float>> own;                 // each worker's scalars
  for (const auto& g : grads) {
    worker_stats.push_back(local_stats(g));
    own.push_back(scalars_of(worker_stats.back()));
    for (std::size_t t = 0; t < own.back().size(); ++t) shared[t] = std::max(shared[t], own.back()[t]);
  }
  finish_scalars(shared);
  std::vector<std::vector<std::uint8_t>> buffers;
  for (std::size_t w = 0; w < grads.size(); ++w) {
    if (!options_.shared_scalar) finish_scalars(own[w]);
    buffers.push_back(encode_worker(grads[w], losses[w], options_.shared_scalar ? shared : own[w], worker_stats[w],
                                    static_cast<std::uint32_t>(w), step));
  }
  double encode_s = seconds_since(t0);
  auto t1 = Clock::now();
  auto out = combine(buffers, shared, stats);
  record_step(stats, workers, encode_s, 0.0, 0.0, seconds_since(t1));
  return out;
}

LayerStats GradientExchange::layer_sizes(std::size_t t) const {
  LayerStats ls;
  ls.ternary = ternary_[t];
  ls.payload_bytes = payload_size_[t];
  ls.float_bytes = 4 * layers_[t].numel;
  return ls;
}

void GradientExchange::record_step(StepStats* stats, int workers, double encode_s, double wait_s, double wire_s,
                                   double decode_s) const {
  if (!stats) return;
  stats->encode_s = encode_s;
  stats->wait_s = wait_s;
  stats->wire_s = wire_s;
  stats->comm_s = wait_s + wire_s;
  stats->decode_s = decode_s;
  stats->wire = step_bytes(workers);
}

std::vector<float> GradientExchange::flat_floats(const std::vector<std::span<const float>>& grads, float loss) const {
  if (grads.size() != layers_.size())
    throw std::invalid_argument("worker sent " + std::to_string(grads.size()) + " tensors, the model has " +
                                std::to_string(layers_.size()));
  std::vector<float> flat;
  for (std::size_t t = 0; t < layers_.size(); ++t) {
    if (grads[t].size() != layers_[t].numel)
      throw std::invalid_argument("tensor " + layers_[t].name + " has " + std::to_string(grads[t].size()) +
                                  " elements, expected " + std::to_string(layers_[t].numel));
    for (std::size_t k = 0; k < grads[t].size(); ++k)
      if (!std::isfinite(grads[t][k])) throw NonFiniteError(static_cast<std::uint32_t>(t), k, grads[t][k]);
    flat.insert(flat.end(), grads[t].begin(), grads[t].end());
  }
  flat.push_back(loss);
  return flat;
}

std::vector<std::vector<float>> GradientExchange::unflatten_mean(const std::vector<float>& sum, int workers,
                                                                 StepStats* stats) const {
  const auto n = static_cast<float>(workers);
  std::vector<std::vector<float>> out(layers_.size());
  std::size_t at = 0;
  if (stats) stats->layers.assign(layers_.size(), LayerStats{});
  for (std::size_t t = 0; t < layers_.size(); ++t) {
    out[t].resize(layers_[t].numel);
    for (std::size_t k = 0; k < out[t].size(); ++k) out[t][k] = sum[at + k] / n;
    at += layers_[t].numel;
    if (stats) stats->layers[t] = layer_sizes(t);
  }
  if (stats) {
    stats->worker_losses.clear();
    stats->loss = static_cast<double>(sum[at] / n);
  }
  return out;
}

std::vector<std::vector<float>> GradientExchange::exchange(const std::vector<std::span<const float>>& mine, float loss,
                                                           Transport& transport, std::uint32_t step,
                                                           StepStats* stats) {
  const int workers = transport.world_size();
  double wait_s = 0.0, wire_s = 0.0;
  // Each collective: a barrier first (time spent waiting for the slowest rank), then the collective.
  auto collective = [&](auto&& op) {
    auto tb = Clock::now();
    transport.barrier();
    wait_s += seconds_since(tb);
    auto tw = Clock::now();
    op();
    wire_s += seconds_since(tw);
  };
  auto t0 = Clock::now();
  if (float_allreduce()) {
    std::vector<float> sum = flat_floats(mine, loss);
    double encode_s = seconds_since(t0);
    collective([&] { transport.allreduce_sum(sum); });
    auto td = Clock::now();
    auto out = unflatten_mean(sum, workers, stats);
    record_step(stats, workers, encode_s, wait_s, wire_s, seconds_since(td));
    return out;
  }
  std::vector<TensorStats> mine_stats = local_stats(mine);
  std::vector<float> shared = scalars_of(mine_stats);
  double encode_s = seconds_since(t0);
  if (options_.codec == GradCodec::terngrad && options_.shared_scalar)
    collective([&] { transport.allreduce_max(shared); });  // the max over workers
  auto te = Clock::now();
  finish_scalars(shared);
  std::vector<std::uint8_t> buf =
      encode_worker(mine, loss, shared, mine_stats, static_cast<std::uint32_t>(transport.rank()), step);
  encode_s += seconds_since(te);
  std::vector<std::vector<std::uint8_t>> buffers;
  collective([&] { buffers = transport.allgather(buf); });
  if (static_cast<int>(buffers.size()) != transport.world_size())
    throw std::runtime_error("allgather returned " + std::to_string(buffers.size()) + " buffers for " +
                             std::to_string(transport.world_size()) + " ranks");
  auto td = Clock::now();
  auto out = combine(buffers, shared, stats);
  record_step(stats, workers, encode_s, wait_s, wire_s, seconds_since(td));
  return out;
}

}  // namespace tg::train
