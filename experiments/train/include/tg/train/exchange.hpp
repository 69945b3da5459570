// terngrad-bench: the data-parallel gradient exchange of TernGrad, without LibTorch. N workers each
// hold one gradient per layer; per-layer shared scalar = max over workers, ternarize with the real
// codec, exact integer aggregation, averaged gradient out. The same code serves the in-process
// simulation (all workers here) and multi-process runs (one worker per rank, through a Transport).
// The comparison codecs go through the same exchange: float32 (allreduce or allgather), QSGD with s
// levels and EF-SignSGD (tg/train/baselines.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tg/codec.hpp"

namespace tg::train {

/// float: workers send float32 gradients; terngrad: ternary payloads with shared scalars; qsgd: QSGD
/// with s levels; signsgd_ef: sign with error feedback (scale ||g + e||_1 / n, residual per worker).
enum class GradCodec { float32, terngrad, qsgd, signsgd_ef };
GradCodec parse_grad_codec(const std::string& text);
const char* to_string(GradCodec codec);

/// How float32 gradients travel (codec float only): allreduce (sum over ranks, Gloo's ring allreduce,
/// then / N) or allgather (every worker's gradient to every rank, averaged in double in worker order).
enum class FloatExchange { allreduce, allgather };
FloatExchange parse_float_exchange(const std::string& text);
const char* to_string(FloatExchange how);

/// Bytes one worker sends (uplink) and receives (downlink) in one step.
struct WireBytes {
  std::uint64_t uplink = 0, downlink = 0;
};
/// Allgather of `per_rank` bytes from each of `ranks` workers: uplink per_rank (its own payload once),
/// downlink (ranks - 1) * per_rank.
WireBytes allgather_bytes(std::uint64_t per_rank, int ranks);
/// Ring allreduce of a `buffer`-byte buffer: reduce-scatter + allgather, each rank sends and receives
/// 2 (ranks - 1) / ranks of the buffer (rounded down to whole bytes).
WireBytes ring_allreduce_bytes(std::uint64_t buffer, int ranks);

/// One gradient tensor, in the order of the model's parameters.
struct LayerInfo {
  std::string name;
  std::size_t numel = 0;
};

struct ExchangeOptions {
  GradCodec codec = GradCodec::terngrad;
  Params params;               // clipping, c, packing, float_below (tensors with fewer elements stay float)
  bool layerwise = true;       // one scalar per tensor (paper Section 3.2); false: one scalar for all
  bool shared_scalar = true;   // terngrad: every worker uses the max over workers (paper Section 3.1);
                               // false: each worker its own scalar, and the mean is decoded in double
  bool quantize_last = true;   // false: the last layer's tensors (`last_layer_from` on) stay float
  std::size_t last_layer_from = 0;  // index of the first tensor of the last layer
  std::uint64_t seed = 1;
  int qsgd_levels = 4;              // QSGD: s, levels of |g_k| / ||g_bucket||_2 in [0, 1]
  std::uint64_t qsgd_bucket = 512;  // QSGD: elements per norm (0: one norm per tensor)
  FloatExchange float_exchange = FloatExchange::allreduce;  // codec float only
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
  /// Element-wise float32 sum over ranks, in place (the summation order is the transport's).
  virtual void allreduce_sum(std::span<float> values) = 0;
  /// Returns once every rank has entered it (separates waiting for the slowest rank from wire time).
  virtual void barrier() = 0;
};

struct LayerStats {
  bool ternary = false;             // travels as TernGrad trits (false for float, QSGD and sign tensors)
  std::uint64_t payload_bytes = 0;  // one worker's payload for this tensor (header / norm / scale included)
  std::uint64_t float_bytes = 0;    // the same tensor as raw float32: 4 * numel
  double sparsity = 0.0;            // fraction of zero trits, mean over workers (0 for float tensors)
  float scalar = 0.0f;              // shared scalar (0 for float tensors)
};

struct StepStats {
  std::vector<LayerStats> layers;
  double encode_s = 0.0;   // scalars + encoding, all workers of this process
  double wait_s = 0.0;     // blocked in the barrier before each collective: waiting for the slowest rank
  double wire_s = 0.0;     // in the collectives themselves, after the barrier (0 in the simulation)
  double comm_s = 0.0;     // wait_s + wire_s
  double decode_s = 0.0;   // aggregation and decoding
  WireBytes wire;          // bytes one worker sends and receives this step (every collective counted)
  double loss = 0.0;       // mean of the workers' losses
  std::vector<float> worker_losses;  // the loss each worker reported, in worker order (empty with float allreduce)
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
  /// Bytes of one worker's payload of tensor t.
  std::uint64_t payload_bytes(std::size_t t) const { return payload_size_[t]; }
  /// Bytes one worker sends and receives per step with `workers` workers (what StepStats::wire holds).
  WireBytes step_bytes(int workers) const;
  /// EF-SignSGD residual of (worker, tensor) (empty before the worker's first step).
  std::span<const float> residual(std::size_t worker, std::size_t t) const;
  /// Sets worker's EF-SignSGD residuals (a resumed run): one per tensor, each of the tensor's size
  /// (std::invalid_argument otherwise).
  void set_residuals(std::size_t worker, std::vector<std::vector<float>> values);

  /// Simulation: grads[w][t] for every worker w; returns the averaged gradient of every tensor.
  /// Not const: EF-SignSGD keeps each worker's residual here between steps, and every tensor keeps the buffer
  /// its payload is encoded into. One caller at a time (simulate and exchange alike).
  std::vector<std::vector<float>> simulate(const std::vector<std::vector<std::span<const float>>>& grads,
                                           const std::vector<float>& losses, std::uint32_t step, StepStats* stats);

  /// One rank of a multi-process run: this rank's gradients; the others arrive through transport.
  /// Gives the same result, bit for bit, as simulate() with every rank's gradients, except float with
  /// allreduce on more than 2 ranks, where the transport's summation order decides the last bits (the
  /// difference is bounded by float32 summation error: see experiments/train/README.md).
  std::vector<std::vector<float>> exchange(const std::vector<std::span<const float>>& mine, float loss,
                                           Transport& transport, std::uint32_t step, StepStats* stats);

 private:
  /// Each ternary tensor's own statistics (its scalar and clip bound, computed once; zero for the others).
  std::vector<TensorStats> local_stats(const std::vector<std::span<const float>>& grads) const;
  void finish_scalars(std::vector<float>& shared) const;
  std::vector<std::uint8_t> encode_worker(const std::vector<std::span<const float>>& grads, float loss,
                                          const std::vector<float>& shared,
                                          const std::vector<TensorStats>& own, std::uint32_t worker,
                                          std::uint32_t step);
  bool float_allreduce() const;
  std::vector<float> flat_floats(const std::vector<std::span<const float>>& grads, float loss) const;
  std::vector<std::vector<float>> unflatten_mean(const std::vector<float>& sum, int workers, StepStats* stats) const;
  std::vector<std::vector<float>> combine(const std::vector<std::vector<std::uint8_t>>& buffers,
                                          const std::vector<float>& shared, StepStats* stats) const;
  /// Tensor t's bytes on the wire and as float32 (the per-layer record of every exchange).
  LayerStats layer_sizes(std::size_t t) const;
  /// The step's times (seconds) and wire bytes into *stats (nothing when stats is null).
  void record_step(StepStats* stats, int workers, double encode_s, double wait_s, double wire_s, double decode_s) const;

  std::vector<LayerInfo> layers_;
  ExchangeOptions options_;
  std::shared_ptr<const Codec> codec_;
  enum class Kind { float32, ternary, qsgd, sign };
  std::vector<bool> ternary_;
  std::vector<Kind> kind_;
  std::vector<Params> layer_params_;
  std::vector<std::size_t> payload_size_;
  std::vector<std::vector<std::vector<float>>> residual_;  // EF-SignSGD: [worker][tensor]
  std::vector<std::vector<std::uint8_t>> payloads_;        // [tensor]: its last payload, reused by encode_worker
};

/// Number of nonzero trits in a packed ternary body (2bit or base3).
std::uint64_t count_nonzero_trits(Packing packing, std::span<const std::uint8_t> body);

}  // namespace tg::train
