// terngrad-bench: `terngrad model`: the Section 6 performance model, predicted throughput (images/s) vs
// workers for float32 vs TernGrad from net sizes, compute time, codec rates and network parameters.
//   terngrad model --preset paper                      # AlexNet, GoogLeNet, VGG-A on 1GbE and InfiniBand
//   terngrad model --net lenet --batch 24 --compute-from run/steps.csv --topology shared --bandwidth-gbps 0.1
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "commands.hpp"
#include "tg/model/perf.hpp"
#include "tg/output_file.hpp"
#include "tg/strf.hpp"

namespace tg::app {
namespace {

using namespace tg::model;

struct ModelOptions {
  std::string preset = "none";
  std::string net = "alexnet";
  std::string run_json;
  int batch = 64;
  double compute_s = -1;
  std::string compute_from;
  int warmup = 3;
  std::uint64_t float_below = 0;
  std::string packing = "2bit";
  std::string codec_rates;  // empty: none with --preset paper, else measure
  std::string topology = "ring";
  double bandwidth_gbps = 1.0, latency_us = 50.0;
  int gpus_per_node = 1;
  double intra_gbps = 0.0, intra_latency_us = 0.0;
  int ps_shards = 0;
  std::string ps_downlink = "ternary";
  std::vector<int> workers;
  std::string json, csv;
  bool quiet = false;
};

// One table: a net on a network with its inputs.
struct Config {
  std::string label;          // "alexnet, 1GbE"
  std::string compute_source; // where compute_s came from
  Inputs in;
};

// The rates of --codec-rates: each cell one decimal number of elements/s in [1, 1e15] (a rate of 1e-300 is no
// codec; "0x10" is refused as everywhere else); an empty cell, such as after a trailing comma, is refused.
CodecRates parse_rates(const std::string& text) {
  if (text == "none") return CodecRates{0, 0, 0, 0, "none (codec time not modeled)"};
  if (text == "measure") return measure_codec_rates("optimized", 1);
  std::vector<double> v;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string cell = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::optional<double> x = read_decimal(cell);
    if (!x || !(*x >= 1 && *x <= 1e15))
      throw std::invalid_argument("--codec-rates: '" + cell.substr(0, 40) +
                                  "' is not a decimal number of elements/s in [1, 1e15] (give measure, none or E,A,F,D)");
    v.push_back(*x);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (v.size() != 4)
    throw std::invalid_argument("--codec-rates takes measure, none or 4 rates E,A,F,D in elements/s, got '" + text + "'");
  return CodecRates{v[0], v[1], v[2], v[3], "--codec-rates " + text};
}

// One CSV field, RFC 4180: quoted, with each quote doubled (a net name from run.json may hold a comma or a quote).
std::string csv_field(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + '"';
}

// An img/s figure of the table: one decimal where it is at least 1, else three significant digits (a model with
// a codec rate of a few elements/s predicts 1e-6 img/s, which "%.1f" would show as 0.0).
std::string rate_text(double v, int width) {
  char cell[64];
  std::snprintf(cell, sizeof cell, v >= 1 ? "%*.1f" : "%*.3g", width, v);
  return cell;
}

std::string describe(const Network& n) {
  std::ostringstream s;
  s << to_string(n.topology) << ", " << n.bandwidth_Bps * 8 / 1e9 << " Gbit/s, latency " << n.latency_s * 1e6
    << " us, " << n.gpus_per_node << " worker(s)/node";
  if (n.gpus_per_node > 1) {
    s << ", intra-node ";
    if (n.intra_bandwidth_Bps > 0) s << n.intra_bandwidth_Bps * 8 / 1e9 << " Gbit/s";
    else s << "unlimited";
    s << " latency " << n.intra_latency_s * 1e6 << " us";
  }
  if (n.topology == Topology::ps)
    s << ", " << (n.ps_shards == 0 ? std::string("a server shard on every node") : std::to_string(n.ps_shards) + " server shard(s)")
      << ", TernGrad pull " << (n.ps_float_downlink ? "float32" : "ternary");
  return s.str();
}

nlohmann::json row_json(const Prediction& p) {
  return {{"scheme", to_string(p.scheme)}, {"workers", p.workers},   {"payload_bytes", p.payload_bytes},
          {"compute_s", p.compute_s},      {"encode_s", p.encode_s}, {"comm_s", p.comm_s},
          {"decode_s", p.decode_s},        {"step_s", p.step_s},     {"images_per_s", p.images_per_s}};
}

int run_model(ModelOptions o, const std::vector<const CLI::Option*>& preset_conflicts) {
  if (o.preset == "paper") {
    for (const CLI::Option* opt : preset_conflicts)
      if (opt->count() > 0)
        throw std::invalid_argument(opt->get_name() + " cannot be combined with --preset paper (the preset sets it)");
  } else {
    if (o.compute_s >= 0 && !o.compute_from.empty())
      throw std::invalid_argument("--compute-s and --compute-from both give the compute time per step: give one of them");
    if (o.compute_s < 0 && o.compute_from.empty())
      throw std::invalid_argument("give the compute time per step: --compute-s SECONDS or --compute-from steps.csv (one of them)");
  }
  if (o.workers.empty()) o.workers = default_worker_counts();
  for (int w : o.workers)
    if (w < 1 || w > 1 << 20) throw std::invalid_argument("--workers: " + std::to_string(w) + " is not in [1, 1048576]");

  // The outputs, before the inputs are read and the codec is timed; nothing is written on an error.
  check_distinct_outputs("--json", o.json, "--csv", o.csv);
  check_output_file("--json", o.json);
  check_output_file("--csv", o.csv);
  check_output_not_input("--json", o.json, "--compute-from", o.compute_from);
  check_output_not_input("--csv", o.csv, "--compute-from", o.compute_from);
  check_output_not_input("--json", o.json, "--run-json", o.run_json);
  check_output_not_input("--csv", o.csv, "--run-json", o.run_json);
  if (o.intra_gbps > 0 && o.intra_gbps < 1e-6)
    throw std::invalid_argument("--intra-gbps: must be 0 (unlimited) or a number in [1e-06, 1e+09], got " + rate_text(o.intra_gbps, 0));

  if (o.codec_rates.empty()) o.codec_rates = o.preset == "paper" ? "none" : "measure";
  CodecRates rates = parse_rates(o.codec_rates);
  std::vector<Config> configs;
  if (o.preset == "paper") {
    for (const PresetConfig& p : paper_preset()) {
      Config c;
      c.label = p.label;
      c.compute_source = "assumed GPU step time (--preset paper, docs/model.md)";
      c.in = p.inputs;
      c.in.rates = rates;
      configs.push_back(c);
    }
  } else {
    Config c;
    c.in.net = o.run_json.empty() ? net(o.net) : read_run_layers(o.run_json);
    c.label = c.in.net.name;
    c.in.batch = o.batch;
    c.in.float_below = o.float_below;
    c.in.base3 = o.packing == "base3";
    if (!o.compute_from.empty()) {
      c.in.compute_s = compute_from_steps_csv(o.compute_from, o.warmup);
      c.compute_source = "median compute_s + optimizer_s of " + o.compute_from + " after " + std::to_string(o.warmup) + " steps";
    } else {
      c.in.compute_s = o.compute_s;
      c.compute_source = "--compute-s";
    }
    c.in.rates = rates;
    Network& n = c.in.network;
    n.topology = parse_topology(o.topology);
    n.bandwidth_Bps = o.bandwidth_gbps * 1e9 / 8;
    n.latency_s = o.latency_us * 1e-6;
    n.gpus_per_node = o.gpus_per_node;
    n.intra_bandwidth_Bps = o.intra_gbps * 1e9 / 8;
    n.intra_latency_s = o.intra_latency_us * 1e-6;
    n.ps_shards = o.ps_shards;
    n.ps_float_downlink = o.ps_downlink == "float";
    configs.push_back(c);
  }

  nlohmann::json jconfigs = nlohmann::json::array();
  std::ostringstream csv;
  csv << tg::app::kModelCsvHeader << '\n';
  csv.precision(9);
  std::string text;
  for (const Config& c : configs) {
    Payload pf = float_payload(c.in.net), pt = terngrad_payload(c.in.net, c.in.float_below, c.in.base3);
    std::vector<Scheme> schemes = schemes_for(c.in.network.topology);
    text += tg::strf("# %s: %llu parameters in %zu tensors (%s); per worker per step float32 %.3f MB, TernGrad %.3f MB (%.2fx less)\n",
                  c.label.c_str(), static_cast<unsigned long long>(c.in.net.parameters()), c.in.net.tensors.size(),
                  c.in.net.input.c_str(), pf.bytes / 1e6, pt.bytes / 1e6, double(pf.bytes) / double(pt.bytes));
    text += "#   network: " + describe(c.in.network) + "\n";
    text += tg::strf("#   batch %d per worker; compute %.4g s/step (%s); codec rates: %s\n", c.in.batch, c.in.compute_s,
                     c.compute_source.c_str(), c.in.rates.source.c_str());
    std::string head = "workers";
    for (Scheme s : schemes) head += "  " + std::string(to_string(s)) + " img/s";
    Scheme tern = schemes.back();
    for (Scheme s : schemes)
      if (s != tern) head += "  speedup vs " + std::string(to_string(s));
    text += head + "\n";
    nlohmann::json rows = nlohmann::json::array();
    for (int w : o.workers) {
      std::vector<Prediction> ps;
      for (Scheme s : schemes) ps.push_back(predict(c.in, s, w));
      text += tg::strf("%7d", w);
      for (const auto& p : ps) {
        text += "  " + rate_text(p.images_per_s, static_cast<int>(std::string(to_string(p.scheme)).size() + 6));
      }
      for (std::size_t k = 0; k + 1 < ps.size(); ++k) {
        const double speedup = ps.back().images_per_s / ps[k].images_per_s;
        const int width = static_cast<int>(std::string(to_string(ps[k].scheme)).size() + 11);
        text += speedup >= 0.01 ? tg::strf("  %*.2fx", width, speedup) : tg::strf("  %*.2gx", width, speedup);
      }
      text += "\n";
      for (const auto& p : ps) {
        rows.push_back(row_json(p));
        csv << csv_field(c.label) << ',' << csv_field(c.in.net.name) << ',' << to_string(c.in.network.topology) << ','
            << to_string(p.scheme) << ',' << p.workers << ',' << c.in.batch << ',' << p.payload_bytes << ','
            << p.compute_s << ',' << p.encode_s << ',' << p.comm_s << ',' << p.decode_s << ',' << p.step_s << ','
            << p.images_per_s << '\n';
      }
    }
    text += "\n";
    const Network& n = c.in.network;
    jconfigs.push_back({{"label", c.label},
                        {"net", c.in.net.name},
                        {"input", c.in.net.input},
                        {"parameters", c.in.net.parameters()},
                        {"tensors", c.in.net.tensors.size()},
                        {"float_payload_bytes", pf.bytes},
                        {"terngrad_payload_bytes", pt.bytes},
                        {"float_below", c.in.float_below},
                        {"packing", c.in.base3 ? "base3" : "2bit"},
                        {"batch_per_worker", c.in.batch},
                        {"compute_s", c.in.compute_s},
                        {"compute_source", c.compute_source},
                        {"codec_rates_elements_per_s", {{"ternary_encode", c.in.rates.ternary_encode},
                                                        {"ternary_aggregate", c.in.rates.ternary_aggregate},
                                                        {"float_encode", c.in.rates.float_encode},
                                                        {"float_decode", c.in.rates.float_decode},
                                                        {"source", c.in.rates.source}}},
                        {"network", {{"topology", to_string(n.topology)}, {"bandwidth_bytes_per_s", n.bandwidth_Bps},
                                     {"latency_s", n.latency_s}, {"gpus_per_node", n.gpus_per_node},
                                     {"intra_bandwidth_bytes_per_s", n.intra_bandwidth_Bps},
                                     {"intra_latency_s", n.intra_latency_s}, {"ps_shards", n.ps_shards},
                                     {"ps_float_downlink", n.ps_float_downlink}}},
                        {"rows", rows}});
  }
  // Outputs after every prediction succeeded, each written whole (temp + rename).
  std::string json_text = nlohmann::json{{"configs", jconfigs}}.dump(1) + "\n";
  if (!o.json.empty() && o.json != "-") tg::write_output(o.json, json_text);
  if (!o.csv.empty() && o.csv != "-") tg::write_output(o.csv, csv.str());
  if (o.json == "-") std::fputs(json_text.c_str(), stdout);         // instead of the table
  else if (o.csv == "-") std::fputs(csv.str().c_str(), stdout);
  else if (!o.quiet) std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

static std::vector<Command> model_commands() {
  auto o = std::make_shared<ModelOptions>();
  auto conflicts = std::make_shared<std::vector<const CLI::Option*>>();
  Command c;
  c.add_fn = [o, conflicts](CLI::App& app) {
    CLI::App* sub = app.add_subcommand(
        "model",
        "Section 6 performance model: predicted throughput (images/s) vs workers, float32 vs TernGrad, from net sizes,\n"
        "compute time per step, codec rates and network (bandwidth, latency, topology). Step time = compute + encode +\n"
        "communicate + decode (formulas: docs/model.md). --preset paper: AlexNet/GoogLeNet/VGG-A on 1GbE and InfiniBand.");
    sub->add_option("--preset", o->preset, "paper: the paper's Section 6 setting (6 tables); none: the options below")
        ->check(CLI::IsMember({"none", "paper"}));
    auto add = [&](CLI::Option* opt) {
      conflicts->push_back(opt);
      return opt;
    };
    CLI::Option* net_option = add(sub->add_option("--net", o->net, "Net whose tensor sizes travel")->check(CLI::IsMember(net_names())));
    add(sub->add_option("--run-json", o->run_json, "Tensor sizes from a measured run's run.json (`terngrad train --out`) instead of --net")
            ->check(tg::app::regular_file(64 << 20))
            ->excludes(net_option));
    add(sub->add_option("--batch", o->batch, "Images per worker per step")->check(tg::app::in_range(1, 1 << 24)));
    add(sub->add_option("--compute-s", o->compute_s, "Compute time per step on one worker, seconds (forward + backward + optimizer);\n"
                        "this or --compute-from is required without --preset")
            ->check(tg::app::in_range(1e-9, 1e6))
            ->default_str("none"));
    add(sub->add_option("--compute-from", o->compute_from, "Compute time per step from a measured run's steps.csv: median of compute_s + optimizer_s")
            ->check(tg::app::regular_file(1u << 30)));
    add(sub->add_option("--warmup", o->warmup, "Steps of --compute-from left out at the start")->check(tg::app::in_range(0, 1 << 30)));
    add(sub->add_option("--float-below", o->float_below, "TernGrad: tensors with fewer elements travel as float32 (0: none)"));
    add(sub->add_option("--packing", o->packing, "TernGrad packing")->check(CLI::IsMember({"2bit", "base3"})));
    sub->add_option("--codec-rates", o->codec_rates,
                    "measure (tg::encode/aggregate/decode timed here, optimized codec, 1 thread; the default), none (codec\n"
                    "time 0; the default of --preset paper), or E,A,F,D in elements/s: TernGrad encode, TernGrad aggregate per\n"
                    "worker payload, float32 encode, float32 decode+sum per worker payload")
        ->check(CLI::Validator(
            [](std::string& text) {
              return text.empty() ? std::string("is empty: give measure, none or E,A,F,D") : std::string();
            },
            ""));
    add(sub->add_option("--topology", o->topology, "ring: a link per node, ring allgather / allreduce; ps: parameter server;\n"
                                                   "shared: one link for all traffic (e.g. a loopback shaped by one tc qdisc)")
            ->check(CLI::IsMember({"ring", "ps", "shared"})));
    add(sub->add_option("--bandwidth-gbps", o->bandwidth_gbps, "Link bandwidth, Gbit/s (10^9 bits)")->check(tg::app::in_range(1e-6, 1e9)));
    add(sub->add_option("--latency-us", o->latency_us, "Latency per message, microseconds")->check(tg::app::in_range(0.0, 1e9)));
    add(sub->add_option("--gpus-per-node", o->gpus_per_node, "Workers sharing one node's link")->check(tg::app::in_range(1, 1 << 16)));
    add(sub->add_option("--intra-gbps", o->intra_gbps, "Bandwidth inside a node, Gbit/s (0: unlimited, else at least 1e-6)")->check(tg::app::in_range(0.0, 1e9)));
    add(sub->add_option("--intra-latency-us", o->intra_latency_us, "Latency inside a node, microseconds")->check(tg::app::in_range(0.0, 1e9)));
    add(sub->add_option("--ps-shards", o->ps_shards, "Parameter-server shards (0: one on every node)")->check(tg::app::in_range(0, 1 << 20)));
    add(sub->add_option("--ps-downlink", o->ps_downlink, "TernGrad over a parameter server: what workers pull")
            ->check(CLI::IsMember({"ternary", "float"})));
    sub->add_option("--workers", o->workers, "Worker counts")->delimiter(',')->check(tg::app::in_range(1, 1 << 20))->default_str("1,2,4,...,512");
    sub->add_option("--json", o->json, "Also write every prediction with its inputs as JSON to FILE ('-': on stdout, instead of the table)")->check(non_empty_path());
    sub->add_option("--csv", o->csv, "Also write one row per scheme and worker count as CSV to FILE ('-': on stdout, instead of the table)")->check(non_empty_path());
    sub->add_flag("--quiet", o->quiet, "No table on stdout");
    // options that only some runs use are refused in the others, not ignored (with --preset paper, the
    // preset's own refusal names them)
    only_with(sub, "--ps-shards", "--topology ps", [o] { return o->preset == "paper" || o->topology == "ps"; });
    only_with(sub, "--ps-downlink", "--topology ps", [o] { return o->preset == "paper" || o->topology == "ps"; });
    only_with(sub, "--warmup", "--compute-from", [o] { return o->preset == "paper" || !o->compute_from.empty(); });
    for (const char* option : {"--intra-gbps", "--intra-latency-us"})
      only_with(sub, option, "--gpus-per-node N (N > 1: workers that share a node)",
                [o] { return o->preset == "paper" || o->gpus_per_node > 1; });
    return sub;
  };
  c.run_fn = [o, conflicts] { return run_model(*o, *conflicts); };
  return {c};
}

const RegisterCommands kRegistered{55, model_commands};

}  // namespace tg::app
