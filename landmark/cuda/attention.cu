// landmark/cuda/attention.cu: fused landmark attention on CUDA. The products (the scores, W v and
// the four of the backward) are strided-batched cuBLAS GEMMs over all heads at once, through
// lm::cuda::gemm; between them one thread per query row runs the grouped softmax of
// grouped_softmax.h, the very LM_HD functions the CPU twin (landmark/cpu/attention.cpp) calls.
// Not flash attention: full (T, T) scores, weights and gradients are formed for every head.
#include "landmark/grouped_softmax.h"
#include "landmark/kernels.h"
#include "tensor/cuda/common.cuh"
#include "tensor/kernels.h"

namespace lm {
namespace cuda {

namespace {

// The layout tensors (landmark/layout.h) on the device, passed to kernels by value. Head h
// belongs to batch row h / NH, whose RowLayout the row kernels hand to grouped_softmax.h.
struct DeviceLayout {
  const int32_t* kind;         // (B, T)
  const int32_t* block_of;     // (B, T)
  const int32_t* block_start;  // (B, T + 1)
  const int32_t* cmt;          // (B)
  int64_t T, NH;
  double cmt_cutoff = 0;  // evaluation-time CMT cutoff (forward only)

  __device__ RowLayout of_head(int64_t h) const {
    const int64_t b = h / NH;
    return RowLayout{kind + b * T, block_of + b * T, block_start + b * (T + 1), cmt[b], cmt_cutoff};
  }
};

DeviceLayout device_layout(const Tensor& kind, const Tensor& block_of, const Tensor& block_start, const Tensor& cmt,
                           int64_t BH, int64_t T) {
  const int64_t B = kind.size(0);
  LM_CHECK(kind.device() == Device::CUDA && block_of.device() == Device::CUDA &&
               block_start.device() == Device::CUDA && cmt.device() == Device::CUDA,
           "landmark_attention on cuda: the layout tensors must live on cuda (make_layout(kinds, Device::CUDA)); kind "
               << describe(kind) << ", block_of " << describe(block_of) << ", block_start " << describe(block_start)
               << ", cmt " << describe(cmt));
  LM_CHECK(B > 0 && BH % B == 0 && kind.size(1) == T,
           "landmark_attention on cuda: " << BH << " heads of length " << T << " do not match the layout "
                                          << describe(kind) << " (B, T): the heads must split evenly over B");
  return DeviceLayout{kind.data<int32_t>(), block_of.data<int32_t>(), block_start.data<int32_t>(),
                      cmt.data<int32_t>(), T, BH / B, 0.0};
}

// Why a thread per row: it runs the very row functions the CPU runs, and the number of groups in a
// row is dynamic, so a block-parallel version would be a second spelling of the math to keep in
// step. The cost: a warp walks 32 rows at once (uncoalesced reads), unmeasured so far against the
// GEMMs. Rows stay balanced: each does its i + 1 entries plus T - 1 - i zeros.
//
// One thread per row r = (head h, query i) of probs and W (BH, T, T). On entry probs holds the
// scaled scores S; on exit P' (grouped_softmax.h), and W the final weights, both 0 for j > i.
// In place like the CPU: row_forward reads each score before it writes that entry of P'. The
// full GEMM filled j > i with scores of future keys; they are never read, only overwritten.
template <class Scalar> __global__ void grouped_softmax_kernel(DeviceLayout lay, Scalar* probs, Scalar* W, int64_t rows) {
  const int64_t T = lay.T;
  LM_CUDA_FOR(r, rows) {
    const RowLayout L = lay.of_head(r / T);
    const int i = static_cast<int>(r % T);
    Scalar* p = probs + r * T;
    Scalar* w = W + r * T;
    gsm::row_forward<Scalar>(L, i, p, p, w);  // S -> P' in place, and the weights
    for (int64_t j = i + 1; j < T; ++j) p[j] = w[j] = Scalar(0);
  }
}

// The backward's first step: the weights W (BH, T, T) again from the saved P' (cheaper to
// recompute than to keep a second T x T matrix per head alive between forward and backward).
template <class Scalar> __global__ void grouped_weights_kernel(DeviceLayout lay, const Scalar* probs, Scalar* W,
                                                               int64_t rows) {
  const int64_t T = lay.T;
  LM_CUDA_FOR(r, rows) {
    const RowLayout L = lay.of_head(r / T);
    const int i = static_cast<int>(r % T);
    Scalar* w = W + r * T;
    gsm::row_weights<Scalar>(L, i, probs + r * T, w);
    for (int64_t j = i + 1; j < T; ++j) w[j] = Scalar(0);
  }
}

// d (BH, T, T) holds G = dL/dW = dout v^T on entry and dS = dL/dS on exit (unscaled: the scale
// enters the dq and dk GEMMs as alpha). In place like the CPU: row_backward reads G[j] before it
// writes dS[j]. G's entries j > i come from the full GEMM and are never read.
template <class Scalar>
__global__ void grouped_softmax_backward_kernel(DeviceLayout lay, const Scalar* probs, const Scalar* W, Scalar* d,
                                                int64_t rows) {
  const int64_t T = lay.T;
  LM_CUDA_FOR(r, rows) {
    const RowLayout L = lay.of_head(r / T);
    const int i = static_cast<int>(r % T);
    Scalar* dr = d + r * T;
    gsm::row_backward<Scalar>(L, i, probs + r * T, W + r * T, dr, dr);  // G -> dS in place
    for (int64_t j = i + 1; j < T; ++j) dr[j] = Scalar(0);
  }
}

}  // namespace

void landmark_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kind,
                                const Tensor& block_of, const Tensor& block_start, const Tensor& cmt, double scale,
                                double cmt_cutoff, const Tensor& probs, const Tensor& out) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), rows = BH * T;
  if (rows == 0) return;
  DeviceLayout lay = device_layout(kind, block_of, block_start, cmt, BH, T);
  lay.cmt_cutoff = cmt_cutoff;
  // q, k, v, out (BH, T, HS); probs P' (BH, T, T); W scratch (BH, T, T).
  Tensor W({BH, T, T}, q.dtype(), Device::CUDA);
  gemm(per_head_gemm(false, true, T, T, HS, HS, HS, T, T, BH, scale), q, k, probs);  // S = scale q k^T
  LM_DISPATCH_FLOAT(q.dtype(), "landmark_attention", {
    grouped_softmax_kernel<scalar_t><<<blocks_for(rows), kThreads>>>(lay, probs.data<scalar_t>(),
                                                                     W.data<scalar_t>(), rows);
    LM_CUDA_CHECK_LAUNCH("grouped_softmax_kernel");
  });
  gemm(per_head_gemm(false, false, T, HS, T, T, HS, HS, T, BH, 1.0), W, v, out);  // out = W v
}

void landmark_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kind,
                                 const Tensor& block_of, const Tensor& block_start, const Tensor& cmt,
                                 const Tensor& probs, const Tensor& dout, double scale, const Tensor& dq,
                                 const Tensor& dk, const Tensor& dv) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), rows = BH * T;
  if (rows == 0) return;
  const DeviceLayout lay = device_layout(kind, block_of, block_start, cmt, BH, T);
  // q, k, v, dout, dq, dk, dv (BH, T, HS); probs P' (BH, T, T); W and dS scratch (BH, T, T).
  Tensor W({BH, T, T}, q.dtype(), Device::CUDA), dS({BH, T, T}, q.dtype(), Device::CUDA);
  LM_DISPATCH_FLOAT(q.dtype(), "landmark_attention_backward", {
    grouped_weights_kernel<scalar_t><<<blocks_for(rows), kThreads>>>(lay, probs.data<scalar_t>(),
                                                                     W.data<scalar_t>(), rows);
    LM_CUDA_CHECK_LAUNCH("grouped_weights_kernel");
  });
  gemm(per_head_gemm(true, false, T, HS, T, T, HS, HS, T, BH, 1.0), W, dout, dv);   // dv = W^T dout
  gemm(per_head_gemm(false, true, T, T, HS, HS, HS, T, T, BH, 1.0), dout, v, dS);  // G = dout v^T
  LM_DISPATCH_FLOAT(q.dtype(), "landmark_attention_backward", {
    grouped_softmax_backward_kernel<scalar_t><<<blocks_for(rows), kThreads>>>(
        lay, probs.data<scalar_t>(), W.data<scalar_t>(), dS.data<scalar_t>(), rows);
    LM_CUDA_CHECK_LAUNCH("grouped_softmax_backward_kernel");
  });
  // The forward's S = scale q k^T, differentiated: dq = scale dS k, dk = scale dS^T q.
  gemm(per_head_gemm(false, false, T, HS, T, T, HS, HS, T, BH, scale), dS, k, dq);
  gemm(per_head_gemm(true, false, T, HS, T, T, HS, HS, T, BH, scale), dS, q, dk);
}

}  // namespace cuda
}  // namespace lm
