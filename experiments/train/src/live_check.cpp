// terngrad-bench: `terngrad train --live-check`: the battery's per-gradient checks on the gradients a
// run sends, and the dump of one step's exchange (see live_check.hpp).
#include "tg/train/live_check.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tg/atomic_file.hpp"
#include "tg/format.hpp"
#include "tg/split.hpp"
#include "tg/strf.hpp"
#include "tg/verify/battery.hpp"
#include "tg/verify/sampler.hpp"

namespace tg::train {
namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

std::string fmt_g(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

std::vector<std::size_t> choose_tensors(const std::string& spec, const GradientExchange& x) {
  const auto& layers = x.layers();
  std::vector<std::size_t> out;
  if (spec == "largest") {
    std::size_t best = layers.size();
    for (std::size_t t = 0; t < layers.size(); ++t)
      if (x.is_ternary(t) && (best == layers.size() || layers[t].numel > layers[best].numel)) best = t;
    if (best == layers.size()) throw std::invalid_argument("--live-check: no tensor of this run travels ternary");
    return {best};
  }
  if (spec == "all") {
    for (std::size_t t = 0; t < layers.size(); ++t)
      if (x.is_ternary(t)) out.push_back(t);
    if (out.empty()) throw std::invalid_argument("--live-check: no tensor of this run travels ternary");
    return out;
  }
  if (spec.empty()) throw std::invalid_argument("--live-check-layers: empty list");
  const std::vector<std::string> items = tg::split_commas(spec);  // every item, empty ones included ("a," is two)
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string& item = items[i];
    if (item.empty())
      throw std::invalid_argument("--live-check-layers: has an empty item in '" + spec.substr(0, 80) +
                                  "' (a comma-separated list of tensor names or indices, no item empty)");
    if (std::find(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(i), item) != items.begin() + static_cast<std::ptrdiff_t>(i))
      throw std::invalid_argument("--live-check-layers: lists '" + item.substr(0, 40) + "' twice (give each once)");
    std::size_t t = layers.size();
    if (all_digits(item)) {
      t = std::stoul(item);  // at most 9 digits
    } else {
      for (std::size_t k = 0; k < layers.size(); ++k)
        if (layers[k].name == item) t = k;
    }
    if (t >= layers.size()) {
      std::string names;
      for (const auto& l : layers) names += (names.empty() ? "" : ", ") + l.name;
      throw std::invalid_argument("--live-check-layers: no tensor '" + item + "' (the model has " +
                                  std::to_string(layers.size()) + ": " + names + ")");
    }
    if (!x.is_ternary(t))
      throw std::invalid_argument("--live-check-layers: tensor " + layers[t].name +
                                  " travels as float32 (--float-below or --quantize-last), there is nothing to check");
    if (std::find(out.begin(), out.end(), t) != out.end())
      throw std::invalid_argument("--live-check-layers: tensor " + layers[t].name + " is listed twice (by name and by index)");
    out.push_back(t);
  }
  return out;
}

}  // namespace

const std::string& live_check_csv_header() {
  static const std::string h = "step,layer,check,kind,statistic,p,alpha,verdict,seconds,detail\n";
  return h;
}

LiveChecker::LiveChecker(const LiveCheckConfig& config, const GradientExchange& exchange,
                         const ExchangeOptions& options, std::shared_ptr<const Codec> codec, long total_steps,
                         std::string out_dir, long start_step)
    : config_(config), layers_(exchange.layers()), options_(options), codec_(std::move(codec)),
      out_dir_(std::move(out_dir)) {
  if (config_.every < 0) throw std::invalid_argument("--live-check must be >= 0 (0: off)");
  if (!enabled()) return;
  if (options_.codec != GradCodec::terngrad) throw std::invalid_argument("--live-check needs --codec terngrad");
  if (config_.draws < 2) throw std::invalid_argument("--live-check-draws must be at least 2");
  if (!(config_.alpha_total > 0 && config_.alpha_total < 1))
    throw std::invalid_argument("--live-check-alpha must be in (0, 1)");
  if (!(config_.beta > 0 && config_.beta < 1)) throw std::invalid_argument("live check beta must be in (0, 1)");
  if (config_.fail != "continue" && config_.fail != "stop")
    throw std::invalid_argument("--live-check-fail must be continue or stop, got '" + config_.fail + "'");
  if (total_steps < 1) throw std::invalid_argument("live check: the run has no steps");
  if (!codec_) throw std::invalid_argument("live check needs a codec");
  chosen_ = choose_tensors(config_.layers, exchange);
  planned_ = (total_steps + config_.every - 1) / config_.every;  // steps 0, every, ... below total_steps
  alpha_each_ = config_.alpha_total / static_cast<double>(planned_) / static_cast<double>(chosen_.size());
  if (start_step > 0 && !out_dir_.empty()) {
    // A resumed run keeps the rows of the checks before its first step (same plan, same keys).
    std::ifstream in(out_dir_ + "/live_checks.csv", std::ios::binary);
    std::string line;
    if (in && std::getline(in, line) && line + "\n" == live_check_csv_header())
      while (std::getline(in, line)) {
        char* end = nullptr;
        long s = std::strtol(line.c_str(), &end, 10);
        if (end != line.c_str() && *end == ',' && s < start_step) earlier_ += line + "\n";
      }
  }
}

std::string LiveChecker::plan() const {
  std::string names;
  for (std::size_t t : chosen_) names += (names.empty() ? "" : ", ") + layers_[t].name;
  return tg::strf("live check: every %ld steps, %u draws of %s (worker 0); alpha_total %g over %ld planned checks x %zu "
                  "tensor(s): alpha %.3g each (Bonferroni); on failure: %s",
                  config_.every, config_.draws, names.c_str(), config_.alpha_total, planned_, chosen_.size(), alpha_each_,
                  config_.fail.c_str());
}

bool LiveChecker::after_exchange(long step, const std::vector<std::span<const float>>& grads, const StepStats& stats) {
  if (!due(step)) return true;
  if (grads.size() != layers_.size() || stats.layers.size() != layers_.size())
    throw std::logic_error("live check: " + std::to_string(grads.size()) + " gradients and " +
                           std::to_string(stats.layers.size()) + " tensor statistics for " +
                           std::to_string(layers_.size()) + " tensors");
  const std::uint32_t first = static_cast<std::uint32_t>(
      (static_cast<std::uint64_t>(step / config_.every) * config_.draws) & 0xffffffffULL);
  const std::uint64_t seed = options_.seed ^ kLiveSeedXor;
  bool ok = true;
  std::string failures;
  for (std::size_t t : chosen_) {
    auto t0 = std::chrono::steady_clock::now();
    std::span<const float> g = grads[t];
    const std::size_t n = g.size();
    const float shared = stats.layers[t].scalar;
    std::vector<std::int8_t> trits(static_cast<std::size_t>(config_.draws) * n);
    std::vector<float> scalars(config_.draws);
    for (std::uint32_t j = 0; j < config_.draws; ++j) {
      StreamKey key{seed, 0, static_cast<std::uint32_t>(t), first + j};
      std::vector<std::uint8_t> p = encode_with_scalar(*codec_, g, options_.params, key, shared);
      Header h;
      std::vector<std::int8_t> d = decode_trits(*codec_, p, &h);
      if (d.size() != n) throw std::logic_error("live check: decoded trit count differs from the tensor's");
      std::memcpy(trits.data() + static_cast<std::size_t>(j) * n, d.data(), n);
      scalars[j] = h.scalar;
    }
    verify::TensorSamples ts{g, trits, scalars, shared, {}};
    verify::SampleCheckOptions so;
    so.params = options_.params;
    so.alpha_total = alpha_each_;
    so.beta = config_.beta;
    so.independence = true;
    so.family = layers_[t].name;
    verify::Result res = verify::check_samples(std::span<const verify::TensorSamples>(&ts, 1), so);
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    seconds_ += sec;
    for (const auto& r : res.rows) {
      LiveCheckRow row;
      row.step = step;
      row.layer = layers_[t].name;
      row.check = r.check;
      row.kind = r.kind;
      row.statistic = r.statistic;
      row.p = std::isfinite(r.p) ? fmt_g(r.p) : r.pvalue;
      row.alpha = r.alpha;
      row.pass = r.pass;
      row.seconds = sec;
      row.detail = r.detail;
      rows_.push_back(row);
    }
    if (!res.pass()) {
      ok = false;
      std::string checks;
      for (const auto& c : res.failed_checks()) checks += (checks.empty() ? "" : ", ") + c;
      std::string first_detail;
      for (const auto& r : res.rows)
        if (!r.pass && first_detail.empty()) first_detail = r.check + ": " + r.detail;
      std::string msg = "live check FAILED at step " + std::to_string(step) + ", layer " + layers_[t].name + ": " +
                        checks + " (alpha " + fmt_g(alpha_each_) + "; " + first_detail + ")";
      std::fprintf(stderr, "terngrad train: %s\n", msg.c_str());
      std::fflush(stderr);
      failures += (failures.empty() ? "" : "; ") + msg;
    }
  }
  ++checks_run_;
  if (!ok) ++checks_failed_;
  write_csv();
  if (!ok && config_.fail == "stop") throw LiveCheckFailed(failures + " (--live-check-fail stop)");
  return ok;
}

void LiveChecker::write_csv() const {
  if (out_dir_.empty()) return;
  std::ostringstream s;
  s << live_check_csv_header() << earlier_;
  for (const auto& r : rows_)
    s << r.step << ',' << csv_field(r.layer) << ',' << r.check << ',' << r.kind << ',' << csv_field(r.statistic) << ','
      << csv_field(r.p) << ',' << fmt_g(r.alpha) << ',' << (r.pass ? "pass" : "fail") << ',' << fmt_g(r.seconds) << ','
      << csv_field(r.detail) << '\n';
  std::filesystem::create_directories(out_dir_);
  tg::write_file_atomic(out_dir_ + "/live_checks.csv", s.str());
}

std::shared_ptr<const Codec> make_exchange_codec(const std::string& fault_codec) {
  if (fault_codec.empty()) return std::shared_ptr<const Codec>(make_optimized_codec(1));
  return verify::make_mutant_codec(fault_codec);
}

void dump_exchange(const std::string& dir, long step, const std::vector<LayerInfo>& layers,
                   const ExchangeOptions& options, int first_worker,
                   const std::vector<std::vector<std::span<const float>>>& grads, const StepStats& stats) {
  if (dir.empty()) throw std::invalid_argument("--dump-step needs --out");
  if (stats.layers.size() != layers.size()) throw std::logic_error("dump: tensor statistics do not match the model");
  std::filesystem::create_directories(dir);
  nlohmann::json j = {{"seed", options.seed}, {"step", step}, {"workers", stats.buffers.size()}, {"tensors", nlohmann::json::array()}};
  for (std::size_t w = 0; w < stats.buffers.size(); ++w) {
    std::size_t at = 4;  // the worker's loss, float32
    for (std::size_t t = 0; t < layers.size(); ++t) {
      std::size_t n = stats.layers[t].payload_bytes;
      if (at + n > stats.buffers[w].size()) throw std::logic_error("dump: buffer shorter than its payloads");
      tg::write_file_atomic(dir + "/payload-w" + std::to_string(w) + "-t" + std::to_string(t) + ".bin",
                            std::string_view(reinterpret_cast<const char*>(stats.buffers[w].data() + at), n));
      at += n;
    }
  }
  for (std::size_t i = 0; i < grads.size(); ++i)
    for (std::size_t t = 0; t < grads[i].size(); ++t)
      tg::write_file_atomic(dir + "/grad-w" + std::to_string(first_worker + static_cast<int>(i)) + "-t" +
                                std::to_string(t) + ".f32",
                            std::string_view(reinterpret_cast<const char*>(grads[i][t].data()), 4 * grads[i][t].size()));
  for (std::size_t t = 0; t < layers.size(); ++t)
    j["tensors"].push_back({{"name", layers[t].name}, {"numel", layers[t].numel}, {"ternary", stats.layers[t].ternary},
                            {"scalar", stats.layers[t].scalar}, {"payload_bytes", stats.layers[t].payload_bytes}});
  tg::write_file_atomic(dir + "/dump.json", j.dump(1) + "\n");
}

}  // namespace tg::train
