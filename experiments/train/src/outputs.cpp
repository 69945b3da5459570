// terngrad-bench: the files a training run writes (no LibTorch): steps.csv (per step), layers.csv (per
// ternary tensor per step), evals.csv (test curve), ranks.csv (multi-process: every rank's time split
// per step), run.json (settings, data, totals, per-layer table) and, on request, weights.f32 (final
// parameters, raw little-endian float32). Each is written atomically.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "tg/atomic_file.hpp"
#include "tg/train/trainer.hpp"

namespace tg::train {
namespace {

// On a resumed run (start_step > 0), the rows an earlier run wrote to the same file for steps before
// `before` (steps are 0-based; an evaluation row is numbered by the steps done), so that the curves
// continue instead of starting over. Read bounded (a curve file over
// 1 GiB, or another file's header, contributes nothing).
std::string earlier_rows(const std::string& path, const std::string& header, long start_step, long before) {
  if (start_step <= 0) return {};
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) > (std::uintmax_t{1} << 30))
    return {};
  std::ifstream in(path, std::ios::binary);
  std::string line, out;
  if (!std::getline(in, line) || line + "\n" != header) return {};
  while (std::getline(in, line)) {
    char* end = nullptr;
    long step = std::strtol(line.c_str(), &end, 10);
    if (end == line.c_str() || *end != ',') continue;
    if (step < before) out += line + "\n";
  }
  return out;
}

}  // namespace

void write_outputs(const std::string& dir, const TrainConfig& c, const TrainResult& r) {
  std::ostringstream steps;
  steps.precision(9);
  const std::string steps_header =
      "step,loss,lr,compute_s,encode_s,comm_s,decode_s,optimizer_s,payload_bytes,float_bytes,wait_s,wire_s,"
      "uplink_bytes,downlink_bytes\n";
  steps << steps_header << earlier_rows(dir + "/steps.csv", steps_header, r.start_step, r.start_step);
  for (const auto& s : r.step_records)
    steps << s.step << ',' << s.loss << ',' << s.lr << ',' << s.compute_s << ',' << s.encode_s << ',' << s.comm_s << ','
          << s.decode_s << ',' << s.optimizer_s << ',' << s.payload_bytes << ',' << s.float_bytes << ',' << s.wait_s << ','
          << s.wire_s << ',' << s.uplink_bytes << ',' << s.downlink_bytes << '\n';
  tg::write_file_atomic(dir + "/steps.csv", steps.str());

  if (!r.rank_records.empty()) {
    std::ostringstream ranks;
    ranks.precision(9);
    const std::string ranks_header = "step,rank,compute_s,encode_s,wait_s,wire_s,decode_s,optimizer_s\n";
    ranks << ranks_header << earlier_rows(dir + "/ranks.csv", ranks_header, r.start_step, r.start_step);
    for (const auto& t : r.rank_records)
      ranks << t.step << ',' << t.rank << ',' << t.compute_s << ',' << t.encode_s << ',' << t.wait_s << ',' << t.wire_s
            << ',' << t.decode_s << ',' << t.optimizer_s << '\n';
    tg::write_file_atomic(dir + "/ranks.csv", ranks.str());
  }

  std::ostringstream layers;
  layers.precision(9);
  const std::string layers_header = "step,layer,name,sparsity,scalar\n";
  layers << layers_header << earlier_rows(dir + "/layers.csv", layers_header, r.start_step, r.start_step);
  for (const auto& l : r.layer_records)
    layers << l.step << ',' << l.layer << ',' << r.layers[l.layer].name << ',' << l.sparsity << ',' << l.scalar << '\n';
  tg::write_file_atomic(dir + "/layers.csv", layers.str());

  std::ostringstream evals;
  evals.precision(9);
  const std::string evals_header = "step,train_loss,test_loss,test_accuracy\n";
  evals << evals_header << earlier_rows(dir + "/evals.csv", evals_header, r.start_step, r.start_step + 1);
  for (const auto& e : r.evals) evals << e.step << ',' << e.train_loss << ',' << e.test_loss << ',' << e.test_accuracy << '\n';
  tg::write_file_atomic(dir + "/evals.csv", evals.str());

  nlohmann::json j;
  j["config"] = {{"model", c.model}, {"data", c.data}, {"data_dir", c.data_dir}, {"train_limit", c.train_limit},
                 {"test_limit", c.test_limit}, {"codec", c.codec}, {"packing", c.packing}, {"layerwise", c.layerwise}, {"shared_scalar", c.shared_scalar},
                 {"clip", c.clip}, {"c", c.c}, {"float_below", c.float_below}, {"quantize_last", c.quantize_last},
                 {"qsgd_levels", c.qsgd_levels}, {"qsgd_bucket", c.qsgd_bucket}, {"float_exchange", c.float_exchange},
                 {"optimizer", c.optimizer}, {"lr", c.lr}, {"momentum", c.momentum}, {"weight_decay", c.weight_decay},
                 {"weight_decay_in", c.weight_decay_in},
                 {"lr_policy", c.lr_policy}, {"gamma", c.gamma}, {"power", c.power}, {"step_size", c.step_size},
                 {"batch", c.batch}, {"workers", r.workers}, {"steps", r.steps}, {"seed", c.seed}, {"threads", c.threads}, {"sim_threads", c.sim_threads},
                 {"mode", c.world_size > 0 ? "c10d-gloo" : "simulation"}, {"resume", c.resume}};
  j["data_description"] = r.data_description;
  j["start_step"] = r.start_step;
  j["steps_done"] = r.step_records.size();
  // A snapshot written during the run (every --eval-every steps) says it is one: a folder left by a run that was
  // interrupted or failed is not taken for a finished run's
  j["finished"] = r.finished;
  if (!r.finished)
    j["status"] = "snapshot at step " + std::to_string(r.start_step + static_cast<long>(r.step_records.size())) + " of " +
                  std::to_string(r.steps) + ", written during the run: a run that stopped here was interrupted or failed";
  j["time_s"] = {{"compute", r.compute_s}, {"encode", r.encode_s}, {"communicate", r.comm_s}, {"wait", r.wait_s},
                 {"wire", r.wire_s}, {"decode", r.decode_s}, {"optimizer", r.optimizer_s}, {"wall", r.wall_s}};
  if (!r.rank_records.empty()) {  // totals per rank over this run's steps
    std::vector<nlohmann::json> per_rank;
    for (const auto& t : r.rank_records) {
      while (per_rank.size() <= static_cast<std::size_t>(t.rank))
        per_rank.push_back({{"rank", per_rank.size()}, {"compute", 0.0}, {"encode", 0.0}, {"wait", 0.0}, {"wire", 0.0},
                            {"decode", 0.0}, {"optimizer", 0.0}});
      auto& p = per_rank[static_cast<std::size_t>(t.rank)];
      p["compute"] = p["compute"].get<double>() + t.compute_s;
      p["encode"] = p["encode"].get<double>() + t.encode_s;
      p["wait"] = p["wait"].get<double>() + t.wait_s;
      p["wire"] = p["wire"].get<double>() + t.wire_s;
      p["decode"] = p["decode"].get<double>() + t.decode_s;
      p["optimizer"] = p["optimizer"].get<double>() + t.optimizer_s;
    }
    j["time_s_per_rank"] = per_rank;
  }
  j["final_test_accuracy"] = r.final_test_accuracy;
  nlohmann::json ev = nlohmann::json::array();
  for (const auto& e : r.evals)
    ev.push_back({{"step", e.step}, {"train_loss", e.train_loss}, {"test_loss", e.test_loss}, {"test_accuracy", e.test_accuracy}});
  j["evals"] = ev;
  nlohmann::json ls = nlohmann::json::array();
  std::uint64_t tern_payload = 0, tern_float = 0, all_payload = 0, all_float = 0;
  for (const auto& l : r.layers) {
    ls.push_back({{"name", l.name}, {"numel", l.numel}, {"ternary", l.ternary}, {"payload_bytes", l.payload_bytes},
                  {"float_bytes", l.float_bytes}, {"mean_sparsity", l.mean_sparsity}, {"mean_scalar", l.mean_scalar}});
    all_payload += l.payload_bytes;
    all_float += l.float_bytes;
    if (l.ternary) tern_payload += l.payload_bytes, tern_float += l.float_bytes;
  }
  j["layers"] = ls;
  j["bytes_per_worker_step"] = {{"payload_all", all_payload}, {"float32_all", all_float},
                                {"payload_ternary_layers", tern_payload}, {"float32_ternary_layers", tern_float},
                                {"uplink", r.uplink_bytes}, {"downlink", r.downlink_bytes}};
  if (c.live_check.every > 0)
    j["live_check"] = {{"every", c.live_check.every}, {"draws", c.live_check.draws}, {"alpha_total", c.live_check.alpha_total},
                       {"layers", c.live_check.layers}, {"fail", c.live_check.fail}, {"checks", r.live_checks},
                       {"failed", r.live_checks_failed}, {"seconds", r.live_check_s}};
  tg::write_file_atomic(dir + "/run.json", j.dump(2) + "\n");

  if (!c.save_weights) return;
  std::string w(r.final_weights.size() * sizeof(float), '\0');
  for (std::size_t i = 0; i < r.final_weights.size(); ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &r.final_weights[i], 4);
    for (int b = 0; b < 4; ++b) w[4 * i + b] = static_cast<char>(bits >> (8 * b));
  }
  tg::write_file_atomic(dir + "/weights.f32", w);
}

std::vector<float> read_weights_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open weights file " + path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() % 4 != 0) throw std::runtime_error(path + ": size " + std::to_string(bytes.size()) + " is not a multiple of 4");
  std::vector<float> out(bytes.size() / 4);
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint32_t bits = 0;
    for (int b = 3; b >= 0; --b) bits = (bits << 8) | static_cast<unsigned char>(bytes[4 * i + b]);
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

}  // namespace tg::train
