// cuda/runtime.h: the little of the CUDA runtime the host side needs (memory, copies, device
// count), implemented in cuda/runtime.cu. Every call is checked and raises lm::Error with the
// CUDA error string. Only compiled when LANDMARK_CUDA is on; storage.cpp and tensor.cpp guard
// their calls with LANDMARK_WITH_CUDA.
#pragma once

#include <cstddef>
#include <string>

namespace lm {
namespace cuda {

void* device_malloc(size_t nbytes);
void device_free(void* p) noexcept;
void memcpy_h2d(void* dst, const void* src, size_t nbytes);
void memcpy_d2h(void* dst, const void* src, size_t nbytes);
void memcpy_d2d(void* dst, const void* src, size_t nbytes);
int device_count() noexcept;  // 0 when no driver or no device, never throws
std::string unavailable_reason();  // why device_count() is 0 ("" when a device is there)
void synchronize();

}  // namespace cuda
}  // namespace lm
