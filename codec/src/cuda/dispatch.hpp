// terngrad-bench: internal entry points of the CUDA codec shared by kernels.cu (device side) and
// host.cpp (the tg::Codec wrapper and host conveniences). Not installed; not a public API.
#pragma once

#include <cstdint>
#include <string>

#include "tg/cuda.hpp"

namespace tg::cuda::detail {

/// Throws CudaError naming `what` with the runtime's error name and string when status != 0.
void check(int status, const char* what);

/// Empty when this build holds code (SASS or PTX) the current device can run; otherwise the runtime's
/// error. Architectures are chosen at build time (codec/src/cuda/CMakeLists.txt).
std::string missing_kernel_image();

/// Index into kernel_versions() of a version name ("" = the default, the last one); tg::Error
/// invalid_argument for an unknown name.
int version_index(const std::string& name);

/// The encode pipeline's steps. Without clipping: max, rule, pack. With clipping: mean_chunks,
/// mean_total (the max pass runs in the same launch, beside the chains: `max` stops there too),
/// sigma_chunks, sigma_total, rule, pack.
enum class Step { max, mean_chunks, mean_total, sigma_chunks, sigma_total, rule, pack };

/// What one encode pipeline run does.
struct EncodeRun {
  const DeviceTensor* d_table = nullptr;  // device table of `count` tensors, or null with `single`
  DeviceTensor single;                    // the one tensor when d_table is null
  std::uint32_t count = 1;
  std::uint64_t total_elements = 0;
  Params params;
  StreamKey key;
  const float* d_shared_scalar = nullptr;  // encode_with_scalar semantics when not null
  bool has_rule = false;                   // use `rule` as given (Codec::encode_body): no scalar pass
  ScalarRule rule;
  Step last = Step::pack;                  // stop after this step (rule: results, no body; the benchmark
                                           // times each prefix of the pipeline)
  int version = -1;                        // kernel version index (-1: default)
};

/// Enqueues the pipeline on `stream`: prepare, max|g| (+ mean and sigma for clipping), rule, pack.
void run_encode(void* d_workspace, std::size_t workspace_bytes, const EncodeRun& run,
                TensorResult* d_results, cudaStream_t stream);

}  // namespace tg::cuda::detail
