// cuda/index.cu: embedding gather and its scatter-add backward on CUDA, plus the shared index
// range check. The backward gives each thread one channel and walks the positions in order, so
// no two threads add into the same element and the sum order is position order, as on the CPU:
// deterministic, no atomics (and slower than an atomic scatter; correctness first). Not a
// general gather/scatter. Twin: tensor/cpu/index.cpp.
#include <climits>

#include "tensor/cuda/common.cuh"
#include "tensor/kernels.h"
#include "tensor/storage.h"

namespace lm {
namespace cuda {

namespace {

constexpr int kCheckThreads = 1024;

struct MinOp {
  __device__ long long operator()(long long a, long long b) const { return b < a ? b : a; }
};

// ix (count) i32 -> result (1): the first position holding an index outside [0, limit) that is
// not `ignore`, or -1 when every index is fine. One block: each thread finds its smallest bad
// position, then a fixed-order min over the block.
__global__ void first_bad_kernel(const int32_t* ix, int64_t count, int64_t limit, bool has_ignore, int64_t ignore,
                                 long long* result) {
  long long first = LLONG_MAX;
  for (int64_t n = threadIdx.x; n < count; n += blockDim.x) {
    const int64_t v = ix[n];
    const bool bad = (v < 0 || v >= limit) && !(has_ignore && v == ignore);
    if (bad) {
      first = n;
      break;  // later positions of this thread are larger
    }
  }
  first = block_allreduce(first, MinOp{});
  if (threadIdx.x == 0) *result = first == LLONG_MAX ? -1 : first;
}

// out (N, C) = w[ix[n], :]; one thread per output element.
template <class Scalar> __global__ void embedding_kernel(const Scalar* w, const int32_t* ix, Scalar* out, int64_t N,
                                                         int64_t C) {
  LM_CUDA_FOR(i, N * C) {
    const int64_t n = i / C, c = i % C;
    out[i] = w[static_cast<int64_t>(ix[n]) * C + c];
  }
}

// dw (V, C) already zero; thread c adds gout[n, c] into dw[ix[n], c] for n = 0, 1, ... in order.
// Neighbouring threads touch neighbouring channels, so each step's loads and stores coalesce.
template <class Scalar>
__global__ void embedding_backward_kernel(const Scalar* g, const int32_t* ix, Scalar* dw, int64_t N, int64_t C) {
  LM_CUDA_FOR(c, C) {
    for (int64_t n = 0; n < N; ++n) dw[static_cast<int64_t>(ix[n]) * C + c] += g[n * C + c];
  }
}

}  // namespace

int64_t first_bad_index(const int32_t* ix, int64_t count, int64_t limit, bool has_ignore, int64_t ignore) {
  if (count == 0) return -1;
  Storage result(sizeof(long long), Device::CUDA);  // freed on every path, errors included
  first_bad_kernel<<<1, kCheckThreads>>>(ix, count, limit, has_ignore, ignore, static_cast<long long*>(result.data()));
  LM_CUDA_CHECK_LAUNCH("first_bad_kernel");
  long long bad = -1;
  LM_CUDA_CHECK(cudaMemcpy(&bad, result.data(), sizeof(bad), cudaMemcpyDeviceToHost));
  return static_cast<int64_t>(bad);
}

int64_t embedding(const Tensor& weight, const Tensor& idx, const Tensor& out) {
  const int64_t V = weight.size(0), C = weight.size(1), N = idx.numel();
  const int32_t* ix = idx.data<int32_t>();
  // Check every index before reading any row: a bad one would read outside the weight.
  const int64_t bad = first_bad_index(ix, N, V, false, 0);
  if (bad >= 0) return bad;
  if (N * C == 0) return -1;
  LM_DISPATCH_FLOAT(weight.dtype(), "embedding", {
    embedding_kernel<scalar_t>
        <<<blocks_for(N * C), kThreads>>>(weight.data<scalar_t>(), ix, out.data<scalar_t>(), N, C);
    LM_CUDA_CHECK_LAUNCH("embedding_kernel");
  });
  return -1;
}

void embedding_backward(const Tensor& gout, const Tensor& idx, const Tensor& dweight) {
  const int64_t V = dweight.size(0), C = dweight.size(1), N = idx.numel();
  // The CPU twin trusts its indices (the forward checked them); here an out-of-range one would
  // be a device fault that poisons the whole context, so it is reported instead.
  const int64_t bad = first_bad_index(idx.data<int32_t>(), N, V, false, 0);
  LM_CHECK(bad < 0, "embedding_backward on cuda: the index at position " << bad << " is out of range [0, " << V << ")");
  LM_DISPATCH_FLOAT(dweight.dtype(), "embedding_backward", {
    scalar_t* d = dweight.data<scalar_t>();
    // All-zero bytes are +0.0 in IEEE f32 and f64.
    LM_CUDA_CHECK(cudaMemset(d, 0, static_cast<size_t>(V * C) * sizeof(scalar_t)));
    if (N > 0 && C > 0) {
      embedding_backward_kernel<scalar_t>
          <<<blocks_for(C), kThreads>>>(gout.data<scalar_t>(), idx.data<int32_t>(), d, N, C);
      LM_CUDA_CHECK_LAUNCH("embedding_backward_kernel");
    }
  });
}

}  // namespace cuda
}  // namespace lm
