// cuda/runtime.cu: the host side's few CUDA runtime calls (allocation, copies, device count,
// synchronisation), each checked so a failure becomes an lm::Error naming the call and CUDA's
// error string. No kernels and no streams here: everything runs on the default stream. The CPU
// counterparts are std::aligned_alloc and memcpy in storage.cpp / tensor.cpp.
#include <string>
#include "tensor/cuda/common.cuh"
#include "tensor/cuda/runtime.h"

namespace lm {
namespace cuda {

void* device_malloc(size_t nbytes) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, nbytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear it, so the next launch check does not report this failure
    const char* hint = err == cudaErrorMemoryAllocation
                           ? " (use a smaller batch or model, or free other tensors)"
                           : " (is a GPU present, and is its driver recent enough for this CUDA toolkit?)";
    LM_FAIL("cuda: could not allocate " << nbytes << " bytes of device memory: " << cudaGetErrorName(err) << ": "
                                        << cudaGetErrorString(err) << hint);
  }
  return p;
}

void device_free(void* p) noexcept {
  // Called from destructors, which must not throw. At process exit the runtime may already be
  // unloaded (cudaErrorCudartUnloading); the memory goes with the context then, so any error
  // is dropped on purpose, and cleared so it does not surface at an unrelated launch check.
  if (p == nullptr) return;
  if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
}

void memcpy_h2d(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  LM_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice));
}

void memcpy_d2h(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  LM_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost));
}

void memcpy_d2d(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  LM_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToDevice));
}

std::string unavailable_reason() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  (void)cudaGetLastError();
  if (err != cudaSuccess) return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
  return n == 0 ? "the driver reports no device" : "";
}

int device_count() noexcept {
  // Without a driver or a device this returns cudaErrorNoDevice / cudaErrorInsufficientDriver:
  // that is an answer ("none"), not a failure, so it must neither throw nor stay recorded as
  // the runtime's last error.
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

void synchronize() { LM_CUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace cuda
}  // namespace lm
