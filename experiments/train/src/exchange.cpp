// terngrad-bench: TernGrad's data-parallel exchange on top of the real codec (see exchange.hpp).
// Worker buffer on the wire: [loss float32 LE][payload of tensor 0][payload of tensor 1]...; every
// payload's size depends only on the tensor's size and the options, so all ranks' buffers match.
#include "tg/train/exchange.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace tg::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr std::size_t kLossBytes = 4;

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
  throw std::invalid_argument("codec '" + text + "' is not one of: float, terngrad");
}

const char* to_string(GradCodec codec) { return codec == GradCodec::float32 ? "float" : "terngrad"; }

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
  for (std::size_t t = 0; t < layers_.size(); ++t) {
    Params p = options_.params;
    bool ternary = options_.codec == GradCodec::terngrad && layers_[t].numel >= p.float_below &&
                   (options_.quantize_last || t < options_.last_layer_from);
    if (!ternary) p.float_below = std::numeric_limits<std::uint64_t>::max();
    ternary_.push_back(ternary);
    layer_params_.push_back(p);
    payload_size_.push_back(kHeaderBytes + (ternary ? body_bytes(p.packing, layers_[t].numel) : 4 * layers_[t].numel));
  }
}

std::vector<float> GradientExchange::local_scalars(const std::vector<std::span<const float>>& grads) const {
  if (grads.size() != layers_.size())
    throw std::invalid_argument("worker sent " + std::to_string(grads.size()) + " tensors, the model has " +
                                std::to_string(layers_.size()));
  std::vector<float> s(layers_.size(), 0.0f);
  for (std::size_t t = 0; t < layers_.size(); ++t) {
    if (grads[t].size() != layers_[t].numel)
      throw std::invalid_argument("tensor " + layers_[t].name + " has " + std::to_string(grads[t].size()) +
                                  " elements, expected " + std::to_string(layers_[t].numel));
    if (ternary_[t]) s[t] = tensor_scalar(*codec_, grads[t], layer_params_[t], static_cast<std::uint32_t>(t));
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
                                                          std::uint32_t worker, std::uint32_t step) const {
  std::size_t total = kLossBytes;
  for (std::size_t n : payload_size_) total += n;
  std::vector<std::uint8_t> buf(total);
  std::uint32_t bits;
  std::memcpy(&bits, &loss, 4);
  for (int b = 0; b < 4; ++b) buf[b] = static_cast<std::uint8_t>(bits >> (8 * b));
  std::size_t at = kLossBytes;
  for (std::size_t t = 0; t < layers_.size(); ++t) {
    StreamKey key{options_.seed, worker, static_cast<std::uint32_t>(t), step};
    std::vector<std::uint8_t> p = ternary_[t] ? encode_with_scalar(*codec_, grads[t], layer_params_[t], key, shared[t])
                                              : encode(*codec_, grads[t], layer_params_[t], key);
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
  }
  std::size_t at = kLossBytes;
  for (std::size_t t = 0; t < layers_.size(); ++t) {
    std::vector<std::span<const std::uint8_t>> payloads;
    for (const auto& b : buffers) payloads.emplace_back(b.data() + at, payload_size_[t]);
    LayerStats ls;
    ls.ternary = ternary_[t];
    ls.payload_bytes = payload_size_[t];
    ls.float_bytes = 4 * layers_[t].numel;
    if (ternary_[t]) {
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
      // Float tensors: sum in worker order in double, then divide, so every rank gets the same bits.
      std::vector<double> sum(layers_[t].numel, 0.0);
      for (const auto& p : payloads) {
        Decoded d = decode(*codec_, p);
        if (d.values.size() != sum.size())
          throw std::runtime_error("tensor " + layers_[t].name + ": float payload has the wrong element count");
        for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += d.values[k];
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
                                                           StepStats* stats) const {
  if (grads.empty()) throw std::invalid_argument("simulation with zero workers");
  if (losses.size() != grads.size()) throw std::invalid_argument("one loss per worker expected");
  auto t0 = Clock::now();
  std::vector<float> shared(layers_.size(), 0.0f);
  for (const auto& g : grads) {
    std::vector<float> s = local_scalars(g);
    for (std::size_t t = 0; t < s.size(); ++t) shared[t] = std::max(shared[t], s[t]);
  }
  finish_scalars(shared);
  std::vector<std::vector<std::uint8_t>> buffers;
  for (std::size_t w = 0; w < grads.size(); ++w)
    buffers.push_back(encode_worker(grads[w], losses[w], shared, static_cast<std::uint32_t>(w), step));
  double encode_s = seconds_since(t0);
  auto t1 = Clock::now();
  auto out = combine(buffers, shared, stats);
  if (stats) {
    stats->encode_s = encode_s;
    stats->comm_s = 0.0;
    stats->decode_s = seconds_since(t1);
  }
  return out;
}

std::vector<std::vector<float>> GradientExchange::exchange(const std::vector<std::span<const float>>& mine, float loss,
                                                           Transport& transport, std::uint32_t step,
                                                           StepStats* stats) const {
  auto t0 = Clock::now();
  std::vector<float> shared = local_scalars(mine);
  double encode_s = seconds_since(t0);
  auto tc = Clock::now();
  if (options_.codec == GradCodec::terngrad) transport.allreduce_max(shared);  // the max over workers
  double comm_s = seconds_since(tc);
  auto te = Clock::now();
  finish_scalars(shared);
  std::vector<std::uint8_t> buf = encode_worker(mine, loss, shared, static_cast<std::uint32_t>(transport.rank()), step);
  encode_s += seconds_since(te);
  tc = Clock::now();
  std::vector<std::vector<std::uint8_t>> buffers = transport.allgather(buf);
  comm_s += seconds_since(tc);
  if (static_cast<int>(buffers.size()) != transport.world_size())
    throw std::runtime_error("allgather returned " + std::to_string(buffers.size()) + " buffers for " +
                             std::to_string(transport.world_size()) + " ranks");
  auto td = Clock::now();
  auto out = combine(buffers, shared, stats);
  if (stats) {
    stats->encode_s = encode_s;
    stats->comm_s = comm_s;
    stats->decode_s = seconds_since(td);
  }
  return out;
}

}  // namespace tg::train
