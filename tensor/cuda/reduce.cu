// cuda/reduce.cu: reductions over one dim (sum, mean, max, argmax) and the row-wise softmax
// family with its backward, on CUDA. Long reductions give a whole block to each output (tree
// combine in a fixed order); short ones give one thread per output and walk n in index order,
// exactly like the CPU. Never atomics, so every run gives the same bits. f32 sums accumulate in
// f64 as on the CPU. Not a general-purpose segmented reduction. Twin: tensor/cpu/reduce.cpp.
#include <cmath>
#include <type_traits>

#include "tensor/cuda/common.cuh"
#include "tensor/kernels.h"

namespace lm {
namespace cuda {

namespace {

template <class Scalar>
struct Acc {
  using type = double;
};
template <>
struct Acc<int32_t> {
  using type = int64_t;
};

// Below this many outputs a block per output keeps the GPU busier than a thread per output;
// rows up to kShortRow long are not worth a block of kRowThreads threads.
constexpr int64_t kFewOutputs = 2048;
constexpr int64_t kShortRow = 32;

template <class Scalar>
__device__ Scalar lowest() {
  if constexpr (std::is_integral<Scalar>::value)
    return Scalar(INT32_MIN);
  else
    return -static_cast<Scalar>(INFINITY);
}

// The max of reduce(): NaN wins over everything (CPU: `if (v > m || v != v) m = v`).
struct MaxNanOp {
  template <class Scalar>
  __device__ Scalar operator()(Scalar a, Scalar b) const {
    return (a != a) ? a : (b != b || b > a) ? b : a;
  }
};

// Argmax order: a NaN beats every number, a larger value beats a smaller one, and among equals
// the smaller index wins (so the first maximum, or the first NaN, is chosen, as on the CPU).
// bi < 0 marks "no element yet". The combine is associative, so the tree order cannot matter.
template <class Scalar>
__device__ void argmax_take(Scalar& bv, int64_t& bi, Scalar v, int64_t i) {
  if (i < 0) return;
  bool take;
  if (bi < 0)
    take = true;
  else if (v != v)
    take = (bv == bv) || i < bi;
  else
    take = (bv == bv) && (v > bv || (v == bv && i < bi));
  if (take) {
    bv = v;
    bi = i;
  }
}

// Block-wide argmax of per-thread (value, index) candidates; returns the winner's index.
template <class Scalar>
__device__ int64_t block_argmax(Scalar v, int64_t i) {
  __shared__ Scalar warp_v[32];
  __shared__ int64_t warp_i[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Scalar ov = __shfl_down_sync(0xffffffffu, v, o);
    int64_t oi = __shfl_down_sync(0xffffffffu, i, o);
    argmax_take(v, i, ov, oi);
  }
  __syncthreads();
  if (lane == 0) {
    warp_v[warp] = v;
    warp_i[warp] = i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < nwarps; ++w) argmax_take(v, i, warp_v[w], warp_i[w]);
  }
  return i;  // meaningful in thread 0 only
}

// One block per output r of the (outer, inner) result; x viewed as (outer, n, inner).
template <class Scalar>
__global__ void reduce_block_kernel(ReduceOp op, const Scalar* x, int64_t outputs, int64_t n, int64_t inner,
                                    Scalar* out, int32_t* out_idx) {
  using acc_t = typename Acc<Scalar>::type;
  for (int64_t r = blockIdx.x; r < outputs; r += gridDim.x) {
    const Scalar* p = x + (r / inner) * n * inner + r % inner;
    if (op == ReduceOp::Argmax) {
      Scalar bv = Scalar(0);
      int64_t bi = -1;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) argmax_take(bv, bi, p[j * inner], j);
      bi = block_argmax(bv, bi);
      if (threadIdx.x == 0) out_idx[r] = static_cast<int32_t>(bi);
    } else if (op == ReduceOp::Max) {
      Scalar m = lowest<Scalar>();
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = MaxNanOp{}(m, p[j * inner]);
      m = block_allreduce(m, MaxNanOp{});
      if (threadIdx.x == 0) out[r] = m;
    } else {
      acc_t s = 0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += static_cast<acc_t>(p[j * inner]);
      s = block_allreduce(s, SumOp{});
      if (op == ReduceOp::Mean) s = static_cast<acc_t>(static_cast<double>(s) / static_cast<double>(n));
      if (threadIdx.x == 0) out[r] = static_cast<Scalar>(s);
    }
  }
}

// x (outer, n, inner) -> out (outer, inner). One thread per output, walking n in order: the CPU
// loop, verbatim. Neighbouring threads read neighbouring `inner` positions, so the loads coalesce.
template <class Scalar>
__global__ void reduce_thread_kernel(ReduceOp op, const Scalar* x, int64_t outputs, int64_t n, int64_t inner,
                                     Scalar* out, int32_t* out_idx) {
  using acc_t = typename Acc<Scalar>::type;
  LM_CUDA_FOR(r, outputs) {
    const Scalar* p = x + (r / inner) * n * inner + r % inner;
    if (op == ReduceOp::Argmax) {
      Scalar bv = p[0];
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j) {
        Scalar v = p[j * inner];
        if (v > bv || (v != v && bv == bv)) {
          bv = v;
          best = j;
        }
      }
      out_idx[r] = static_cast<int32_t>(best);
    } else if (op == ReduceOp::Max) {
      Scalar m = p[0];
      for (int64_t j = 1; j < n; ++j) {
        Scalar v = p[j * inner];
        if (v > m || v != v) m = v;
      }
      out[r] = m;
    } else {
      acc_t s = 0;
      for (int64_t j = 0; j < n; ++j) s += static_cast<acc_t>(p[j * inner]);
      if (op == ReduceOp::Mean) s = static_cast<acc_t>(static_cast<double>(s) / static_cast<double>(n));
      out[r] = static_cast<Scalar>(s);
    }
  }
}

// x (rows, cols) -> y (rows, cols), one block per row. Same steps as the CPU: max (ignoring
// NaN), an all -inf row shifted by 0 instead of -inf, then exp / sum or x - logsumexp.
template <class Scalar>
__global__ void softmax_kernel(const Scalar* x, Scalar* y, int64_t rows, int64_t cols, bool log) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Scalar* xr = x + r * cols;
    Scalar* yr = y + r * cols;
    Scalar m = -static_cast<Scalar>(INFINITY);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = MaxOp{}(m, xr[j]);
    m = block_allreduce(m, MaxOp{});
    if (m == -static_cast<Scalar>(INFINITY)) m = Scalar(0);
    Scalar s = 0;
    if (log) {
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += std::exp(xr[j] - m);
      s = block_allreduce(s, SumOp{});
      const Scalar lse = m + std::log(s);
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = xr[j] - lse;
    } else {
      // Each thread rereads only the entries it wrote itself, so no barrier is needed between.
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        yr[j] = std::exp(xr[j] - m);
        s += yr[j];
      }
      s = block_allreduce(s, SumOp{});
      const Scalar inv = Scalar(1) / s;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] *= inv;
    }
  }
}

// y, g, dx (rows, cols):  softmax: dx = y * (g - sum(g * y));  log-softmax: dx = g - exp(y) * sum(g).
template <class Scalar>
__global__ void softmax_backward_kernel(const Scalar* y, const Scalar* g, Scalar* dx, int64_t rows, int64_t cols,
                                        bool log) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Scalar* yr = y + r * cols;
    const Scalar* gr = g + r * cols;
    Scalar* dr = dx + r * cols;
    Scalar s = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += log ? gr[j] : gr[j] * yr[j];
    s = block_allreduce(s, SumOp{});
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      dr[j] = log ? gr[j] - std::exp(yr[j]) * s : yr[j] * (gr[j] - s);
  }
}

}  // namespace

void reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& out) {
  const int64_t outputs = outer * inner;
  if (outputs == 0 || n == 0) return;  // the front zero-fills the n == 0 case itself
  // A block per output when outputs are few (to fill the GPU) or rows are contiguous and long
  // (coalesced loads); otherwise a thread per output, which also keeps short rows cheap.
  const bool per_block = outputs < kFewOutputs || (inner == 1 && n > kShortRow);
  LM_DISPATCH_ALL(x.dtype(), "reduce", {
    scalar_t* o = op == ReduceOp::Argmax ? nullptr : out.data<scalar_t>();
    int32_t* oi = op == ReduceOp::Argmax ? out.data<int32_t>() : nullptr;
    if (per_block) {
      reduce_block_kernel<scalar_t>
          <<<row_blocks(outputs), kRowThreads>>>(op, x.data<scalar_t>(), outputs, n, inner, o, oi);
      LM_CUDA_CHECK_LAUNCH("reduce_block_kernel");
    } else {
      reduce_thread_kernel<scalar_t>
          <<<blocks_for(outputs), kThreads>>>(op, x.data<scalar_t>(), outputs, n, inner, o, oi);
      LM_CUDA_CHECK_LAUNCH("reduce_thread_kernel");
    }
  });
}

void softmax(const Tensor& x, const Tensor& out, bool log) {
  const int64_t cols = x.size(-1), rows = cols == 0 ? 0 : x.numel() / cols;
  if (rows == 0) return;
  LM_DISPATCH_FLOAT(x.dtype(), "softmax", {
    softmax_kernel<scalar_t>
        <<<row_blocks(rows), kRowThreads>>>(x.data<scalar_t>(), out.data<scalar_t>(), rows, cols, log);
    LM_CUDA_CHECK_LAUNCH("softmax_kernel");
  });
}

void softmax_backward(const Tensor& y, const Tensor& g, const Tensor& dx, bool log) {
  const int64_t cols = y.size(-1), rows = cols == 0 ? 0 : y.numel() / cols;
  if (rows == 0) return;
  LM_DISPATCH_FLOAT(y.dtype(), "softmax_backward", {
    softmax_backward_kernel<scalar_t><<<row_blocks(rows), kRowThreads>>>(y.data<scalar_t>(), g.data<scalar_t>(),
                                                                         dx.data<scalar_t>(), rows, cols, log);
    LM_CUDA_CHECK_LAUNCH("softmax_backward_kernel");
  });
}

}  // namespace cuda
}  // namespace lm
