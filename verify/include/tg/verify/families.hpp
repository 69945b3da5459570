// terngrad-bench: the gradient families of the battery (docs/statistics.md): gaussian, laplace,
// student-t (3 dof), sparse, spike, constant, zeros, tiny (1e-30), huge (1e30), pladder (a ladder
// of keep probabilities), multilayer (scales 100x apart) and lenet (LeNet-5 layer shapes, in code).
//
// Every value is drawn from Philox4x32-10 with the exact recipe below, so the inputs are the same
// on every standard library and can be rebuilt in NumPy from this comment alone.
//
// Stream. make_gradient(name, d, seed) reads one sequence of 32-bit words w_0, w_1, ... :
//
//   tag     = 32-bit FNV-1a of the family name (h = 2166136261; per byte c: h = (h ^ c) * 16777619)
//   key     = { seed & 0xffffffff, seed >> 32 }
//   counter = { (j/4) & 0xffffffff, (j/4) >> 32, tag, 0 }
//   w_j     = word (j % 4) of philox4x32_10(counter, key)      (tg/philox.hpp; Random123, cuRAND)
//
// philox4x32_10 (NumPy's np.random.Philox is the 4x64 variant, a different function): 10 rounds of
//   (c0, c1, c2, c3) <- (hi(B*c2) ^ c1 ^ k0, lo(B*c2), hi(A*c0) ^ c3 ^ k1, lo(A*c0)),
// A = 0xD2511F53, B = 0xCD9E8D57, hi/lo the halves of the 64-bit product; before every round but
// the first, (k0, k1) += (0x9E3779B9, 0xBB67AE85) mod 2^32.
//
// Transforms (all arithmetic in IEEE double, evaluated in the order written; each call consumes the
// next words of the stream, left to right):
//
//   U()  = ((a >> 5) * 2^26 + (b >> 6) + 0.5) / 2^53          a, b = the next two words; in (0, 1),
//          except that the largest value rounds (ties to even) to exactly 1.0 (probability 2^-53)
//   N()  = sqrt(-2 ln u1) * cos(6.283185307179586 * u2)        u1 = U(), u2 = U() (Box-Muller, one
//          output per pair; 6.283185307179586 is 2 pi rounded to double, NumPy's 2 * np.pi)
//   E()  = -ln U()                                             exponential(1)
//   T()  = z / sqrt((z1*z1 + z2*z2 + z3*z3) / 3)               z, z1, z2, z3: four N() in order
//   Bernoulli(q) = U() < q
//   Index(n)     = min(floor(U() * n), n - 1)                  uniform integer in [0, n)
//
// So N() takes 4 words, T() 16. Values are float32: float(x) rounds the double to nearest.
//
// Families (element k = 0 .. d-1, in order; "scale * N()" is the double product, then float):
//
//   gaussian    g_k = float(N())
//   laplace     per element: negative = U() < 0.5, then e = E(); g_k = float(negative ? -e : e)
//   student_t   g_k = float(T())
//   sparse      first all d values float(N()), then for k = 0 .. d-1: if U() < 0.95, g_k = 0
//   spike       g_k = float(-1e-3 + 2e-3 * U()) for all k, then g[Index(d)] = -1.0
//   constant    g_k = 0.25 (no draws)
//   zeros       g_k = 0 (no draws)
//   tiny        g_k = float(1e-30 * N())
//   huge        g_k = float(1e30 * N())
//   pladder     g_0 = 1.0 exactly (so s = max|g| = 1 and the keep probability is p_k = |g_k|), no
//               draws; for k = 1 .. d-1 the bin [lo, hi) is chosen by k % 8, and where k % 8 is 6
//               by k % 16:
//                 0, 1, 2, 3 -> [2^-12, 2^-11)    4 -> [2^-11, 2^-10)    5 -> [2^-10, 2^-6)
//                 6 (k % 16 = 6) -> [2^-6, 2^-1)  6 (k % 16 = 14) -> [2^-22, 2^-18)    7 -> [2^-1, 1)
//               m = float(lo * (hi / lo) ** U()) clamped to [lo, the largest float below hi];
//               then negative = U() < 0.5 and g_k = negative ? -m : m. Half the elements sit at
//               p < 2^-11 so that bias at the smallest keep probabilities has enough keeps to test;
//               a sixteenth at p < 2^-18, where a keep rule with short uniforms keeps too often
//               (16-bit uniforms keep every p < 2^-16 at 2^-16).
//               Then, for k = d .. 2d-1: U = 2^12 + (2^18 - 2^12)(1 - U()),
//               m = float(1 / U) clamped to [2^-18, the largest float below 2^-12], negative = U() < 0.5:
//               keep probabilities in [2^-18, 2^-12) with density proportional to 1/p^2, so every
//               octave holds the same expected number of keeps, and a rule that loses every keep
//               below 2^-16 (or below 2^-14: float16 with flush to zero) loses a third (two thirds).
//               Then, for k = 2d .. 2d + floor(d/2) - 1:
//               U = 2^10 + (2^16 - 2^10)(1 - U()), m = float(1 - 1 / U) clamped to [1 - 2^-10, the
//               largest float below 1], negative = U() < 0.5: drop probabilities q = 1 - p in
//               [2^-16, 2^-10] with density proportional to 1/q^2, so every octave holds the same
//               expected number of drops, and a keep probability rounded to nearest float16 (every
//               q < 2^-12 kept always) loses two thirds of them, to nearest bfloat16 (q < 2^-9) all.
//               Then, for k = 2d + floor(d/2) .. 5d + floor(d/2) - 1 (pladder has 5d + floor(d/2)
//               elements): m = float(2^-40 * (2^13) ** U()) clamped to [2^-40, the largest float below
//               2^-27], negative = U() < 0.5: the near drops, keep probabilities in [2^-40, 2^-27) (below the
//               row near-drops' 2^-26 also once rounded up to a multiple of 2^-32), which the spec almost
//               never keeps and a k-bit uniform keeps with probability 2^-k each (21-bit uniforms: 2^-21,
//               3.6 times the float32 allowance of the row near-drops). 3d of them, so that ci's
//               pladder alone holds 201 million near-drop element-draws (65,536 x 3 x 1024 draws).
//   multilayer  four tensors "layer0".."layer3" of sizes d/2, d/4, d/8, d - d/2 - d/4 - d/8 with
//               scales 1, 1e-2, 1e-4, 1e2: float(scale * N()), tensors in order from the same
//               stream; a tensor of size 0 is left out (no draws)
//   lenet       ignores d; tensors in order (name rows x cols, scale, dead-row probability):
//                 conv1.weight  6 x 25     3e-2  0      conv1.bias  1 x 6    1e-2  0
//                 conv2.weight  16 x 150   1e-2  0      conv2.bias  1 x 16   5e-3  0
//                 fc1.weight    120 x 400  2e-3  0.3    fc1.bias    1 x 120  3e-3  0
//                 fc2.weight    84 x 120   4e-3  0.2    fc2.bias    1 x 84   5e-3  0
//                 fc3.weight    10 x 84    2e-2  0      fc3.bias    1 x 10   3e-2  0
//               (61,706 parameters);
//               per tensor: rows*cols values float(scale * T()) (row-major), then for each row
//               r = 0 .. rows-1 one U() (drawn for every row, also where the probability is 0):
//               if U() < dead, row r is set to exactly 0 (dead ReLU units)
//
// ln, cos, sqrt and pow are the C library's (NumPy's np.log, np.cos, ... call the same kind of
// routines): sqrt is exact; the others may differ between math libraries in the last bit of a
// double, which changes a float32 value only when it falls on a rounding boundary (about 2^-29).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tg::verify {

struct Layer {
  std::string name;
  std::vector<float> g;
};

struct Gradient {
  std::string family;
  std::vector<Layer> layers;
  std::size_t size() const;
};

/// All family names in battery order.
const std::vector<std::string>& family_names();

/// A gradient of family `name` with about d elements (lenet has its fixed 61,706, pladder 5d + floor(d/2)), from `seed`.
/// Throws tg::Error(invalid_argument) on an unknown name or d == 0.
Gradient make_gradient(const std::string& name, std::size_t d, std::uint64_t seed);

/// The battery's large job's gradient (family `large`, one tensor "large" of exactly n elements): pladder's
/// layout for d = floor(2n / 11), its fourth part (the near drops) running on to n, so that every bin of p and
/// the near drops are also seen on a tensor large enough for a code path that begins above a size (a threaded
/// or GPU path above 2^19 elements with shorter uniforms). From its own stream (seed, fnv1a("large")).
/// Throws tg::Error(invalid_argument) below 11 elements.
Gradient large_gradient(std::size_t n, std::uint64_t seed);

}  // namespace tg::verify
