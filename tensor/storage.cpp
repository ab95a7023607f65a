// storage.cpp: allocation of CPU (64-byte aligned) and CUDA buffers.
#include "tensor/storage.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <new>
#include <vector>

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

// Small host buffers are recycled through a per-thread cache of free buffers in power-of-two
// size classes (64 B .. 256 KiB, at most kCachedPerClass each). Decoding a token runs a few hundred
// tiny ops, each allocating its output, and glibc's aligned allocation (split + consolidate) was
// a fifth of a decode step in perf; a cache hit is a vector pop. Bigger buffers go straight to
// the C allocator. Under AddressSanitizer the cache is off so use-after-free stays visible.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheHostBuffers = false;
#else
constexpr bool kCacheHostBuffers = true;
#endif
constexpr int kMinClass = 6, kMaxClass = 18;  // 2^6 = 64 B .. 2^18 = 256 KiB
constexpr size_t kCachedPerClass = 32;

struct HostBufferCache {
  std::vector<void*> free_list[kMaxClass + 1];
  ~HostBufferCache();
};
// Set while this thread's cache object exists; a buffer freed after it is gone (a static tensor
// destroyed at exit) goes straight back to the C allocator.
thread_local bool t_cache_alive = false;
HostBufferCache::~HostBufferCache() {
  t_cache_alive = false;
  for (auto& list : free_list)
    for (void* p : list) std::free(p);
}
HostBufferCache& host_cache() {
  thread_local HostBufferCache cache;
  t_cache_alive = true;
  return cache;
}
// The size class of a request: the smallest c with 2^c >= nbytes (at least kMinClass), or -1 when
// the request is too big to cache.
int size_class(size_t nbytes) {
  for (int c = kMinClass; c <= kMaxClass; ++c)  // bounded: a shift never reaches the word's width
    if ((size_t{1} << c) >= nbytes) return c;
  return -1;
}

void* host_alloc(size_t nbytes) {
  if constexpr (kCacheHostBuffers) {  // (not `c = cache ? class : -1`: GCC warned of a shift by -1)
    const int c = size_class(nbytes);
    if (c >= 0) {
      std::vector<void*>& list = host_cache().free_list[c];
      if (!list.empty()) {
        void* p = list.back();
        list.pop_back();
        return p;
      }
      return std::aligned_alloc(64, size_t{1} << c);
    }
  }
  if (nbytes > physical_memory_bytes()) return nullptr;  // see physical_memory_bytes
  const size_t rounded = (nbytes + 63) / 64 * 64;
  return std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
}

void host_free(void* p, size_t nbytes) {
  if constexpr (kCacheHostBuffers) {  // as in host_alloc
    const int c = size_class(nbytes);
    if (c >= 0 && t_cache_alive) {
      std::vector<void*>& list = host_cache().free_list[c];
      if (list.size() < kCachedPerClass) {
        list.push_back(p);
        return;
      }
    }
  }
  std::free(p);
}
}  // namespace

// The machine's physical memory. A host request above it is refused before the allocator sees
// it: such a request is a bug or bad input (a huge flag), and allocators handle absurd sizes
// badly (the sanitizers' abort, and rounding up to 64 bytes wraps near 2^64 to a tiny buffer).
size_t physical_memory_bytes() {
  static const size_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return std::numeric_limits<size_t>::max() / 2;  // unknown: no limit of ours
    return static_cast<size_t>(pages) * static_cast<size_t>(page);
  }();
  return bytes;
}

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device == Device::CPU) {
    static const bool tuned = tune_host_allocator();
    (void)tuned;
    data_ = host_alloc(nbytes);
    LM_CHECK(data_ != nullptr, "out of host memory allocating " << nbytes << " bytes (the machine has "
                                                                << physical_memory_bytes() << ")");
  } else {
#ifdef LANDMARK_WITH_CUDA
    data_ = cuda::device_malloc(nbytes == 0 ? 4 : nbytes);
#else
    LM_FAIL(
        "cannot allocate on cuda: this build has no CUDA support "
        "(configure with -DLANDMARK_CUDA=ON on a machine with the CUDA toolkit)");
#endif
  }
}

Storage::~Storage() {
  if (device_ == Device::CPU) {
    host_free(data_, nbytes_);
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

std::string cuda_device_description() {
#ifdef LANDMARK_WITH_CUDA
  return cuda::device_count() > 0 ? cuda::device_description() : "";
#else
  return "";
#endif
}

size_t host_cached_bytes() {
  const HostBufferCache& cache = host_cache();
  size_t bytes = 0;
  for (int c = kMinClass; c <= kMaxClass; ++c) bytes += cache.free_list[c].size() * (size_t{1} << c);
  return bytes;
}

void host_release_cached() {
  for (auto& list : host_cache().free_list) {
    for (void* p : list) std::free(p);
    list.clear();
  }
}

size_t cuda_cached_bytes() {
#ifdef LANDMARK_WITH_CUDA
  return cuda::cached_bytes();
#else
  return 0;
#endif
}

void cuda_release_cached() {
#ifdef LANDMARK_WITH_CUDA
  cuda::release_cached();
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
