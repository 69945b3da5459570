// terngrad-bench: host entry points of the one-thread Philox kernels (philox_kernel.cu) used by the CUDA
// known-answer tests. Each returns "" on success or the CUDA error; outputs are pre-filled with 0xCA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tg/philox.hpp"

namespace tg::cuda::test {

/// out[i] = philox4x32_10(ctr[i], keys[2i], keys[2i+1]) computed by one device thread.
std::string philox_raw_on_device(const std::vector<PhiloxBlock>& ctr, const std::vector<std::uint32_t>& keys,
                                 std::vector<PhiloxBlock>& out);
/// out[i] = philox_block(keys[i], blocks[i]) computed by one device thread.
std::string philox_stream_on_device(const std::vector<StreamKey>& keys, const std::vector<std::uint32_t>& blocks,
                                    std::vector<PhiloxBlock>& out);

}  // namespace tg::cuda::test
