// terngrad-bench: the data-parallel gradient exchange of TernGrad, without LibTorch. N workers each
// hold one gradient per layer; per-layer shared scalar = max over workers, ternarize with the real
// codec, exact integer aggregation, averaged gradient out. The same code serves the in-process
// simulation (all workers here) and multi-process runs (one worker per rank, through a Transport).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tg/codec.hpp"

namespace tg::train {

/// float: workers send float32 gradients; terngrad: ternary payloads with shared scalars.
enum class GradCodec { float32, terngrad };
GradCodec parse_grad_codec(const std::string& text);
const char* to_string(GradCodec codec);

/// One gradient tensor, in the order of the model's parameters.
struct LayerInfo {
  std::string name;
  std::size_t numel = 0;
};

struct ExchangeOptions {
  GradCodec codec = GradCodec::terngrad;
  Params params;               // clipping, c, packing, float_below (tensors with fewer elements stay float)
  bool layerwise = true;       // one scalar per tensor (paper Section 3.2); false: one scalar for all
  bool quantize_last = true;   // false: the last layer's tensors (`last_layer_from` on) stay float
  std::size_t last_layer_from = 0;  // index of the first tensor of the last layer
  std::uint64_t seed = 1;
};

/// How one worker's buffer is sent between ranks: collectives on bytes and floats.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Element-wise max over ranks, in place.
  virtual void allreduce_max(std::span<float> values) = 0;
  /// Every rank's buffer, in rank order; all buffers must have the same size.
  virtual std::vector<std::vector<std::uint8_t>> allgather(std::span<const std::uint8_t> mine) = 0;
};

struct LayerStats {
  bool ternary = false;
  std::uint64_t payload_bytes = 0;  // one worker's payload for this tensor (header included)
  std::uint64_t float_bytes = 0;    // the same tensor as raw float32: 4 * numel
  double sparsity = 0.0;            // fraction of zero trits, mean over workers (0 for float tensors)
  float scalar = 0.0f;              // shared scalar (0 for float tensors)
};

struct StepStats {
  std::vector<LayerStats> layers;
  double encode_s = 0.0;   // scalars + encoding, all workers of this process
  double comm_s = 0.0;     // collectives (0 in the simulation)
  double decode_s = 0.0;   // aggregation and decoding
  std::vector<float> worker_losses;  // the loss each worker reported, in worker order
  bool keep_buffers = false;  // set before the exchange: keep every worker's buffer in `buffers`
  std::vector<std::vector<std::uint8_t>> buffers;  // [loss][payload of tensor 0][...], in worker order
  std::uint64_t payload_bytes() const;
  std::uint64_t float_bytes() const;
};

class GradientExchange {
 public:
  GradientExchange(std::vector<LayerInfo> layers, ExchangeOptions options, std::shared_ptr<const Codec> codec);

  const std::vector<LayerInfo>& layers() const { return layers_; }
  /// Whether tensor t travels ternary under these options.
  bool is_ternary(std::size_t t) const { return ternary_[t]; }

  /// Simulation: grads[w][t] for every worker w; returns the averaged gradient of every tensor.
  std::vector<std::vector<float>> simulate(const std::vector<std::vector<std::span<const float>>>& grads,
                                           const std::vector<float>& losses, std::uint32_t step,
                                           StepStats* stats) const;

  /// One rank of a multi-process run: this rank's gradients; the others arrive through transport.
  /// Gives the same result, bit for bit, as simulate() with every rank's gradients.
  std::vector<std::vector<float>> exchange(const std::vector<std::span<const float>>& mine, float loss,
                                           Transport& transport, std::uint32_t step, StepStats* stats) const;

 private:
  std::vector<float> local_scalars(const std::vector<std::span<const float>>& grads) const;
  void finish_scalars(std::vector<float>& shared) const;
  std::vector<std::uint8_t> encode_worker(const std::vector<std::span<const float>>& grads, float loss,
                                          const std::vector<float>& shared, std::uint32_t worker,
                                          std::uint32_t step) const;
  std::vector<std::vector<float>> combine(const std::vector<std::vector<std::uint8_t>>& buffers,
                                          const std::vector<float>& shared, StepStats* stats) const;

  std::vector<LayerInfo> layers_;
  ExchangeOptions options_;
  std::shared_ptr<const Codec> codec_;
  std::vector<bool> ternary_;
  std::vector<Params> layer_params_;
  std::vector<std::size_t> payload_size_;
};

/// Number of nonzero trits in a packed ternary body (2bit or base3).
std::uint64_t count_nonzero_trits(Packing packing, std::span<const std::uint8_t> body);

}  // namespace tg::train
