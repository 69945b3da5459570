// terngrad-bench: the one place that decides how per-element code is compiled.
// TG_HD marks functions that both host code and CUDA kernels call (empty without nvcc),
// so the CPU-only build needs no CUDA headers at all.
#pragma once

#if defined(__CUDACC__)
#define TG_HD __host__ __device__
#define TG_HD_INLINE __host__ __device__ __forceinline__
#else
#define TG_HD
#define TG_HD_INLINE inline
#endif
