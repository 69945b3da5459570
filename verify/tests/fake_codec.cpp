// terngrad-bench: a stand-in external codec for the exec-protocol tests (tests/test_exec.cpp).
// Speaks the protocol of docs/battery.md; `--mode` picks a behaviour: good (reference codec), fail,
// sleep, wrong-shape, wrong-dtype, nan, bad-values, no-output, garbage, plain, clip-only; with
// --serve the persistent form (serve:), where die (exits at the first request), chatter (answers
// something else than ok) and twice (answers every request with two lines "ok") are three more.
//   tg_verify_fake_codec --mode good --input g.npy --output out.npy --seed 1 ... --steps 2
//   tg_verify_fake_codec --mode good --serve
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tg/atomic_file.hpp"
#include "tg/codec.hpp"
#include "tg/verify/npy.hpp"

namespace {

// One request: the one-shot arguments; returns the exit status the one-shot program would have.
int handle(const std::vector<std::string>& args) {
  std::string mode = "good", in, out, clip = "none";
  std::uint64_t seed = 0;
  std::uint32_t worker = 0, tensor = 0, step = 0, steps = 1;
  double c = 2.5, scalar = -1;
  for (std::size_t i = 0; i + 1 < args.size(); i += 2) {
    const std::string& k = args[i];
    const std::string& v = args[i + 1];
    if (k == "--mode") mode = v;
    else if (k == "--input") in = v;
    else if (k == "--output") out = v;
    else if (k == "--seed") seed = std::stoull(v);
    else if (k == "--worker") worker = static_cast<std::uint32_t>(std::stoul(v));
    else if (k == "--tensor") tensor = static_cast<std::uint32_t>(std::stoul(v));
    else if (k == "--step") step = static_cast<std::uint32_t>(std::stoul(v));
    else if (k == "--steps") steps = static_cast<std::uint32_t>(std::stoul(v));
    else if (k == "--clip") clip = v;
    else if (k == "--c") c = std::stod(v);
    else if (k == "--scalar") scalar = std::stod(v);
  }
  // A codec without clipping or a shared scalar (it ignores --clip and --scalar), and one that always
  // clips (GRACE's TernGrad does) and takes no shared scalar: both correct within what they implement;
  // clip-shared always clips and takes a shared scalar (each worker still clamps at its own bound).
  if (mode == "plain") clip = "none", scalar = -1;
  if (mode == "clip-only") clip = "clip", scalar = -1;
  if (mode == "clip-shared") clip = "clip";  // always clips, and takes a shared scalar
  if (mode == "fail") {
    std::fprintf(stderr, "fake codec: deliberate failure\n");
    return 3;
  }
  if (mode == "sleep") std::this_thread::sleep_for(std::chrono::seconds(20));
  if (mode == "no-output") return 0;
  if (mode == "garbage") {
    tg::write_file_atomic(out, "this is not an npy file");
    return 0;
  }
  auto g = tg::verify::read_npy(in);
  std::size_t d = g.data.size();
  tg::Params p;
  p.clip = tg::parse_clip_mode(clip.c_str());
  p.c = c;
  const tg::Codec& ref = tg::reference_codec();
  tg::ScalarRule rule = scalar >= 0 ? tg::make_rule(static_cast<float>(scalar), tg::clip_bound(ref, g.data, p))
                                    : tg::own_rule(ref, g.data, p, tensor);
  std::vector<float> vals(static_cast<std::size_t>(steps) * d);
  std::vector<std::int8_t> t(d);
  for (std::uint32_t j = 0; j < steps; ++j) {
    ref.ternarize(g.data, rule, {seed, worker, tensor, step + j}, t);
    for (std::size_t k = 0; k < d; ++k) vals[j * d + k] = rule.scalar * static_cast<float>(t[k]);
  }
  if (mode == "nan") vals[0] = std::nanf("");
  if (mode == "bad-values")
    for (auto& v : vals)
      if (v != 0.0f) { v *= 0.5f; break; }
  if (mode == "wrong-shape") {
    vals.push_back(0.0f);
    tg::verify::write_npy(out, vals, {vals.size()});
    return 0;
  }
  if (mode == "wrong-dtype") {
    auto bytes = tg::verify::make_npy(vals, {steps, d});
    std::string s(bytes.begin(), bytes.end());
    s.replace(s.find("<f4"), 3, "<f8");
    tg::write_file_atomic(out, s);
    return 0;
  }
  tg::verify::write_npy(out, vals, {steps, d});
  return 0;
}

// Splits a request line: words separated by spaces, '...' quoting as the battery writes it.
std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::string w;
  bool quoted = false, any = false;
  for (char ch : line) {
    if (ch == '\'') quoted = !quoted, any = true;
    else if (ch == ' ' && !quoted) {
      if (any) out.push_back(w);
      w.clear(), any = false;
    } else w += ch, any = true;
  }
  if (any) out.push_back(w);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> base;
  bool serve = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--serve") serve = true;
    else base.push_back(argv[i]);
  }
  if (!serve) return handle(base);
  std::string mode = base.size() >= 2 && base[0] == "--mode" ? base[1] : "good";
  std::cout << "terngrad-serve 1" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (mode == "die") return 4;
    std::vector<std::string> args = base;
    for (auto& w : words(line)) args.push_back(w);
    int rc = handle(args);
    if (mode == "chatter") std::cout << "hello" << std::endl;
    else if (rc == 0) std::cout << (mode == "twice" ? "ok\nok" : "ok") << std::endl;
    else std::cout << "error the fake codec failed with status " << rc << std::endl;
  }
  return 0;
}
