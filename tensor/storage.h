// storage.h: an owning, untyped, uninitialised buffer on one device. Tensors share a Storage
// through shared_ptr; views never copy it. CPU buffers are 64-byte aligned for vector loads.
#pragma once

#include <cstddef>
#include <string>

#include "tensor/dtype.h"

namespace lm {

class Storage {
 public:
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_ = Device::CPU;
};

// The machine's physical memory in bytes (sysconf; "unlimited" when the system does not say).
// Host allocations above it are refused; model configs are checked against it before building.
size_t physical_memory_bytes();

// True when the library was compiled with CUDA kernels (LANDMARK_CUDA). Says nothing about
// whether a GPU is present: see cuda_device_count().
bool cuda_compiled();
int cuda_device_count();  // 0 when not compiled with CUDA or when no device/driver is found
void cuda_synchronize();  // wait for queued CUDA work (and surface its errors); no-op without CUDA
// Why no CUDA device can be used: "built without CUDA", the runtime's error (e.g. a driver too
// old for the toolkit), or "" when one can.
std::string cuda_unavailable_reason();
// The current CUDA device, for benchmark and log headers: "NVIDIA H100 80GB HBM3, compute
// capability 9.0, 132 SMs, 79.1 GiB"; "" without CUDA or a device.
std::string cuda_device_description();
// CUDA tensors take their memory through a caching allocator (tensor/cuda/runtime.cu): freed
// blocks are kept for reuse. The bytes it holds idle, and a call that returns them all to CUDA
// (0 and nothing to do without CUDA).
size_t cuda_cached_bytes();
void cuda_release_cached();
// The same for small host buffers (64 B to 256 KiB), which the calling thread keeps for reuse in
// a cache of its own (tensor/storage.cpp): the bytes it holds idle, and a call that frees them.
size_t host_cached_bytes();
void host_release_cached();

}  // namespace lm
