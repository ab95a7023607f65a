// cuda/runtime.h: the little of the CUDA runtime the host side needs (memory, copies, device
// count), implemented in cuda/runtime.cu. Every call is checked and raises lm::Error with the
// CUDA error string. Only compiled when LANDMARK_CUDA is on; storage.cpp and tensor.cpp guard
// their calls with LANDMARK_WITH_CUDA.
#pragma once

#include <cstddef>
#include <string>

namespace lm {
namespace cuda {

// Device memory through a caching allocator (runtime.cu): device_free keeps the block for the
// next request of its rounded size instead of calling cudaFree, which waits for the device.
void* device_malloc(size_t nbytes);
void device_free(void* p) noexcept;
size_t cached_bytes();  // bytes held idle by the cache
void release_cached();  // give every idle block back to CUDA (cudaFree)
void memcpy_h2d(void* dst, const void* src, size_t nbytes);
void memcpy_d2h(void* dst, const void* src, size_t nbytes);
void memcpy_d2d(void* dst, const void* src, size_t nbytes);
int device_count() noexcept;       // 0 when no driver or no device, never throws
std::string unavailable_reason();  // why device_count() is 0 ("" when a device is there)
void synchronize();
std::string device_description();  // name, compute capability, SMs, memory of the current device

}  // namespace cuda
}  // namespace lm
