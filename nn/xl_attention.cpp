// xl_attention.cpp: fronts of the attention after a constant prefix (xl_attention.h): the fused
// op over the CPU kernels of nn/cpu/xl_attention.cpp, and its composed reference.
#include "nn/xl_attention.h"

#include <cmath>

#include "autograd/functions.h"
#include "nn/kernels.h"
#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

namespace {
// The cache as (B, NH, M, HS) tensors matching q, M = 0 when undefined; checks every shape.
std::pair<Tensor, Tensor> checked_cache(const Var& q, const Var& k, const Var& v, const Tensor& ck, const Tensor& cv) {
  LM_CHECK(q.dim() == 4 && is_floating(q.dtype()),
           "prefix_attention: q must be float (B, NH, T, HS), got " << describe(q.value()));
  LM_CHECK(k.shape() == q.shape() && v.shape() == q.shape() && k.dtype() == q.dtype() && v.dtype() == q.dtype() &&
               k.device() == q.device() && v.device() == q.device(),
           "prefix_attention: q " << describe(q.value()) << ", k " << describe(k.value()) << ", v "
                                  << describe(v.value()) << " must share shape, dtype and device");
  const int64_t B = q.size(0), NH = q.size(1), HS = q.size(3);
  LM_CHECK(ck.defined() == cv.defined(), "prefix_attention: give both cached keys and values, or neither");
  if (!ck.defined()) {
    Tensor empty = zeros({B, NH, 0, HS}, q.dtype(), q.device());
    return {empty, empty};
  }
  LM_CHECK(ck.dim() == 4 && ck.size(0) == B && ck.size(1) == NH && ck.size(3) == HS && cv.shape() == ck.shape() &&
               ck.dtype() == q.dtype() && cv.dtype() == q.dtype() && ck.device() == q.device() &&
               cv.device() == q.device(),
           "prefix_attention: the cache k " << describe(ck) << ", v " << describe(cv) << " must be (B, NH, M, HS) = ("
                                            << B << ", " << NH << ", M, " << HS << ") like q " << describe(q.value()));
  return {ck, cv};
}
}  // namespace

// S = scale q [ck | k]^T (query i sees the M cached keys and current keys j <= i), P = softmax(S),
// y = P [cv | v]. Backward (nn/kernels.h): the cache is a constant, so only the current columns
// feed dk and dv: dv = P[:, M:]^T dy; dP = dy [cv | v]^T; dS = P (dP - rowsum(P dP));
// dq = scale dS [ck | k]; dk = scale dS[:, M:]^T q.
Var prefix_attention(const Var& q, const Var& k, const Var& v, const Tensor& ck_in, const Tensor& cv_in) {
  const auto [ck, cv] = checked_cache(q, k, v, ck_in, cv_in);
  LM_CHECK(q.device() == Device::CPU,
           "prefix_attention (the Transformer-XL cache): CPU only, there is no CUDA kernel; "
           "got "
               << describe(q.value()) << " (run XL models with --device cpu)");
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), HS = q.size(3), M = ck.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  Tensor q3 = q.value().contiguous().view({B * NH, T, HS}), k3 = k.value().contiguous().view({B * NH, T, HS}),
         v3 = v.value().contiguous().view({B * NH, T, HS});
  Tensor ck3 = ck.contiguous().view({B * NH, M, HS}), cv3 = cv.contiguous().view({B * NH, M, HS});
  Tensor probs({B * NH, T, M + T}, q.dtype(), q.device());
  Tensor out({B * NH, T, HS}, q.dtype(), q.device());
  if (out.numel() > 0) cpu::prefix_attention_forward(q3, k3, v3, ck3, cv3, scale, probs, out);
  Shape shape = q.shape();
  return make_op_result("prefix_attention", out.view(shape), {q, k, v},
                        [q3, k3, v3, ck3, cv3, probs, scale, shape](const Tensor& g) {
                          Tensor dq(q3.shape(), q3.dtype(), q3.device()), dk(q3.shape(), q3.dtype(), q3.device()),
                              dv(q3.shape(), q3.dtype(), q3.device());
                          if (dq.numel() > 0)
                            cpu::prefix_attention_backward(q3, k3, v3, ck3, cv3, probs, g.contiguous().view(q3.shape()),
                                                           scale, dq, dk, dv);
                          return std::vector<Tensor>{dq.view(shape), dk.view(shape), dv.view(shape)};
                        });
}

Var prefix_attention_reference(const Var& q, const Var& k, const Var& v, const Tensor& ck_in, const Tensor& cv_in) {
  const auto [ck, cv] = checked_cache(q, k, v, ck_in, cv_in);
  const int64_t T = q.size(2), HS = q.size(3), M = ck.size(2);
  // Keys and values of the cache and the window in one sequence; the cache enters as a constant.
  Var keys = M > 0 ? concat({Var(ck), k}, 2) : k, vals = M > 0 ? concat({Var(cv), v}, 2) : v;
  Var scores = mul(matmul(q, keys, false, true), 1.0 / std::sqrt(static_cast<double>(HS)));  // (B, NH, T, M + T)
  // Query i sits at position M + i of that sequence and sees the keys at positions j <= M + i.
  Tensor rows = arange(static_cast<double>(M), static_cast<double>(M + T), 1.0, DType::I32, q.device()).reshape({T, 1});
  Tensor cols = arange(M + T, DType::I32, q.device()).reshape({1, M + T});
  Var masked = where(le(cols, rows), scores, Var(full({}, -INFINITY, q.dtype(), q.device())));
  return matmul(softmax(masked), vals);
}

}  // namespace lm
