// terngrad-bench: every seed and stream key the battery derives from the run's --seed, in one table
// (docs/statistics.md, "Keys"). Distinct purposes and indices give distinct 64-bit seeds, so the
// draws of two jobs come from different Philox keys and their statistics are independent.
#pragma once

#include <cstdint>

namespace tg::verify {

/// What a derived seed is for. The numeric values are part of the battery's definition.
enum class KeyPurpose : std::uint32_t {
  gradient = 1,   // index = gradient variant (below); make_gradient mixes in the family name
  job = 2,        // index = job number in the run's plan: the stream seed of that job's draws
  streams = 3,    // the streams correlation check (workers 0/1, tensors 0/1, steps 2i/2i+1)
  collision = 4,  // the stream-collision probe (plus its far keys, below)
  aggregate = 5,  // N workers sharing one scalar: worker w = stream worker w
  compare = 6,    // compare_samplers (terngrad compare, the cross check): key (seed, 3, 5 + layer, 11)
  fresh = 7,      // the fresh-gradient structure row: steps 0..2 of one key with gradients A, B, A
  tails = 8,      // the tails structure row: its stream seed, and (with KeyPurpose::gradient) its values
};

/// Gradient variants: which draw of a family a check uses (index of KeyPurpose::gradient).
enum class GradientVariant : std::uint32_t {
  plain = 0,     // the per-family checks and layerwise (same gradient, so their ratio is meaningful)
  clip = 1,      // clipping (mode clip)
  saturate = 2,  // clipping (mode saturate)
  streams = 3,   // the streams check's gaussian
  compare = 4,   // compare_samplers' families
  fresh = 5,     // the fresh-gradient structure row: A (gaussian), and B (student_t) at fresh + 1
  large = 7,     // the large job's gaussian (kLargeElements)
  aggregate = 16  // + worker: the aggregate check's workers
};

/// splitmix64's output function: a bijection of 64-bit words with full avalanche.
constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// The seed of (purpose, index) in a run with user seed `seed`:
///   mix64(mix64(seed) ^ (purpose << 32 | index)) >> 1.
/// 63 bits, so that codecs parsing the seed as a signed 64-bit integer take every seed the battery
/// sends. Two distinct (purpose, index) of one run share a seed with probability 2^-63.
constexpr std::uint64_t derive_seed(std::uint64_t seed, KeyPurpose purpose, std::uint32_t index) {
  return mix64(mix64(seed) ^ ((static_cast<std::uint64_t>(purpose) << 32) | index)) >> 1;
}

/// A derived seed (63 bits, above) as a uniform double in [0, 1): its 53 high bits times 2^-53. (Taking the
/// top 53 of 64 bits, w >> 11, would leave [0, 1/2): the top bit of a derived seed is always 0.)
constexpr double derived_uniform(std::uint64_t derived) { return static_cast<double>(derived >> 10) * 0x1p-53; }

}  // namespace tg::verify
