// terngrad-bench: `terngrad compare A B`: two implementations, bit for bit (tg::verify::compare_samplers).
// Every gradient family of the battery, clipping none / clip / saturate, each with its own and with a shared scalar, the same
// stream keys on both: scalars and trits must be equal, payloads byte-identical where both are codecs.
// Exit 0 identical, 1 a difference (the table names the first one per case), 2 usage or input error.
// --stat: implementations whose random streams differ, compared in distribution instead (exit 0 same
// distribution, 1 different).
//   terngrad compare reference optimized
//   terngrad compare reference exec:'python3 mycodec.py' --stat
//   terngrad compare reference exec:'python3 mycodec.py' --json diff.json
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "tg/atomic_file.hpp"
#include "tg/verify/battery.hpp"

namespace tg::app {
namespace {

using namespace tg::verify;

struct CompareCli {
  std::string a, b;
  std::size_t d = 4099;
  std::uint32_t steps = 2;
  std::uint32_t stat_draws = 256;
  std::uint64_t seed = 20171204;
  bool stat = false;
  double alpha = 1e-6, beta = 1e-3;
  std::vector<std::string> clip = {"none", "clip", "saturate"};
  std::vector<std::string> clip_lists;  // each --clip's comma-separated list; given, they replace the default
  bool no_shared = false;
  std::string json;
  double exec_timeout = 300.0;
  bool no_progress = false;
};

int run_compare(const CompareCli& o) {
  if (o.a.empty() || o.b.empty())
    throw Error(ErrorCode::invalid_argument, "give two implementations: terngrad compare A B (e.g. reference optimized)");
  CompareOptions co;
  co.d = o.d;
  co.steps = o.steps;
  co.seed = o.seed;
  co.modes.clear();
  std::vector<std::string> modes = o.clip;
  if (!o.clip_lists.empty()) {
    modes.clear();
    for (const auto& list : o.clip_lists)
      for (auto& m : split_commas(list)) modes.push_back(std::move(m));
  }
  for (const auto& m : modes) co.modes.push_back(parse_clip_mode(m.c_str()));
  co.shared_scalar = !o.no_shared;
  co.progress = !o.no_progress;
  ExecOptions eo;
  eo.timeout_s = o.exec_timeout;
  std::unique_ptr<Sampler> a, b;
  try {
    // a bad name is named as the argument it is (compare takes A and B, not --impl)
    a = make_sampler(o.a, eo, "implementation A");
    b = make_sampler(o.b, eo, "implementation B");
  } catch (const Unavailable& e) {
    std::fprintf(stderr, "terngrad compare: %s\n", e.what());
    return 2;
  }
  check_output_file("--json", o.json);  // before the run ("-": stdout, instead of the table)
  auto report = [&](const std::string& table, const std::string& json) {
    if (o.json == "-") std::fputs(json.c_str(), stdout);
    else std::fputs(table.c_str(), stdout);
    if (!o.json.empty() && o.json != "-") tg::write_file_atomic(o.json, json);
  };
  if (o.stat) {
    StatCompareOptions so;
    so.d = o.d;
    so.draws = o.stat_draws;
    so.seed = o.seed;
    so.modes = co.modes;
    so.alpha_total = o.alpha;
    so.beta = o.beta;
    so.progress = co.progress;
    StatCompareResult r = compare_statistically(*a, *b, so);
    report(format_stat_compare(r), format_stat_compare_json(r));
    return r.same() ? 0 : 1;
  }
  CompareResult r = compare_samplers(*a, *b, co);
  report(format_compare(r), format_compare_json(r));
  return r.identical() ? 0 : 1;
}

}  // namespace

static Command compare_command() {
  auto opts = std::make_shared<CompareCli>();
  Command c;
  c.add_fn = [opts](CLI::App& app) {
    CLI::App* sub = app.add_subcommand(
        "compare", "Two implementations bit for bit: scalars, trits and payload bytes on every gradient family and "
                   "clipping mode (exit 0 identical, 1 different, 2 error)");
    const char* impl_help =
        "Implementation: reference, optimized, cuda, exec:'CMD' or serve:'CMD' (external program, docs/battery.md), "
        "mutant:NAME or variant:NAME (verify --list-mutants)";
    // Not ->required(): CLI11 would then report a missing A before an unknown option; run_compare checks.
    sub->add_option("A", opts->a, impl_help);
    sub->add_option("B", opts->b, impl_help);
    sub->add_option("--elements", opts->d, "Elements per gradient family (lenet keeps its layer shapes)")
        ->check(tg::app::in_range(std::size_t{1}, std::size_t{1} << 26))
        ->capture_default_str();
    sub->add_option("--draws", opts->steps, "Draws per stream key (steps 0..N-1 of the key)")
        ->check(tg::app::in_range(1u, 1024u))
        ->capture_default_str();
    CLI::Option* stat = sub->add_flag("--stat", opts->stat,
                  "Compare in distribution, for implementations whose random streams differ: scalars and signs, "
                  "total and per-coordinate keep rates (docs/statistics.md)");
    sub->add_option("--stat-draws", opts->stat_draws, "--stat: encodings each implementation draws per case")
        ->check(tg::app::in_range(2u, 100000u))
        ->needs(stat);
    sub->add_option("--alpha", opts->alpha, "--stat: probability that implementations with one distribution are "
                                            "called different")
        ->check(tg::app::in_range(1e-12, 0.5))
        ->needs(stat);
    sub->add_option("--beta", opts->beta, "--stat: 1 - power at which detectable effects are stated")
        ->check(tg::app::in_range(1e-12, 0.5))
        ->needs(stat);
    hidden_alias(sub, "--d", opts->d, "--elements")->check(tg::app::in_range(std::size_t{1}, std::size_t{1} << 26));
    hidden_alias(sub, "--steps", opts->steps, "--draws")->check(tg::app::in_range(1u, 1024u));
    sub->add_option("--seed", opts->seed, "Seed of the gradients and of the stream keys")->capture_default_str();
    // One comma-separated list per --clip (repeatable): an option taking a list of values would also take the
    // implementations A and B that follow it.
    sub->add_option("--clip", opts->clip_lists, "Clipping modes to compare, comma-separated (or --clip repeated: --clip none --clip clip)")
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->check(CLI::Validator(
            [](std::string& list) {
              for (const auto& m : split_commas(list))
                if (m != "none" && m != "clip" && m != "saturate") return "'" + m + "' not in {none,clip,saturate}";
              return std::string();
            },
            "MODE[,MODE...]"));
    sub->add_flag("--no-shared", opts->no_shared, "Leave out the cases with a shared scalar");
    sub->add_option("--json", opts->json, "Write every case as JSON to FILE ('-': on stdout, instead of the table)")->check(non_empty_path());
    sub->add_option("--exec-timeout", opts->exec_timeout, "Seconds an external codec may take per call")
        ->check(tg::app::in_range(0.001, 86400.0))
        ->capture_default_str();
    sub->add_flag("--no-progress", opts->no_progress, "No progress line on stderr");
    only_with(sub, "--exec-timeout", "an external implementation (A or B exec:CMD or serve:CMD)",
              [opts] { return external_impl(opts->a) || external_impl(opts->b); });
    return sub;
  };
  c.run_fn = [opts] { return run_compare(*opts); };
  return c;
}

const RegisterCommands kRegistered{20, [] { return std::vector<Command>{compare_command()}; }};

}  // namespace tg::app
