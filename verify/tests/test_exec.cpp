// terngrad-bench: the exec protocol of the battery (one-shot exec: and persistent serve:) against a
// stand-in program (fake_codec.cpp): a correct program reproduces the reference bytes; failures,
// timeouts, wrong shapes/dtypes, non-finite or malformed values, a missing handshake or a program that
// dies give clear errors. Run: ctest -R tg_verify_tests
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include <unistd.h>

#include "tg/verify/sampler.hpp"

namespace tg::verify {
namespace {

std::vector<float> gradient(std::size_t d) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n;
  std::vector<float> g(d);
  for (auto& x : g) x = n(rng);
  return g;
}

std::string fake(const std::string& mode) { return std::string(TG_FAKE_CODEC) + " --mode " + mode; }

// The error of one request to the stand-in program in `mode`, one-shot (exec:) or persistent (serve:).
std::string error_of(const std::string& mode, double timeout = 30.0, bool serve = false) {
  try {
    auto s = serve ? make_serve_sampler(fake(mode), {timeout}) : make_exec_sampler(fake(mode), {timeout});
    auto g = gradient(37);
    s->draw({g, Params{}, {9, 1, 2, 3}, 2, std::nullopt});
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}
std::string serve_error_of(const std::string& mode, double timeout = 30.0) { return error_of(mode, timeout, true); }

TEST(Exec, GoodProgramReproducesReferenceBytes) {
  auto g = gradient(1001);
  auto ext = make_exec_sampler(fake("good"), {30.0});
  auto ref = make_sampler("reference", {});
  EXPECT_EQ(ext->cost_note(), "");  // nothing run yet
  for (ClipMode m : {ClipMode::none, ClipMode::clip}) {
    Params p;
    p.clip = m;
    DrawRequest r{g, p, {42, 1, 2, 7}, 3, std::nullopt};
    Draws a = ext->draw(r), b = ref->draw(r);
    EXPECT_EQ(a.trits, b.trits);
    EXPECT_EQ(a.scalars, b.scalars);
    EXPECT_TRUE(a.defect.empty());
    r.scalar = 9.5f;  // shared scalar
    a = ext->draw(r), b = ref->draw(r);
    EXPECT_EQ(a.trits, b.trits);
    EXPECT_EQ(a.scalars, b.scalars);
  }
  // what the run's processes cost, said after it (terngrad verify prints it on stderr); in-process codecs say nothing
  const std::string note = ext->cost_note();
  EXPECT_EQ(note.rfind("exec: 4 requests, one process each, ", 0), 0u) << note;
  EXPECT_NE(note.find("ms per request"), std::string::npos) << note;
  EXPECT_NE(note.find("--impl serve:'CMD'"), std::string::npos) << note;
  EXPECT_EQ(ref->cost_note(), "");
}

TEST(Exec, RowWithoutNonzeroOutputTakesTheSharedScalar) {
  // Every |g| is tiny against the shared scalar, so rows can be all zero: their scalar is the one
  // requested (the value file carries no scalar then), and the trits still match the reference.
  std::vector<float> g(16, 1e-6f);
  auto ext = make_exec_sampler(fake("good"), {30.0});
  DrawRequest r{g, Params{}, {3, 0, 0, 0}, 4, 1e6f};
  Draws a = ext->draw(r), b = make_sampler("reference", {})->draw(r);
  EXPECT_EQ(a.trits, b.trits);
  EXPECT_EQ(a.scalars, std::vector<float>(4, 1e6f));
}

TEST(Exec, ErrorsNameTheProblem) {
  EXPECT_NE(error_of("fail").find("exited with status 3"), std::string::npos);
  EXPECT_NE(error_of("fail").find("deliberate failure"), std::string::npos);
  EXPECT_NE(error_of("sleep", 0.3).find("timed out"), std::string::npos);
  EXPECT_NE(error_of("wrong-shape").find("shape (75,), expected (2, 37)"), std::string::npos);
  EXPECT_NE(error_of("wrong-dtype").find("dtype is '<f8'"), std::string::npos);
  // A non-finite output names its value, the request's gradient (its range shows an overflow or an underflow)
  // and the request; so does a wrong shape.
  const std::string nan = error_of("nan");
  EXPECT_NE(nan.find("row 0 element 0 is not finite (NaN)"), std::string::npos) << nan;
  EXPECT_NE(nan.find("(the request's gradient: 37 elements, nonzero |g| from "), std::string::npos) << nan;
  EXPECT_NE(nan.find("--seed 9 --worker 1 --tensor 2 --step 3 --steps 2"), std::string::npos) << nan;
  EXPECT_NE(error_of("wrong-shape").find("; command: "), std::string::npos);
  EXPECT_NE(serve_error_of("nan").find("; request: --input"), std::string::npos);
  EXPECT_NE(error_of("no-output").find("wrote no output file"), std::string::npos);
  EXPECT_NE(error_of("garbage").find("malformed .npy"), std::string::npos);
  EXPECT_NE(error_of("garbage").find("; command: "), std::string::npos);  // which request wrote it
}

// ---- the persistent form (serve:) ------------------------------------------------------------------

TEST(Serve, OneProcessReproducesReferenceBytes) {
  auto g = gradient(1001);
  auto ext = make_serve_sampler(fake("good"), {30.0});
  auto ref = make_sampler("reference", {});
  for (ClipMode m : {ClipMode::none, ClipMode::clip}) {
    Params p;
    p.clip = m;
    for (std::optional<float> shared : {std::optional<float>{}, std::optional<float>{9.5f}}) {
      DrawRequest r{g, p, {42, 1, 2, 7}, 3, shared};
      Draws a = ext->draw(r), b = ref->draw(r);
      EXPECT_EQ(a.trits, b.trits);
      EXPECT_EQ(a.scalars, b.scalars);
    }
  }
  EXPECT_EQ(ext->name(), "serve:" + fake("good"));
}

TEST(Serve, ErrorsNameTheProblem) {
  EXPECT_NE(serve_error_of("fail").find("answered 'error the fake codec failed with status 3'"), std::string::npos);
  EXPECT_NE(serve_error_of("fail").find("deliberate failure"), std::string::npos);  // its stderr
  EXPECT_NE(serve_error_of("sleep", 0.3).find("no answer within 0.3 s"), std::string::npos);
  EXPECT_NE(serve_error_of("die").find("it exited"), std::string::npos);
  EXPECT_NE(serve_error_of("chatter").find("answered 'hello' instead of 'ok'"), std::string::npos);
  EXPECT_NE(serve_error_of("wrong-shape").find("shape (75,), expected (2, 37)"), std::string::npos);
  EXPECT_NE(serve_error_of("garbage").find("malformed .npy"), std::string::npos);
  {  // a second answer to one request is refused at the next one, not taken as its answer
    auto s = make_serve_sampler(fake("twice"), {30.0});
    auto g = gradient(37);
    EXPECT_NO_THROW(s->draw({g, Params{}, {9, 1, 2, 3}, 2, std::nullopt}));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the second line has arrived
    try {
      s->draw({g, Params{}, {9, 1, 2, 5}, 2, std::nullopt});
      ADD_FAILURE() << "a second answer was taken as the next request's";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("it wrote 'ok' after its answer to the request: --input"), std::string::npos) << what;
      EXPECT_NE(what.find("--step 3 "), std::string::npos) << what;  // the request it followed
    }
  }
  // a program that does not speak the persistent form fails the handshake, and one that exits before it
  // too; either way the sampler's temporary folder is removed and SIGPIPE's disposition restored
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("tg-handshake-test-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string saved = old_tmpdir ? old_tmpdir : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  struct sigaction before {};
  ::sigaction(SIGPIPE, nullptr, &before);
  for (const auto& [cmd, want] : {std::pair<std::string, std::string>{"echo hello", "not the handshake 'terngrad-serve 1'"},
                                  {"true", "it exited (end of its output) while the battery waited for the handshake"},
                                  {"/nonexistent/codec-program", "not found"}}) {
    try {
      make_serve_sampler(cmd, {30.0});
      ADD_FAILURE() << "no handshake error: " << cmd;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fs::is_empty(tmp)) << cmd << ": the temporary folder was left behind";
    struct sigaction after {};
    ::sigaction(SIGPIPE, nullptr, &after);
    EXPECT_EQ(after.sa_handler, before.sa_handler) << cmd;
  }
  if (old_tmpdir) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
  fs::remove_all(tmp);
}

TEST(Exec, ValuesOutsideTheTernaryLevelsAreADefect) {
  auto s = make_exec_sampler(fake("bad-values"), {30.0});
  auto g = gradient(64);
  Draws d = s->draw({g, Params{}, {1, 0, 0, 0}, 2, std::nullopt});
  EXPECT_NE(d.defect.find("not in {-s, 0, +s}"), std::string::npos) << d.defect;
}

TEST(Exec, SignalStopsTheProgramAndRemovesTheTemporaryFolder) {
  namespace fs = std::filesystem;
  fs::path tmp = fs::temp_directory_path() / ("tg-interrupt-test-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const char* old_tmpdir = std::getenv("TMPDIR");
  std::string saved = old_tmpdir ? old_tmpdir : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  struct sigaction before {};
  ::sigaction(SIGTERM, nullptr, &before);
  auto start = std::chrono::steady_clock::now();
  {
    auto s = make_exec_sampler(fake("sleep"), {60.0});  // the program sleeps 20 s
    EXPECT_FALSE(fs::is_empty(tmp));                    // the sampler's folder
    std::thread signaller([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::kill(::getpid(), SIGTERM);
    });
    auto g = gradient(37);
    int got = 0;
    try {
      s->draw({g, Params{}, {9, 1, 2, 3}, 2, std::nullopt});
    } catch (const Interrupted& e) {
      got = e.signal_number();
    }
    signaller.join();
    EXPECT_EQ(got, SIGTERM);
    // Further draws refuse to start while the signal is pending.
    EXPECT_THROW(s->draw({g, Params{}, {9, 1, 2, 3}, 2, std::nullopt}), Interrupted);
  }
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, 15.0);          // the program was stopped, not waited for (it sleeps 20 s)
  EXPECT_TRUE(fs::is_empty(tmp));   // the folder went with the sampler
  struct sigaction after {};
  ::sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);  // the previous handler is back
  if (old_tmpdir) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
  fs::remove_all(tmp);
}

// A program that fails and leaves a background child in its process group: the child is stopped with it, not
// left running; and the message carries the program's last lines (a traceback's error is on its last line),
// on one printable line.
TEST(Exec, AFailingProgramsBackgroundChildIsStoppedAndItsLastLinesReported) {
  const std::filesystem::path pidfile =
      std::filesystem::temp_directory_path() / ("tg-exec-child-" + std::to_string(::getpid()) + ".pid");
  const std::string cmd = "sleep 300 & echo $! > '" + pidfile.string() +
                          "'; printf 'Traceback (most recent call last):\\n  File x\\nValueError: the real cause\\n' >&2; "
                          "exit 3; :";
  auto s = make_exec_sampler(cmd, {30.0});
  auto g = gradient(8);
  std::string what;
  try {
    s->draw({g, Params{}, {1, 0, 0, 0}, 1, std::nullopt});
  } catch (const Error& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("exited with status 3"), std::string::npos) << what;
  EXPECT_NE(what.find("Traceback (most recent call last): |   File x | ValueError: the real cause"), std::string::npos)
      << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  std::FILE* f = std::fopen(pidfile.c_str(), "r");
  ASSERT_NE(f, nullptr);
  long child = 0;
  ASSERT_EQ(std::fscanf(f, "%ld", &child), 1);
  std::fclose(f);
  std::filesystem::remove(pidfile);
  ASSERT_GT(child, 1);
  // killed: gone, or a zombie until init reaps it
  bool alive = ::kill(static_cast<pid_t>(child), 0) == 0;
  for (int i = 0; i < 100 && alive; ++i) {
    std::string stat;
    if (std::FILE* st = std::fopen(("/proc/" + std::to_string(child) + "/stat").c_str(), "r")) {
      char buf[256] = {};
      std::fread(buf, 1, sizeof buf - 1, st);
      std::fclose(st);
      stat = buf;
    }
    const std::size_t close = stat.rfind(')');
    if (stat.empty() || (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z')) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    alive = ::kill(static_cast<pid_t>(child), 0) == 0;
    if (i == 99) ::kill(static_cast<pid_t>(child), SIGKILL), ADD_FAILURE() << "background child " << child << " still runs";
  }
}

TEST(Exec, MissingProgramIsAnError) {
  auto s = make_exec_sampler("/nonexistent/codec-program", {30.0});
  auto g = gradient(8);
  EXPECT_THROW(s->draw({g, Params{}, {1, 0, 0, 0}, 1, std::nullopt}), Error);
}

TEST(Impl, ParsingAndAvailability) {
  EXPECT_THROW(make_sampler("bogus", {}), Error);
  EXPECT_THROW(make_sampler("mutant:nope", {}), Error);
  EXPECT_THROW(make_sampler("exec:  ", {}), Error);
  std::string why;
  if (!cuda_usable(&why)) {
    EXPECT_FALSE(why.empty());
    EXPECT_THROW(make_sampler("cuda", {}), Unavailable);
  }
  // every mutant and variant name makes a sampler: Mutants.ListsAndFactoriesAgree
}

}  // namespace
}  // namespace tg::verify
