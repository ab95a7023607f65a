// cuda/common.cuh: what every CUDA kernel file shares: checked CUDA calls, launch sizes and
// grid-stride loops, a block-wide reduction, and StridedPack (shape + strides of up to 8 dims
// passed by value, so a thread can turn a linear index into each operand's offset). Not a
// general CUDA toolkit: only what tensor/cuda/*.cu use. The CPU counterpart is cpu/parallel.h.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "tensor/check.h"
#include "tensor/shape.h"

// Any CUDA runtime call: failure raises lm::Error with the call, CUDA's error name and string.
#define LM_CUDA_CHECK(call)                                                              \
  do {                                                                                   \
    cudaError_t lm_cuda_err_ = (call);                                                   \
    if (lm_cuda_err_ != cudaSuccess)                                                     \
      LM_FAIL("CUDA call `" #call "` failed: " << cudaGetErrorName(lm_cuda_err_) << ": " \
                                               << cudaGetErrorString(lm_cuda_err_));     \
  } while (0)

// After every kernel launch: catches bad launch configurations at once. Faults inside the
// kernel surface at the next synchronising call (a copy to the host, synchronize()).
#define LM_CUDA_CHECK_LAUNCH(kernel_name)                                                                        \
  do {                                                                                                           \
    cudaError_t lm_cuda_err_ = cudaGetLastError();                                                               \
    if (lm_cuda_err_ != cudaSuccess)                                                                             \
      LM_FAIL("CUDA kernel " << (kernel_name) << " failed to launch: " << cudaGetErrorName(lm_cuda_err_) << ": " \
                             << cudaGetErrorString(lm_cuda_err_));                                               \
  } while (0)

// for (i = this thread's first index; i < n; i += all threads in the grid), in int64 so that
// tensors past 2^31 elements index correctly.
#define LM_CUDA_FOR(i, n)                                                                \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

namespace lm {
namespace cuda {

constexpr int kThreads = 256;            // elementwise kernels
constexpr int kRowThreads = 256;         // one block per row (softmax, layernorm, ...): 8 warps
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride loops cover the rest
constexpr int kMaxDims = 8;

// Blocks for a grid-stride loop over n items (n > 0).
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  return static_cast<unsigned>(std::min<int64_t>((n + threads - 1) / threads, kMaxBlocks));
}
// Blocks for a loop over rows where each block takes whole rows.
inline unsigned row_blocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, kMaxBlocks)); }

// ---- block-wide reduction ----
struct SumOp {
  template <class Scalar>
  __device__ Scalar operator()(Scalar a, Scalar b) const {
    return a + b;
  }
};
// The max the CPU softmax uses: `b > a ? b : a`, so a NaN never replaces a number.
struct MaxOp {
  template <class Scalar>
  __device__ Scalar operator()(Scalar a, Scalar b) const {
    return b > a ? b : a;
  }
};

// Every thread of the block passes its partial value and gets the combined value of all of
// them. blockDim.x must be a multiple of 32 (at most 1024). The combine order depends only on
// blockDim, so results are the same on every run. Safe to call several times in a row.
template <class Scalar, class Op>
__device__ Scalar block_allreduce(Scalar v, Op op) {
  __shared__ Scalar warp_vals[32];
  __shared__ Scalar result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
  __syncthreads();  // every thread has read `result` of a previous call before it is rewritten
  if (lane == 0) warp_vals[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    Scalar r = warp_vals[0];
    for (int w = 1; w < nwarps; ++w) r = op(r, warp_vals[w]);
    result = r;
  }
  __syncthreads();
  return result;
}

// ---- strided operands ----
// N operands that share an iteration shape but have their own element strides (0 where an
// operand broadcasts). offsets() maps a row-major linear index to each operand's offset.
template <int N>
struct StridedPack {
  int ndim = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[N][kMaxDims] = {};

  __device__ void offsets(int64_t i, int64_t* off) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t idx = i % size[d];
      i /= size[d];
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += idx * stride[k][d];
    }
  }
};

// Host side: drop size-1 dims and merge dims that are contiguous with their inner neighbour
// for every operand (as cpu/parallel.h does), so most views become 1 or 2 dims and tensors of
// more than 8 dims still work when their layout collapses far enough.
template <int N>
StridedPack<N> make_strided_pack(const Shape& shape, const std::array<const Shape*, N>& strides, const char* opname) {
  StridedPack<N> p;
  Shape size;
  std::array<Shape, N> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !size.empty();
    for (int k = 0; k < N && merge; ++k) merge = st[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      size.back() *= shape[d];
      for (int k = 0; k < N; ++k) st[k].back() = (*strides[k])[d];
    } else {
      size.push_back(shape[d]);
      for (int k = 0; k < N; ++k) st[k].push_back((*strides[k])[d]);
    }
  }
  LM_CHECK(size.size() <= static_cast<size_t>(kMaxDims),
           opname << " on cuda: the view " << shape_str(shape) << " needs " << size.size()
                  << " dims after merging contiguous ones; at most " << kMaxDims
                  << " are supported (call contiguous() first)");
  p.ndim = static_cast<int>(size.size());
  for (int d = 0; d < p.ndim; ++d) {
    p.size[d] = size[d];
    for (int k = 0; k < N; ++k) p.stride[k][d] = st[k][d];
  }
  return p;  // ndim == 0 means a single element at offset 0 for everyone
}

// First position n in [0, count) whose index ix[n] is outside [0, limit) and, when
// `has_ignore`, not equal to `ignore`; -1 when none. Runs one block on the device (a
// deterministic min-reduction, no atomics) and copies one number back. Defined in index.cu.
int64_t first_bad_index(const int32_t* ix, int64_t count, int64_t limit, bool has_ignore, int64_t ignore);

}  // namespace cuda
}  // namespace lm
