// terngrad-bench: the random stream every codec implementation draws from.
// Philox4x32-10 (Random123, header-only; cuRAND's Philox is the same function), keyed so that
// element i of tensor t at step k on worker w with user seed S gets the same 32 bits everywhere.
//
// Exact packing (version 1 of the stream; changing it changes every golden vector):
//
//   key     = { S & 0xffffffff, S >> 32 }
//   counter = { i / 4, k, t, w }            (i/4 must fit in 32 bits: tensors hold at most 2^34 elements)
//   u_i     = word (i % 4) of philox4x32_10(counter, key)
//
// The map (S, w, t, k, i/4) -> (key, counter) is injective, and Philox is a bijection of the counter
// for a fixed key, so distinct (seed, worker, tensor, step) never share a block: streams cannot collide.
#pragma once

#include <cstdint>

#include <Random123/philox.h>

#include "tg/config.hpp"

namespace tg {

/// Where a tensor's randomness comes from: user seed, worker id, tensor id, training step.
struct StreamKey {
  std::uint64_t seed = 0;
  std::uint32_t worker = 0;
  std::uint32_t tensor = 0;
  std::uint32_t step = 0;
};

/// Largest element count a tensor may have (block index i/4 is one 32-bit counter word).
inline constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 34;

using PhiloxBlock = r123array4x32;

/// The four 32-bit words of block `block` (elements 4*block .. 4*block+3) of the stream `key`.
TG_HD_INLINE PhiloxBlock philox_block(const StreamKey& key, std::uint32_t block) {
  r123::Philox4x32_R<10> rng;
  r123::Philox4x32_R<10>::ctr_type ctr = {{block, key.step, key.tensor, key.worker}};
  r123::Philox4x32_R<10>::key_type k = {
      {static_cast<std::uint32_t>(key.seed), static_cast<std::uint32_t>(key.seed >> 32)}};
  return rng(ctr, k);
}

/// Raw Philox4x32-10 on an explicit counter and key (for the published known-answer vectors).
TG_HD_INLINE PhiloxBlock philox4x32_10(PhiloxBlock ctr, std::uint32_t k0, std::uint32_t k1) {
  r123::Philox4x32_R<10> rng;
  r123::Philox4x32_R<10>::key_type k = {{k0, k1}};
  return rng(ctr, k);
}

}  // namespace tg
