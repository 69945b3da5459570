// terngrad-bench: gradient aggregation of the simulated workers (float, TernGrad via the codec,
// QSGD-style and SignSGD contrasts). See include/tg/convex/methods.hpp.
#include "tg/convex/methods.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>

namespace tg::convex {

std::vector<std::string> method_names() {
  return {"float", "tern", "tern-clip", "tern-saturate", "tern-global", "tern-unshared", "qsgd", "sign",
          "tern-mutant-2s"};
}

MethodSpec parse_method(const std::string& name, double c) {
  MethodSpec m;
  m.name = name;
  m.params.c = c;
  if (name == "float") {
    m.scheme = Scheme::float32;
  } else if (name == "tern" || name == "tern-global" || name == "tern-unshared" || name == "tern-mutant-2s") {
    m.scheme = Scheme::terngrad;
    m.layerwise = name != "tern-global";
    m.shared = name != "tern-unshared";
    if (name == "tern-mutant-2s") m.scalar_factor = 2.0;
  } else if (name == "tern-clip" || name == "tern-saturate") {
    m.scheme = Scheme::terngrad;
    m.params.clip = name == "tern-clip" ? ClipMode::clip : ClipMode::saturate;
  } else if (name == "qsgd") {
    m.scheme = Scheme::qsgd;
  } else if (name == "sign") {
    m.scheme = Scheme::signsgd;
  } else {
    std::string list;
    for (auto& n : method_names()) list += (list.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown method '" + name + "' (expected one of " + list + ")");
  }
  validate(m.params);
  return m;
}

Aggregator::Aggregator(MethodSpec method, std::vector<Block> blocks, int workers, std::uint64_t seed)
    : method_(std::move(method)), workers_(workers), seed_(seed), codec_(make_optimized_codec(1)) {
  if (workers < 1) throw std::invalid_argument("workers must be >= 1");
  if (blocks.empty()) throw std::invalid_argument("a problem needs at least one parameter block");
  if (method_.layerwise) {
    blocks_ = std::move(blocks);
  } else {
    int total = blocks.back().offset + blocks.back().size;
    blocks_ = {Block{0, total, 1.0}};
  }
  buf_.resize(workers);
}

void Aggregator::combine(const std::vector<Eigen::VectorXd>& grads, std::uint32_t step, Eigen::VectorXd& update,
                         StepStats& stats) {
  const auto D = grads.at(0).size();
  update.setZero(D);
  stats.noise_var.setZero(D);
  stats.target.setZero(D);
  stats.assumption3 = 0.0;
  stats.grad_sq = 0.0;
  for (const auto& g : grads) {
    stats.assumption3 += g.cwiseAbs().maxCoeff() * g.lpNorm<1>() / workers_;
    stats.grad_sq += g.squaredNorm() / workers_;
  }
  switch (method_.scheme) {
    case Scheme::float32:
      for (const auto& g : grads) update += g / workers_;
      stats.target = update;
      return;
    case Scheme::terngrad:
      if (method_.shared) terngrad_shared(grads, step, update, stats);
      else terngrad_own(grads, step, update, stats);
      return;
    case Scheme::qsgd:
      qsgd(grads, step, update, stats);
      return;
    case Scheme::signsgd:
      signsgd(grads, update);
      stats.target = update;
      return;
  }
}

// Shared scalar s = max_w tensor_scalar(g_w) per block, each worker encoded with it, and the exact
// integer mean of the trits (tg::aggregate). The identity is stated for s; the update is unbiased for
// mean_w clamp(g_w, cap_w), cap_w = the worker's clip bound c*sigma_w (+inf without clipping).
void Aggregator::terngrad_shared(const std::vector<Eigen::VectorXd>& grads, std::uint32_t step,
                                 Eigen::VectorXd& update, StepStats& stats) {
  const double N = workers_;
  for (std::uint32_t j = 0; j < blocks_.size(); ++j) {
    const Block& blk = blocks_[j];
    std::vector<float> scalars(workers_);
    for (int w = 0; w < workers_; ++w) {
      buf_[w].resize(blk.size);
      for (int k = 0; k < blk.size; ++k) buf_[w][k] = static_cast<float>(grads[w](blk.offset + k));
      scalars[w] = tensor_scalar(*codec_, buf_[w], method_.params, j);
    }
    const float s_rule = shared_scalar(scalars);
    const float s_enc = static_cast<float>(method_.scalar_factor * s_rule);
    std::vector<std::vector<std::uint8_t>> payloads(workers_);
    std::vector<std::span<const std::uint8_t>> spans;
    for (int w = 0; w < workers_; ++w) {
      payloads[w] = encode_with_scalar(*codec_, buf_[w], method_.params,
                                       StreamKey{seed_, static_cast<std::uint32_t>(w), j, step}, s_enc);
      spans.emplace_back(payloads[w]);
      const double cap = std::min<double>(clip_bound(*codec_, buf_[w], method_.params), s_rule);
      for (int k = 0; k < blk.size; ++k) {
        double x = std::clamp<double>(buf_[w][k], -cap, cap);
        stats.target(blk.offset + k) += x / N;
        stats.noise_var(blk.offset + k) += std::fabs(x) * (s_rule - std::fabs(x)) / (N * N);
      }
    }
    Aggregate agg = aggregate(*codec_, spans);
    for (int k = 0; k < blk.size; ++k) update(blk.offset + k) = agg.mean[k];
  }
}

// Each worker's own scalar(s): encode_layers (layer-wise) or encode (global), decode, mean in double.
void Aggregator::terngrad_own(const std::vector<Eigen::VectorXd>& grads, std::uint32_t step,
                              Eigen::VectorXd& update, StepStats& stats) {
  const double N = workers_;
  for (int w = 0; w < workers_; ++w) {
    std::vector<std::vector<float>> layers(blocks_.size());
    std::vector<std::span<const float>> spans;
    for (std::size_t j = 0; j < blocks_.size(); ++j) {
      const Block& blk = blocks_[j];
      layers[j].resize(blk.size);
      for (int k = 0; k < blk.size; ++k) layers[j][k] = static_cast<float>(grads[w](blk.offset + k));
      spans.emplace_back(layers[j]);
    }
    auto payloads = encode_layers(*codec_, spans, method_.params, StreamKey{seed_, static_cast<std::uint32_t>(w), 0, step});
    for (std::size_t j = 0; j < blocks_.size(); ++j) {
      const Block& blk = blocks_[j];
      Decoded dec = decode(*codec_, payloads[j]);
      ScalarRule rule = own_rule(*codec_, layers[j], method_.params, static_cast<std::uint32_t>(j));
      for (int k = 0; k < blk.size; ++k) {
        update(blk.offset + k) += static_cast<double>(dec.values[k]) / N;
        double x = std::clamp<double>(layers[j][k], -rule.cap, rule.cap);
        stats.target(blk.offset + k) += x / N;
        stats.noise_var(blk.offset + k) += std::fabs(x) * (rule.scalar - std::fabs(x)) / (N * N);
      }
    }
  }
}

// QSGD-style, one level: s = ||g_block||_2, output sign(g_k) s with probability |g_k| / s, uniforms
// from the same Philox function as the codec on tensor ids 0x51000000 + block (disjoint from TernGrad's).
void Aggregator::qsgd(const std::vector<Eigen::VectorXd>& grads, std::uint32_t step, Eigen::VectorXd& update,
                      StepStats& stats) {
  const double N = workers_;
  for (int w = 0; w < workers_; ++w) {
    for (std::uint32_t j = 0; j < blocks_.size(); ++j) {
      const Block& blk = blocks_[j];
      double s = grads[w].segment(blk.offset, blk.size).norm();
      StreamKey key{seed_, static_cast<std::uint32_t>(w), 0x51000000u + j, step};
      for (int k = 0; k < blk.size; ++k) {
        double g = grads[w](blk.offset + k), a = std::fabs(g);
        std::uint32_t u = philox_block(key, static_cast<std::uint32_t>(k / 4)).v[k % 4];
        bool keep = s > 0.0 && static_cast<double>(u) < (a / s) * kTwoPow32;
        if (keep) update(blk.offset + k) += std::copysign(s, g) / N;
        stats.target(blk.offset + k) += g / N;
        stats.noise_var(blk.offset + k) += a * (s - a) / (N * N);
      }
    }
  }
}

// Scaled SignSGD: each worker sends sign(g) per block with the block's mean |g| as scale (biased).
void Aggregator::signsgd(const std::vector<Eigen::VectorXd>& grads, Eigen::VectorXd& update) {
  for (int w = 0; w < workers_; ++w) {
    for (const Block& blk : blocks_) {
      auto seg = grads[w].segment(blk.offset, blk.size);
      double scale = seg.lpNorm<1>() / blk.size;
      for (int k = 0; k < blk.size; ++k) {
        double g = seg(k);
        update(blk.offset + k) += (g > 0 ? scale : (g < 0 ? -scale : 0.0)) / workers_;
      }
    }
  }
}

}  // namespace tg::convex
