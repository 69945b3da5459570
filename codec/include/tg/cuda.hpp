// terngrad-bench: the CUDA codec (codec/src/cuda), available when the build has TG_ENABLE_CUDA=ON
// (target tg_codec_cuda, which defines TG_HAVE_CUDA=1 for its users). Two layers:
//   * tg::cuda::make_codec(): a tg::Codec on host spans (copies in, runs the kernels, copies out),
//     so every host-side test and the battery walk it like the CPU codecs;
//   * a CUB-style device API: device pointers, a caller-owned workspace sized by a query, an explicit
//     cudaStream_t, no hidden synchronisation; results (scalar, first non-finite index, first
//     invalid byte) are written to device memory for the caller to read when it synchronises.
// Bytes are identical to tg::reference_codec() for every input, size, parameter and seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tg/codec.hpp"

// The runtime's own declaration (driver_types.h), repeated so this header needs no CUDA include path.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace tg::cuda {

/// A failed CUDA runtime call: the call, the cudaError_t value and the runtime's error string.
class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& message, int status) : std::runtime_error(message), status_(status) {}
  /// The cudaError_t value (0 when the failure is not a runtime status, e.g. "no device").
  int status() const { return status_; }

 private:
  int status_;
};

/// True when a CUDA driver and a device this build has code for are present (by default compute
/// capability 8.0 and newer: A100, H100/H200, later devices through PTX; see CMAKE_CUDA_ARCHITECTURES).
/// Otherwise false, with the reason in *why (when why is not null). Never throws or aborts.
bool device_available(std::string* why = nullptr);

/// Names of the kernel versions, oldest first (the last one is the default). Tests and benchmarks
/// walk this table: "v1-bytewise" (one thread per body byte, the plain port), "v2-block" (one thread
/// per Philox block / base3 word, vector loads and stores when aligned), "v3-unrolled" (v2 with four
/// 2bit blocks loaded per thread before use; its decode is v2's).
const std::vector<std::string>& kernel_versions();

/// The CUDA codec on the current device, with the default (fastest) kernel version.
/// Throws CudaError when no usable device is present (check device_available first).
std::unique_ptr<tg::Codec> make_codec();
/// The CUDA codec with a named kernel version (tg::Error invalid_argument for an unknown name).
std::unique_ptr<tg::Codec> make_codec(const std::string& version);
/// One entry per kernel version ("cuda-v1-bytewise", ...), for cross-implementation loops.
std::vector<tg::CodecEntry> cuda_codecs();

// ---- device API ----------------------------------------------------------------------------------

/// Index value meaning "none": every input finite / every byte valid.
inline constexpr std::uint64_t kNone = ~std::uint64_t{0};
/// TensorResult::first_bad of every tensor of an encode_layers call whose table does not match its
/// total_elements (or holds a tensor over 2^34 elements): nothing was written.
inline constexpr std::uint64_t kBadTable = kNone - 1;

/// One tensor of a layer-wise encode, all pointers in device memory. `body` receives
/// body_bytes(params.packing, n) bytes; `tensor` is the tensor id of its Philox stream.
struct DeviceTensor {
  const float* g = nullptr;
  std::uint64_t n = 0;
  std::uint8_t* body = nullptr;
  std::uint32_t tensor = 0;
  std::uint32_t reserved = 0;
};

/// What an encode writes per tensor (device memory). When first_bad != kNone the tensor held a NaN or
/// Inf at that index (the first one) and its body was not written.
struct TensorResult {
  float scalar = 0.0f;       // s of the payload header
  float bound = 0.0f;        // c * sigma as float (+inf for ClipMode::none)
  std::uint64_t first_bad = kNone;
  double mean = 0.0;         // tg/reduce.hpp canonical order; 0 for ClipMode::none
  double sigma = 0.0;
};

/// Workspace bytes for an encode of `tensors` tensors holding `total_elements` elements in all.
std::size_t encode_workspace_bytes(std::uint32_t tensors, std::uint64_t total_elements);

/// Encodes one tensor: scalar pass(es), ternarize and pack into d_body (body only: the 32-byte
/// header and its CRC32C are the host's, tg::write_header). d_shared_scalar (device, may be null)
/// selects encode_with_scalar semantics. Enqueued on `stream`; nothing synchronises. Throws tg::Error
/// (invalid_argument, length_overflow) for bad arguments and CudaError if a launch fails.
void encode(void* d_workspace, std::size_t workspace_bytes, const float* d_g, std::uint64_t n,
            const Params& params, const StreamKey& key, std::uint8_t* d_body, TensorResult* d_result,
            cudaStream_t stream, const float* d_shared_scalar = nullptr, const std::string& version = "");

/// Layer-wise encode of `count` tensors (table in device memory) in a fixed number of launches,
/// each with its own scalar; key.tensor is ignored (each DeviceTensor carries its id).
/// total_elements must be the sum of the n fields (it sizes the workspace; a mismatch is detected on
/// the device and reported as kBadTable, never a write out of bounds). d_results has `count` entries.
void encode_layers(void* d_workspace, std::size_t workspace_bytes, const DeviceTensor* d_tensors,
                   std::uint32_t count, std::uint64_t total_elements, const Params& params,
                   const StreamKey& key, TensorResult* d_results, cudaStream_t stream,
                   const std::string& version = "");

/// Ternarizes with a given rule into int8 trits (no packing).
void ternarize(const float* d_g, std::uint64_t n, const ScalarRule& rule, const StreamKey& key,
               std::int8_t* d_trits, cudaStream_t stream);

/// Decodes a ternary body of n elements to floats (scalar * trit). *d_first_bad receives the index of
/// the first invalid body byte or kNone; d_out is then not meaningful.
void decode(Packing packing, const std::uint8_t* d_body, std::uint64_t n, float scalar, float* d_out,
            std::uint64_t* d_first_bad, cudaStream_t stream, const std::string& version = "");

/// Unpacks a ternary body to int8 trits; *d_first_bad as for decode.
void unpack(Packing packing, const std::uint8_t* d_body, std::uint64_t n, std::int8_t* d_trits,
            std::uint64_t* d_first_bad, cudaStream_t stream);

/// Exact integer aggregation of `workers` bodies (d_bodies: device array of device pointers) that
/// share one scalar: d_sums[k] = sum of trits, d_mean[k] = (float)((double)scalar * sum / workers).
/// *d_first_bad = w * body_bytes + j for the first invalid byte j of the first bad worker w, or kNone.
void aggregate(const std::uint8_t* const* d_bodies, std::uint32_t workers, Packing packing,
               std::uint64_t n, float scalar, std::int32_t* d_sums, float* d_mean,
               std::uint64_t* d_first_bad, cudaStream_t stream);

// ---- host conveniences on top of the device API (they synchronise) --------------------------------

/// tg::encode through the fused device path: the same payload bytes as tg::encode(reference_codec()).
std::vector<std::uint8_t> encode_payload(std::span<const float> g, const Params& params,
                                         const StreamKey& key, const std::string& version = "");
/// tg::encode_layers through one encode_layers call (tensor i gets id key.tensor + i).
std::vector<std::vector<std::uint8_t>> encode_layers_payloads(
    const std::vector<std::span<const float>>& layers, const Params& params, const StreamKey& key,
    const std::string& version = "");
/// tg::aggregate through the aggregation kernel (headers and CRCs checked on the host first, so a
/// payload with both a header defect and an invalid body byte reports the header defect).
Aggregate aggregate_payloads(const std::vector<std::span<const std::uint8_t>>& payloads);

}  // namespace tg::cuda
