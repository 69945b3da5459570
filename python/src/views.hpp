// terngrad-bench: what the two binding files of terngrad._core share: typed, zero-copy views of
// NumPy arrays (with errors that say how to fix the input) and NumPy outputs that own their memory.
// Used by bindings.cpp (codec) and verify_bindings.cpp (battery).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tg_py {

namespace nb = nanobind;

using AnyArray = nb::ndarray<nb::ro, nb::device::cpu>;

inline std::string py_type_name(nb::handle h) { return Py_TYPE(h.ptr())->tp_name; }

inline bool c_contiguous(const AnyArray& a) {
  if (a.size() == 0) return true;  // no element to address: any strides will do
  int64_t expected = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) return false;
    expected *= static_cast<int64_t>(a.shape(i));
  }
  return true;
}

template <typename T>
struct DtypeName;
template <>
struct DtypeName<float> {
  static constexpr const char* name = "float32";
  static constexpr const char* fix = "x.astype(np.float32); the codec never converts silently";
};
template <>
struct DtypeName<std::int8_t> {
  static constexpr const char* name = "int8";
  static constexpr const char* fix = "x.astype(np.int8), values -1, 0, +1";
};

// A C-contiguous NumPy array of T (any shape, read as a flat span) without a copy; the array object
// stays referenced by `array` for as long as the span is used.
template <typename T>
struct View {
  AnyArray array;
  std::span<const T> span;
};

// Requires a C-contiguous layout and sets the span (view_of with contiguous = false leaves both to this, so a
// caller can name a wrong shape first: a transposed array is also a non-contiguous one).
template <typename T>
void require_contiguous(View<T>& v, const char* what) {
  if (!c_contiguous(v.array))
    throw nb::value_error((std::string(what) + " must be C-contiguous (read in place); pass np.ascontiguousarray(x)")
                              .c_str());
  v.span = {static_cast<const T*>(v.array.data()), v.array.size()};
}

template <typename T>
View<T> view_of(nb::handle obj, const char* what, bool contiguous = true) {
  View<T> v;
  const std::string dt = DtypeName<T>::name;
  if (!nb::try_cast(obj, v.array, false)) {
    // An array nanobind cannot take as it is: name its dtype (a byte order other than the machine's, '>f4',
    // is the usual one), not only its type.
    std::string got = py_type_name(obj);
    if (nb::hasattr(obj, "dtype") && nb::hasattr(obj.attr("dtype"), "isnative")) {
      nb::object d = obj.attr("dtype");
      const std::string code = nb::steal<nb::str>(PyObject_Str(d.attr("str").ptr())).c_str();
      if (!nb::cast<bool>(d.attr("isnative")))
        throw nb::type_error((std::string(what) + " must be little-endian (native) " + dt + ", got " + code +
                              " (convert with x.astype(np." + dt + "))")
                                 .c_str());
      got += " of dtype " + code;
    }
    throw nb::type_error((std::string(what) + " must be a NumPy " + dt + " array, got " + got +
                          " (use np.asarray(x, dtype=np." + dt + "))")
                             .c_str());
  }
  if (v.array.dtype() != nb::dtype<T>()) {
    std::string got = "?";
    if (nb::hasattr(obj, "dtype")) {
      nb::object d = obj.attr("dtype");
      got = nb::steal<nb::str>(PyObject_Str(d.ptr())).c_str();
    }
    throw nb::type_error((std::string(what) + " must have dtype " + dt + ", got " + got + " (convert with " +
                          DtypeName<T>::fix + ")")
                             .c_str());
  }
  if (contiguous) require_contiguous(v, what);
  return v;
}

using FloatView = View<float>;
inline FloatView float_view(nb::handle obj, const char* what) { return view_of<float>(obj, what); }

// A NumPy array that owns `values` (moved in); shape defaults to flat.
template <typename T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T>&& values, std::vector<size_t> shape = {}) {
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  if (shape.empty()) shape = {owned->size()};
  return nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner);
}

}  // namespace tg_py
