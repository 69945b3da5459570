// terngrad-bench: `terngrad verify`: runs the statistical battery on one implementation
// (--impl reference | optimized | cuda | exec:CMD | mutant:NAME) or, with --self-test, on every correct
// implementation and every mutant. Exit 0 all pass, 1 a check failed, 2 usage or input error.
//   terngrad verify [--profile quick|ci|full] [--impl optimized] [--json F] [--junit F] [--self-test]
//   terngrad verify --samples G.npy VALUES.npy [--clip none|clip|saturate] [--c C] [--scalar S]
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include "commands.hpp"
#include "tg/atomic_file.hpp"
#include "tg/strf.hpp"
#include "tg/verify/battery.hpp"
#include "tg/verify/npy.hpp"

namespace tg::app {
namespace {

using namespace tg::verify;

struct VerifyOptions {
  std::string impl = "optimized";
  std::string profile = "ci";
  std::uint64_t seed = 20171204;
  double alpha = 0.0;  // 0: the profile's
  double beta = 0.0;
  std::string json, junit;
  std::vector<std::string> skip;
  std::vector<std::string> supports;
  bool unseeded = false;
  bool self_test = false;
  std::string example;
  double exec_timeout = 300.0;
  bool no_progress = false;
  bool verbose = false;
  bool list_mutants = false;
  // --samples G.npy VALUES.npy (repeatable): the per-gradient checks on draws made elsewhere
  std::vector<std::string> samples;
  std::string clip = "none";
  double c = 2.5;
  double scalar = -1.0;  // < 0: each draw's own scalar
};

const char* kExampleCommand = "build/venv/bin/python examples/numpy_codec.py";

// The NumPy example's command: relative to the current folder when run from the repository's root, else
// from the repository this program was built in (<repo>/build/<preset>/apps/terngrad), with absolute paths;
// "" when neither has both the interpreter and the script.
std::string default_example() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists("build/venv/bin/python", ec) && fs::exists("examples/numpy_codec.py", ec)) return kExampleCommand;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path repo = exe.parent_path().parent_path().parent_path().parent_path();
  const fs::path python = repo / "build" / "venv" / "bin" / "python", script = repo / "examples" / "numpy_codec.py";
  if (!fs::exists(python, ec) || !fs::exists(script, ec)) return "";
  auto quoted = [](const std::string& x) {
    std::string q = "'";
    for (char ch : x) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
  };
  return quoted(python.string()) + " " + quoted(script.string());
}

Options make_options(const VerifyOptions& o) {
  Options opt;
  opt.profile = profile_named(o.profile);
  if (o.alpha != 0.0) opt.profile.alpha_total = o.alpha;
  if (o.beta != 0.0) opt.profile.beta = o.beta;
  opt.seed = o.seed;
  opt.skip.insert(o.skip.begin(), o.skip.end());
  opt.supports.insert(o.supports.begin(), o.supports.end());
  opt.reproducible = !o.unseeded;
  opt.progress = !o.no_progress;
  return opt;
}

// The reports, each to its file or ("-") to stdout instead of the table (check_outputs allows one there).
bool reports_on_stdout(const VerifyOptions& o) { return o.json == "-" || o.junit == "-"; }

void write_reports(const VerifyOptions& o, const std::vector<Result>& results) {
  if (o.json == "-") std::fputs(format_json(results).c_str(), stdout);
  else if (!o.json.empty()) tg::write_file_atomic(o.json, format_json(results));
  if (o.junit == "-") std::fputs(format_junit(results).c_str(), stdout);
  else if (!o.junit.empty()) tg::write_file_atomic(o.junit, format_junit(results));
}

// The table on stdout, unless a report goes there instead.
void print_table(const VerifyOptions& o, const Result& r) {
  if (!reports_on_stdout(o)) std::fputs(format_table(r).c_str(), stdout);
}

// Every output path, after the other options and before anything runs or is read; creates nothing.
void check_outputs(const VerifyOptions& o) {
  check_distinct_outputs("--json", o.json, "--junit", o.junit);
  check_output_file("--json", o.json);
  check_output_file("--junit", o.junit);
  for (const std::string& input : o.samples) {  // the gradients and draws it reads
    check_output_not_input("--json", o.json, "--samples", input);
    check_output_not_input("--junit", o.junit, "--samples", input);
  }
}

int run_single(const VerifyOptions& o) {
  Options opt = make_options(o);
  ExecOptions eo;
  eo.timeout_s = o.exec_timeout;
  std::unique_ptr<Sampler> sampler;
  try {
    sampler = make_sampler(o.impl, eo);
  } catch (const Unavailable& e) {
    std::fprintf(stderr, "terngrad verify: %s\n", e.what());
    return 2;
  }
  check_outputs(o);
  Result r = run_battery(*sampler, opt);
  print_table(o, r);
  write_reports(o, {r});
  if (const std::string note = sampler->cost_note(); !note.empty()) std::fprintf(stderr, "terngrad verify: %s\n", note.c_str());
  return r.pass() ? 0 : 1;
}

int run_self_test(const VerifyOptions& o) {
  Options base = make_options(o);
  ExecOptions eo;
  eo.timeout_s = o.exec_timeout;
  struct Entry {
    std::string impl;
    bool correct;
  };
  check_outputs(o);
  std::vector<Entry> entries = {{"reference", true}, {"optimized", true}};
  FILE* text = reports_on_stdout(o) ? stderr : stdout;  // a report on stdout: the text goes to stderr
  std::string why;
  if (cuda_usable(&why)) entries.push_back({"cuda", true});
  else std::fprintf(text, "self-test: skipping cuda: %s\n", why.c_str());
  std::string example = o.example.empty() ? default_example() : o.example;
  if (!example.empty() && example != "none") entries.push_back({"exec:" + example, true});
  else std::fprintf(text, "self-test: no NumPy example (build/venv/bin/python or examples/numpy_codec.py missing here and in the "
                       "repository this program was built in; --example CMD)\n");
  for (const auto& v : variant_list()) entries.push_back({std::string("variant:") + v.name, true});
  for (const auto& m : mutant_list()) entries.push_back({std::string("mutant:") + m.name, false});

  std::vector<Result> results;
  std::vector<std::vector<std::string>> lines;
  bool ok = true;
  for (const auto& e : entries) {
    Options opt = base;
    // A mutant differs from the reference bytes, so the cross-implementation check would reject it
    // trivially: mutants must be rejected by the statistical and structural checks alone. A correct
    // variant may differ in the last bits of the clip bound (within the tolerance), so it too is
    // judged on the statistics alone.
    if (!e.correct || e.impl.rfind("variant:", 0) == 0) opt.skip.insert("cross");
    auto sampler = make_sampler(e.impl, eo);
    std::fprintf(stderr, "self-test: %s ...\n", e.impl.c_str());
    Result r = run_battery(*sampler, opt);
    r.expected = e.correct ? "pass" : "reject";
    if (o.verbose) std::fputs(format_table(r).c_str(), text);
    bool as_expected = r.as_expected();
    ok = ok && as_expected;
    std::string fails;
    for (const auto& c : r.failed_checks()) fails += (fails.empty() ? "" : ", ") + c;
    // every failed check is listed: the column wraps (a fixed buffer here once cut the list off at 511 characters)
    lines.push_back({e.impl, e.correct ? "pass" : "reject", r.pass() ? "passed" : "rejected", as_expected ? "ok" : "WRONG",
                     tg::strf("%.1f s", r.seconds), fails.empty() ? "-" : fails});
    results.push_back(std::move(r));
  }
  Profile P = base.profile;
  std::fprintf(text, "terngrad verify --self-test: profile %s, seed %llu, alpha_total %.3g per run, beta %.3g\n",
               P.name.c_str(), static_cast<unsigned long long>(base.seed), P.alpha_total, P.beta);
  std::fputs(tg::verify::format_columns({{"implementation", 50},
                                          {"expected", 8},
                                          {"result", 8},
                                          {"as expected", 11},
                                          {"time", 8, true},
                                          {"failed checks", 64}},
                                         lines)
                 .c_str(),
             text);
  std::fprintf(text, "\nverdict: %s\n", ok ? "PASS (every correct implementation passed, every mutant was rejected)"
                                             : "FAIL (see the rows marked WRONG)");
  write_reports(o, results);
  return ok ? 0 : 1;
}

// --samples: g (any shape, read flat) and the decoded draws (shape (draws, *g.shape) or (draws, g.size)).
int run_samples(const VerifyOptions& o) {
  if (o.samples.size() % 2 != 0)
    throw Error(ErrorCode::invalid_argument, "--samples takes two files per tensor: G.npy VALUES.npy (got " +
                                                 std::to_string(o.samples.size()) + " file name" + (o.samples.size() == 1 ? ")" : "s)"));
  SampleCheckOptions so;
  so.params.clip = parse_clip_mode(o.clip.c_str());
  so.params.c = o.c;
  if (o.alpha != 0.0) so.alpha_total = o.alpha;
  if (o.beta != 0.0) so.beta = o.beta;
  for (const auto& s : o.skip) {
    if (s != "independence")
      throw Error(ErrorCode::invalid_argument, "--samples: only the independence check can be skipped, not '" + s + "'");
    so.independence = false;
  }
  std::optional<float> shared;
  if (o.scalar >= 0.0) shared = static_cast<float>(o.scalar);
  if (shared && *shared == 0.0f && o.scalar > 0.0)  // the draws' scalar is a float32: 1e-46 would be read as 0
    throw Error(ErrorCode::invalid_argument,
                strf("--scalar %g is below the smallest positive float32 (1.4e-45): it would be read as 0", o.scalar));
  // Each pair is one layer: a draws file given for two layers (the same pair twice, or one file of draws for two
  // gradients) is a slip, not a layer-wise gradient whose layers happen to have the same draws.
  for (std::size_t i = 1; i < o.samples.size(); i += 2)
    for (std::size_t k = 1; k < i; k += 2)
      if (same_file(o.samples[i], o.samples[k]))
        throw Error(ErrorCode::invalid_argument,
                    strf("--samples: the draws file %s is given for layer %zu and for layer %zu (each --samples G V "
                         "pair is one layer, with its own draws)",
                         o.samples[i].c_str(), k / 2, i / 2));
  check_outputs(o);  // before the files are read
  std::vector<NpyArray> grads, values;
  std::vector<Draws> draws;
  std::vector<TensorSamples> tensors;
  for (std::size_t i = 0; i + 1 < o.samples.size(); i += 2) {
    const std::string& gp = o.samples[i];
    const std::string& vp = o.samples[i + 1];
    grads.push_back(read_npy(gp));
    values.push_back(read_npy(vp));
    const NpyArray& g = grads.back();
    const NpyArray& v = values.back();
    // Before anything is allocated per draw: VALUES of shape (1e9, 0) is 128 bytes on disk.
    if (g.data.empty()) throw Error(ErrorCode::invalid_argument, gp + ": the gradient is empty");
    for (std::size_t k = 0; k < g.data.size(); ++k)
      if (!std::isfinite(g.data[k]))
        throw Error(ErrorCode::non_finite, gp + ": element " + std::to_string(k) + " of the gradient is " +
                                               non_finite_name(g.data[k]) +
                                               " (the checks need a finite gradient)");
    // (draws, g.size) or (draws, *g.shape): the same shape, not only the same count (a transposed array is not
    // the gradient's layout)
    const bool flat = v.shape.size() == 2 && v.shape[1] == g.data.size();
    const bool same = v.shape.size() == g.shape.size() + 1 && std::equal(g.shape.begin(), g.shape.end(), v.shape.begin() + 1);
    if (!flat && !same) {
      auto join = [](const std::vector<std::uint64_t>& sh, std::size_t from) {
        std::string t;
        for (std::size_t k = from; k < sh.size(); ++k) t += (k > from ? ", " : "") + std::to_string(sh[k]);
        return t;
      };
      const std::string gs = join(g.shape, 0);
      const std::string want = g.shape.size() == 1 ? "(draws, " + gs + ")"
                                                   : "(draws, " + std::to_string(g.data.size()) + ") or (draws, " + gs + ")";
      throw Error(ErrorCode::invalid_argument,
                  vp + ": shape must be " + want + " for the gradient " + gp + " of shape (" + gs +
                      (g.shape.size() == 1 ? ",)" : ")") + ", got (" + join(v.shape, 0) + (v.shape.size() == 1 ? ",)" : ")") +
                      " (row j is the decoded gradient of draw j; pair each gradient with its own draws: --samples G1 V1 --samples G2 V2)");
    }
    if (v.shape[0] > std::numeric_limits<std::uint32_t>::max())
      throw Error(ErrorCode::invalid_argument, vp + ": too many draws");
    if (v.shape[0] < 2)
      throw Error(ErrorCode::invalid_argument,
                  strf("%s: %llu draw%s: the checks need at least 2 (one row per draw)", vp.c_str(),
                       static_cast<unsigned long long>(v.shape[0]), v.shape[0] == 1 ? "" : "s"));
    if (i > 0 && v.shape[0] != values.front().shape[0])
      throw Error(ErrorCode::invalid_argument,
                  strf("%s has %llu draws, %s %llu: every layer needs the same draws (row j of each is draw j)",
                       vp.c_str(), static_cast<unsigned long long>(v.shape[0]), o.samples[1].c_str(),
                       static_cast<unsigned long long>(values.front().shape[0])));
    draws.push_back(draws_from_values(v.data, g.data.size(), static_cast<std::uint32_t>(v.shape[0]), shared, vp));
  }
  for (std::size_t i = 0; i < draws.size(); ++i)
    tensors.push_back({grads[i].data, draws[i].trits, draws[i].scalars, shared, draws[i].defect});
  Result r = check_samples(tensors, so);
  print_table(o, r);
  write_reports(o, {r});
  return r.pass() ? 0 : 1;
}

int run_verify(const VerifyOptions& o) {
  if (o.list_mutants) {
    for (const auto& m : mutant_list()) std::printf("mutant:%-18s %s\n", m.name, m.description);
    for (const auto& v : variant_list()) std::printf("variant:%-17s (correct) %s\n", v.name, v.description);
    return 0;
  }
  if (!o.samples.empty()) return run_samples(o);
  try {
    return o.self_test ? run_self_test(o) : run_single(o);
  } catch (const Interrupted& e) {
    // The sampler is gone by now: its program was stopped and its temporary folder removed. No
    // report was written. Die of the same signal, so the caller sees the conventional status.
    std::fprintf(stderr, "terngrad verify: %s; the external program was stopped, its temporary folder removed, "
                         "no report written\n", e.what());
    retire_reports("verify", "was interrupted");
    std::fflush(stderr);
    std::signal(e.signal_number(), SIG_DFL);
    std::raise(e.signal_number());
    return 128 + e.signal_number();
  }
}

}  // namespace

static Command verify_command() {
  auto opts = std::make_shared<VerifyOptions>();
  Command c;
  c.add_fn = [opts](CLI::App& app) {
    CLI::App* sub = app.add_subcommand(
        "verify", "Statistical verification battery: structure, unbiasedness, variance, independence, streams, "
                  "clipping, layer-wise scalars, aggregation, cross-implementation bytes (exit 0 pass, 1 fail, 2 error)");
    sub->add_option("--impl", opts->impl,
                    "Implementation: reference, optimized, cuda, exec:'CMD' (external program, one process per request, "
                    "docs/battery.md), serve:'CMD' (one process for the run), mutant:NAME or variant:NAME "
                    "(--list-mutants)")
        ->capture_default_str();
    sub->add_option("--profile", opts->profile, "quick (ctest), ci (default) or full")
        ->check(CLI::IsMember({"quick", "ci", "full"}))
        ->capture_default_str();
    sub->add_option("--seed", opts->seed, "Seed of the gradients and of the codec streams (fixed by default)")
        ->capture_default_str();
    sub->add_option("--alpha", opts->alpha,
                    "Total false-fail probability of the run (default: the profile's, 1e-6 for quick and ci, 1e-9 "
                    "for full; 1e-6 with --samples)")
        ->check(tg::app::in_range(1e-300, 0.5))
        ->default_str("profile's");
    sub->add_option("--beta", opts->beta, "1 - power at which detectable effects are stated")
        ->check(tg::app::in_range(1e-300, 0.5))
        ->default_str("1e-3");
    sub->add_option("--json", opts->json, "Write the results as JSON to FILE ('-': on stdout, instead of the table)")->check(non_empty_path());
    sub->add_option("--junit", opts->junit, "Write the results as JUnit XML to FILE ('-': on stdout, instead of the table)")->check(non_empty_path());
    sub->add_option("--skip", opts->skip, "Checks to leave out, comma-separated (e.g. cross for a codec with its own "
                                          "random stream)")
        ->delimiter(',')
        ->check(CLI::IsMember(check_names()));
    sub->add_option("--supports", opts->supports,
                    "What the implementation implements, comma-separated: none, clip, saturate (clipping modes), "
                    "shared-scalar, spec-stream (default: all). The battery runs only what applies and says what it "
                    "left out")
        ->delimiter(',')
        ->check(CLI::IsMember(capability_names()));
    sub->add_flag("--unseeded", opts->unseeded,
                  "The implementation draws fresh randomness on every call (a framework's global generator), so the "
                  "same key does not give the same bytes: leave out only the same-key comparisons and cross");
    sub->add_flag("--self-test", opts->self_test,
                  "Run the battery on every correct implementation and variant (all must pass) and every mutant (all "
                  "must fail)");
    sub->add_option("--example", opts->example,
                    std::string("External command the self-test checks as a correct implementation (default: '") +
                        kExampleCommand + "' when present; 'none' to leave out)");
    sub->add_option("--exec-timeout", opts->exec_timeout, "Seconds an external codec may take per call")
        ->check(tg::app::in_range(0.001, 86400.0))
        ->capture_default_str();
    sub->add_flag("--no-progress", opts->no_progress, "No progress line on stderr");
    sub->add_flag("--verbose", opts->verbose, "Self-test: print every run's full table");
    sub->add_flag("--list-mutants", opts->list_mutants, "List the mutants and the correct variants and exit");
    CLI::Option* samples =
        sub->add_option("--samples", opts->samples,
                        "Check draws made elsewhere instead of running an implementation: G.npy (the gradient, "
                        "float32) and VALUES.npy (float32, shape (draws, G.size), row j = the decoded g~ of draw j); "
                        "repeat for the layers of one gradient. Runs structure, unbiased, variance and independence "
                        "(docs/battery.md)")
            ->expected(2)
            ->type_name("G.npy VALUES.npy")
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    sub->add_option("--clip", opts->clip, "With --samples: the clipping mode the draws used (none, clip, saturate)")
        ->check(CLI::IsMember({"none", "clip", "saturate"}))
        ->capture_default_str()
        ->needs(samples);
    sub->add_option("--c", opts->c, "With --samples: the clipping factor c (bound c * sigma)")
        ->check(tg::app::in_range(tg::kMinClipFactor, tg::kMaxClipFactor))
        ->capture_default_str()
        ->needs(samples);
    sub->add_option("--scalar", opts->scalar, "With --samples: the shared scalar the draws were asked for, if any")
        ->check(tg::app::in_range(0.0, 3.4e38))
        ->default_str("none")
        ->needs(samples);
    for (const char* other : {"--impl", "--profile", "--seed", "--self-test", "--example", "--exec-timeout", "--supports",
                              "--unseeded", "--verbose", "--list-mutants"})
      samples->excludes(sub->get_option(other));
    // --list-mutants prints the list and does nothing else: options of a run are refused with it
    CLI::Option* list = sub->get_option("--list-mutants");
    for (const char* other : {"--json", "--junit", "--impl", "--profile", "--seed", "--self-test", "--skip", "--supports",
                              "--unseeded", "--alpha", "--beta"})
      list->excludes(sub->get_option(other));
    sub->get_option("--verbose")->needs(sub->get_option("--self-test"));
    only_with(sub, "--example", "--self-test", [opts] { return opts->self_test; });
    only_with(sub, "--exec-timeout", "an external implementation (--impl exec:CMD or serve:CMD, or --self-test's --example)",
              [opts] { return external_impl(opts->impl) || (opts->self_test && opts->example != "none"); });
    return sub;
  };
  c.run_fn = [opts] { return run_verify(*opts); };
  return c;
}

const RegisterCommands kRegistered{10, [] { return std::vector<Command>{verify_command()}; }};

}  // namespace tg::app
