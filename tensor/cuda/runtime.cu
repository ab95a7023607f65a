// cuda/runtime.cu: the host side's few CUDA runtime calls (allocation through a caching
// allocator, copies, device count, synchronisation), each checked so a failure becomes an
// lm::Error naming the call and CUDA's error string. No kernels and no streams here: everything
// runs on the default stream. The CPU counterparts are std::aligned_alloc and memcpy in
// storage.cpp / tensor.cpp.
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensor/cuda/common.cuh"
#include "tensor/cuda/runtime.h"

namespace lm {
namespace cuda {

namespace {
// ---- The caching allocator ----
// cudaFree waits until the device has finished all queued work, and cudaMalloc is slow too; a
// training step makes and drops thousands of tensors, so freeing each one stalled the GPU between
// kernels. Instead, a freed block goes into a bin of blocks of its (rounded) size and the next
// request of that size takes it back. Every kernel, copy and cuBLAS call runs on the default
// stream, in order, so a block that the host frees while a queued kernel still reads it can be
// handed to a later kernel: that kernel runs after the earlier one. Reads to the host
// (memcpy_d2h) wait for the device. LM_CUDA_CACHE=0 in the environment turns caching off (for
// compute-sanitizer, which can only see a use after free when blocks really go back to CUDA).
constexpr size_t kSmallRound = 512, kLargeRound = size_t(1) << 20;

// Sizes up to 1 MiB round up to a multiple of 512 bytes, larger ones to a multiple of 1 MiB, so
// tensors of nearby sizes share a bin and no block wastes more than 1 MiB.
size_t rounded(size_t nbytes) {
  const size_t r = nbytes <= kLargeRound ? kSmallRound : kLargeRound;
  return (nbytes + r - 1) / r * r;
}

struct BlockCache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_by_size;  // rounded size -> idle blocks
  std::unordered_map<void*, size_t> size_of;                    // every block we handed out or hold
  size_t cached = 0;                                            // bytes idle in free_by_size
  const bool enabled = [] {
    const char* e = std::getenv("LM_CUDA_CACHE");
    return e == nullptr || std::string(e) != "0";
  }();

  // Gives every idle block back to CUDA (caller holds mu).
  void release_locked() {
    for (auto& [size, blocks] : free_by_size)
      for (void* p : blocks) {
        size_of.erase(p);
        if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
      }
    free_by_size.clear();
    cached = 0;
  }
};

// Made once and never destroyed: blocks still cached at exit go back with the CUDA context, and
// no destructor runs after the runtime has been unloaded.
BlockCache& cache() {
  static BlockCache* c = new BlockCache();
  return *c;
}

[[noreturn]] void fail_alloc(size_t nbytes, cudaError_t err) {
  const char* hint = err == cudaErrorMemoryAllocation
                         ? " (use a smaller batch or model, or free other tensors)"
                         : " (is a GPU present, and is its driver recent enough for this CUDA toolkit?)";
  LM_FAIL("cuda: could not allocate " << nbytes << " bytes of device memory: " << cudaGetErrorName(err) << ": "
                                      << cudaGetErrorString(err) << hint);
}
}  // namespace

void* device_malloc(size_t nbytes) {
  BlockCache& c = cache();
  const size_t size = c.enabled ? rounded(nbytes) : nbytes;
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.enabled) {
    auto bin = c.free_by_size.find(size);
    if (bin != c.free_by_size.end() && !bin->second.empty()) {
      void* p = bin->second.back();
      bin->second.pop_back();
      c.cached -= size;
      return p;
    }
  }
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, size);
  if (err == cudaErrorMemoryAllocation && c.cached > 0) {  // out of memory: return the idle blocks, try again
    (void)cudaGetLastError();
    c.release_locked();
    err = cudaMalloc(&p, size);
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear it, so the next launch check does not report this failure
    fail_alloc(nbytes, err);
  }
  if (c.enabled) c.size_of[p] = size;
  return p;
}

void device_free(void* p) noexcept {
  // Called from destructors, which must not throw. At process exit the runtime may already be
  // unloaded (cudaErrorCudartUnloading); the memory goes with the context then, so any error
  // is dropped on purpose, and cleared so it does not surface at an unrelated launch check.
  if (p == nullptr) return;
  BlockCache& c = cache();
  if (c.enabled) {
    try {
      std::lock_guard<std::mutex> lock(c.mu);
      auto it = c.size_of.find(p);
      if (it != c.size_of.end()) {
        c.free_by_size[it->second].push_back(p);
        c.cached += it->second;
        return;
      }
    } catch (...) {  // a bin that could not grow (host memory): give the block back instead
    }
  }
  if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
}

size_t cached_bytes() {
  BlockCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.cached;
}

void release_cached() {
  BlockCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.release_locked();
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

std::string device_description() {
  int dev = 0;
  LM_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  LM_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  char buf[384];
  std::snprintf(buf, sizeof buf, "%s, compute capability %d.%d, %d SMs, %.1f GiB", p.name, p.major, p.minor,
                p.multiProcessorCount, static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace cuda
}  // namespace lm
