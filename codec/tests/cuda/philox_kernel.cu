// terngrad-bench: one-thread kernels for the CUDA known-answer tests (test_cuda_codec.cpp): the shared
// __host__ __device__ Philox of tg/philox.hpp evaluated on the device, outputs pre-filled with 0xCA.
#include <cuda_runtime.h>

#include <string>

#include "philox_kernel.hpp"

namespace tg::cuda::test {
namespace {

__global__ void philox_raw_kernel(const PhiloxBlock* ctr, const std::uint32_t* keys, int count, PhiloxBlock* out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  for (int i = 0; i < count; ++i) out[i] = philox4x32_10(ctr[i], keys[2 * i], keys[2 * i + 1]);
}

__global__ void philox_stream_kernel(const StreamKey* keys, const std::uint32_t* blocks, int count, PhiloxBlock* out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  for (int i = 0; i < count; ++i) out[i] = philox_block(keys[i], blocks[i]);
}

std::string run(cudaError_t e, const char* what) {
  return e == cudaSuccess ? "" : std::string(what) + ": " + cudaGetErrorString(e);
}

template <typename In1, typename In2, typename Launch>
std::string on_device(const std::vector<In1>& a, const std::vector<In2>& b, std::vector<PhiloxBlock>& out,
                      Launch launch) {
  In1* da = nullptr;
  In2* db = nullptr;
  PhiloxBlock* dout = nullptr;
  std::string err;
  auto step = [&](cudaError_t e, const char* what) {
    if (err.empty()) err = run(e, what);
    return err.empty();
  };
  if (step(cudaMalloc(&da, sizeof(In1) * a.size() + 1), "cudaMalloc") &&
      step(cudaMalloc(&db, sizeof(In2) * b.size() + 1), "cudaMalloc") &&
      step(cudaMalloc(&dout, sizeof(PhiloxBlock) * out.size() + 1), "cudaMalloc") &&
      step(cudaMemcpy(da, a.data(), sizeof(In1) * a.size(), cudaMemcpyHostToDevice), "cudaMemcpy") &&
      step(cudaMemcpy(db, b.data(), sizeof(In2) * b.size(), cudaMemcpyHostToDevice), "cudaMemcpy") &&
      step(cudaMemset(dout, 0xCA, sizeof(PhiloxBlock) * out.size()), "cudaMemset")) {
    launch(da, db, dout);
    if (step(cudaGetLastError(), "kernel launch") && step(cudaDeviceSynchronize(), "kernel"))
      step(cudaMemcpy(out.data(), dout, sizeof(PhiloxBlock) * out.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dout);
  return err;
}

}  // namespace

std::string philox_raw_on_device(const std::vector<PhiloxBlock>& ctr, const std::vector<std::uint32_t>& keys,
                                 std::vector<PhiloxBlock>& out) {
  out.resize(ctr.size());
  int count = static_cast<int>(ctr.size());
  return on_device(ctr, keys, out, [&](const PhiloxBlock* c, const std::uint32_t* k, PhiloxBlock* o) {
    philox_raw_kernel<<<1, 1>>>(c, k, count, o);
  });
}

std::string philox_stream_on_device(const std::vector<StreamKey>& keys, const std::vector<std::uint32_t>& blocks,
                                    std::vector<PhiloxBlock>& out) {
  out.resize(keys.size());
  int count = static_cast<int>(keys.size());
  return on_device(keys, blocks, out, [&](const StreamKey* k, const std::uint32_t* b, PhiloxBlock* o) {
    philox_stream_kernel<<<1, 1>>>(k, b, count, o);
  });
}

}  // namespace tg::cuda::test
