// terngrad-bench: c10d ProcessGroupGloo transport for multi-process TernGrad runs on loopback.
// Rendezvous through the project's store (tg/train/store.hpp, hosted by rank 0 or by `terngrad
// train-store`; c10d::TCPStore took lengths from the network as allocation sizes); every collective is
// bounded by the process group timeout, so a dead or hung peer ends in an error.
#include "gloo_transport.hpp"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/torch.h>

#include <glog/logging.h>

#include <chrono>
#include <cstring>
#include <stdexcept>

#include "tg/train/store.hpp"
#include "tg/train/trainer.hpp"

namespace tg::train {
namespace {

std::string short_message(const c10::Error& e) { return e.what_without_backtrace(); }

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

// c10d's Store interface over the project's store client: every length checked, every wait bounded,
// garbage from the peer a typed error (tg::train::store), never an abort.
class ProjectStore : public c10d::Store {
 public:
  ProjectStore(const std::string& addr, int port, std::chrono::milliseconds timeout)
      : c10d::Store(timeout), client_(addr, port, seconds(timeout)) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override { client_.set(key, value); }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    return client_.compare_set(key, expected, desired);
  }
  std::vector<uint8_t> get(const std::string& key) override { return client_.get(key); }
  int64_t add(const std::string& key, int64_t value) override { return client_.add(key, value); }
  bool deleteKey(const std::string& key) override { return client_.del(key); }
  bool check(const std::vector<std::string>& keys) override { return client_.check(keys); }
  int64_t getNumKeys() override { return client_.num_keys(); }
  void wait(const std::vector<std::string>& keys) override { client_.wait(keys, seconds(timeout_)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    client_.wait(keys, seconds(timeout == kNoTimeout ? timeout_ : timeout));
  }
  void setTimeout(const std::chrono::milliseconds& timeout) override {
    c10d::Store::setTimeout(timeout);
    client_.set_timeout(seconds(timeout));
  }

 private:
  static double seconds(std::chrono::milliseconds ms) { return ms.count() > 0 ? ms.count() / 1000.0 : 300.0; }
  store::StoreClient client_;
};

class GlooTransport : public Transport {
 public:
  explicit GlooTransport(const RendezvousOptions& o) : o_(o) {
    auto timeout = std::chrono::milliseconds(static_cast<long>(o.timeout_s * 1000.0));
    // c10d reports failures through exceptions (turned into one line below) and also logs them
    // through glog with stack context; keep stderr to the one line.
    FLAGS_minloglevel = google::GLOG_FATAL;
    try {
      if (!o.external_store && o.rank == 0) server_ = std::make_unique<store::StoreServer>(o.addr, o.port);
      store_ = c10::make_intrusive<ProjectStore>(o.addr, o.port, timeout);
    } catch (const std::exception& e) {
      throw std::runtime_error(where() + "cannot reach the rendezvous store at " + o.addr + ":" + std::to_string(o.port) +
                               " within " + seconds_text(o.timeout_s) + ": " + e.what());
    }
    std::fprintf(stderr, "%sreached the store at %s:%d, waiting for %d ranks (at most %.0f s)\n", where().c_str(),
                 o.addr.c_str(), o.port, o.world_size, o.timeout_s);
    try {
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(o.addr));
      opts->threads = 1;
      pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, o.rank, o.world_size, opts);
    } catch (const c10::Error& e) {
      throw std::runtime_error(where() + "rendezvous of " + std::to_string(o.world_size) +
                               " ranks did not complete within " + seconds_text(o.timeout_s) +
                               " (a rank never joined, or the store went away): " + short_message(e));
    } catch (const store::StoreProtocolError& e) {
      throw std::runtime_error(where() + "rendezvous of " + std::to_string(o.world_size) +
                               " ranks failed: the store peer sent a malformed message: " + e.what());
    } catch (const store::StoreTimeout& e) {
      throw std::runtime_error(where() + "rendezvous of " + std::to_string(o.world_size) +
                               " ranks did not complete within " + seconds_text(o.timeout_s) +
                               " (a rank never joined): " + e.what());
    } catch (const std::exception& e) {
      throw std::runtime_error(where() + "rendezvous of " + std::to_string(o.world_size) + " ranks failed (lost the store at " +
                               o.addr + ":" + std::to_string(o.port) + "?): " + e.what());
    }
  }

  int rank() const override { return o_.rank; }
  int world_size() const override { return o_.world_size; }

  void allreduce_max(std::span<float> values) override {
    auto t = torch::from_blob(values.data(), {static_cast<long>(values.size())}, torch::kFloat32).clone();
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions ao;
    ao.reduceOp = c10d::ReduceOp::MAX;
    run("allreduce(max)", [&] { return pg_->allreduce(v, ao); });
    std::memcpy(values.data(), v[0].data_ptr<float>(), values.size() * sizeof(float));
  }

  // Gloo's CPU allreduce (ring-based); its summation order is Gloo's, not rank order.
  void allreduce_sum(std::span<float> values) override {
    auto t = torch::from_blob(values.data(), {static_cast<long>(values.size())}, torch::kFloat32).clone();
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions ao;
    ao.reduceOp = c10d::ReduceOp::SUM;
    run("allreduce(sum)", [&] { return pg_->allreduce(v, ao); });
    std::memcpy(values.data(), v[0].data_ptr<float>(), values.size() * sizeof(float));
  }

  void barrier() override {
    run("barrier", [&] { return pg_->barrier(); });
  }

  std::vector<std::vector<std::uint8_t>> allgather(std::span<const std::uint8_t> mine) override {
    auto in = torch::empty({static_cast<long>(mine.size())}, torch::kUInt8);
    std::memcpy(in.data_ptr<std::uint8_t>(), mine.data(), mine.size());
    std::vector<at::Tensor> inputs{in};
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < o_.world_size; ++r) outputs[0].push_back(torch::empty_like(in));
    run("allgather", [&] { return pg_->allgather(outputs, inputs); });
    std::vector<std::vector<std::uint8_t>> result;
    for (const auto& t : outputs[0]) {
      const std::uint8_t* p = t.data_ptr<std::uint8_t>();
      result.emplace_back(p, p + t.numel());
    }
    return result;
  }

 private:
  std::string where() const {
    return "rank " + std::to_string(o_.rank) + " of " + std::to_string(o_.world_size) + ": ";
  }
  template <class F>
  void run(const char* op, F&& start) {
    try {
      auto work = start();
      work->wait(std::chrono::milliseconds(static_cast<long>(o_.timeout_s * 1000.0)));
    } catch (const c10::Error& e) {
      throw std::runtime_error(where() + op + " failed (a peer died, hung or left; bound " +
                               seconds_text(o_.timeout_s) + "): " + short_message(e));
    } catch (const std::exception& e) {
      throw std::runtime_error(where() + op + " failed (a peer died, hung or left; bound " +
                               seconds_text(o_.timeout_s) + "): " + e.what());
    }
  }

  RendezvousOptions o_;
  std::unique_ptr<store::StoreServer> server_;  // rank 0 hosts it unless --external-store
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

}  // namespace

std::unique_ptr<Transport> make_gloo_transport(const RendezvousOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size)
    throw std::invalid_argument("rank " + std::to_string(options.rank) + " is not in [0, world size " +
                                std::to_string(options.world_size) + ")");
  if (options.port < 1 || options.port > 65535)
    throw std::invalid_argument("port " + std::to_string(options.port) + " is not in [1, 65535]");
  if (!(options.timeout_s > 0.0)) throw std::invalid_argument("timeout must be positive");
  return std::make_unique<GlooTransport>(options);
}

bool ranks_agree(Transport& transport, std::uint64_t value) {
  std::uint8_t bytes[8];
  std::memcpy(bytes, &value, 8);
  auto all = transport.allgather(std::span<const std::uint8_t>(bytes, 8));
  for (const auto& b : all)
    if (std::memcmp(b.data(), bytes, 8) != 0) return false;
  return true;
}

int run_store(const std::string& addr, int port, int world_size, double timeout_s) {
  FLAGS_minloglevel = google::GLOG_FATAL;
  if (port < 1 || port > 65535) throw std::invalid_argument("port " + std::to_string(port) + " is not in [1, 65535]");
  std::unique_ptr<store::StoreServer> server;
  try {
    server = std::make_unique<store::StoreServer>(addr, port);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot host the store on " + addr + ":" + std::to_string(port) + ": " + e.what());
  }
  std::fprintf(stderr, "terngrad train-store: serving %s:%d for %d ranks, for at most %.0f s\n", addr.c_str(), port,
               world_size, timeout_s);
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long>(timeout_s * 1000.0)));
  return 0;
}

}  // namespace tg::train
