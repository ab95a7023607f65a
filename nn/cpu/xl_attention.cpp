// nn/cpu/xl_attention.cpp: causal attention after a constant prefix (Transformer-XL's cache) on
// the CPU. The row blocks of the fused causal attention (nn/cpu/attention.cpp), with M more key
// columns in front: a block of rows r0..r0+rows-1 sees the M cached keys and current keys up to
// its last row. With M = 0 it makes exactly the causal kernel's GEMM calls, in the same order.
// Composed reference: prefix_attention_reference in nn/xl_attention.cpp. No CUDA twin (the XL
// option is CPU-only; docs/nn.md section 17).
#include <algorithm>
#include <limits>
#include <vector>

#include "nn/kernels.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/parallel.h"
#include "tensor/elementwise_math.h"

namespace lm {
namespace cpu {

namespace {
constexpr int64_t kRowBlock = 64;  // as in nn/cpu/attention.cpp, so that M = 0 matches it bit for bit

// One head: q, k, v (T, HS); ck, cv (M, HS) -> P (T, M + T) = softmax(scale q [ck | k]^T) with
// P[i, j] = 0 for j > M + i; o (T, HS) = P [cv | v].
template <class Scalar>
void prefix_forward_head(const Scalar* q, const Scalar* k, const Scalar* v, const Scalar* ck, const Scalar* cv,
                         Scalar scale, Scalar* P, Scalar* o, int64_t T, int64_t M, int64_t HS) {
  const int64_t ld = M + T;
  for (int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, T - r0), cur = r0 + rows;  // current keys 0..cur-1 are visible
    Scalar* Pb = P + r0 * ld;
    const Scalar* qb = q + r0 * HS;
    if (M > 0)
      gemm_single<Scalar>(false, true, rows, M, HS, scale, qb, HS, ck, HS, 0.0, Pb, ld);     // S[:, :M] = scale q ck^T
    gemm_single<Scalar>(false, true, rows, cur, HS, scale, qb, HS, k, HS, 0.0, Pb + M, ld);  // S[:, M:] = scale q k^T
    for (int64_t r = 0; r < rows; ++r) {
      Scalar* p = Pb + r * ld;
      const int64_t n = M + r0 + r + 1;  // the whole cache, then current keys j <= i
      Scalar mx = -std::numeric_limits<Scalar>::infinity();
      for (int64_t j = 0; j < n; ++j) mx = p[j] > mx ? p[j] : mx;
      Scalar s = 0;
      for (int64_t j = 0; j < n; ++j) p[j] = math::exp_softmax(p[j] - mx);
      for (int64_t j = 0; j < n; ++j) s += p[j];
      const Scalar inv = Scalar(1) / s;
      for (int64_t j = 0; j < n; ++j) p[j] *= inv;
      for (int64_t j = n; j < ld; ++j) p[j] = 0;
    }
    Scalar* ob = o + r0 * HS;
    if (M > 0) gemm_single<Scalar>(false, false, rows, HS, M, 1.0, Pb, ld, cv, HS, 0.0, ob, HS);  // o = P[:, :M] cv
    gemm_single<Scalar>(false, false, rows, HS, cur, 1.0, Pb + M, ld, v, HS, M > 0 ? 1.0 : 0.0, ob,
                        HS);  // o += P[:, M:] v
  }
}

// One head: q, k, v, dout (T, HS), ck (M, HS) and the saved P (T, M + T) -> dq, dk, dv (T, HS);
// dS (kRowBlock, M + T) scratch. The cache is a constant: its gradients are never formed.
template <class Scalar>
void prefix_backward_head(const Scalar* q, const Scalar* k, const Scalar* v, const Scalar* ck, const Scalar* cv,
                          const Scalar* P, const Scalar* dout, Scalar scale, Scalar* dq, Scalar* dk, Scalar* dv,
                          Scalar* dS, int64_t T, int64_t M, int64_t HS) {
  const int64_t ld = M + T;
  for (int64_t i = 0; i < T * HS; ++i) {
    dk[i] = 0;
    dv[i] = 0;
  }
  for (int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, T - r0), cur = r0 + rows, keys = M + cur;
    const Scalar* Pb = P + r0 * ld;
    const Scalar* dob = dout + r0 * HS;
    gemm_single<Scalar>(true, false, cur, HS, rows, 1.0, Pb + M, ld, dob, HS, 1.0, dv, HS);  // dv += P[:, M:]^T dout
    if (M > 0)
      gemm_single<Scalar>(false, true, rows, M, HS, 1.0, dob, HS, cv, HS, 0.0, dS, keys);     // dP[:, :M] = dout cv^T
    gemm_single<Scalar>(false, true, rows, cur, HS, 1.0, dob, HS, v, HS, 0.0, dS + M, keys);  // dP[:, M:] = dout v^T
    for (int64_t r = 0; r < rows; ++r) {                                                      // dS = P (dP - <P, dP>)
      const Scalar* p = Pb + r * ld;
      Scalar* d = dS + r * keys;
      const int64_t n = M + r0 + r + 1;
      Scalar dot = 0;
      for (int64_t j = 0; j < n; ++j) dot += p[j] * d[j];
      for (int64_t j = 0; j < n; ++j) d[j] = p[j] * (d[j] - dot);
      for (int64_t j = n; j < keys; ++j) d[j] = 0;
    }
    Scalar* dqb = dq + r0 * HS;
    if (M > 0)
      gemm_single<Scalar>(false, false, rows, HS, M, scale, dS, keys, ck, HS, 0.0, dqb, HS);  // dq = scale dS[:, :M] ck
    gemm_single<Scalar>(false, false, rows, HS, cur, scale, dS + M, keys, k, HS, M > 0 ? 1.0 : 0.0, dqb,
                        HS);  // dq += scale dS[:, M:] k
    gemm_single<Scalar>(true, false, cur, HS, rows, scale, dS + M, keys, q + r0 * HS, HS, 1.0, dk,
                        HS);  // dk += scale dS[:, M:]^T q
  }
}
}  // namespace

void prefix_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& ck, const Tensor& cv,
                              double scale, const Tensor& probs, const Tensor& out) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), M = ck.size(1);
  LM_DISPATCH_FLOAT(q.dtype(), "prefix_attention", {
    const scalar_t *pq = q.data<scalar_t>(), *pk = k.data<scalar_t>(), *pv = v.data<scalar_t>();
    const scalar_t *pck = ck.data<scalar_t>(), *pcv = cv.data<scalar_t>();
    scalar_t *pp = probs.data<scalar_t>(), *po = out.data<scalar_t>();
    parallel_for(BH, T * (M + T) * HS, [&](int64_t b0, int64_t b1) {
      for (int64_t h = b0; h < b1; ++h)
        prefix_forward_head<scalar_t>(pq + h * T * HS, pk + h * T * HS, pv + h * T * HS, pck + h * M * HS,
                                      pcv + h * M * HS, static_cast<scalar_t>(scale), pp + h * T * (M + T),
                                      po + h * T * HS, T, M, HS);
    });
  });
}

void prefix_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& ck, const Tensor& cv,
                               const Tensor& probs, const Tensor& dout, double scale, const Tensor& dq,
                               const Tensor& dk, const Tensor& dv) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), M = ck.size(1);
  LM_DISPATCH_FLOAT(q.dtype(), "prefix_attention_backward", {
    const scalar_t *pq = q.data<scalar_t>(), *pk = k.data<scalar_t>(), *pv = v.data<scalar_t>();
    const scalar_t *pck = ck.data<scalar_t>(), *pcv = cv.data<scalar_t>();
    const scalar_t *pp = probs.data<scalar_t>(), *pdo = dout.data<scalar_t>();
    scalar_t *pdq = dq.data<scalar_t>(), *pdk = dk.data<scalar_t>(), *pdv = dv.data<scalar_t>();
    parallel_for(BH, 2 * T * (M + T) * HS, [&](int64_t b0, int64_t b1) {
      std::vector<scalar_t> scratch(static_cast<size_t>(kRowBlock * (M + T)));  // dS of one row block
      for (int64_t h = b0; h < b1; ++h) {
        const int64_t o = h * T * HS, c = h * M * HS;
        prefix_backward_head<scalar_t>(pq + o, pk + o, pv + o, pck + c, pcv + c, pp + h * T * (M + T), pdo + o,
                                       static_cast<scalar_t>(scale), pdq + o, pdk + o, pdv + o, scratch.data(), T, M,
                                       HS);
      }
    });
  });
}

}  // namespace cpu
}  // namespace lm
