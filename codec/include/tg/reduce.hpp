// terngrad-bench: the canonical summation order for the clipping statistics (mean, sigma).
// Floating-point sums depend on their order; sigma feeds the clip bound c*sigma, so every
// implementation must add in this one order to produce identical bytes:
//
//   * elements are split into chunks of kReduceChunk = 2048 consecutive elements (the last may be short);
//   * in a chunk, lane l (0..7) sums, in double and in increasing index order starting from 0.0,
//     the terms of the elements whose offset within the chunk is l mod 8;
//   * chunk total = ((L0 + L1) + (L2 + L3)) + ((L4 + L5) + (L6 + L7));
//   * grand total = ((0.0 + chunk_0) + chunk_1) + ... in chunk order.
//
// mean = total(g) / n; var = total((g - mean)^2) / n with d*d (never a fused multiply-add);
// sigma = sqrt(var). The 8 lanes map onto two AVX2 double vectors, chunks onto threads or GPU blocks.
#pragma once

#include <cstdint>

#include "tg/config.hpp"

namespace tg {

inline constexpr std::uint64_t kReduceChunk = 2048;
inline constexpr int kReduceLanes = 8;

/// Mean and population standard deviation (mean subtracted) of one tensor, in double.
struct Moments {
  double mean = 0.0;
  double sigma = 0.0;
};

/// Combines the 8 lane sums of one chunk in the canonical tree.
TG_HD_INLINE double combine_lanes(const double* lane) {
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

}  // namespace tg
