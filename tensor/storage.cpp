// storage.cpp: allocation of CPU (64-byte aligned) and CUDA buffers.
#include "tensor/storage.h"

#include <malloc.h>

#include <cstdlib>
#include <new>

#include "tensor/check.h"
#ifdef LANDMARK_WITH_CUDA
#include "tensor/cuda/runtime.h"
#endif

namespace lm {

namespace {
// Training allocates and frees the same large activation buffers every step. glibc serves big
// requests with fresh mmap()s by default, so every step would page-fault its activations in
// again (seen as ~7% of a training step in perf). Keeping freed memory in the heap instead makes
// reuse free. Done once, before the first allocation.
bool tune_host_allocator() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  return true;
}
}  // namespace

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device == Device::CPU) {
    static const bool tuned = tune_host_allocator();
    (void)tuned;
    size_t rounded = (nbytes + 63) / 64 * 64;
    data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    LM_CHECK(data_ != nullptr, "out of host memory allocating " << nbytes << " bytes");
  } else {
#ifdef LANDMARK_WITH_CUDA
    data_ = cuda::device_malloc(nbytes == 0 ? 4 : nbytes);
#else
    LM_FAIL("cannot allocate on cuda: this build has no CUDA support "
            "(configure with -DLANDMARK_CUDA=ON on a machine with the CUDA toolkit)");
#endif
  }
}

Storage::~Storage() {
  if (device_ == Device::CPU) {
    std::free(data_);
  } else {
#ifdef LANDMARK_WITH_CUDA
    cuda::device_free(data_);
#endif
  }
}

bool cuda_compiled() {
#ifdef LANDMARK_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::string cuda_unavailable_reason() {
#ifdef LANDMARK_WITH_CUDA
  return cuda::unavailable_reason();
#else
  return "built without CUDA (configure with -DLANDMARK_CUDA=ON)";
#endif
}

void cuda_synchronize() {
#ifdef LANDMARK_WITH_CUDA
  cuda::synchronize();
#endif
}

int cuda_device_count() {
#ifdef LANDMARK_WITH_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

}  // namespace lm
