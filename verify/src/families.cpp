// terngrad-bench: gradient families of the battery (see tg/verify/families.hpp, which documents
// every draw exactly). All randomness comes from Philox4x32-10 through PhiloxWordStream, so the
// battery's inputs are the same on every standard library and can be rebuilt in NumPy.
#include "tg/verify/families.hpp"

#include <algorithm>
#include <cmath>

#include "tg/error.hpp"
#include "tg/philox.hpp"

namespace tg::verify {

std::size_t Gradient::size() const {
  std::size_t n = 0;
  for (const auto& l : layers) n += l.g.size();
  return n;
}

const std::vector<std::string>& family_names() {
  static const std::vector<std::string> names = {
      "gaussian", "laplace", "student_t", "sparse",     "spike",     "constant", "zeros",
      "tiny",     "huge",    "subnormal", "pladder",    "multilayer", "lenet"};
  return names;
}

namespace {

std::uint32_t fnv1a(const std::string& s) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

/// Sequential 32-bit words of Philox4x32-10: word j is word (j % 4) of
/// philox4x32_10({j/4 low 32 bits, j/4 high 32 bits, tag, 0}, key = {seed low, seed high}).
/// The transforms below are the documented ones (families.hpp); change one and every input changes.
class PhiloxWordStream {
 public:
  PhiloxWordStream(std::uint64_t seed, std::uint32_t tag) : seed_(seed), tag_(tag) {}

  std::uint32_t next_word() {
    const std::uint64_t block = next_ / 4;
    const unsigned lane = static_cast<unsigned>(next_ % 4);
    if (lane == 0) {  // first word of a new block
      const PhiloxBlock counter = {
          {static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), tag_, 0u}};
      words_ = philox4x32_10(counter, static_cast<std::uint32_t>(seed_),
                             static_cast<std::uint32_t>(seed_ >> 32));
    }
    ++next_;
    return words_.v[lane];
  }

  /// ((a >> 5) * 2^26 + (b >> 6) + 0.5) / 2^53 from two consecutive words a, b. In (0, 1) except
  /// that the top value rounds to exactly 1.0 (probability 2^-53); every transform tolerates it.
  double uniform() {
    const std::uint64_t a = next_word() >> 5;  // 27 bits
    const std::uint64_t b = next_word() >> 6;  // 26 bits
    const double two_26 = 67108864.0, two_53 = 9007199254740992.0;
    return (static_cast<double>(a) * two_26 + static_cast<double>(b) + 0.5) / two_53;
  }

  /// Box-Muller, one output per pair of uniforms: sqrt(-2 ln u1) * cos(2 pi u2).
  double normal() {
    const double u1 = uniform();
    const double u2 = uniform();
    const double two_pi = 6.283185307179586;  // 2 * pi rounded to double (NumPy's 2 * np.pi)
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2);
  }

  /// Exponential(1): -ln u.
  double exponential() { return -std::log(uniform()); }

  /// Student-t with 3 degrees of freedom: z / sqrt((z1^2 + z2^2 + z3^2) / 3), z drawn first.
  double student_t3() {
    const double z = normal();
    const double z1 = normal(), z2 = normal(), z3 = normal();
    return z / std::sqrt((z1 * z1 + z2 * z2 + z3 * z3) / 3.0);
  }

  /// Bernoulli(q): u < q.
  bool bernoulli(double q) { return uniform() < q; }

  /// Uniform integer in [0, n): floor(u n), clamped to n - 1.
  std::size_t index_below(std::size_t n) {
    const auto k = static_cast<std::size_t>(std::floor(uniform() * static_cast<double>(n)));
    return std::min(k, n - 1);
  }

 private:
  std::uint64_t seed_;
  std::uint32_t tag_;
  std::uint64_t next_ = 0;  // index j of the next word
  PhiloxBlock words_{};
};

std::vector<float> gaussian(std::size_t d, double scale, PhiloxWordStream& rng) {
  std::vector<float> g(d);
  for (auto& x : g) x = static_cast<float>(scale * rng.normal());
  return g;
}

std::vector<float> student(std::size_t d, double scale, PhiloxWordStream& rng) {
  std::vector<float> g(d);
  for (auto& x : g) x = static_cast<float>(scale * rng.student_t3());
  return g;
}

/// Keep-probability ladder of 5d + floor(d/2) elements: g[0] = 1 (so s = max|g| = 1 and p = |g|), then, up to d,
/// magnitudes log-uniform in the bin picked by k % 16, each a float in [lower, upper), with a random
/// sign; then d magnitudes 1/U, U uniform in (2^12, 2^18], with a random sign: keep probabilities in
/// [2^-18, 2^-12) whose expected keeps are the same in every octave (density proportional to 1/p^2),
/// so that a loss of all keeps below 2^-16 (or 2^-14) is a third (two thirds) of them; then floor(d/2)
/// magnitudes 1 - 1/U, U uniform in (2^10, 2^16], with a random sign: drop probabilities q = 1 - p in
/// [2^-16, 2^-10] whose expected drops are the same in every octave, so that a keep probability rounded
/// to 1 when q < 2^-12 (float16, to nearest) or q < 2^-9 (bfloat16) loses a third or all of them; then 3d
/// magnitudes 2^-40 (2^13)^U, U uniform in (0, 1), with a random sign: the near drops, keep probabilities in
/// (2^-40, 2^-27) (2^-27 at most once rounded up to a multiple of 2^-32, as the battery's spec p is: below the
/// near-drops' 2^-26), which a k-bit uniform keeps with probability 2^-k each (the row near-drops).
/// `total` >= 5d + floor(d/2) elements: the near-drop section runs on to the end (the large job's tensor).
std::vector<float> pladder(std::size_t d, PhiloxWordStream& rng, std::size_t total) {
  struct Bin { double lower, upper; };
  static const Bin bins[16] = {
      {0x1p-12, 0x1p-11}, {0x1p-12, 0x1p-11}, {0x1p-12, 0x1p-11}, {0x1p-12, 0x1p-11},
      {0x1p-11, 0x1p-10}, {0x1p-10, 0x1p-6},  {0x1p-6, 0x1p-1},   {0x1p-1, 1.0},
      {0x1p-12, 0x1p-11}, {0x1p-12, 0x1p-11}, {0x1p-12, 0x1p-11}, {0x1p-12, 0x1p-11},
      {0x1p-11, 0x1p-10}, {0x1p-10, 0x1p-6},  {0x1p-22, 0x1p-18}, {0x1p-1, 1.0},
  };
  std::vector<float> g(std::max(total, 5 * d + d / 2));
  g[0] = 1.0f;
  for (std::size_t k = 1; k < d; ++k) {
    const Bin& bin = bins[k % 16];
    const double magnitude = bin.lower * std::pow(bin.upper / bin.lower, rng.uniform());
    const float lower = static_cast<float>(bin.lower);
    const float below_upper = std::nextafter(static_cast<float>(bin.upper), 0.0f);
    const float m = std::clamp(static_cast<float>(magnitude), lower, below_upper);
    g[k] = rng.uniform() < 0.5 ? -m : m;
  }
  const float lowest = 0x1p-18f, below_top = std::nextafter(0x1p-12f, 0.0f);
  for (std::size_t k = d; k < 2 * d; ++k) {
    const double U = 0x1p12 + (0x1p18 - 0x1p12) * (1.0 - rng.uniform());
    const float m = std::clamp(static_cast<float>(1.0 / U), lowest, below_top);
    g[k] = rng.uniform() < 0.5 ? -m : m;
  }
  const float bottom = 1.0f - 0x1p-10f, below_one = std::nextafter(1.0f, 0.0f);
  for (std::size_t k = 2 * d; k < 2 * d + d / 2; ++k) {
    const double U = 0x1p10 + (0x1p16 - 0x1p10) * (1.0 - rng.uniform());
    const float m = std::clamp(static_cast<float>(1.0 - 1.0 / U), bottom, below_one);
    g[k] = rng.uniform() < 0.5 ? -m : m;
  }
  const float near_lowest = 0x1p-40f, near_top = std::nextafter(0x1p-27f, 0.0f);
  for (std::size_t k = 2 * d + d / 2; k < g.size(); ++k) {
    const float m = std::clamp(static_cast<float>(0x1p-40 * std::pow(0x1p13, rng.uniform())), near_lowest, near_top);
    g[k] = rng.uniform() < 0.5 ? -m : m;
  }
  return g;
}

Gradient lenet(PhiloxWordStream& rng) {
  // name, rows (output units), columns, per-layer scale of the gradient entries, dead-row chance
  struct Shape { const char* name; std::size_t rows, cols; double scale; double dead; };
  static const Shape shapes[] = {
      {"conv1.weight", 6, 25, 3e-2, 0.0},    {"conv1.bias", 1, 6, 1e-2, 0.0},
      {"conv2.weight", 16, 150, 1e-2, 0.0},  {"conv2.bias", 1, 16, 5e-3, 0.0},
      {"fc1.weight", 120, 400, 2e-3, 0.3},   {"fc1.bias", 1, 120, 3e-3, 0.0},
      {"fc2.weight", 84, 120, 4e-3, 0.2},    {"fc2.bias", 1, 84, 5e-3, 0.0},
      {"fc3.weight", 10, 84, 2e-2, 0.0},     {"fc3.bias", 1, 10, 3e-2, 0.0},
  };
  Gradient out;
  out.family = "lenet";
  for (const auto& s : shapes) {
    Layer l{s.name, student(s.rows * s.cols, s.scale, rng)};
    for (std::size_t r = 0; r < s.rows; ++r)  // one uniform per row, even where dead == 0
      if (rng.bernoulli(s.dead))
        for (std::size_t c = 0; c < s.cols; ++c) l.g[r * s.cols + c] = 0.0f;
    out.layers.push_back(std::move(l));
  }
  return out;
}

}  // namespace

Gradient make_gradient(const std::string& name, std::size_t d, std::uint64_t seed) {
  if (d == 0) throw Error(ErrorCode::invalid_argument, "gradient size must be positive");
  PhiloxWordStream rng(seed, fnv1a(name));
  Gradient out;
  out.family = name;
  auto single = [&](std::vector<float> g) { out.layers.push_back({name, std::move(g)}); };
  if (name == "gaussian") {
    single(gaussian(d, 1.0, rng));
  } else if (name == "laplace") {
    std::vector<float> g(d);
    for (auto& x : g) {
      const bool negative = rng.uniform() < 0.5;  // sign first, then the magnitude
      const double e = rng.exponential();
      x = static_cast<float>(negative ? -e : e);
    }
    single(std::move(g));
  } else if (name == "student_t") {
    single(student(d, 1.0, rng));
  } else if (name == "sparse") {
    std::vector<float> g = gaussian(d, 1.0, rng);  // all d normals first, then the d zero draws
    for (auto& x : g)
      if (rng.bernoulli(0.95)) x = 0.0f;
    single(std::move(g));
  } else if (name == "spike") {
    std::vector<float> g(d);
    for (auto& x : g) x = static_cast<float>(-1e-3 + 2e-3 * rng.uniform());
    g[rng.index_below(d)] = -1.0f;
    single(std::move(g));
  } else if (name == "constant") {
    single(std::vector<float>(d, 0.25f));
  } else if (name == "zeros") {
    single(std::vector<float>(d, 0.0f));
  } else if (name == "tiny") {
    single(gaussian(d, 1e-30, rng));
  } else if (name == "huge") {
    single(gaussian(d, 1e30, rng));
  } else if (name == "subnormal") {
    // every element below the normal range (2^-126 ~ 1.2e-38): the scalar too, so 1/s overflows in float32
    // and a codec that flushes subnormals to zero (FTZ/DAZ) sees an all-zero tensor
    single(gaussian(d, 1e-40, rng));
  } else if (name == "pladder") {
    single(pladder(d, rng, 0));
  } else if (name == "multilayer") {
    // four tensors whose scales differ by 100x from one to the next, drawn in order from one stream
    std::size_t sizes[4] = {d / 2, d / 4, d / 8, d - d / 2 - d / 4 - d / 8};
    double scales[4] = {1.0, 1e-2, 1e-4, 1e2};
    for (int l = 0; l < 4; ++l)
      if (sizes[l] > 0) out.layers.push_back({"layer" + std::to_string(l), gaussian(sizes[l], scales[l], rng)});
  } else if (name == "lenet") {
    out = lenet(rng);
  } else {
    std::string known;
    for (const auto& n : family_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::invalid_argument, "unknown gradient family '" + name + "' (known: " + known + ")");
  }
  return out;
}

Gradient large_gradient(std::size_t n, std::uint64_t seed) {
  if (n < 11) throw Error(ErrorCode::invalid_argument, "the large gradient needs at least 11 elements");
  PhiloxWordStream rng(seed, fnv1a("large"));
  Gradient out;
  out.family = "large";
  out.layers.push_back({"large", pladder(2 * n / 11, rng, n)});
  return out;
}

}  // namespace tg::verify
