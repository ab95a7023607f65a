// hostdevice.h: LM_HD marks per-element helpers that both the CPU kernels and the CUDA kernels
// call. Under nvcc it expands to __host__ __device__; under a plain C++ compiler to `inline`, so
// the CPU tests exercise exactly the arithmetic the GPU runs.
#pragma once

#if defined(__CUDACC__)
#define LM_HD __host__ __device__ __forceinline__
#else
#define LM_HD inline
#endif
