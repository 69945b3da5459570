// terngrad-bench: `terngrad demo`: encodes one Gaussian gradient and prints the scalar, sparsity,
// bytes on the wire, and the variance identity next to a Monte-Carlo estimate.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>

#include <unistd.h>

#include "commands.hpp"
#include "tg/codec.hpp"

namespace tg::app {
namespace {

struct DemoOptions {
  std::size_t n = 1 << 20;
  int draws = 200;
  std::uint64_t seed = 1;
  std::string clip = "none";
  std::string packing = "2bit";
  double c = 2.5;
};

int run_demo(const DemoOptions& o) {
  Params p;
  p.clip = parse_clip_mode(o.clip.c_str());
  p.packing = parse_packing(o.packing.c_str());
  p.c = o.c;
  validate(p);
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(o.n);
  for (auto& x : g) x = dist(rng);
  auto codec = make_optimized_codec();
  auto payload = encode(*codec, g, p, {o.seed, 0, 0, 0});
  Decoded d = decode(*codec, payload);
  std::size_t nonzero = 0;
  for (float v : d.values) nonzero += v != 0.0f;
  std::printf("gradient: %zu float32 Gaussian(0,1) elements, seed %llu, codec %s\n", o.n,
              static_cast<unsigned long long>(o.seed), codec->name().c_str());
  if (p.clip == ClipMode::none) std::printf("clipping none, packing %s\n", to_string(p.packing));
  else std::printf("clipping %s (c = %g), packing %s\n", to_string(p.clip), p.c, to_string(p.packing));
  std::printf("scalar s                 %.6g (max|g| = %.6g)\n", d.header.scalar,
              static_cast<double>(codec->max_abs(g, 0)));
  std::printf("nonzero outputs          %zu of %zu (%.2f%%)\n", nonzero, o.n, 100.0 * nonzero / std::max<std::size_t>(1, o.n));
  const double shrink = 4.0 * o.n / payload.size();
  if (shrink >= 1.0)
    std::printf("bytes on the wire        %zu (float32: %zu, %.2fx smaller)\n", payload.size(), 4 * o.n, shrink);
  else  // a few elements: the 32-byte header outweighs what the body saves
    std::printf("bytes on the wire        %zu (float32: %zu, %.2fx larger: the %zu-byte header outweighs the body)\n",
                payload.size(), 4 * o.n, 1.0 / shrink, kHeaderBytes);
  // Monte-Carlo of E||g~ - g||^2 over independent steps; with clipping the target is clamp(g).
  ScalarRule rule = own_rule(*codec, g, p, 0);
  std::vector<float> target(g);
  for (auto& x : target) x = std::copysign(std::min(std::fabs(x), rule.cap), x);
  double exact = variance_for_scalar(target, rule.scalar);
  std::vector<std::int8_t> t(o.n);
  double sum = 0.0, sumsq = 0.0;
  // what is known so far is on stdout before the draws start (a run cut short still shows it); a run longer
  // than a few seconds says how far it is on stderr: one updating line on a terminal, a line a minute otherwise
  std::fflush(stdout);
  const bool tty = ::isatty(::fileno(stderr));
  const auto t0 = std::chrono::steady_clock::now();
  double shown = 0.0;
  bool said = false;
  for (int step = 0; step < o.draws; ++step) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (step > 0 && secs >= 3.0 && secs - shown >= (tty ? 0.5 : 60.0)) {
      const double left = secs / step * (o.draws - step);
      std::fprintf(stderr, tty ? "\rdemo: draw %d of %d, about %.0f s left   " : "demo: draw %d of %d, about %.0f s left\n",
                   step, o.draws, left);
      shown = secs;
      said = true;
    }
    codec->ternarize(g, rule, {o.seed, 0, 0, static_cast<std::uint32_t>(step)}, t);
    double z = 0.0;
    for (std::size_t k = 0; k < o.n; ++k) {
      double e = static_cast<double>(rule.scalar) * t[k] - target[k];
      z += e * e;
    }
    sum += z;
    sumsq += z * z;
  }
  if (said && tty) std::fprintf(stderr, "\r%60s\r", "");
  double mean = sum / o.draws;
  double se = std::sqrt(std::max(0.0, sumsq / o.draws - mean * mean) / o.draws);
  std::printf("variance identity        s||x||_1 - ||x||_2^2 = %.6g  (x = clamp(g) under clipping)\n", exact);
  if (exact > 0)
    std::printf("Monte-Carlo, %d draws     E||g~ - x||^2 = %.6g +- %.2g (1 standard error), ratio %.5f\n", o.draws,
                mean, se, mean / exact);
  else  // every |x_i| is 0 or s (one element, or all clipped): each draw is exact, no ratio to take
    std::printf("Monte-Carlo, %d draws     E||g~ - x||^2 = %.6g +- %.2g (1 standard error); the identity is 0: every "
                "|x_i| is 0 or s, so every draw is exact\n",
                o.draws, mean, se);
  std::printf("(this is a demonstration; `terngrad verify` runs the battery with stated error rates)\n");
  return 0;
}

}  // namespace

static Command demo_command() {
  auto opts = std::make_shared<DemoOptions>();
  Command c;
  c.add_fn = [opts](CLI::App& app) {
    CLI::App* sub = app.add_subcommand("demo", "Encode one gradient; show scalar, sparsity, bytes, variance identity");
    sub->add_option("--elements", opts->n, "Number of gradient elements")
        ->check(tg::app::in_range(std::size_t{1}, std::size_t{1} << 30));
    hidden_alias(sub, "--n", opts->n, "--elements")->check(tg::app::in_range(std::size_t{1}, std::size_t{1} << 30));
    sub->add_option("--draws", opts->draws, "Monte-Carlo draws for the variance estimate")->check(tg::app::in_range(2, 1000000));
    sub->add_option("--seed", opts->seed, "Seed of the gradient and of the codec's stream");
    sub->add_option("--clip", opts->clip, "Clipping mode")->check(CLI::IsMember({"none", "clip", "saturate"}));
    sub->add_option("--packing", opts->packing, "Packing")->check(CLI::IsMember({"2bit", "base3"}));
    sub->add_option("--c", opts->c, "Clip factor (bound c*sigma), with --clip clip or saturate")->check(tg::app::in_range(tg::kMinClipFactor, tg::kMaxClipFactor));
    tg::app::only_with(sub, "--c", "--clip clip or saturate", [opts] { return opts->clip != "none"; });
    return sub;
  };
  c.run_fn = [opts] { return run_demo(*opts); };
  return c;
}

const RegisterCommands kRegistered{70, [] { return std::vector<Command>{demo_command()}; }};

}  // namespace tg::app
