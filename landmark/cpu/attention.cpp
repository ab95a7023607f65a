// landmark/cpu/attention.cpp: fused landmark attention on the CPU. The structure mirrors the fused
// causal attention (nn/cpu/attention.cpp): heads in parallel, queries in row blocks of 64 that
// only touch keys up to their last row, GEMMs for the products. Between the GEMMs, each row runs
// the grouped softmax of grouped_softmax.h. Memory: the saved P' (T x T per head) and a
// 64 x T scratch per thread; no T x T x groups temporaries. CUDA twin: landmark/cuda/attention.cu;
// composed reference: landmark_attention_reference (landmark/reference.cpp).
#include <algorithm>
#include <vector>

#include "landmark/grouped_softmax.h"
#include "landmark/kernels.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/parallel.h"

namespace lm {
namespace cpu {

namespace {
constexpr int64_t kRowBlock = 64;

RowLayout row_layout(const Tensor& kind, const Tensor& block_of, const Tensor& block_start, const Tensor& cmt,
                     int64_t b, double cmt_cutoff = 0) {
  const int64_t T = kind.size(1);
  return RowLayout{kind.data<int32_t>() + b * T, block_of.data<int32_t>() + b * T,
                   block_start.data<int32_t>() + b * (T + 1), cmt.data<int32_t>()[b], cmt_cutoff};
}

// One head: q, k, v (T, HS) -> P (T, T) holds P' (grouped_softmax.h), zero above the diagonal;
// o (T, HS) = W v with W the final weights; W (kRowBlock, T) scratch.
template <class Scalar>
void forward_head(const RowLayout& L, const Scalar* q, const Scalar* k, const Scalar* v, Scalar scale, Scalar* P,
                  Scalar* o, Scalar* W, int64_t T, int64_t HS) {
  for (int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, T - r0), keys = r0 + rows;
    Scalar* Pb = P + r0 * T;
    gemm_single<Scalar>(false, true, rows, keys, HS, scale, q + r0 * HS, HS, k, HS, 0.0, Pb, T);  // scores
    for (int64_t r = 0; r < rows; ++r) {
      const int i = static_cast<int>(r0 + r);
      Scalar* p = Pb + r * T;
      Scalar* w = W + r * keys;
      gsm::row_forward<Scalar>(L, i, p, p, w);  // scores -> P' in place (see grouped_softmax.h)
      for (int64_t j = i + 1; j < T; ++j) p[j] = 0;
      for (int64_t j = i + 1; j < keys; ++j) w[j] = 0;
    }
    gemm_single<Scalar>(false, false, rows, HS, keys, 1.0, W, keys, v, HS, 0.0, o + r0 * HS, HS);  // o = W v
  }
}

// One head: q, k, v, dout (T, HS) and the saved P' (T, T) -> dq, dk, dv (T, HS); W, dS
// (kRowBlock, T) scratch.
template <class Scalar>
void backward_head(const RowLayout& L, const Scalar* q, const Scalar* k, const Scalar* v, const Scalar* P,
                   const Scalar* dout, Scalar scale, Scalar* dq, Scalar* dk, Scalar* dv, Scalar* W, Scalar* dS,
                   int64_t T, int64_t HS) {
  std::fill(dk, dk + T * HS, Scalar(0));
  std::fill(dv, dv + T * HS, Scalar(0));
  for (int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, T - r0), keys = r0 + rows;
    const Scalar* Pb = P + r0 * T;
    const Scalar* dob = dout + r0 * HS;
    for (int64_t r = 0; r < rows; ++r) {  // recompute the weights of this row block
      const int i = static_cast<int>(r0 + r);
      Scalar* w = W + r * keys;
      gsm::row_weights<Scalar>(L, i, Pb + r * T, w);
      for (int64_t j = i + 1; j < keys; ++j) w[j] = 0;
    }
    gemm_single<Scalar>(true, false, keys, HS, rows, 1.0, W, keys, dob, HS, 1.0, dv, HS);  // dv += W^T dout
    gemm_single<Scalar>(false, true, rows, keys, HS, 1.0, dob, HS, v, HS, 0.0, dS, keys);  // G = dout v^T
    for (int64_t r = 0; r < rows; ++r) {
      const int i = static_cast<int>(r0 + r);
      Scalar* d = dS + r * keys;
      gsm::row_backward<Scalar>(L, i, Pb + r * T, W + r * keys, d, d);  // G -> dS in place
      for (int64_t j = i + 1; j < keys; ++j) d[j] = 0;
    }
    gemm_single<Scalar>(false, false, rows, HS, keys, scale, dS, keys, k, HS, 0.0, dq + r0 * HS,
                        HS);  // dq = scale dS k
    gemm_single<Scalar>(true, false, keys, HS, rows, scale, dS, keys, q + r0 * HS, HS, 1.0, dk,
                        HS);  // dk += scale dS^T q
  }
}
}  // namespace

void landmark_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kind,
                                const Tensor& block_of, const Tensor& block_start, const Tensor& cmt, double scale,
                                double cmt_cutoff, const Tensor& probs, const Tensor& out) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), NH = BH / kind.size(0);
  LM_DISPATCH_FLOAT(q.dtype(), "landmark_attention", {
    const scalar_t *pq = q.data<scalar_t>(), *pk = k.data<scalar_t>(), *pv = v.data<scalar_t>();
    scalar_t *pp = probs.data<scalar_t>(), *po = out.data<scalar_t>();
    parallel_for(BH, T * T * HS, [&](int64_t h0, int64_t h1) {
      std::vector<scalar_t> W(static_cast<size_t>(kRowBlock * T));
      for (int64_t h = h0; h < h1; ++h) {
        const RowLayout L = row_layout(kind, block_of, block_start, cmt, h / NH, cmt_cutoff);
        const int64_t o = h * T * HS;
        forward_head<scalar_t>(L, pq + o, pk + o, pv + o, static_cast<scalar_t>(scale), pp + h * T * T, po + o,
                               W.data(), T, HS);
      }
    });
  });
}

void landmark_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kind,
                                 const Tensor& block_of, const Tensor& block_start, const Tensor& cmt,
                                 const Tensor& probs, const Tensor& dout, double scale, const Tensor& dq,
                                 const Tensor& dk, const Tensor& dv) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), NH = BH / kind.size(0);
  LM_DISPATCH_FLOAT(q.dtype(), "landmark_attention_backward", {
    const scalar_t *pq = q.data<scalar_t>(), *pk = k.data<scalar_t>(), *pv = v.data<scalar_t>();
    const scalar_t *pp = probs.data<scalar_t>(), *pdo = dout.data<scalar_t>();
    scalar_t *pdq = dq.data<scalar_t>(), *pdk = dk.data<scalar_t>(), *pdv = dv.data<scalar_t>();
    parallel_for(BH, 2 * T * T * HS, [&](int64_t h0, int64_t h1) {
      std::vector<scalar_t> W(static_cast<size_t>(kRowBlock * T)), dS(static_cast<size_t>(kRowBlock * T));
      for (int64_t h = h0; h < h1; ++h) {
        const RowLayout L = row_layout(kind, block_of, block_start, cmt, h / NH);
        const int64_t o = h * T * HS;
        backward_head<scalar_t>(L, pq + o, pk + o, pv + o, pp + h * T * T, pdo + o, static_cast<scalar_t>(scale),
                                pdq + o, pdk + o, pdv + o, W.data(), dS.data(), T, HS);
      }
    });
  });
}

}  // namespace cpu
}  // namespace lm
