// terngrad-bench: bindings of the statistical battery (tg_verify) as terngrad._core.verify, re-exported
// by python/terngrad/verify.py: run the whole battery on a named implementation or on a Python
// function that draws, and run the per-gradient checks on arrays of samples drawn anywhere.
// Tests: python/tests/test_verify.py (ctest -L python).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tg/error.hpp"
#include "tg/verify/battery.hpp"
#include "tg/verify/sampler.hpp"
#include "tg/verify/stats.hpp"
#include "views.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace tg_py;
namespace tv = tg::verify;

namespace {

[[noreturn]] void bad_input(const std::string& message) { throw tg::Error(tg::ErrorCode::invalid_argument, message); }

tg::Params check_params(const std::string& clip, double c) {
  tg::Params p;
  p.clip = tg::parse_clip_mode(clip.c_str());
  p.c = c;
  tg::validate(p);
  return p;
}

// One array or a list/tuple of arrays (one per tensor).
std::vector<nb::handle> items(nb::handle obj) {
  std::vector<nb::handle> out;
  if (nb::isinstance<nb::list>(obj) || nb::isinstance<nb::tuple>(obj)) {
    for (nb::handle h : obj) out.push_back(h);
  } else {
    out.push_back(obj);
  }
  return out;
}

// How g and the draws were given, when their counts differ: "g is one array and values a list of 64: ...".
[[noreturn]] void counts_differ(nb::handle g, std::initializer_list<std::pair<const char*, nb::handle>> draws) {
  auto form = [](nb::handle obj) {
    const bool list = nb::isinstance<nb::list>(obj) || nb::isinstance<nb::tuple>(obj);
    return list ? "a list of " + std::to_string(nb::len(obj)) : std::string("one array");
  };
  std::string text = "g is " + form(g);
  for (const auto& [name, obj] : draws) text += std::string(", ") + name + " " + form(obj);
  bad_input(text + ": give one of each per tensor (a list of arrays is a layer-wise gradient, tensor i = layer i; "
                   "the draws of one tensor go in one array with a row per draw, e.g. numpy.asarray(rows, numpy.float32))");
}

std::string nth(const char* what, std::size_t i, std::size_t count) {
  return count == 1 ? std::string(what) : std::string(what) + "[" + std::to_string(i) + "]";
}

// The checks need a finite gradient: the first NaN/Inf of tensor i raises NonFiniteError (tensor i,
// its index), named by the argument it came from, before anything is checked.
void require_finite(std::span<const float> g, std::size_t i, std::size_t count) {
  for (std::size_t k = 0; k < g.size(); ++k)
    if (!std::isfinite(g[k]))
      throw tg::NonFiniteError(static_cast<std::uint32_t>(i), k,
                               nth("g", i, count) + ": element " + std::to_string(k) + " of the gradient is " +
                                   tv::non_finite_name(g[k]) + " (the checks need a finite gradient)");
}

// A number given as the scalar: a TypeError naming it for anything else (a str, bytes, a dict, an array; a bool,
// which would read as 1 or 0), not the cast's RuntimeError "std::bad_cast".
// The scalar is a float32: a value that would become 0 or inf there (1e-46, 1e39) is named, not read as that.
float scalar_number(nb::handle h, const std::string& what) {
  double v = 0.0;
  if (nb::isinstance<nb::bool_>(h) || nb::isinstance<nb::str>(h) || nb::isinstance<nb::bytes>(h) ||
      !nb::try_cast<double>(nb::borrow(h), v))
    throw nb::type_error((what + " must be a number or None, got " + py_type_name(h)).c_str());
  const float f = static_cast<float>(v);
  char b[64];
  std::snprintf(b, sizeof b, "%g", v);
  if (std::isfinite(v) && !std::isfinite(f))
    bad_input(what + " " + b + " is above the largest float32 (3.4028235e+38)");
  if (v != 0.0 && f == 0.0f) bad_input(what + " " + b + " is below the smallest positive float32 (1.4e-45): it would be read as 0");
  return f;
}

// The shared scalar of tensor i: None, one float for every tensor, or a list with one entry each.
std::optional<float> scalar_of(nb::handle scalar, std::size_t i, std::size_t count) {
  if (scalar.is_none()) return std::nullopt;
  if (nb::isinstance<nb::list>(scalar) || nb::isinstance<nb::tuple>(scalar)) {
    if (nb::len(scalar) != count)
      bad_input("scalar: " + std::to_string(nb::len(scalar)) + " entries for " + std::to_string(count) + " tensors");
    nb::handle s = scalar[i];
    if (s.is_none()) return std::nullopt;
    return scalar_number(s, nth("scalar", i, count));
  }
  return scalar_number(scalar, "scalar");
}

// Rows of a (draws, d) array, of a (draws, *g.shape) one (as `terngrad verify --samples` reads), or
// of a flat one of draws * d values. draws: the number asked for, or none (any number of draws).
void check_rows(const AnyArray& a, std::optional<std::size_t> draws, std::size_t d, const std::string& what) {
  std::size_t row = 1;
  for (size_t k = 1; k < a.ndim(); ++k) row *= a.shape(k);
  const std::size_t n = draws ? *draws : (a.ndim() >= 1 ? a.shape(0) : 0);
  bool ok = a.ndim() >= 2 ? a.shape(0) == n && row == d : a.ndim() == 1 && a.size() == n * d;
  if (!ok) {
    std::string got = "(";
    for (size_t k = 0; k < a.ndim(); ++k) got += (k ? ", " : "") + std::to_string(a.shape(k));
    got += a.ndim() == 1 ? ",)" : ")";
    const bool transposed = a.ndim() == 2 && a.shape(0) == d && (draws ? a.shape(1) == *draws : true);
    bad_input(what + " has shape " + got + ", expected (" + (draws ? std::to_string(*draws) : std::string("draws")) +
              ", " + std::to_string(d) + ") (draws x elements)" + (transposed ? ": transposed?" : ""));
  }
}

// alpha and beta in (0, 0.5], as the command line takes them (--alpha, --beta).
void check_error_rates(std::optional<double> alpha, std::optional<double> beta) {
  // tg::Error: terngrad.CodecError, a ValueError, as for every other bad parameter of these functions
  if (alpha && !(*alpha > 0.0 && *alpha <= 0.5))
    throw tg::Error(tg::ErrorCode::invalid_argument, "alpha must be in (0, 0.5], as --alpha");
  if (beta && !(*beta > 0.0 && *beta <= 0.5))
    throw tg::Error(tg::ErrorCode::invalid_argument, "beta must be in (0, 0.5], as --beta");
}

tv::Result run_checks(const std::vector<tv::TensorSamples>& samples, const std::string& clip, double c, double alpha,
                      double beta, bool independence, const std::string& family) {
  check_error_rates(alpha, beta);
  tv::SampleCheckOptions o;
  o.params = check_params(clip, c);
  o.alpha_total = alpha;
  o.beta = beta;
  o.independence = independence;
  o.family = family;
  nb::gil_scoped_release release;
  return tv::check_samples(samples, o);
}

// ---- a Python function as the battery's implementation ----------------------------------------------

// A draw() result has one row per step, as an external program's output file must: shape (steps, d), not flat.
void require_two_dimensions(const AnyArray& a, std::uint32_t steps, std::size_t d, const std::string& what) {
  if (a.ndim() == 2) return;
  std::string got = "(";
  for (size_t k = 0; k < a.ndim(); ++k) got += (k ? ", " : "") + std::to_string(a.shape(k));
  got += a.ndim() == 1 ? ",)" : ")";
  bad_input(what + " has shape " + got + ", expected (" + std::to_string(steps) + ", " + std::to_string(d) +
            ") (one row per step)");
}

const char* kDrawDoc =
    "draw(g, *, seed, worker, tensor, step, steps, clip, c, scalar) -> values | (trits, scalars): "
    "g a float32 array (the tensor, a copy), row j of the result the estimate of g at step "
    "`step + j` of the stream (seed, worker, tensor); clip 'none', 'clip' or 'saturate' with factor c; "
    "scalar None (each row's own scalar) or the shared scalar to use. Return either the decoded values "
    "(float32, shape (steps, g.size)) or (trits int8 (steps, g.size), scalars float32 (steps,)).";

// The draw() call that answered: its keyword arguments, to call it again by hand.
std::string request_note(const tv::DrawRequest& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "request: seed=%llu, worker=%u, tensor=%u, step=%u, steps=%u, clip='%s', c=%.9g",
                static_cast<unsigned long long>(r.key.seed), r.key.worker, r.key.tensor, r.key.step, r.steps,
                tg::to_string(r.params.clip), r.params.c);
  std::string s = buf;
  if (r.scalar) {
    std::snprintf(buf, sizeof buf, ", scalar=%.9g", static_cast<double>(*r.scalar));
    s += buf;
  }
  return s;
}

class PySampler : public tv::Sampler {
 public:
  PySampler(nb::callable fn, std::string name) : fn_(std::move(fn)), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  tv::Draws draw(const tv::DrawRequest& r) override {
    nb::gil_scoped_acquire gil;
    const std::size_t d = r.g.size();
    nb::object g = nb::cast(to_numpy(std::vector<float>(r.g.begin(), r.g.end())));
    nb::object scalar = r.scalar ? nb::cast(*r.scalar) : nb::none();
    nb::object out = fn_(g, "seed"_a = r.key.seed, "worker"_a = r.key.worker, "tensor"_a = r.key.tensor,
                         "step"_a = r.key.step, "steps"_a = r.steps, "clip"_a = tg::to_string(r.params.clip),
                         "c"_a = r.params.c, "scalar"_a = scalar);
    if (nb::isinstance<nb::tuple>(out) && nb::len(out) != 2)
      bad_input("draw() returned a tuple of " + std::to_string(nb::len(out)) +
                " items: return the values (float32, shape (steps, g.size)) or the pair (trits, scalars); " +
                request_note(r));
    if (nb::isinstance<nb::tuple>(out)) {
      View<std::int8_t> t = view_of<std::int8_t>(out[0], "draw() trits", false);  // its shape named first
      View<float> s = view_of<float>(out[1], "draw() scalars");
      require_two_dimensions(t.array, r.steps, d, "draw() trits");
      check_rows(t.array, r.steps, d, "draw() trits");
      require_contiguous(t, "draw() trits");
      if (s.span.size() != r.steps)
        bad_input("draw() returned " + std::to_string(s.span.size()) + " scalars for " + std::to_string(r.steps) +
                  " steps");
      tv::Draws dr;
      dr.d = d;
      dr.steps = r.steps;
      dr.trits.assign(t.span.begin(), t.span.end());
      dr.scalars.assign(s.span.begin(), s.span.end());
      // a trit other than -1, 0, +1 is an output not of the form {-s, 0, +s}: the structure row's (kept as its sign)
      for (std::size_t i = 0; i < dr.trits.size(); ++i)
        if (dr.trits[i] < -1 || dr.trits[i] > 1) {
          if (dr.defect.empty())
            dr.defect = "draw() trits row " + std::to_string(i / d) + " element " + std::to_string(i % d) + " is " +
                        std::to_string(dr.trits[i]) + " (trits are -1, 0 or +1); " + request_note(r);
          dr.trits[i] = static_cast<std::int8_t>(dr.trits[i] > 0 ? 1 : -1);
        }
      for (std::uint32_t j = 0; j < r.steps; ++j)
        if (!std::isfinite(dr.scalars[j]))
          bad_input("draw() scalar of row " + std::to_string(j) + " is not finite (" + std::to_string(dr.scalars[j]) +
                    ") (" + tv::gradient_range_note(r.g) + "); " + request_note(r));
      return dr;
    }
    View<float> v = view_of<float>(out, "draw() output", false);  // a transposed array: its shape named first
    require_two_dimensions(v.array, r.steps, d, "draw() output");
    check_rows(v.array, r.steps, d, "draw() output");
    require_contiguous(v, "draw() output");
    try {
      return tv::draws_from_values(v.span, d, r.steps, r.scalar, "draw() output");
    } catch (const tg::Error& e) {  // a non-finite value: the gradient's range shows an overflow or underflow
      throw tg::Error(e.code(), std::string(e.what()) + " (" + tv::gradient_range_note(r.g) + "); " + request_note(r));
    }
  }

 private:
  nb::callable fn_;
  std::string name_;
};

std::string fn_name(nb::handle fn) {
  for (const char* attr : {"__qualname__", "__name__"})
    if (nb::hasattr(fn, attr)) return nb::cast<std::string>(nb::str(fn.attr(attr)));
  return py_type_name(fn);
}

// module.qualname of a function (its qualname alone where the module is __main__ or unknown): how the reproduce line
// of a run names it.
std::string module_qualified_name(nb::handle fn) {
  std::string name = fn_name(fn);
  if (nb::hasattr(fn, "__module__") && !nb::getattr(fn, "__module__").is_none()) {
    const std::string module = nb::cast<std::string>(nb::str(fn.attr("__module__")));
    if (!module.empty() && module != "__main__") name = module + "." + name;
  }
  return name;
}

// A sampler from an implementation name or a Python draw function; *python says which.
std::unique_ptr<tv::Sampler> sampler_of(nb::handle impl, const std::optional<std::string>& name, bool* python,
                                        double exec_timeout = 300.0) {
  if (nb::isinstance<nb::str>(impl)) {
    *python = false;
    tv::ExecOptions eo;
    eo.timeout_s = exec_timeout;
    return tv::make_sampler(nb::cast<std::string>(impl), eo);
  }
  if (!PyCallable_Check(impl.ptr()))
    throw nb::type_error(("impl must be a name ('optimized', 'reference', 'exec:CMD', 'mutant:NAME') or a "
                          "function draw(g, *, seed, worker, tensor, step, steps, clip, c, scalar), got " +
                          py_type_name(impl))
                             .c_str());
  *python = true;
  return std::make_unique<PySampler>(nb::borrow<nb::callable>(impl), name ? *name : "python:" + fn_name(impl));
}

std::string row_repr(const tv::Row& r) {
  std::string verdict = r.kind == "info" ? "info" : (r.pass ? "pass" : "FAIL");
  return "Row(" + r.check + ", " + r.family + ": " + r.statistic + ", threshold " + r.threshold + ", " + verdict + ")";
}

}  // namespace

void bind_verify(nb::module_& m) {
  nb::module_ v = m.def_submodule(
      "verify",
      "The statistical battery of terngrad-bench (docs/battery.md): every check states its false-fail "
      "rate (alpha_total split over the decisions, Bonferroni) and its power (the smallest effect found "
      "with probability 1 - beta).");

  nb::exception<tv::Unavailable>(v, "Unavailable", PyExc_RuntimeError);
  nb::exception<tv::Interrupted>(v, "Interrupted", PyExc_KeyboardInterrupt);

  nb::list profiles;
  for (const char* p : {"quick", "ci", "full"}) profiles.append(p);
  v.attr("PROFILES") = nb::tuple(profiles);
  nb::list checks;
  for (const auto& c : tv::check_names()) checks.append(c);
  v.attr("CHECKS") = nb::tuple(checks);
  nb::dict mutants;
  for (const auto& mu : tv::mutant_list()) mutants[mu.name] = mu.description;
  v.attr("MUTANTS") = mutants;
  nb::dict variants;
  for (const auto& va : tv::variant_list()) variants[va.name] = va.description;
  v.attr("VARIANTS") = variants;
  nb::list caps;
  for (const auto& c : tv::capability_names()) caps.append(c);
  v.attr("CAPABILITIES") = nb::tuple(caps);

  nb::class_<tv::Row>(v, "Row", "One line of a battery report.")
      .def_ro("check", &tv::Row::check, "check name, e.g. 'unbiased' or 'clipping.variance'")
      .def_ro("family", &tv::Row::family, "gradient family (or 'samples', or what was compared)")
      .def_ro("kind", &tv::Row::kind, "'exact' (a deterministic fact), 'stat' (uses alpha) or 'info' (not tested)")
      .def_ro("statistic", &tv::Row::statistic, "what was observed")
      .def_ro("threshold", &tv::Row::threshold, "where it would fail")
      .def_ro("p_value", &tv::Row::pvalue, "p-value, its bound, or '-'")
      .def_ro("detectable", &tv::Row::power, "smallest effect detected with probability >= 1 - beta")
      .def_ro("alpha", &tv::Row::alpha, "this decision's share of alpha_total (0 for exact and info rows)")
      .def_prop_ro("passed", [](const tv::Row& r) { return r.pass; }, "False when the check failed")
      .def_ro("detail", &tv::Row::detail, "why it failed, or what it compared")
      .def_ro("id", &tv::Row::id, "unique within a run and the same on every seed: check/family[/label]")
      .def_ro("z", &tv::Row::z, "standardized statistic S / sqrt(Var S under H0) (nan where there is none)")
      .def_ro("p", &tv::Row::p, "the row's p-value, or its Bernstein bound (may exceed 1); nan for exact/info rows")
      .def("__repr__", &row_repr);

  nb::class_<tv::Result>(v, "Result",
                         "A battery run: rows, the error budget, and the verdict. table() is the report "
                         "`terngrad verify` prints; to_json() its --json document.")
      .def_ro("impl", &tv::Result::impl, "implementation name ('samples' for check_samples/check_values)")
      .def_ro("rows", &tv::Result::rows, "list of Row, in report order")
      .def_ro("decisions", &tv::Result::decisions, "number of statistical decisions sharing alpha_total")
      .def_ro("alpha_each", &tv::Result::alpha_each, "alpha_total / decisions")
      .def_ro("seconds", &tv::Result::seconds, "wall time of the run")
      .def_prop_ro("alpha_total", [](const tv::Result& r) { return r.options.profile.alpha_total; },
                   "probability that a correct implementation fails this run (an upper bound)")
      .def_prop_ro("beta", [](const tv::Result& r) { return r.options.profile.beta; },
                   "1 - beta is the power at which the 'detectable' column is stated")
      .def_prop_ro("profile", [](const tv::Result& r) { return r.options.profile.name; }, "profile name")
      .def_prop_ro("passed", &tv::Result::pass, "True when no row failed")
      .def_prop_ro("failed_checks", &tv::Result::failed_checks, "names of the failed checks")
      .def("table", &tv::format_table, "The report as text (as `terngrad verify` prints it).")
      .def("to_json", [](const tv::Result& r) { return tv::format_json({r}); },
           "The report as JSON (the schema of `terngrad verify --json`, docs/verify-output.schema.json).")
      .def("to_junit", [](const tv::Result& r) { return tv::format_junit({r}); },
           "The report as JUnit XML (`terngrad verify --junit`): one case per row, stable names.")
      .def("summary", &tv::format_summary,
           "A few lines: the verdict, each failed row (effect measured against the smallest detectable one, and "
           "why), and the command that reproduces the run. Short enough for an assertion message.")
      .def("__repr__", [](const tv::Result& r) {
        return "Result(impl='" + r.impl + "', " + (r.pass() ? "passed" : "FAILED") + ", " +
               std::to_string(r.rows.size()) + " rows, " + std::to_string(r.decisions) + " decisions)";
      });

  v.def(
      "run",
      [](nb::object impl, const std::string& profile, std::uint64_t seed, std::vector<std::string> skip,
         std::optional<double> alpha, std::optional<double> beta, bool progress, std::optional<std::string> name,
         std::vector<std::string> supports, bool reproducible, double exec_timeout) {
        check_error_rates(alpha, beta);
        if (!(exec_timeout >= 0.001 && exec_timeout <= 86400.0))
          throw tg::Error(tg::ErrorCode::invalid_argument, "exec_timeout must be in [0.001, 86400] seconds, as --exec-timeout");
        tv::Options o;
        o.profile = tv::profile_named(profile);
        if (alpha) o.profile.alpha_total = *alpha;
        if (beta) o.profile.beta = *beta;
        o.seed = seed;
        o.skip.insert(skip.begin(), skip.end());
        o.supports.insert(supports.begin(), supports.end());
        o.reproducible = reproducible;
        o.progress = progress;
        bool python = false;
        std::unique_ptr<tv::Sampler> s = sampler_of(impl, name, &python, exec_timeout);
        if (python) {
          tv::Result r = tv::run_battery(*s, o);
          r.python_function = module_qualified_name(impl);
          return r;
        }
        // The run releases the GIL; between blocks of draws it takes it back to let Python's signal
        // handlers run, so Ctrl-C stops a long run (KeyboardInterrupt) instead of waiting for its end.
        o.poll = [] {
          nb::gil_scoped_acquire gil;
          if (PyErr_CheckSignals() != 0) throw nb::python_error();
        };
        nb::gil_scoped_release release;
        return tv::run_battery(*s, o);
      },
      "impl"_a = "optimized", "profile"_a = "ci", "seed"_a = 20171204, "skip"_a = std::vector<std::string>{},
      "alpha"_a = nb::none(), "beta"_a = nb::none(), "progress"_a = false, "name"_a = nb::none(),
      "supports"_a = std::vector<std::string>{}, "reproducible"_a = true, "exec_timeout"_a = 300.0,
      (std::string("Run the whole battery (the checks of CHECKS on the families of docs/battery.md) and return a "
                   "Result. impl: 'optimized', 'reference', 'mutant:NAME' (see MUTANTS), 'exec:CMD' (an external "
                   "program, docs/battery.md), or a Python function\n    ") +
       kDrawDoc +
       "\nprofile: 'quick', 'ci' (the default, as the CLI's) or 'full' (sizes and alpha_total; alpha/beta override). skip: check names to "
       "leave out, e.g. ['cross']. supports: what the implementation implements (CAPABILITIES; default all), "
       "e.g. ['clip', 'spec-stream'] for a codec that always clips. reproducible=False: the implementation draws "
       "fresh randomness on every call (a framework's global generator), so only the same-key comparisons and "
       "cross are left out. exec_timeout: seconds an 'exec:' or 'serve:' program may take per request (as "
       "--exec-timeout). A correct implementation fails with "
       "probability <= alpha_total. 'cuda' "
       "raises Unavailable when the module was built without the CUDA codec or no usable device is present.")
          .c_str());

  nb::class_<tv::CompareCase>(v, "CompareCase", "One case of compare(): a family, a layer, a clipping mode.")
      .def_ro("family", &tv::CompareCase::family)
      .def_ro("layer", &tv::CompareCase::layer)
      .def_ro("mode", &tv::CompareCase::mode, "'none', 'clip' or 'saturate'; '+shared' with a shared scalar")
      .def_ro("trits", &tv::CompareCase::trits, "trits compared")
      .def_ro("payloads", &tv::CompareCase::payloads, "payloads compared byte for byte (0 unless both are codecs)")
      .def_ro("difference", &tv::CompareCase::difference, "'' when identical, else the first difference")
      .def_prop_ro("identical", [](const tv::CompareCase& k) { return k.difference.empty(); })
      .def("__repr__", [](const tv::CompareCase& k) {
        return "CompareCase(" + k.family + "/" + k.layer + " " + k.mode + ": " +
               (k.difference.empty() ? std::string("identical") : k.difference) + ")";
      });
  nb::class_<tv::CompareResult>(v, "CompareResult", "Two implementations compared bit for bit.")
      .def_ro("a", &tv::CompareResult::a)
      .def_ro("b", &tv::CompareResult::b)
      .def_ro("cases", &tv::CompareResult::cases, "list of CompareCase")
      .def_ro("seconds", &tv::CompareResult::seconds)
      .def_prop_ro("identical", &tv::CompareResult::identical, "True when every case is identical")
      .def_prop_ro("trits", &tv::CompareResult::trits)
      .def_prop_ro("payloads", &tv::CompareResult::payloads)
      .def_prop_ro("first_difference",
                   [](const tv::CompareResult& r) -> std::optional<tv::CompareCase> {
                     const tv::CompareCase* k = r.first_difference();
                     return k ? std::optional<tv::CompareCase>(*k) : std::nullopt;
                   },
                   "the first differing CompareCase, or None")
      .def("table", &tv::format_compare, "The table `terngrad compare` prints.")
      .def("to_json", &tv::format_compare_json, "The JSON of `terngrad compare --json`.")
      .def("__repr__", [](const tv::CompareResult& r) {
        return "CompareResult(" + r.a + " vs " + r.b + ": " + (r.identical() ? "identical" : "DIFFERENT") + ", " +
               std::to_string(r.cases.size()) + " cases)";
      });

  v.def(
      "compare",
      [](nb::handle a, nb::handle b, std::size_t d, std::uint32_t steps, std::uint64_t seed,
         std::vector<std::string> clip, bool shared, bool stop_at_first, double exec_timeout) {
        // the command line's bounds (--elements, --draws, --exec-timeout)
        if (d < 1 || d > (std::size_t{1} << 26))
          throw tg::Error(tg::ErrorCode::invalid_argument, "d must be in [1, 67108864], as --elements, got " + std::to_string(d));
        if (steps < 1 || steps > 1024)
          throw tg::Error(tg::ErrorCode::invalid_argument, "steps must be in [1, 1024], as --draws, got " + std::to_string(steps));
        if (!(exec_timeout >= 0.001 && exec_timeout <= 86400.0))
          throw tg::Error(tg::ErrorCode::invalid_argument, "exec_timeout must be in [0.001, 86400] seconds, as --exec-timeout");
        tv::CompareOptions o;
        o.d = d;
        o.steps = steps;
        o.seed = seed;
        o.modes.clear();
        for (const auto& m : clip) o.modes.push_back(tg::parse_clip_mode(m.c_str()));
        o.shared_scalar = shared;
        o.stop_at_first = stop_at_first;
        bool pa = false, pb = false;
        std::unique_ptr<tv::Sampler> sa = sampler_of(a, std::nullopt, &pa, exec_timeout),
                                     sb = sampler_of(b, std::nullopt, &pb, exec_timeout);
        if (pa || pb) return tv::compare_samplers(*sa, *sb, o);
        nb::gil_scoped_release release;
        return tv::compare_samplers(*sa, *sb, o);
      },
      "a"_a, "b"_a, "d"_a = 4099, "steps"_a = 2, "seed"_a = 20171204,
      "clip"_a = std::vector<std::string>{"none", "clip", "saturate"}, "shared"_a = true, "stop_at_first"_a = false,
      "exec_timeout"_a = 300.0,
      "Compare two implementations bit for bit (`terngrad compare`): each a name as in run() or a draw "
      "function. Every family and layer of the battery, each clipping mode in `clip` and (shared=True) once "
      "with a shared scalar: scalars and trits equal, payloads byte-identical where both are codecs. "
      "Returns a CompareResult (identical, cases, first_difference, table()).");

  v.def(
      "check_samples",
      [](nb::handle g, nb::handle trits, nb::handle scalars, const std::string& clip, double c, nb::handle scalar,
         double alpha, double beta, bool independence, const std::string& family) {
        std::vector<nb::handle> gs = items(g), ts = items(trits), ss = items(scalars);
        const std::size_t count = gs.size();
        if (ts.size() != count || ss.size() != count)
          counts_differ(g, {{"trits", trits}, {"scalars", scalars}});
        std::vector<FloatView> gv, sv;
        std::vector<View<std::int8_t>> tv_;
        std::vector<tv::TensorSamples> samples;
        for (std::size_t i = 0; i < count; ++i) {
          gv.push_back(float_view(gs[i], nth("g", i, count).c_str()));
          require_finite(gv.back().span, i, count);
          sv.push_back(float_view(ss[i], nth("scalars", i, count).c_str()));
          tv_.push_back(view_of<std::int8_t>(ts[i], nth("trits", i, count).c_str(), false));  // its shape named first
          // The draws are the rows of trits: trits is named for its own shape, scalars for its count.
          const AnyArray& ta = tv_.back().array;
          const std::size_t d = gv.back().span.size();
          const std::size_t draws = ta.ndim() >= 2 ? ta.shape(0) : (d > 0 ? ta.size() / d : sv.back().span.size());
          check_rows(ta, draws, d, nth("trits", i, count));
          require_contiguous(tv_.back(), nth("trits", i, count).c_str());
          if (sv.back().span.size() != draws)
            bad_input(nth("scalars", i, count) + " has " + std::to_string(sv.back().span.size()) + " values for the " +
                      std::to_string(draws) + " draws of " + nth("trits", i, count) + " (one scalar per draw)");
          samples.push_back({gv.back().span, tv_.back().span, sv.back().span, scalar_of(scalar, i, count), {}});
        }
        return run_checks(samples, clip, c, alpha, beta, independence, family);
      },
      "g"_a, "trits"_a, "scalars"_a, "clip"_a = "none", "c"_a = 2.5, "scalar"_a = nb::none(), "alpha"_a = 1e-6,
      "beta"_a = 1e-3, "independence"_a = true, "family"_a = "samples",
      "The battery's per-gradient checks on draws made anywhere: g (float32, the gradient), trits (int8, "
      "shape (draws, g.size), row j = draw j, values -1/0/+1) and scalars (float32, one per draw). Lists of "
      "arrays check a layer-wise gradient (tensor i = layer i). Checks: structure (exact: the scalar against "
      "the spec's for g under clip/c, signs, |g| >= s kept, 0 never kept), unbiased per coordinate "
      "(exact binomial) and pooled (Bernstein), the variance identity, and independence of the masks (block scales and lags). "
      "scalar: the shared scalar the draws were asked for (one value, or one per tensor). The draws must be "
      "independent (distinct steps or seeds). A correct codec fails with probability <= alpha; each row "
      "states its power at 1 - beta. Returns a Result.");

  v.def(
      "check_values",
      [](nb::handle g, nb::handle values, const std::string& clip, double c, nb::handle scalar, double alpha,
         double beta, bool independence, const std::string& family) {
        std::vector<nb::handle> gs = items(g), vs = items(values);
        const std::size_t count = gs.size();
        if (vs.size() != count)
          counts_differ(g, {{"values", values}});
        std::vector<FloatView> gv;
        std::vector<tv::Draws> draws;
        std::vector<tv::TensorSamples> samples;
        draws.reserve(count);
        for (std::size_t i = 0; i < count; ++i) {
          gv.push_back(float_view(gs[i], nth("g", i, count).c_str()));
          require_finite(gv.back().span, i, count);
          FloatView val = view_of<float>(vs[i], nth("values", i, count).c_str(), false);  // its shape named first
          const std::size_t d = gv.back().span.size();
          // Before anything is allocated per draw: values of shape (1e9, 0) cost no memory.
          if (d == 0) bad_input(nth("g", i, count) + " is empty");
          if (val.array.ndim() < 2)
            bad_input(nth("values", i, count) + " must have shape (draws, " + std::to_string(d) +
                      ") or (draws, *g.shape), got 1 dimension");
          check_rows(val.array, std::nullopt, d, nth("values", i, count));
          require_contiguous(val, nth("values", i, count).c_str());
          std::optional<float> s = scalar_of(scalar, i, count);
          draws.push_back(tv::draws_from_values(val.span, d, static_cast<std::uint32_t>(val.array.shape(0)), s,
                                                nth("values", i, count)));
          samples.push_back({gv.back().span, draws.back().trits, draws.back().scalars, s, draws.back().defect});
        }
        return run_checks(samples, clip, c, alpha, beta, independence, family);
      },
      "g"_a, "values"_a, "clip"_a = "none", "c"_a = 2.5, "scalar"_a = nb::none(), "alpha"_a = 1e-6, "beta"_a = 1e-3,
      "independence"_a = true, "family"_a = "samples",
      "check_samples on decoded estimates: values (float32, shape (draws, g.size) or (draws, *g.shape)), row j "
      "= g~ of draw j. "
      "Each row's scalar is its largest |value| (a row of zeros takes `scalar`, or 0); a value that is not "
      "-s, 0 or +s fails the structure row. Lists of arrays check a layer-wise gradient.");

  v.def(
      "clopper_pearson",
      [](std::uint64_t n, std::uint64_t k, double alpha) {
        if (k > n) throw nb::value_error("k must not exceed n");
        if (!(alpha > 0 && alpha < 1)) throw nb::value_error("alpha must be in (0, 1)");
        tv::Interval i = tv::clopper_pearson(n, k, alpha);
        return std::make_pair(i.lo, i.hi);
      },
      "n"_a, "k"_a, "alpha"_a,
      "Exact (Clopper-Pearson) two-sided interval (lo, hi) for a probability after k successes in n trials, "
      "coverage 1 - alpha: the per-coordinate test of the 'unbiased' check.");
  v.def(
      "bernstein_threshold",
      [](double variance, double bound, double alpha) {
        if (!(variance >= 0) || !(bound >= 0)) throw nb::value_error("variance and bound must be >= 0");
        if (!(alpha > 0 && alpha < 1)) throw nb::value_error("alpha must be in (0, 1)");
        return tv::bernstein_threshold(variance, bound, alpha);
      },
      "variance"_a, "bound"_a, "alpha"_a,
      "The x with P(|S| >= x) <= alpha for a sum S of independent zero-mean terms, |term| <= bound, total "
      "variance `variance` (Bernstein): the threshold of the pooled, variance and independence checks.");
}
