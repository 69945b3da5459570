// terngrad-bench: the training loop (LibTorch): data, model, per-worker gradients, the gradient
// exchange (float, TernGrad, QSGD, EF-SignSGD; simulated workers or c10d/Gloo ranks), optimizer,
// evaluation, checkpoints, outputs.
// Entry point: tg::train::run_training (trainer.hpp); `terngrad train --help` lists the options.
#include <torch/torch.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "gloo_transport.hpp"
#include "models.hpp"
#include "tg/atomic_file.hpp"
#include "tg/error.hpp"
#include "tg/train/checkpoint_file.hpp"
#include "tg/train/data.hpp"
#include "tg/train/exchange.hpp"
#include "tg/train/live_check.hpp"
#include "tg/train/tensor_data.hpp"
#include "tg/train/trainer.hpp"

namespace tg::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::uint64_t mix64(std::uint64_t x) {  // splitmix64 finalizer: per-sample augmentation draws
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

enum class Prep { scale01, cifar, imagenet };

struct Dataset {
  ImageSet train, test;
  Prep prep = Prep::scale01;
  int pad = 0;       // cifar: zero padding on each side before cropping
  int crop = 24;     // cifar: crop size
  std::string description;
};

bool is_imagenet_model(const std::string& m) { return m == "alexnet" || m == "googlenet" || m == "vgga"; }

Dataset load_data(const TrainConfig& c) {
  Dataset d;
  if (is_imagenet_model(c.model) && c.data != "synthetic" && c.data != "tensor")
    throw std::invalid_argument("model " + c.model + " runs on --data tensor (a preprocessed ImageNet-style folder) or --data synthetic");
  if (c.data == "fashion-mnist" || c.data == "mnist") {
    std::string dir = c.data_dir.empty() ? std::string(kFashionMnistDir) : c.data_dir;
    if (c.data == "mnist" && c.data_dir.empty()) throw std::invalid_argument("--data mnist needs --data-dir");
    d.train = load_mnist_dir(dir, true, c.train_limit);
    d.test = load_mnist_dir(dir, false, c.test_limit);
  } else if (c.data == "cifar10") {
    if (c.data_dir.empty()) throw std::invalid_argument("--data cifar10 needs --data-dir (a cifar-10-batches-bin folder)");
    d.train = load_cifar10_dir(c.data_dir, true, c.train_limit);
    d.test = load_cifar10_dir(c.data_dir, false, c.test_limit);
  } else if (c.data == "tensor") {
    if (c.data_dir.empty()) throw std::invalid_argument("--data tensor needs --data-dir (a folder with tensors.txt)");
    d.train = load_tensor_dir(c.data_dir, true, c.train_limit);
    d.test = load_tensor_dir(c.data_dir, false, c.test_limit);
    if (is_imagenet_model(c.model)) {
      ModelInput in = imagenet_input(c.model);
      if (d.train.channels != in.channels || d.train.height != in.height || d.train.width != in.width)
        throw std::invalid_argument("model " + c.model + " takes " + std::to_string(in.channels) + "x" +
                                    std::to_string(in.height) + "x" + std::to_string(in.width) + " images; " + c.data_dir +
                                    " holds " + std::to_string(d.train.channels) + "x" + std::to_string(d.train.height) +
                                    "x" + std::to_string(d.train.width));
    }
  } else if (c.data == "synthetic") {
    std::size_t n = std::max<std::size_t>(2 * static_cast<std::size_t>(c.batch), c.train_limit);
    if (is_imagenet_model(c.model)) {
      ModelInput in = imagenet_input(c.model);
      d.train = synthetic_images(n, in.channels, in.height, in.width, in.classes, c.seed);
      d.test = synthetic_images(std::max<std::size_t>(c.test_limit, 8), in.channels, in.height, in.width, in.classes, c.seed + 1);
    } else {
      int ch = c.model == "cifarnet" ? 3 : 1, hw = c.model == "cifarnet" ? 32 : 28;
      d.train = synthetic_images(n, ch, hw, hw, 10, c.seed);
      d.test = synthetic_images(std::max<std::size_t>(c.test_limit, 64), ch, hw, hw, 10, c.seed + 1);
    }
  } else {
    throw std::invalid_argument("data '" + c.data + "' is not one of: fashion-mnist, mnist, cifar10, tensor, synthetic");
  }
  if (d.train.count == 0 || d.test.count == 0) throw std::invalid_argument("empty training or test set");
  std::string how;
  if (is_imagenet_model(c.model)) {
    d.prep = Prep::imagenet;
    how = "pixels/255 - 0.5";
  } else if (c.model == "cifarnet") {
    d.prep = Prep::cifar;
    d.pad = d.train.height < 32 ? (32 - d.train.height) / 2 : 0;
    if (d.train.height + 2 * d.pad < d.crop || d.train.width + 2 * d.pad < d.crop)
      throw std::invalid_argument("cifarnet needs images of at least 24x24");
    how = "zero-padded by " + std::to_string(d.pad) + " to " + std::to_string(d.train.height + 2 * d.pad) +
          " px, random 24x24 crop and horizontal flip (train) / center crop (test), per-image standardization";
  } else {
    d.prep = Prep::scale01;
    how = "pixels/255";
  }
  d.description = "train: " + d.train.source + "; test: " + d.test.source + "; preprocessing: " + how;
  return d;
}

ModelInput model_input(const TrainConfig& c, const Dataset& d) {
  if (d.prep == Prep::imagenet) {
    ModelInput in = imagenet_input(c.model);
    if (c.data == "tensor") in.classes = d.train.classes;
    return in;
  }
  if (d.prep == Prep::cifar) return {d.train.channels, d.crop, d.crop, d.train.classes};
  return {d.train.channels, d.train.height, d.train.width, d.train.classes};
}

// Images `positions` (global positions within the step's batch) of `set`, preprocessed.
torch::Tensor make_images(const Dataset& d, const ImageSet& set, const std::vector<std::size_t>& idx,
                          const std::vector<std::size_t>& salt, bool train, std::uint64_t seed) {
  const int C = set.channels, H = set.height, W = set.width;
  if (d.prep != Prep::cifar) {
    auto x = torch::empty({static_cast<long>(idx.size()), C, H, W}, torch::kFloat32);
    float* out = x.data_ptr<float>();
    std::size_t n = set.image_bytes();
    float shift = d.prep == Prep::imagenet ? 0.5f : 0.0f;
    for (std::size_t i = 0; i < idx.size(); ++i) {
      const std::uint8_t* p = set.pixel_data() + idx[i] * n;
      for (std::size_t k = 0; k < n; ++k) out[i * n + k] = static_cast<float>(p[k]) / 255.0f - shift;
    }
    return x;
  }
  const int S = d.crop, PH = H + 2 * d.pad, PW = W + 2 * d.pad;
  auto x = torch::empty({static_cast<long>(idx.size()), C, S, S}, torch::kFloat32);
  float* out = x.data_ptr<float>();
  std::size_t per = static_cast<std::size_t>(C) * S * S;
  for (std::size_t i = 0; i < idx.size(); ++i) {
    int oy = (PH - S) / 2, ox = (PW - S) / 2;
    bool flip = false;
    if (train) {
      std::uint64_t h = mix64(seed ^ mix64(salt[i]));
      oy = static_cast<int>(h % static_cast<std::uint64_t>(PH - S + 1));
      ox = static_cast<int>((h >> 20) % static_cast<std::uint64_t>(PW - S + 1));
      flip = ((h >> 40) & 1u) != 0;
    }
    const std::uint8_t* p = set.pixel_data() + idx[i] * set.image_bytes();
    float* o = out + i * per;
    double sum = 0.0, sumsq = 0.0;
    for (int ch = 0; ch < C; ++ch)
      for (int y = 0; y < S; ++y)
        for (int xx = 0; xx < S; ++xx) {
          int sy = oy + y - d.pad, sx = ox + (flip ? S - 1 - xx : xx) - d.pad;
          float v = (sy >= 0 && sy < H && sx >= 0 && sx < W) ? static_cast<float>(p[(ch * H + sy) * W + sx]) : 0.0f;
          o[(ch * S + y) * S + xx] = v;
          sum += v;
          sumsq += static_cast<double>(v) * v;
        }
    // tf.image.per_image_standardization: (x - mean) / max(std, 1/sqrt(N)).
    double mean = sum / static_cast<double>(per);
    double sd = std::sqrt(std::max(0.0, sumsq / static_cast<double>(per) - mean * mean));
    double adj = std::max(sd, 1.0 / std::sqrt(static_cast<double>(per)));
    for (std::size_t k = 0; k < per; ++k) o[k] = static_cast<float>((o[k] - mean) / adj);
  }
  return x;
}

torch::Tensor make_labels(const ImageSet& set, const std::vector<std::size_t>& idx) {
  auto y = torch::empty({static_cast<long>(idx.size())}, torch::kInt64);
  auto* out = y.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < idx.size(); ++i) out[i] = set.labels[idx[i]];
  return y;
}

// Sample order: epoch e is a permutation of the training set drawn from (seed, e); the step's global
// batch is positions [step*B, step*B + B) of the concatenated epochs. Depends only on (seed, step).
class Sampler {
 public:
  Sampler(std::size_t n, std::uint64_t seed) : n_(n), seed_(seed) {}
  std::size_t at(std::uint64_t pos) {
    std::uint64_t e = pos / n_;
    if (e != epoch_ || perm_.empty()) {
      epoch_ = e;
      perm_.resize(n_);
      std::iota(perm_.begin(), perm_.end(), std::size_t{0});
      std::mt19937_64 rng(mix64(seed_ ^ mix64(e + 0x5151)));
      for (std::size_t i = n_ - 1; i > 0; --i) std::swap(perm_[i], perm_[rng() % (i + 1)]);  // Fisher-Yates
    }
    return perm_[pos % n_];
  }

 private:
  std::size_t n_;
  std::uint64_t seed_;
  std::uint64_t epoch_ = 0;
  std::vector<std::size_t> perm_;
};

double learning_rate(const TrainConfig& c, long step) {
  if (c.lr_policy == "fixed") return c.lr;
  if (c.lr_policy == "inv") return c.lr * std::pow(1.0 + c.gamma * static_cast<double>(step), -c.power);
  if (c.lr_policy == "step") return c.lr * std::pow(c.gamma, std::floor(static_cast<double>(step) / c.step_size));
  throw std::invalid_argument("lr policy '" + c.lr_policy + "' is not one of: fixed, inv, step");
}

// Weight decay in the optimizer only with --weight-decay-in update; in the loss otherwise (decay_in_loss).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainConfig& c, std::vector<torch::Tensor> params) {
  const double wd = c.weight_decay_in == "update" ? c.weight_decay : 0.0;
  if (c.optimizer == "sgd" || c.optimizer == "momentum") {
    auto o = torch::optim::SGDOptions(c.lr).weight_decay(wd).momentum(c.optimizer == "sgd" ? 0.0 : c.momentum);
    return std::make_unique<torch::optim::SGD>(params, o);
  }
  if (c.optimizer == "adam") {
    auto o = torch::optim::AdamOptions(c.lr).betas({c.adam_beta1, c.adam_beta2}).eps(c.adam_eps).weight_decay(wd);
    return std::make_unique<torch::optim::Adam>(params, o);
  }
  throw std::invalid_argument("optimizer '" + c.optimizer + "' is not one of: sgd, momentum, adam");
}

// With --weight-decay-in loss, the parameters whose L2 term wd/2 ||w||^2 is in the loss, as in the
// authors' TensorFlow models: every conv and fc weight (not the biases); CifarNet (the TF CIFAR-10
// tutorial net): the weights of local3 and local4 only.
bool decay_in_loss(const std::string& model, const std::string& name, const torch::Tensor& p) {
  if (model == "cifarnet") return name == "local3.weight" || name == "local4.weight";
  return p.dim() >= 2;
}

std::string fingerprint(const TrainConfig& c, int workers) {
  std::ostringstream s;
  s << c.model << '|' << c.data << '|' << c.train_limit << '|' << c.codec << '|' << c.packing << '|' << c.layerwise << '|'
    << c.clip << '|' << c.c << '|' << c.float_below << '|' << c.quantize_last << '|' << c.optimizer << '|' << c.lr << '|'
    << c.momentum << '|' << c.weight_decay << '|' << c.lr_policy << '|' << c.gamma << '|' << c.power << '|' << c.step_size
    << '|' << c.batch << '|' << workers << '|' << c.seed << '|' << c.weight_decay_in;
  if (c.codec == "qsgd") s << "|qsgd-levels " << c.qsgd_levels << "|qsgd-bucket " << c.qsgd_bucket;
  if (c.codec == "float") s << '|' << c.float_exchange;
  if (!c.shared_scalar) s << "|own-scalars";
  return s.str();
}

std::uint64_t hash_weights(const std::vector<float>& w) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a over the bytes
  const auto* p = reinterpret_cast<const unsigned char*>(w.data());
  for (std::size_t i = 0; i < w.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

std::vector<float> flat_weights(Net& model) {
  std::vector<float> out;
  for (const auto& p : model.parameters()) {
    auto c = p.detach().to(torch::kCPU).contiguous();
    const float* d = c.data_ptr<float>();
    out.insert(out.end(), d, d + c.numel());
  }
  return out;
}

struct Evaluation {
  double loss = 0.0, accuracy = 0.0;
};

// The test set in chunks of 500 images: loss summed in double chunk by chunk in chunk order, correct
// predictions counted. With replicas (--sim-threads), thread k > 0 evaluates chunks k, k + T, ... on
// replicas[k - 1], a copy of the model's parameters and buffers; each chunk is the same computation on
// any thread and the sums keep the chunk order, so the results have the bits of one thread.
Evaluation evaluate(Net& model, const std::vector<std::shared_ptr<Net>>& replicas, const Dataset& d,
                    const torch::Device& dev) {
  const std::size_t chunk = 500;
  const std::size_t chunks = (d.test.count + chunk - 1) / chunk;
  std::vector<double> loss_of(chunks, 0.0);
  std::vector<std::size_t> correct_of(chunks, 0);
  const std::size_t threads = 1 + replicas.size();
  auto run_chunks = [&](Net& net, std::size_t first) {
    torch::NoGradGuard no_grad;
    net.eval();
    for (std::size_t c = first; c < chunks; c += threads) {
      std::vector<std::size_t> idx;
      for (std::size_t i = c * chunk; i < std::min(d.test.count, (c + 1) * chunk); ++i) idx.push_back(i);
      auto x = make_images(d, d.test, idx, idx, false, 0).to(dev);
      auto y = make_labels(d.test, idx).to(dev);
      auto logits = net.forward(x);
      loss_of[c] = torch::nn::functional::cross_entropy(logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                       .item<double>();
      correct_of[c] = static_cast<std::size_t>(logits.argmax(1).eq(y).sum().item<std::int64_t>());
    }
    net.train();
  };
  if (replicas.empty() || chunks < 2) {
    run_chunks(model, 0);
  } else {
    std::vector<torch::Tensor> from = model.parameters(), from_buffers = model.buffers();
    std::vector<std::exception_ptr> errors(threads);
    std::vector<std::thread> pool;
    for (std::size_t k = 1; k < threads; ++k)
      pool.emplace_back([&, k] {
        try {
          at::init_num_threads();  // the run's team size, as in the step's threads
          Net& net = *replicas[k - 1];
          {
            torch::NoGradGuard no_grad;
            std::vector<torch::Tensor> ps = net.parameters(), bs = net.buffers();
            for (std::size_t t = 0; t < ps.size(); ++t) ps[t].copy_(from[t]);
            for (std::size_t t = 0; t < bs.size(); ++t) bs[t].copy_(from_buffers[t]);
          }
          run_chunks(net, k);
        } catch (...) {
          errors[k] = std::current_exception();
        }
      });
    try {
      run_chunks(model, 0);
    } catch (...) {
      errors[0] = std::current_exception();
    }
    for (auto& t : pool) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }
  double loss = 0.0;
  std::size_t correct = 0;
  for (std::size_t c = 0; c < chunks; ++c) {
    loss += loss_of[c];
    correct += correct_of[c];
  }
  return {loss / static_cast<double>(d.test.count), static_cast<double>(correct) / static_cast<double>(d.test.count)};
}

// The checkpoint's manifest (tg/train/checkpoint_file.hpp): run fingerprint, step, every tensor's shape,
// and with residual_workers > 0 (EF-SignSGD) the residual section's shape: one residual per parameter.
CheckpointManifest manifest_of(Net& model, long step, const std::string& fp, std::size_t residual_workers) {
  CheckpointManifest m;
  m.fingerprint = fp;
  m.step = step;
  for (const auto& item : model.named_parameters(true)) m.tensors.emplace_back(item.key(), c10::str(item.value().sizes()));
  for (const auto& item : model.named_buffers(true)) m.tensors.emplace_back(item.key(), c10::str(item.value().sizes()));
  m.residual_workers = residual_workers;
  if (residual_workers > 0)
    for (const auto& p : model.parameters()) m.residual_numel.push_back(static_cast<std::size_t>(p.numel()));
  return m;
}

// Every worker's EF-SignSGD residuals, for a checkpoint. The simulation's exchange holds them all; in a
// multi-process run each rank holds its own, so every rank calls this at the same step and one
// allgather brings all of them to every rank (rank 0 writes them). A worker that has not stepped yet
// has the zero residual it would start from.
Residuals collect_residuals(const GradientExchange& x, int workers, Transport* transport) {
  const auto& layers = x.layers();
  auto own = [&](std::size_t w) {
    std::vector<std::vector<float>> r;
    for (std::size_t t = 0; t < layers.size(); ++t) {
      auto e = x.residual(w, t);
      r.push_back(e.empty() ? std::vector<float>(layers[t].numel, 0.0f) : std::vector<float>(e.begin(), e.end()));
    }
    return r;
  };
  Residuals out;
  if (!transport) {
    for (int w = 0; w < workers; ++w) out.push_back(own(static_cast<std::size_t>(w)));
    return out;
  }
  std::vector<std::uint8_t> bytes;
  for (const auto& e : own(static_cast<std::size_t>(transport->rank()))) {
    std::size_t at = bytes.size();
    bytes.resize(at + 4 * e.size());
    if (!e.empty()) std::memcpy(bytes.data() + at, e.data(), 4 * e.size());
  }
  for (const auto& theirs : transport->allgather(bytes)) {
    if (theirs.size() != bytes.size())
      throw std::runtime_error("a rank sent " + std::to_string(theirs.size()) + " bytes of residuals, expected " +
                               std::to_string(bytes.size()));
    std::vector<std::vector<float>> r;
    std::size_t at = 0;
    for (const auto& l : layers) {
      std::vector<float> e(l.numel);
      if (l.numel) std::memcpy(e.data(), theirs.data() + at, 4 * l.numel);
      at += 4 * l.numel;
      r.push_back(std::move(e));
    }
    out.push_back(std::move(r));
  }
  return out;
}

// residuals: every worker's EF-SignSGD residuals (collect_residuals), nullptr for the other codecs.
void save_checkpoint(const std::string& path, Net& model, torch::optim::Optimizer& opt, long step, const std::string& fp,
                     const Residuals* residuals) {
  torch::serialize::OutputArchive ar;
  model.save(ar);
  torch::serialize::OutputArchive opt_ar;
  opt.save(opt_ar);
  ar.write("optimizer", opt_ar);
  ar.write("step", c10::IValue(static_cast<std::int64_t>(step)));
  ar.write("fingerprint", c10::IValue(fp));
  std::ostringstream os;
  ar.save_to(os);
  tg::write_file_atomic(path, seal_checkpoint(os.str(), manifest_of(model, step, fp, residuals ? residuals->size() : 0),
                                              residuals));
}

// residual_workers > 0 (EF-SignSGD): the checkpoint must hold that many workers' residuals, returned in
// *residuals; 0: it must hold none.
long load_checkpoint(const std::string& path, Net& model, torch::optim::Optimizer& opt, const std::string& fp,
                     std::size_t residual_workers, Residuals* residuals) {
  long sealed_step = 0;  // footer, CRC32C, manifest and residual section checked before any weight is read
  std::istringstream in(open_checkpoint(path, manifest_of(model, 0, fp, residual_workers), &sealed_step, residuals));
  torch::serialize::InputArchive ar;
  try {
    ar.load_from(in);
  } catch (const c10::Error& e) {
    throw std::invalid_argument("checkpoint " + path + " is not readable: " + e.what_without_backtrace());
  }
  c10::IValue v;
  if (!ar.try_read("fingerprint", v) || !v.isString())
    throw std::invalid_argument("checkpoint " + path + " has no run fingerprint");
  if (v.toStringRef() != fp)
    throw std::invalid_argument("checkpoint " + path + " was written by a run with other settings: " +
                                fingerprint_difference(v.toStringRef(), fp));
  try {
    model.load(ar);
    torch::serialize::InputArchive opt_ar;
    ar.read("optimizer", opt_ar);
    opt.load(opt_ar);
  } catch (const c10::Error& e) {
    throw std::invalid_argument("checkpoint " + path + " does not match the model: " + e.what_without_backtrace());
  }
  if (!ar.try_read("step", v) || !v.isInt() || v.toInt() != sealed_step)
    throw std::invalid_argument("checkpoint " + path + " has no step, or not the manifest's");
  return static_cast<long>(v.toInt());
}

void progress_bar(long step, long total, double loss, double acc, double img_per_s) {
  char buf[200];
  int width = 30, filled = total > 0 ? static_cast<int>(width * step / total) : width;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(static_cast<std::size_t>(width), '.');
  std::snprintf(buf, sizeof buf, "\r[%s] %ld/%ld  loss %.4f  test acc %s  %.0f img/s   ", bar.c_str(), step, total, loss,
                acc >= 0 ? (std::to_string(100.0 * acc).substr(0, 5) + "%").c_str() : "-", img_per_s);
  std::fputs(buf, stderr);
  std::fflush(stderr);
}

// Every rank's time split of every step, gathered once at the end of a multi-process run (one
// allgather of 6 doubles per step; every rank ran the same steps).
std::vector<RankStepTimes> gather_rank_times(Transport& transport, const std::vector<StepRecord>& mine) {
  std::vector<double> v;
  for (const auto& s : mine) v.insert(v.end(), {s.compute_s, s.encode_s, s.wait_s, s.wire_s, s.decode_s, s.optimizer_s});
  std::vector<std::uint8_t> bytes(v.size() * sizeof(double));
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  auto all = transport.allgather(bytes);
  std::vector<RankStepTimes> out;
  for (std::size_t i = 0; i < mine.size(); ++i)
    for (std::size_t r = 0; r < all.size(); ++r) {
      double d[6];
      std::memcpy(d, all[r].data() + i * sizeof d, sizeof d);
      out.push_back({mine[i].step, static_cast<int>(r), d[0], d[1], d[2], d[3], d[4], d[5]});
    }
  return out;
}

}  // namespace

std::vector<std::string> model_names() { return {"lenet", "cifarnet", "alexnet", "googlenet", "vgga"}; }

TrainResult run_training(const TrainConfig& c) {
  auto wall0 = Clock::now();
  const bool distributed = c.world_size > 0;
  const int workers = distributed ? c.world_size : c.workers;
  if (workers < 1) throw std::invalid_argument("workers must be at least 1");
  if (c.batch < 1 || c.batch % workers != 0)
    throw std::invalid_argument("total batch " + std::to_string(c.batch) + " is not a positive multiple of " +
                                std::to_string(workers) + " workers");
  if (c.threads < 1) throw std::invalid_argument("threads must be at least 1");
  if (c.sim_threads < 1) throw std::invalid_argument("--sim-threads must be at least 1");
  if (c.sim_threads > 1 && distributed)
    throw std::invalid_argument("--sim-threads applies to the in-process simulation; a rank of a multi-process run computes one worker");
  if (c.sim_threads > 1 && c.device != "cpu")
    throw std::invalid_argument("--sim-threads above 1 runs on the CPU only (--device " + c.device + ")");
  torch::set_num_threads(c.threads);
  learning_rate(c, 0);  // validates the policy before any work
  torch::Device device(torch::kCPU);
  if (c.device == "cuda") {
    if (!torch::cuda::is_available())
      throw std::invalid_argument("--device cuda: this LibTorch build has no CUDA support or sees no GPU; use --device cpu");
    const int gpus = static_cast<int>(torch::cuda::device_count());
    device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(c.world_size > 0 ? c.rank % gpus : 0));
  } else if (c.device != "cpu") {
    throw std::invalid_argument("device '" + c.device + "' is not one of: cpu, cuda");
  }
  if (c.weight_decay_in != "loss" && c.weight_decay_in != "update")
    throw std::invalid_argument("weight decay '" + c.weight_decay_in + "' is not one of: loss, update");

  Dataset data = load_data(c);
  check_shard_fits(data.train, static_cast<std::size_t>(c.batch / workers), static_cast<std::size_t>(c.batch));
  torch::manual_seed(c.seed);  // initialization on the CPU, then moved: the same weights on every device
  std::shared_ptr<Net> model = make_model(c.model, model_input(c, data));
  model->to(device);
  model->train();
  // --sim-threads: thread k > 0 computes its workers on replicas[k - 1], a copy of the model whose
  // parameters are set from the model's before every step. Built with the global generator's state put
  // back afterwards, so the run draws the same numbers as with one thread.
  const int sim_threads = std::min(c.sim_threads, workers);
  std::vector<std::shared_ptr<Net>> replicas;
  if (sim_threads > 1) {
    for (const auto& m : model->modules(/*include_self=*/false))
      if (m->name().find("Dropout") != std::string::npos)
        throw std::invalid_argument("--sim-threads above 1: " + c.model + " has dropout, whose masks come from one shared random generator; use --sim-threads 1");
    auto generator = at::detail::getDefaultCPUGenerator();
    at::Tensor state = generator.get_state();
    for (int k = 1; k < sim_threads; ++k) {
      replicas.push_back(make_model(c.model, model_input(c, data)));
      replicas.back()->train();
    }
    generator.set_state(state);
  }

  std::vector<torch::Tensor> params;
  std::vector<LayerInfo> layers;
  std::vector<std::string> module_of;
  std::vector<bool> decayed;  // weight decay in the loss (--weight-decay-in loss)
  for (const auto& item : model->named_parameters()) {
    params.push_back(item.value());
    decayed.push_back(c.weight_decay_in == "loss" && c.weight_decay > 0.0 && decay_in_loss(c.model, item.key(), item.value()));
    layers.push_back({item.key(), static_cast<std::size_t>(item.value().numel())});
    module_of.push_back(item.key().substr(0, item.key().rfind('.')));
  }
  std::size_t last_from = layers.size();
  while (last_from > 0 && module_of[last_from - 1] == module_of.back()) --last_from;

  ExchangeOptions xo;
  xo.codec = parse_grad_codec(c.codec);
  xo.params.clip = parse_clip_mode(c.clip.c_str());
  xo.params.c = c.c;
  xo.params.packing = parse_packing(c.packing.c_str());
  xo.params.float_below = c.float_below;
  xo.layerwise = c.layerwise;
  xo.shared_scalar = c.shared_scalar;
  xo.quantize_last = c.quantize_last;
  xo.last_layer_from = last_from;
  xo.seed = c.seed;
  xo.qsgd_levels = c.qsgd_levels;
  xo.qsgd_bucket = c.qsgd_bucket;
  xo.float_exchange = parse_float_exchange(c.float_exchange);
  std::shared_ptr<const Codec> codec = make_exchange_codec(c.fault_codec);
  GradientExchange exchange(layers, xo, codec);

  auto optimizer = make_optimizer(c, params);
  const std::string fp = fingerprint(c, workers);
  long total = c.steps;
  if (c.epochs > 0) {
    // a number of steps a long holds (1e300 epochs is a typing error, not an overflowed cast)
    const double steps = std::ceil(c.epochs * static_cast<double>(data.train.count) / c.batch);
    if (!(steps <= 2147483648.0)) {  // --steps' own limit, 2^31
      char what[200];
      std::snprintf(what, sizeof what, "--epochs %.6g is %.3g steps of batch %d over %zu images (at most 2^31 steps)", c.epochs,
                    steps, c.batch, static_cast<std::size_t>(data.train.count));
      throw std::invalid_argument(what);
    }
    total = static_cast<long>(steps);
  }
  if (total < 1) throw std::invalid_argument("steps must be at least 1");
  long start = 0;
  // EF-SignSGD: every worker's residual travels in the checkpoint (see collect_residuals); each rank of a
  // multi-process run reads the same file and keeps its own.
  const bool keeps_residuals = xo.codec == GradCodec::signsgd_ef;
  const std::size_t residual_workers = keeps_residuals ? static_cast<std::size_t>(workers) : 0;
  if (!c.resume.empty()) {
    Residuals residuals;
    start = load_checkpoint(c.resume, *model, *optimizer, fp, residual_workers, &residuals);
    for (std::size_t w = 0; w < residuals.size(); ++w)
      if (!distributed || static_cast<int>(w) == c.rank) exchange.set_residuals(w, std::move(residuals[w]));
  }
  if (start > total)
    throw std::invalid_argument("checkpoint is at step " + std::to_string(start) + ", beyond the run's " + std::to_string(total));

  std::unique_ptr<Transport> transport;
  if (distributed) {
    RendezvousOptions ro;
    ro.addr = c.master_addr;
    ro.port = c.master_port;
    ro.rank = c.rank;
    ro.world_size = c.world_size;
    ro.external_store = c.external_store;
    ro.timeout_s = c.timeout_s;
    transport = make_gloo_transport(ro);
  }
  const bool leader = !distributed || c.rank == 0;
  LiveChecker live(c.live_check, exchange, xo, codec, total, leader ? c.out_dir : std::string(), start);
  if (live.enabled() && leader) std::fprintf(stderr, "terngrad train: %s\n", live.plan().c_str());

  TrainResult r;
  r.data_description = data.description;
  r.start_step = start;
  r.steps = total;
  r.workers = workers;
  for (const auto& l : layers) r.layers.push_back({l.name, l.numel, false, 0, 0, 0.0, 0.0});
  Sampler sampler(data.train.count, c.seed);
  const int shard = c.batch / workers;
  double loss_since_eval = 0.0;
  long steps_since_eval = 0;
  double last_acc = -1.0;
  auto bar_time = Clock::now();
  long images_since_bar = 0;

  auto write_now = [&] {
    if (leader && !c.out_dir.empty()) {
      r.final_weights = flat_weights(*model);
      r.wall_s = seconds_since(wall0);
      write_outputs(c.out_dir, c, r);
    }
  };
  auto do_eval = [&](long step) {
    if (!leader) return;
    Evaluation e = evaluate(*model, replicas, data, device);
    r.evals.push_back({step, steps_since_eval ? loss_since_eval / steps_since_eval : 0.0, e.loss, e.accuracy});
    loss_since_eval = 0.0;
    steps_since_eval = 0;
    last_acc = e.accuracy;
  };

  for (long step = start; step < total; ++step) {
    if (distributed && (c.fault_rank < 0 || c.fault_rank == c.rank)) {
      if (step == c.fault_kill_at_step) std::raise(SIGKILL);
      if (step == c.fault_hang_at_step)
        for (;;) ::pause();
    }
    StepRecord rec;
    rec.step = step;
    rec.lr = learning_rate(c, step);
    for (auto& g : optimizer->param_groups()) g.options().set_lr(rec.lr);

    auto t0 = Clock::now();
    int first = distributed ? c.rank : 0, last = distributed ? c.rank + 1 : workers;
    std::vector<std::vector<std::vector<float>>> grads(static_cast<std::size_t>(last - first));
    std::vector<float> losses(static_cast<std::size_t>(last - first));
    // Each worker's images (the sampler caches an epoch's permutation: read here, on one thread).
    std::vector<std::vector<std::size_t>> idx(grads.size()), salt(grads.size());
    for (int w = first; w < last; ++w)
      for (int i = 0; i < shard; ++i) {
        std::uint64_t pos = static_cast<std::uint64_t>(step) * c.batch + static_cast<std::uint64_t>(w * shard + i);
        idx[static_cast<std::size_t>(w - first)].push_back(sampler.at(pos));
        salt[static_cast<std::size_t>(w - first)].push_back(pos);
      }
    // Worker w's gradients (and the decay term) on net, whose parameters are ps, into grads/losses[w - first].
    auto compute_worker = [&](Net& net, const std::vector<torch::Tensor>& ps, int w) {
      const auto at = static_cast<std::size_t>(w - first);
      auto x = make_images(data, data.train, idx[at], salt[at], true, c.seed).to(device);
      auto y = make_labels(data.train, idx[at]).to(device);
      net.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(net.forward(x), y);
      loss.backward();
      losses[at] = loss.item<float>();
      std::vector<std::vector<float>> g;
      for (std::size_t t = 0; t < ps.size(); ++t) {
        torch::Tensor p = ps[t];
        std::vector<float> v(static_cast<std::size_t>(p.numel()), 0.0f);
        if (decayed[t]) {  // d/dw of wd/2 ||w||^2 joins the gradient that is exchanged
          torch::NoGradGuard no_grad;
          if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
          p.mutable_grad().add_(p.detach(), c.weight_decay);
        }
        if (p.grad().defined()) {
          auto gc = p.grad().to(torch::kCPU).contiguous();  // the exchange runs on the CPU
          std::memcpy(v.data(), gc.data_ptr<float>(), v.size() * sizeof(float));
        }
        g.push_back(std::move(v));
      }
      grads[at] = std::move(g);
    };
    if (replicas.empty()) {
      for (int w = first; w < last; ++w) compute_worker(*model, params, w);
    } else {  // thread k computes workers k, k + T, ...; each worker's bits do not depend on which thread
      std::vector<std::exception_ptr> errors(static_cast<std::size_t>(sim_threads));
      std::vector<std::thread> pool;
      for (int k = 1; k < sim_threads; ++k)
        pool.emplace_back([&, k] {
          try {
            // a new thread starts with OpenMP's default team size, not torch::set_num_threads(c.threads):
            // set it, so each thread's operations run as the single-threaded run's do
            at::init_num_threads();
            Net& net = *replicas[static_cast<std::size_t>(k - 1)];
            std::vector<torch::Tensor> ps = net.parameters();
            {
              torch::NoGradGuard no_grad;
              for (std::size_t t = 0; t < ps.size(); ++t) ps[t].copy_(params[t]);
            }
            for (int w = first + k; w < last; w += sim_threads) compute_worker(net, ps, w);
          } catch (...) {
            errors[static_cast<std::size_t>(k)] = std::current_exception();
          }
        });
      try {
        for (int w = first; w < last; w += sim_threads) compute_worker(*model, params, w);
      } catch (...) {
        errors[0] = std::current_exception();
      }
      for (auto& t : pool) t.join();
      for (auto& e : errors)  // the lowest thread's error, so the message does not depend on timing
        if (e) std::rethrow_exception(e);
    }
    rec.compute_s = seconds_since(t0);

    StepStats st;
    st.keep_buffers = step == c.dump_step;
    std::vector<std::vector<float>> avg;
    auto spans_of = [](const std::vector<std::vector<float>>& g) {
      std::vector<std::span<const float>> s;
      for (const auto& v : g) s.emplace_back(v);
      return s;
    };
    try {
      if (distributed) {
        avg = exchange.exchange(spans_of(grads[0]), losses[0], *transport, static_cast<std::uint32_t>(step), &st);
      } else {
        std::vector<std::vector<std::span<const float>>> all;
        for (const auto& g : grads) all.push_back(spans_of(g));
        avg = exchange.simulate(all, losses, static_cast<std::uint32_t>(step), &st);
      }
    } catch (const tg::NonFiniteError& e) {  // the model diverged: say where, in the layer's name
      std::string layer = e.tensor() < layers.size() ? layers[e.tensor()].name : "tensor " + std::to_string(e.tensor());
      throw std::runtime_error("training diverged at step " + std::to_string(step) + ": the gradient of " + layer +
                               " is not finite at element " + std::to_string(e.index()) + " (mean loss since the last evaluation: " +
                               std::to_string(loss_since_eval / std::max<long>(1, steps_since_eval)) +
                               "); try a smaller --lr or another codec setting");
    }
    if (leader) live.after_exchange(step, spans_of(grads[0]), st);
    if (st.keep_buffers && leader) {
      std::vector<std::vector<std::span<const float>>> mine;
      for (const auto& g : grads) mine.push_back(spans_of(g));
      dump_exchange(c.out_dir + "/dump-step" + std::to_string(step), step, layers, xo, first, mine, st);
    }
    auto to = Clock::now();
    for (std::size_t t = 0; t < params.size(); ++t) {
      auto src = torch::from_blob(avg[t].data(), params[t].sizes(), torch::kFloat32);
      if (!params[t].grad().defined()) params[t].mutable_grad() = torch::zeros_like(params[t]);
      params[t].mutable_grad().copy_(src);
    }
    optimizer->step();
    rec.optimizer_s = seconds_since(to);
    rec.encode_s = st.encode_s;
    rec.comm_s = st.comm_s;
    rec.wait_s = st.wait_s;
    rec.wire_s = st.wire_s;
    rec.decode_s = st.decode_s;
    rec.payload_bytes = st.payload_bytes();
    rec.float_bytes = st.float_bytes();
    rec.uplink_bytes = st.wire.uplink;
    rec.downlink_bytes = st.wire.downlink;
    rec.loss = st.loss;
    if (!std::isfinite(rec.loss))
      throw std::runtime_error("training diverged: loss is " + std::to_string(rec.loss) + " at step " + std::to_string(step));
    loss_since_eval += rec.loss;
    ++steps_since_eval;
    r.compute_s += rec.compute_s;
    r.encode_s += rec.encode_s;
    r.comm_s += rec.comm_s;
    r.wait_s += rec.wait_s;
    r.wire_s += rec.wire_s;
    r.uplink_bytes = rec.uplink_bytes;
    r.downlink_bytes = rec.downlink_bytes;
    r.decode_s += rec.decode_s;
    r.optimizer_s += rec.optimizer_s;
    r.step_records.push_back(rec);
    for (std::size_t t = 0; t < st.layers.size(); ++t) {
      const LayerStats& ls = st.layers[t];
      LayerSummary& sum = r.layers[t];
      sum.ternary = ls.ternary;
      sum.payload_bytes = ls.payload_bytes;
      sum.float_bytes = ls.float_bytes;
      sum.mean_sparsity += ls.sparsity;
      sum.mean_scalar += ls.scalar;
      if (ls.ternary) r.layer_records.push_back({step, static_cast<std::uint32_t>(t), ls.sparsity, ls.scalar});
    }

    long done = step + 1;
    bool eval_now = done == total || (c.eval_every > 0 && done % c.eval_every == 0);
    if (eval_now) do_eval(done);
    if (!c.checkpoint.empty() && (done == total || (c.checkpoint_every > 0 && done % c.checkpoint_every == 0))) {
      Residuals residuals;  // every rank takes part in gathering them; rank 0 writes
      if (keeps_residuals) residuals = collect_residuals(exchange, workers, distributed ? transport.get() : nullptr);
      if (leader) save_checkpoint(c.checkpoint, *model, *optimizer, done, fp, keeps_residuals ? &residuals : nullptr);
    }
    if (eval_now && done != total) {
      long n = static_cast<long>(r.step_records.size());
      for (auto& l : r.layers) l.mean_sparsity /= static_cast<double>(n), l.mean_scalar /= static_cast<double>(n);
      write_now();
      for (auto& l : r.layers) l.mean_sparsity *= static_cast<double>(n), l.mean_scalar *= static_cast<double>(n);
    }
    images_since_bar += c.batch;
    if (c.progress && leader && (seconds_since(bar_time) > 0.5 || done == total)) {
      progress_bar(done, total, rec.loss, last_acc, images_since_bar / seconds_since(bar_time));
      bar_time = Clock::now();
      images_since_bar = 0;
    }
  }
  if (c.progress && leader) std::fputs("\n", stderr);
  long n = static_cast<long>(r.step_records.size());
  if (n > 0)
    for (auto& l : r.layers) l.mean_sparsity /= static_cast<double>(n), l.mean_scalar /= static_cast<double>(n);
  if (r.evals.empty() && leader) do_eval(total);
  r.final_test_accuracy = leader && !r.evals.empty() ? r.evals.back().test_accuracy : 0.0;
  r.final_weights = flat_weights(*model);
  if (distributed) r.rank_records = gather_rank_times(*transport, r.step_records);
  if (distributed && !ranks_agree(*transport, hash_weights(r.final_weights)))
    throw std::runtime_error("rank " + std::to_string(c.rank) + ": the ranks' final weights differ (non-deterministic gradients?)");
  r.live_checks = live.checks_run(), r.live_checks_failed = live.checks_failed(), r.live_check_s = live.seconds();
  r.wall_s = seconds_since(wall0);
  r.finished = true;
  if (leader && !c.out_dir.empty()) write_outputs(c.out_dir, c, r);
  return r;
}

}  // namespace tg::train
