// terngrad-bench: nanobind bindings of the TernGrad codec (module terngrad._core; the package
// python/terngrad/__init__.py re-exports it). Built by the project's CMake (target tg_python);
// tested by python/tests (ctest -L python). NumPy float32 arrays come in without a copy.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tg/codec.hpp"
#include "tg/output_file.hpp"
#include "tg/strf.hpp"
#include "views.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace tg_py;

void bind_verify(nb::module_& m);  // verify_bindings.cpp

namespace {

// ---- exceptions ------------------------------------------------------------------------------

PyObject* g_codec_error = nullptr;       // terngrad.CodecError(ValueError)
PyObject* g_non_finite_error = nullptr;  // terngrad.NonFiniteError(CodecError)

void raise_codec_error(const tg::Error& e, PyObject* cls) {
  PyObject* inst = PyObject_CallFunction(cls, "s", e.what());
  if (!inst) return;  // the call itself set a Python error
  PyObject* code = PyUnicode_FromString(tg::to_string(e.code()));
  PyObject_SetAttrString(inst, "code", code);
  Py_XDECREF(code);
  if (auto* nf = dynamic_cast<const tg::NonFiniteError*>(&e)) {
    PyObject* tensor = PyLong_FromUnsignedLong(nf->tensor());
    PyObject* index = PyLong_FromUnsignedLongLong(nf->index());
    PyObject_SetAttrString(inst, "tensor", tensor);
    PyObject_SetAttrString(inst, "index", index);
    Py_XDECREF(tensor);
    Py_XDECREF(index);
  }
  PyErr_SetObject(cls, inst);
  Py_DECREF(inst);
}

void translate_codec_errors(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const tg::NonFiniteError& e) {
    raise_codec_error(e, g_non_finite_error);
  } catch (const tg::Error& e) {
    raise_codec_error(e, g_codec_error);
  }
}

// ---- inputs ----------------------------------------------------------------------------------

// Bytes of a payload: bytes, bytearray, memoryview or a contiguous uint8 array, without a copy.
struct ByteView {
  nb::object keep;
  AnyArray array;
  std::span<const std::uint8_t> span;
};

ByteView byte_view(nb::handle obj, const char* what) {
  ByteView v;
  if (nb::isinstance<nb::bytes>(obj)) {
    nb::bytes b = nb::borrow<nb::bytes>(obj);
    v.keep = b;
    v.span = {reinterpret_cast<const std::uint8_t*>(b.c_str()), b.size()};
    return v;
  }
  if (!nb::try_cast(obj, v.array, false))
    throw nb::type_error((std::string(what) + " must be bytes, bytearray, memoryview or a uint8 array, got " +
                          py_type_name(obj))
                             .c_str());
  if (v.array.dtype() != nb::dtype<std::uint8_t>() || !c_contiguous(v.array))
    throw nb::type_error((std::string(what) + " must be contiguous bytes (uint8)").c_str());
  v.span = {static_cast<const std::uint8_t*>(v.array.data()), v.array.size()};
  return v;
}

// ---- outputs ---------------------------------------------------------------------------------

nb::bytes to_bytes(const std::vector<std::uint8_t>& v) {
  return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

// A payload as bytes (one copy), or as_array: a writable NumPy uint8 array that owns the encoder's
// buffer (no copy), which torch.from_numpy wraps as it is.
nb::object payload_object(std::vector<std::uint8_t>&& v, bool as_array) {
  if (as_array) return nb::cast(to_numpy(std::move(v)));
  return to_bytes(v);
}

// ---- codecs ----------------------------------------------------------------------------------

// Codecs by the registry's names (tg::make_codec: reference, optimized, optimized-<isa>[-t<N>]), made
// once each; "portable" is kept as the older name of optimized-portable-t1.
const tg::Codec& codec_named(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const tg::Codec>> made;
  std::string key = name == "portable" ? "optimized-portable-t1" : name;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = made.find(key);
  if (it == made.end()) it = made.emplace(key, tg::make_codec(key)).first;  // tg::Error -> CodecError
  return *it->second;
}

tg::Params make_params(const std::string& clip, double c, const std::string& packing, std::uint64_t float_below) {
  tg::Params p;
  p.clip = tg::parse_clip_mode(clip.c_str());
  p.c = c;
  p.packing = tg::parse_packing(packing.c_str());
  p.float_below = float_below;
  tg::validate(p);
  return p;
}

std::string packing_name(tg::Packing p) { return tg::to_string(p); }

// Arrays are held as the NumPy objects themselves, so every attribute access returns the same array.
struct PyDecoded {
  nb::object values;
  tg::Header header;
};

struct PyAggregate {
  float scalar;
  std::uint32_t workers;
  nb::object sums;
  nb::object mean;
};

const char* kKeyDoc =
    "seed, worker, tensor, step: the stream key (Philox4x32-10, key = seed, counter = "
    "(i/4, step, tensor, worker)); the same key gives the same bytes on every implementation.";

// The arguments every per-tensor statistic takes (g, clip rule, codec): parsed once, then f(codec, g,
// params) runs without the GIL.
template <typename F>
auto with_clip_args(nb::handle g, const std::string& clip, double c, const std::string& codec, F f) {
  FloatView v = float_view(g, "g");
  tg::Params p = make_params(clip, c, "2bit", 0);
  const tg::Codec& cd = codec_named(codec);
  nb::gil_scoped_release release;
  return f(cd, v.span, p);
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() =
      "TernGrad codec (Wen et al., NeurIPS 2017): stochastic ternary gradients g~ = s * sign(g) * b, "
      "b ~ Bernoulli(|g|/s), s = max|g| after the clipping rule. Bindings of the C++ codec of "
      "terngrad-bench; bytes are identical to the C++ codec's.";

  g_codec_error = PyErr_NewExceptionWithDoc(
      "terngrad.CodecError",
      "A codec error (bad option, malformed payload, ...). `code` names it: invalid_argument, "
      "truncated, bad_magic, bad_version, bad_packing, invalid_code, crc_mismatch, length_overflow, "
      "length_mismatch, scalar_mismatch, non_finite.",
      PyExc_ValueError, nullptr);
  g_non_finite_error = PyErr_NewExceptionWithDoc(
      "terngrad.NonFiniteError",
      "NaN or Inf in a gradient; `tensor` and `index` name the first bad value. Nothing is encoded.",
      g_codec_error, nullptr);
  m.attr("CodecError") = nb::handle(g_codec_error);
  m.attr("NonFiniteError") = nb::handle(g_non_finite_error);
  nb::register_exception_translator(translate_codec_errors);

  m.def(
      "write_output",
      [](const std::string& path, nb::bytes data) {
        try {
          std::string_view text(static_cast<const char*>(data.data()), data.size());
          nb::gil_scoped_release release;
          tg::write_output(path, text);
        } catch (const tg::OutputError& e) {
          PyErr_SetString(PyExc_OSError, e.what());
          throw nb::python_error();
        }
      },
      "path"_a, "data"_a,
      "The project's output writer (common/include/tg/output_file.hpp): temp + fsync + rename for a regular "
      "file or a new path, the resolved target of a symlink, in place for a character device, FIFO or "
      "/dev/stdout, refused (OSError) for a folder, block device or socket. A failed write leaves the "
      "previous file intact.");

  m.attr("HEADER_BYTES") = tg::kHeaderBytes;
  m.attr("FORMAT_VERSION") = tg::kFormatVersion;
  m.attr("MAX_ELEMENTS") = tg::kMaxElements;
  {  // the registry's names this CPU runs, and the older alias "portable"
    nb::list names;
    for (const std::string& n : tg::codec_names()) names.append(n);
    names.append("portable");
    m.attr("CODECS") = nb::steal(PyList_AsTuple(names.ptr()));
  }
  m.attr("CLIP_MODES") = nb::make_tuple("none", "clip", "saturate");
  m.attr("PACKINGS") = nb::make_tuple("2bit", "base3");

  nb::class_<tg::Header>(m, "Header", "The fields of a validated 32-byte payload header.")
      .def_prop_ro("packing", [](const tg::Header& h) { return packing_name(h.packing); },
                   "'2bit', 'base3' or 'float32'")
      .def_ro("count", &tg::Header::count, "number of elements")
      .def_ro("scalar", &tg::Header::scalar, "the scalar s (0 for float32 payloads)")
      .def_ro("tensor", &tg::Header::tensor, "tensor id")
      .def_ro("body_crc", &tg::Header::body_crc, "CRC32C of the body")
      .def("__repr__", [](const tg::Header& h) {
        return "Header(packing='" + packing_name(h.packing) + "', count=" + std::to_string(h.count) +
               ", scalar=" + std::string(nb::repr(nb::float_(h.scalar)).c_str()) +
               ", tensor=" + std::to_string(h.tensor) + ")";
      });

  nb::class_<tg::TensorStats>(m, "TensorStats",
                              "One worker's statistics of one tensor (tensor_stats): its scalar and clip bound.")
      .def_ro("count", &tg::TensorStats::count, "elements of the tensor they describe")
      .def_prop_ro("clip", [](const tg::TensorStats& t) { return std::string(tg::to_string(t.clip)); },
                   "the clipping mode they were computed under")
      .def_ro("c", &tg::TensorStats::c, "the clip factor they were computed under")
      .def_ro("max_abs", &tg::TensorStats::max_abs, "max |g|")
      .def_ro("bound", &tg::TensorStats::bound, "the clip bound c*sigma as float32 (inf for clip='none')")
      .def_ro("scalar", &tg::TensorStats::scalar, "the tensor's own scalar min(max_abs, bound) (= tensor_scalar)")
      .def("__repr__", [](const tg::TensorStats& t) {
        return "TensorStats(count=" + std::to_string(t.count) + ", clip='" + tg::to_string(t.clip) +
               "', scalar=" + std::string(nb::repr(nb::float_(t.scalar)).c_str()) +
               ", bound=" + std::string(nb::repr(nb::float_(t.bound)).c_str()) + ")";
      });

  nb::class_<PyDecoded>(m, "Decoded", "A decoded payload: values (float32, s * trit) and header.")
      .def_ro("values", &PyDecoded::values, "float32 array: scalar * trit, or the float32 body")
      .def_ro("header", &PyDecoded::header, "the validated header")
      .def_prop_ro("scalar", [](const PyDecoded& d) { return d.header.scalar; }, "the scalar s");

  nb::class_<PyAggregate>(m, "Aggregate", "Exact integer sum of N workers' trits that share one scalar.")
      .def_ro("scalar", &PyAggregate::scalar, "the shared scalar s")
      .def_ro("workers", &PyAggregate::workers, "N, the number of payloads")
      .def_ro("sums", &PyAggregate::sums, "int32 array: sum of trits, in [-N, N]")
      .def_ro("mean", &PyAggregate::mean, "float32 array: (double)s * sum / N rounded to float");

  m.def(
      "encode",
      [](nb::handle g, std::uint64_t seed, std::uint32_t worker, std::uint32_t tensor, std::uint32_t step,
         const std::string& clip, double c, const std::string& packing, std::uint64_t float_below,
         const std::string& codec, bool as_array) {
        FloatView v = float_view(g, "g");
        tg::Params p = make_params(clip, c, packing, float_below);
        const tg::Codec& cd = codec_named(codec);
        std::vector<std::uint8_t> out;
        {
          nb::gil_scoped_release release;
          out = tg::encode(cd, v.span, p, {seed, worker, tensor, step});
        }
        return payload_object(std::move(out), as_array);
      },
      "g"_a, "seed"_a = 0, "worker"_a = 0, "tensor"_a = 0, "step"_a = 0, "clip"_a = "none", "c"_a = 2.5,
      "packing"_a = "2bit", "float_below"_a = 0, "codec"_a = "optimized", "as_array"_a = false,
      (std::string("Encode one tensor (float32 array, any shape, read flat) into a self-describing payload "
                   "(bytes).\n\nclip: 'none' (s = max|g|), 'clip' (clamp to c*sigma, paper Eq. 7) or "
                   "'saturate' (same bytes as clip). packing: '2bit' or 'base3'. Tensors with fewer than "
                   "float_below elements travel as float32. ") +
       kKeyDoc + " codec: one of CODECS ('optimized', 'reference', 'portable', or an optimized kernel set by name). as_array: return the payload as a "
                 "writable NumPy uint8 array that owns it (no copy into bytes; torch.from_numpy takes it "
                 "as is).\nRaises TypeError for a non-float32 input, NonFiniteError (a ValueError) for "
                 "NaN/Inf, CodecError for bad options.")
          .c_str());

  m.def(
      "encode_with_scalar",
      [](nb::handle g, double given, std::uint64_t seed, std::uint32_t worker, std::uint32_t tensor,
         std::uint32_t step, const std::string& clip, double c, const std::string& packing,
         std::uint64_t float_below, const std::string& codec, const tg::TensorStats* stats, bool as_array) {
        // taken as a double so that a value beyond float32 is named as given (a float parameter made 1e39 inf)
        if (std::isfinite(given) && std::fabs(given) > static_cast<double>(std::numeric_limits<float>::max()))
          throw nb::value_error(("encode_with_scalar: scalar " + tg::strf("%.6g", given) +
                                 " is beyond float32's range (the scalar is a float32, at most 3.4e38)")
                                    .c_str());
        const float scalar = static_cast<float>(given);
        FloatView v = float_view(g, "g");
        tg::Params p = make_params(clip, c, packing, float_below);
        const tg::Codec& cd = codec_named(codec);
        std::vector<std::uint8_t> out;
        {
          nb::gil_scoped_release release;
          out = stats ? tg::encode_with_scalar(cd, v.span, p, {seed, worker, tensor, step}, scalar, *stats)
                      : tg::encode_with_scalar(cd, v.span, p, {seed, worker, tensor, step}, scalar);
        }
        return payload_object(std::move(out), as_array);
      },
      "g"_a, "scalar"_a, "seed"_a = 0, "worker"_a = 0, "tensor"_a = 0, "step"_a = 0, "clip"_a = "none",
      "c"_a = 2.5, "packing"_a = "2bit", "float_below"_a = 0, "codec"_a = "optimized",
      "stats"_a.none() = nb::none(), "as_array"_a = false,
      "Encode with an externally given scalar (the shared max over workers, see shared_scalar): the "
      "worker's own clip bound still applies, then magnitudes above `scalar` saturate to it.\n\n"
      "stats: this worker's tensor_stats(g, clip=..., c=...) of the same g, if already computed (for its "
      "scalar): the encode then reads g once instead of computing the statistics again. The same bytes; "
      "g must not have changed since. CodecError(invalid_argument) if stats describe another size or "
      "clipping rule. as_array: as in encode.");

  m.def(
      "encode_layers",
      [](nb::sequence layers, std::uint64_t seed, std::uint32_t worker, std::uint32_t tensor, std::uint32_t step,
         const std::string& clip, double c, const std::string& packing, std::uint64_t float_below,
         const std::string& codec) {
        // one array is a sequence of its elements: each would become a one-element layer
        if (nb::hasattr(layers, "__array_interface__") || nb::hasattr(layers, "__dlpack__"))
          throw nb::type_error("encode_layers: layers must be a list of float32 arrays, one per layer, got one array "
                               "(encode(g) encodes one tensor; encode_layers([g]) one layer)");
        std::vector<FloatView> views;
        std::vector<std::span<const float>> spans;
        const size_t count = nb::len(layers);
        views.reserve(count);
        for (size_t i = 0; i < count; ++i) {
          std::string what = "layers[" + std::to_string(i) + "]";
          views.push_back(float_view(layers[i], what.c_str()));
          spans.push_back(views.back().span);
        }
        tg::Params p = make_params(clip, c, packing, float_below);
        const tg::Codec& cd = codec_named(codec);
        std::vector<std::vector<std::uint8_t>> out;
        {
          nb::gil_scoped_release release;
          out = tg::encode_layers(cd, spans, p, {seed, worker, tensor, step});
        }
        nb::list result;
        for (auto& o : out) result.append(to_bytes(o));
        return result;
      },
      "layers"_a, "seed"_a = 0, "worker"_a = 0, "tensor"_a = 0, "step"_a = 0, "clip"_a = "none",
      "c"_a = 2.5, "packing"_a = "2bit", "float_below"_a = 0, "codec"_a = "optimized",
      "Layer-wise encode of a list of float32 arrays: layer i gets its own scalar and tensor id "
      "tensor + i. Returns a list of payloads (bytes).");

  m.def(
      "decode",
      [](nb::handle payload, const std::string& codec) {
        ByteView b = byte_view(payload, "payload");
        const tg::Codec& cd = codec_named(codec);
        tg::Decoded d;
        {
          nb::gil_scoped_release release;
          d = tg::decode(cd, b.span);
        }
        PyDecoded out;
        out.header = d.header;
        out.values = nb::cast(to_numpy(std::move(d.values)));
        return out;
      },
      "payload"_a, "codec"_a = "optimized",
      "Decode a payload (bytes-like) into a Decoded (values: float32 array, header). Everything is "
      "validated first; a malformed payload raises CodecError (a ValueError) whose `code` names the "
      "defect (truncated, bad_magic, crc_mismatch, invalid_code, ...).");

  m.def(
      "decode_trits",
      [](nb::handle payload, const std::string& codec) {
        ByteView b = byte_view(payload, "payload");
        const tg::Codec& cd = codec_named(codec);
        std::vector<std::int8_t> trits;
        {
          nb::gil_scoped_release release;
          trits = tg::decode_trits(cd, b.span);
        }
        return to_numpy(std::move(trits));
      },
      "payload"_a, "codec"_a = "optimized",
      "Decode a ternary payload to its trits (int8 array of -1, 0, +1). CodecError(bad_packing) for a "
      "float32 payload.");

  m.def(
      "parse_header",
      [](nb::handle payload) {
        ByteView b = byte_view(payload, "payload");
        return tg::parse_header(b.span);
      },
      "payload"_a, "Validate a whole payload (header, length, checksums) and return its Header.");

  m.def(
      "ternarize",
      [](nb::handle g, std::uint64_t seed, std::uint32_t worker, std::uint32_t tensor, std::uint32_t step,
         const std::string& clip, double c, const std::string& codec) {
        FloatView v = float_view(g, "g");
        tg::Params p = make_params(clip, c, "2bit", 0);
        const tg::Codec& cd = codec_named(codec);
        std::vector<std::int8_t> trits(v.span.size());
        float s;
        {
          nb::gil_scoped_release release;
          s = tg::ternarize(cd, v.span, p, {seed, worker, tensor, step}, trits);
        }
        return std::make_tuple(s, to_numpy(std::move(trits)));
      },
      "g"_a, "seed"_a = 0, "worker"_a = 0, "tensor"_a = 0, "step"_a = 0, "clip"_a = "none", "c"_a = 2.5,
      "codec"_a = "optimized",
      "Ternarize g with its own scalar, without packing: returns (s, trits), trits an int8 array of "
      "-1, 0, +1 (flat). The estimate of g is s * trits.");

  m.def(
      "ternarize_steps",
      [](nb::handle g, std::uint32_t draws, std::uint32_t first_step, std::uint64_t seed, std::uint32_t worker,
         std::uint32_t tensor, const std::string& clip, double c, const std::string& codec) {
        FloatView v = float_view(g, "g");
        tg::Params p = make_params(clip, c, "2bit", 0);
        const tg::Codec& cd = codec_named(codec);
        std::size_t n = v.span.size();
        if (static_cast<std::uint64_t>(first_step) + draws > (std::uint64_t{1} << 32))
          throw nb::value_error("first_step + draws must not exceed 2^32 (steps are 32-bit)");
        // Refused before anything is allocated: the result is draws x size int8 trits.
        constexpr std::uint64_t kMaxTrits = std::uint64_t{1} << 30;  // 1 GiB
        if (static_cast<std::uint64_t>(draws) * n > kMaxTrits)
          throw nb::value_error(("draws x size = " + std::to_string(static_cast<std::uint64_t>(draws) * n) +
                                 " trits is over the limit of 2^30 (1 GiB of int8): ask for fewer draws").c_str());
        std::vector<std::int8_t> trits;
        float s;
        {
          nb::gil_scoped_release release;
          // Reserved, not zeroed: each row's pages are touched as it is drawn, between the signal
          // polls (zeroing 1 GiB first, under the GIL, delayed Ctrl-C by seconds).
          trits.reserve(static_cast<std::size_t>(draws) * n);
          tg::ScalarRule rule = tg::own_rule(cd, v.span, p, tensor);
          s = rule.scalar;
          // Ctrl-C is honoured between chunks of about 2^24 trits (the GIL is taken only to poll).
          const std::uint32_t chunk = static_cast<std::uint32_t>(std::max<std::size_t>(1, (std::size_t{1} << 24) / std::max<std::size_t>(1, n)));
          for (std::uint32_t j = 0; j < draws; ++j) {
            if (j > 0 && j % chunk == 0) {
              nb::gil_scoped_acquire gil;
              if (PyErr_CheckSignals() != 0) throw nb::python_error();
            }
            trits.resize(static_cast<std::size_t>(j + 1) * n);  // within the capacity: no reallocation
            cd.ternarize(v.span, rule, {seed, worker, tensor, first_step + j},
                         std::span<std::int8_t>(trits.data() + static_cast<std::size_t>(j) * n, n));
          }
        }
        return std::make_tuple(s, to_numpy(std::move(trits), {draws, n}));
      },
      "g"_a, "draws"_a, "first_step"_a = 0, "seed"_a = 0, "worker"_a = 0, "tensor"_a = 0, "clip"_a = "none",
      "c"_a = 2.5, "codec"_a = "optimized",
      "Independent draws for Monte-Carlo: row j is ternarize(g, step=first_step + j). Returns (s, trits) "
      "with trits an int8 array of shape (draws, g.size); draws * g.size is at most 2^30 (ValueError before "
      "allocating otherwise). Releases the GIL; Ctrl-C interrupts it (KeyboardInterrupt).");

  m.def(
      "tensor_scalar",
      [](nb::handle g, const std::string& clip, double c, std::uint32_t tensor, const std::string& codec) {
        return with_clip_args(g, clip, c, codec, [&](const tg::Codec& cd, std::span<const float> v, const tg::Params& p) {
          return tg::tensor_scalar(cd, v, p, tensor);
        });
      },
      "g"_a, "clip"_a = "none", "c"_a = 2.5, "tensor"_a = 0, "codec"_a = "optimized",
      "The scalar s of one tensor under the clipping rule (max|g|, or min(max|g|, c*sigma) when clipping).");

  m.def(
      "tensor_stats",
      [](nb::handle g, const std::string& clip, double c, std::uint32_t tensor, const std::string& codec) {
        return with_clip_args(g, clip, c, codec, [&](const tg::Codec& cd, std::span<const float> v, const tg::Params& p) {
          return tg::tensor_stats(cd, v, p, tensor);
        });
      },
      "g"_a, "clip"_a = "none", "c"_a = 2.5, "tensor"_a = 0, "codec"_a = "optimized",
      "One worker's statistics of g under the clipping rule, in one pass: .scalar (= tensor_scalar, the "
      "worker's contribution to the shared max) and .bound (its clip bound). Pass them to "
      "encode_with_scalar(g, s, ..., stats=) to encode g without computing them again.");

  m.def(
      "clip_bound",
      [](nb::handle g, const std::string& clip, double c, const std::string& codec) {
        return with_clip_args(g, clip, c, codec, [](const tg::Codec& cd, std::span<const float> v, const tg::Params& p) {
          return tg::clip_bound(cd, v, p);
        });
      },
      "g"_a, "clip"_a = "clip", "c"_a = 2.5, "codec"_a = "optimized",
      "The clip bound c*sigma as float32 (sigma: population std in the canonical order); inf for clip='none'.");

  m.def(
      "shared_scalar",
      [](const std::vector<float>& scalars) {
        if (scalars.empty()) throw nb::value_error("shared_scalar: no worker scalars (give one per worker)");
        return tg::shared_scalar(scalars);
      },
      "worker_scalars"_a,
      "The shared scalar: the max of the workers' tensor_scalar values (one max-allreduce in a real run).");

  m.def(
      "aggregate",
      [](nb::sequence payloads, const std::string& codec) {
        std::vector<ByteView> views;
        std::vector<std::span<const std::uint8_t>> spans;
        const size_t count = nb::len(payloads);
        views.reserve(count);
        for (size_t i = 0; i < count; ++i) {
          std::string what = "payloads[" + std::to_string(i) + "]";
          views.push_back(byte_view(payloads[i], what.c_str()));
          spans.push_back(views.back().span);
        }
        const tg::Codec& cd = codec_named(codec);
        tg::Aggregate a;
        {
          nb::gil_scoped_release release;
          a = tg::aggregate(cd, spans);
        }
        PyAggregate out;
        out.scalar = a.scalar;
        out.workers = a.workers;
        out.sums = nb::cast(to_numpy(std::move(a.sums)));
        out.mean = nb::cast(to_numpy(std::move(a.mean)));
        return out;
      },
      "payloads"_a, "codec"_a = "optimized",
      "Exact integer aggregation of N workers' ternary payloads that share scalar, size and tensor id "
      "(CodecError scalar_mismatch otherwise).");

  m.def(
      "variance_identity",
      [](nb::handle g) {
        FloatView v = float_view(g, "g");
        tg::reference_codec().max_abs(v.span, 0);  // NonFiniteError on NaN/Inf
        return tg::variance_identity(v.span);
      },
      "g"_a,
      "||g||_inf ||g||_1 - ||g||_2^2 in double: E||g~ - g||^2 of TernGrad with s = max|g| (paper Sec. 3).");

  m.def(
      "variance_for_scalar",
      [](nb::handle x, double s) {
        FloatView v = float_view(x, "x");
        float m = tg::reference_codec().max_abs(v.span, 0);
        if (!(s >= static_cast<double>(m)) || !std::isfinite(s))
          throw nb::value_error("s must be finite and at least max|x|");
        return tg::variance_for_scalar(v.span, s);
      },
      "x"_a, "s"_a, "sum_k |x_k| (s - |x_k|): the expected squared error for an explicit scalar s >= max|x|.");

  m.def(
      "body_bytes",
      [](const std::string& packing, std::uint64_t n) { return tg::body_bytes(tg::parse_packing(packing.c_str()), n); },
      "packing"_a, "n"_a, "Bytes of the body of n elements in a packing ('2bit', 'base3', 'float32').");

  m.def(
      "crc32c", [](nb::handle data) { return tg::crc32c(byte_view(data, "data").span); }, "data"_a,
      "CRC32C (Castagnoli) of bytes; crc32c(b'123456789') == 0xe3069283.");

  m.def(
      "philox_uniforms",
      [](std::uint64_t n, std::uint64_t seed, std::uint32_t worker, std::uint32_t tensor, std::uint32_t step) {
        if (n > tg::kMaxElements) throw nb::value_error("n exceeds 2^34");
        std::vector<std::uint32_t> u(n);
        tg::StreamKey key{seed, worker, tensor, step};
        for (std::uint64_t b = 0; b * 4 < n; ++b) {
          tg::PhiloxBlock blk = tg::philox_block(key, static_cast<std::uint32_t>(b));
          for (std::uint64_t j = 0; j < 4 && 4 * b + j < n; ++j) u[4 * b + j] = blk.v[j];
        }
        return to_numpy(std::move(u));
      },
      "n"_a, "seed"_a = 0, "worker"_a = 0, "tensor"_a = 0, "step"_a = 0,
      "The 32-bit uniforms u_0..u_{n-1} of a stream key: element k is kept iff u_k < min(|g_k|, cap) * 2^32 / s.");

  m.def("cpu_has_avx2", &tg::cpu_has_avx2, "Whether the optimized codec uses its AVX2 path on this CPU.");

  bind_verify(m);
}
