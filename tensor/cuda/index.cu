// cuda/index.cu: embedding gather and its scatter-add backward on CUDA, plus the shared index
// range check. The backward sorts the positions by token (a stable radix sort, so equal tokens
// keep position order), then one thread per (distinct token, channel) sums that token's rows in
// position order: no two threads add into the same element and the sum order is the CPU's, so
// the result is deterministic and has the CPU twin's bits, with no atomics. Not a general
// gather/scatter. Twin: tensor/cpu/index.cpp.
#include <climits>
#include <cub/device/device_radix_sort.cuh>

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
template <class Scalar>
__global__ void embedding_kernel(const Scalar* w, const int32_t* ix, Scalar* out, int64_t N, int64_t C) {
  LM_CUDA_FOR(i, N * C) {
    const int64_t n = i / C, c = i % C;
    out[i] = w[static_cast<int64_t>(ix[n]) * C + c];
  }
}

// dw (V, C) already zero. sorted_ix (N) are the tokens in ascending order and pos (N) their
// positions, equal tokens in position order (stable sort). Thread (p, c) does the work only when
// p starts a run of equal tokens: it sums gout[pos, c] over the run, in position order, into the
// token's row. Neighbouring threads take neighbouring channels, so loads and stores coalesce.
// Until 2026-11-27 one thread per channel walked all N positions: C threads in all, 2.1 ms of
// GPT-2 124M's backward on an H100 (docs/cuda.md section 11).
template <class Scalar>
__global__ void embedding_backward_kernel(const Scalar* g, const int32_t* sorted_ix, const int32_t* pos, Scalar* dw,
                                          int64_t N, int64_t C) {
  LM_CUDA_FOR(e, N * C) {
    const int64_t p = e / C, c = e % C;
    const int32_t token = sorted_ix[p];
    if (p > 0 && sorted_ix[p - 1] == token) continue;  // not the first of its run
    Scalar acc = 0;
    for (int64_t r = p; r < N && sorted_ix[r] == token; ++r) acc += g[static_cast<int64_t>(pos[r]) * C + c];
    dw[static_cast<int64_t>(token) * C + c] = acc;
  }
}

__global__ void iota_kernel(int32_t* out, int64_t n) { LM_CUDA_FOR(i, n) out[i] = static_cast<int32_t>(i); }

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
  LM_CHECK(N < (int64_t(1) << 31), "embedding_backward on cuda: " << N << " positions, past the 2^31 the sort takes");
  // Stable radix sort of (token, position) pairs on the tokens' significant bits only.
  int end_bit = 1;
  while (end_bit < 31 && (int64_t(1) << end_bit) < V) ++end_bit;
  const int n = static_cast<int>(N);
  // Freed on every path; the caching allocator hands a block out again only to work queued after
  // the kernels below on the same stream (tensor/cuda/runtime.cu).
  Storage keys(sizeof(int32_t) * static_cast<size_t>(N > 0 ? N : 1), Device::CUDA),
      vals(sizeof(int32_t) * 2 * static_cast<size_t>(N > 0 ? N : 1), Device::CUDA);
  int32_t* sorted_ix = static_cast<int32_t*>(keys.data());
  int32_t* pos_in = static_cast<int32_t*>(vals.data());
  int32_t* pos = pos_in + N;
  if (N > 0) {
    iota_kernel<<<blocks_for(N), kThreads>>>(pos_in, N);
    LM_CUDA_CHECK_LAUNCH("iota_kernel");
    size_t temp_bytes = 0;
    LM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, idx.data<int32_t>(), sorted_ix, pos_in, pos, n,
                                                  0, end_bit));
    Storage temp(temp_bytes > 0 ? temp_bytes : 1, Device::CUDA);
    LM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), temp_bytes, idx.data<int32_t>(), sorted_ix, pos_in, pos,
                                                  n, 0, end_bit));
  }
  LM_DISPATCH_FLOAT(dweight.dtype(), "embedding_backward", {
    scalar_t* d = dweight.data<scalar_t>();
    // All-zero bytes are +0.0 in IEEE f32 and f64 (the rows of tokens that do not occur).
    LM_CUDA_CHECK(cudaMemset(d, 0, static_cast<size_t>(V * C) * sizeof(scalar_t)));
    if (N > 0 && C > 0) {
      embedding_backward_kernel<scalar_t>
          <<<blocks_for(N * C), kThreads>>>(gout.data<scalar_t>(), sorted_ix, pos, d, N, C);
      LM_CUDA_CHECK_LAUNCH("embedding_backward_kernel");
    }
  });
}

}  // namespace cuda
}  // namespace lm
