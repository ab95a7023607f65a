// ops_matmul.cpp: the matmul front. It works out the GEMM layout of each operand (row-major as
// is, or a transposed view of a row-major tensor, which just flips the transpose flag) so that
// common views cost no copy, then calls the device GEMM (cpu/gemm.cpp or cuda/gemm.cu).
#include "tensor/dispatch.h"
#include "tensor/ops.h"

namespace lm {

namespace {
// How one operand is handed to GEMM: a tensor whose last two dims are row-major, plus whether
// the logical matrix is the transpose of that storage.
struct Operand {
  Tensor t;
  bool trans;
  int64_t ld;
};

Operand as_gemm_operand(const Tensor& x, bool trans) {
  const int64_t r = x.size(-2), c = x.size(-1);
  if (x.is_contiguous()) return {x, trans, c};
  Tensor xt = x.transpose(-1, -2);
  if (xt.is_contiguous()) return {xt, !trans, r};  // x is a transposed view: use its storage
  return {x.contiguous(), trans, c};
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  LM_CHECK(a.defined() && b.defined(), "matmul: undefined input");
  LM_CHECK(a.dtype() == b.dtype() && a.device() == b.device(),
           "matmul: inputs differ in dtype or device (" << describe(a) << " vs " << describe(b) << ")");
  LM_CHECK(is_floating(a.dtype()), "matmul: needs f32 or f64, got " << describe(a));
  LM_CHECK(a.dim() >= 2 && b.dim() >= 2,
           "matmul: needs tensors of at least 2 dims, got " << describe(a) << " and " << describe(b));
  const int64_t M = trans_a ? a.size(-1) : a.size(-2), K = trans_a ? a.size(-2) : a.size(-1);
  const int64_t Kb = trans_b ? b.size(-1) : b.size(-2), N = trans_b ? b.size(-2) : b.size(-1);
  LM_CHECK(K == Kb, "matmul: inner sizes differ: " << describe(a) << (trans_a ? " (transposed)" : "") << " times "
                                                   << describe(b) << (trans_b ? " (transposed)" : "")
                                                   << " gives K=" << K << " vs " << Kb);
  Shape batch(a.shape().begin(), a.shape().end() - 2);
  const bool shared_b = b.dim() == 2;
  if (!shared_b) {
    Shape bbatch(b.shape().begin(), b.shape().end() - 2);
    LM_CHECK(bbatch == batch, "matmul: batch dims differ: " << describe(a) << " vs " << describe(b)
                                                            << " (b may also be 2-d and shared)");
  }
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out(out_shape, a.dtype(), a.device());
  if (out.numel() == 0) return out;

  Operand oa = as_gemm_operand(a, trans_a), ob = as_gemm_operand(b, trans_b);
  GemmArgs g;
  g.trans_a = oa.trans;
  g.trans_b = ob.trans;
  g.M = M;
  g.N = N;
  g.K = K;
  g.batch = numel(batch);
  g.lda = oa.ld;
  g.ldb = ob.ld;
  g.ldc = N;
  g.stride_a = M * K;
  g.stride_b = shared_b ? 0 : K * N;
  g.stride_c = M * N;
  LM_KERNEL(a.device(), gemm, g, oa.t, ob.t, out);
  return out;
}

}  // namespace lm
