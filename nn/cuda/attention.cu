// nn/cuda/attention.cu: fused causal attention on CUDA. The products (q k^T, P v and the four of
// the backward) are strided-batched cuBLAS GEMMs over all heads at once, through lm::cuda::gemm
// (tensor/cuda/gemm.cu); the causal softmax and its backward are one block per row, reduced in a
// fixed order with no atomics. Not flash attention: the (T, T) score matrix is stored, but the
// GEMMs are cut into row tiles that skip most of the masked upper triangle
// (tensor/cuda/attention_tiles.h).
// CPU twin: nn/cpu/attention.cpp.
#include <algorithm>
#include <cmath>

#include "nn/kernels.h"
#include "tensor/cuda/attention_tiles.h"
#include "tensor/cuda/common.cuh"
#include "tensor/elementwise_math.h"
#include "tensor/kernels.h"

namespace lm {
namespace cuda {

namespace {

// probs (BH, T, T) holds S = scale q k^T on entry and P on exit. Row r is query i = r % T, which
// sees keys 0..i: P[i, j] = exp(S[i, j] - max) / sum for j <= i, and 0 for j > i. One block per
// row; the branch on the row is uniform, so every thread reaches the same barriers.
template <class Scalar>
__global__ void causal_softmax_kernel(Scalar* probs, int64_t T, int64_t rows) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    Scalar* p = probs + r * T;
    const int64_t n = r % T + 1;
    Scalar m = -static_cast<Scalar>(INFINITY);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = MaxOp{}(m, p[j]);
    m = block_allreduce(m, MaxOp{});
    // Each thread rescales only the entries it wrote itself, so no barrier is needed between.
    Scalar s = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      p[j] = math::exp_softmax(p[j] - m);  // the CPU twin's exp (tensor/elementwise_math.h)
      s += p[j];
    }
    s = block_allreduce(s, SumOp{});
    const Scalar inv = Scalar(1) / s;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) p[j] *= inv;
    for (int64_t j = n + threadIdx.x; j < T; j += blockDim.x) p[j] = Scalar(0);
  }
}

// d (BH, T, T) holds dP = dout v^T on entry and dS on exit:
//   dS[i, j] = P[i, j] (dP[i, j] - sum_{j' <= i} P[i, j'] dP[i, j'])  for j <= i, 0 above.
// The masked entries of dP are garbage from the full GEMM and are never read. One block per row.
template <class Scalar>
__global__ void causal_softmax_backward_kernel(const Scalar* probs, Scalar* d, int64_t T, int64_t rows) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Scalar* p = probs + r * T;
    Scalar* dr = d + r * T;
    const int64_t n = r % T + 1;
    Scalar dot = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dot += p[j] * dr[j];
    dot = block_allreduce(dot, SumOp{});
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dr[j] = p[j] * (dr[j] - dot);
    for (int64_t j = n + threadIdx.x; j < T; j += blockDim.x) dr[j] = Scalar(0);
  }
}

}  // namespace

void causal_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& probs,
                              const Tensor& out) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), rows = BH * T, TT = T * T, TH = T * HS;
  if (rows == 0) return;
  // q, k, v, out (BH, T, HS); probs (BH, T, T).
  const int64_t tile = attention_tile(T);
  for (int64_t i0 = 0; i0 < T; i0 += tile) {  // S[i0:i1, 0:i1] = scale q[i0:i1] k[0:i1]^T
    const int64_t n = std::min(tile, T - i0), i1 = i0 + n;
    gemm(blocks_gemm(false, true, n, i1, HS, HS, HS, T, TH, TH, TT, BH, scale), from_element(q, i0 * HS), k,
         from_element(probs, i0 * T));
  }
  LM_DISPATCH_FLOAT(q.dtype(), "causal_attention", {
    causal_softmax_kernel<scalar_t><<<row_blocks(rows), kRowThreads>>>(probs.data<scalar_t>(), T, rows);
    LM_CUDA_CHECK_LAUNCH("causal_softmax_kernel");
  });
  for (int64_t i0 = 0; i0 < T; i0 += tile) {  // out[i0:i1] = P[i0:i1, 0:i1] v[0:i1]
    const int64_t n = std::min(tile, T - i0), i1 = i0 + n;
    gemm(blocks_gemm(false, false, n, HS, i1, T, HS, HS, TT, TH, TH, BH, 1.0), from_element(probs, i0 * T), v,
         from_element(out, i0 * HS));
  }
}

void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                               const Tensor& dout, double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), rows = BH * T, TT = T * T, TH = T * HS;
  if (rows == 0) return;
  // q, k, v, dout, dq, dk, dv (BH, T, HS); probs P (BH, T, T); dS scratch (BH, T, T).
  Tensor dS({BH, T, T}, q.dtype(), Device::CUDA);
  const int64_t tile = attention_tile(T);
  for (int64_t j0 = 0; j0 < T; j0 += tile) {  // dv[j0:j1] = P[j0:T, j0:j1]^T dout[j0:T]
    const int64_t n = std::min(tile, T - j0);
    gemm(blocks_gemm(true, false, n, HS, T - j0, T, HS, HS, TT, TH, TH, BH, 1.0), from_element(probs, j0 * T + j0),
         from_element(dout, j0 * HS), from_element(dv, j0 * HS));
  }
  for (int64_t i0 = 0; i0 < T; i0 += tile) {  // dP[i0:i1, 0:i1] = dout[i0:i1] v[0:i1]^T
    const int64_t n = std::min(tile, T - i0), i1 = i0 + n;
    gemm(blocks_gemm(false, true, n, i1, HS, HS, HS, T, TH, TH, TT, BH, 1.0), from_element(dout, i0 * HS), v,
         from_element(dS, i0 * T));
  }
  LM_DISPATCH_FLOAT(q.dtype(), "causal_attention_backward", {
    causal_softmax_backward_kernel<scalar_t>
        <<<row_blocks(rows), kRowThreads>>>(probs.data<scalar_t>(), dS.data<scalar_t>(), T, rows);
    LM_CUDA_CHECK_LAUNCH("causal_softmax_backward_kernel");
  });
  for (int64_t i0 = 0; i0 < T; i0 += tile) {  // dq[i0:i1] = scale dS[i0:i1, 0:i1] k[0:i1]
    const int64_t n = std::min(tile, T - i0), i1 = i0 + n;
    gemm(blocks_gemm(false, false, n, HS, i1, T, HS, HS, TT, TH, TH, BH, scale), from_element(dS, i0 * T), k,
         from_element(dq, i0 * HS));
  }
  for (int64_t j0 = 0; j0 < T; j0 += tile) {  // dk[j0:j1] = scale dS[j0:T, j0:j1]^T q[j0:T]
    const int64_t n = std::min(tile, T - j0);
    gemm(blocks_gemm(true, false, n, HS, T - j0, T, HS, HS, TT, TH, TH, BH, scale), from_element(dS, j0 * T + j0),
         from_element(q, j0 * HS), from_element(dk, j0 * HS));
  }
}

}  // namespace cuda
}  // namespace lm
