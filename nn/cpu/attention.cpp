// nn/cpu/attention.cpp: fused causal attention on the CPU. Heads run in parallel; inside a head
// the rows are processed in blocks of kRowBlock queries, and each block only touches keys up to
// its last row, so the GEMMs skip (most of) the masked upper triangle. The softmax probabilities
// are saved for the backward (T x T per head). Composed reference: causal_attention_reference in
// nn/functional.cpp; CUDA twin: nn/cuda/attention.cu.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "nn/kernels.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/parallel.h"
#include "tensor/elementwise_math.h"

namespace lm {
namespace cpu {

namespace {
constexpr int64_t kRowBlock = 64;

// One head: q, k, v (T, HS) -> P (T, T) = causal softmax(scale q k^T), zero above the diagonal;
// o (T, HS) = P v.
template <class Scalar>
void forward_head(const Scalar* q, const Scalar* k, const Scalar* v, Scalar scale, Scalar* P, Scalar* o, int64_t T,
                  int64_t HS) {
  for (int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, T - r0), keys = r0 + rows;  // keys 0..keys-1 are visible
    Scalar* Pb = P + r0 * T;
    gemm_single<Scalar>(false, true, rows, keys, HS, scale, q + r0 * HS, HS, k, HS, 0.0, Pb, T);  // S = scale q k^T
    for (int64_t r = 0; r < rows; ++r) {
      Scalar* p = Pb + r * T;
      const int64_t n = r0 + r + 1;  // causal: j <= i
      Scalar mx = -std::numeric_limits<Scalar>::infinity();
      for (int64_t j = 0; j < n; ++j) mx = p[j] > mx ? p[j] : mx;
      Scalar s = 0;
      for (int64_t j = 0; j < n; ++j) p[j] = math::exp_softmax(p[j] - mx);  // vectorises (elementwise_math.h)
      for (int64_t j = 0; j < n; ++j) s += p[j];
      const Scalar inv = Scalar(1) / s;
      for (int64_t j = 0; j < n; ++j) p[j] *= inv;
      for (int64_t j = n; j < T; ++j) p[j] = 0;
    }
    gemm_single<Scalar>(false, false, rows, HS, keys, 1.0, Pb, T, v, HS, 0.0, o + r0 * HS, HS);  // o = P v
  }
}

// One head: q, k, v, dout (T, HS) and the saved P (T, T) -> dq, dk, dv (T, HS); dS (kRowBlock, T)
// scratch.
template <class Scalar>
void backward_head(const Scalar* q, const Scalar* k, const Scalar* v, const Scalar* P, const Scalar* dout, Scalar scale,
                   Scalar* dq, Scalar* dk, Scalar* dv, Scalar* dS, int64_t T, int64_t HS) {
  for (int64_t i = 0; i < T * HS; ++i) {
    dk[i] = 0;
    dv[i] = 0;
  }
  for (int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, T - r0), keys = r0 + rows;
    const Scalar* Pb = P + r0 * T;
    const Scalar* dob = dout + r0 * HS;
    gemm_single<Scalar>(true, false, keys, HS, rows, 1.0, Pb, T, dob, HS, 1.0, dv, HS);    // dv += P^T dout
    gemm_single<Scalar>(false, true, rows, keys, HS, 1.0, dob, HS, v, HS, 0.0, dS, keys);  // dP = dout v^T
    for (int64_t r = 0; r < rows; ++r) {                                                   // dS = P (dP - <P, dP>)
      const Scalar* p = Pb + r * T;
      Scalar* d = dS + r * keys;
      const int64_t n = r0 + r + 1;
      Scalar dot = 0;
      for (int64_t j = 0; j < n; ++j) dot += p[j] * d[j];
      for (int64_t j = 0; j < n; ++j) d[j] = p[j] * (d[j] - dot);
      for (int64_t j = n; j < keys; ++j) d[j] = 0;
    }
    gemm_single<Scalar>(false, false, rows, HS, keys, scale, dS, keys, k, HS, 0.0, dq + r0 * HS,
                        HS);  // dq = scale dS k
    gemm_single<Scalar>(true, false, keys, HS, rows, scale, dS, keys, q + r0 * HS, HS, 1.0, dk,
                        HS);  // dk += scale dS^T q
  }
}
}  // namespace

void causal_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& probs,
                              const Tensor& out) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2);
  LM_DISPATCH_FLOAT(q.dtype(), "causal_attention", {
    const scalar_t *pq = q.data<scalar_t>(), *pk = k.data<scalar_t>(), *pv = v.data<scalar_t>();
    scalar_t *pp = probs.data<scalar_t>(), *po = out.data<scalar_t>();
    parallel_for(BH, T * T * HS, [&](int64_t b0, int64_t b1) {
      for (int64_t h = b0; h < b1; ++h)
        forward_head<scalar_t>(pq + h * T * HS, pk + h * T * HS, pv + h * T * HS, static_cast<scalar_t>(scale),
                               pp + h * T * T, po + h * T * HS, T, HS);
    });
  });
}

void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                               const Tensor& dout, double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2);
  LM_DISPATCH_FLOAT(q.dtype(), "causal_attention_backward", {
    const scalar_t *pq = q.data<scalar_t>(), *pk = k.data<scalar_t>(), *pv = v.data<scalar_t>();
    const scalar_t *pp = probs.data<scalar_t>(), *pdo = dout.data<scalar_t>();
    scalar_t *pdq = dq.data<scalar_t>(), *pdk = dk.data<scalar_t>(), *pdv = dv.data<scalar_t>();
    parallel_for(BH, 2 * T * T * HS, [&](int64_t b0, int64_t b1) {
      std::vector<scalar_t> scratch(static_cast<size_t>(kRowBlock * T));  // dS of one row block
      for (int64_t h = b0; h < b1; ++h) {
        const int64_t o = h * T * HS;
        backward_head<scalar_t>(pq + o, pk + o, pv + o, pp + h * T * T, pdo + o, static_cast<scalar_t>(scale), pdq + o,
                                pdk + o, pdv + o, scratch.data(), T, HS);
      }
    });
  });
}

}  // namespace cpu
}  // namespace lm
