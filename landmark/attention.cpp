// attention.cpp: the fused landmark attention front and its autograd wrapper (attention.h).
#include "landmark/attention.h"

#include <cmath>
#include <vector>

#include "autograd/functions.h"
#include "landmark/grouped_softmax.h"
#include "landmark/kernels.h"
#include "tensor/create.h"
#include "tensor/dispatch.h"

namespace lm {

namespace {
void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const LandmarkLayout& L) {
  LM_CHECK(q.dim() == 4 && is_floating(q.dtype()),
           "landmark_attention: q must be float (B, NH, T, HS), got " << describe(q));
  LM_CHECK(k.shape() == q.shape() && v.shape() == q.shape() && k.dtype() == q.dtype() && v.dtype() == q.dtype() &&
               k.device() == q.device() && v.device() == q.device(),
           "landmark_attention: q " << describe(q) << ", k " << describe(k) << ", v " << describe(v)
                                    << " must share shape, dtype and device");
  LM_CHECK(L.B == q.size(0) && L.T == q.size(2),
           "landmark_attention: layout is for (B, T) = (" << L.B << ", " << L.T << ") but q is " << describe(q));
  LM_CHECK(L.kind.device() == q.device(),
           "landmark_attention: layout on " << device_name(L.kind.device()) << " but q on " << device_name(q.device()));
}
// Appendix D's drop rate: rows (head, query) of batch rows that have a CMT at position 0, the
// CMT's own row excluded; dropped when P'(cmt) < cutoff.
void count_cmt_drops(const Tensor& probs, const LandmarkLayout& L, int64_t NH) {
  const int64_t T = L.T;
  std::vector<double> col = probs.select(2, 0).narrow(1, 1, T - 1).to_double_vector();  // (BH, T - 1)
  std::vector<int32_t> cmt = L.cmt.to_vector<int32_t>();
  for (int64_t h = 0; h < L.B * NH; ++h) {
    if (cmt[h / NH] != 0) continue;
    for (int64_t i = 0; i < T - 1; ++i) {
      ++L.cmt_stats->rows;
      if (gsm::cmt_dropped(col[h * (T - 1) + i], L.cmt_cutoff)) ++L.cmt_stats->dropped;
    }
  }
}
}  // namespace

// y = W(q, k) v with the grouped-softmax weights W. Backward: closed form (grouped_softmax.h).
Var landmark_attention(const Var& q, const Var& k, const Var& v, const LandmarkLayout& L) {
  check_inputs(q.value(), k.value(), v.value(), L);
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), HS = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  Tensor q3 = q.value().contiguous().view({B * NH, T, HS}), k3 = k.value().contiguous().view({B * NH, T, HS}),
         v3 = v.value().contiguous().view({B * NH, T, HS});
  LM_CHECK(L.cmt_cutoff == 0 || !grad_enabled() || !(q.requires_grad() || k.requires_grad() || v.requires_grad()),
           "landmark_attention: the CMT cutoff (" << L.cmt_cutoff << ") is for evaluation only; run under NoGradGuard");
  // P' (B NH, T, T) is kept for the CPU backward and for the CMT drop count; the CUDA kernels
  // compute it again in the backward, a tile of rows at a time, so on CUDA nothing T x T is kept.
  const bool keep_probs = q.device() == Device::CPU || L.cmt_stats != nullptr;
  Tensor probs = keep_probs ? Tensor({B * NH, T, T}, q.dtype(), q.device()) : Tensor();
  Tensor out({B * NH, T, HS}, q.dtype(), q.device());
  if (out.numel() > 0)
    LM_KERNEL(q.device(), landmark_attention_forward, q3, k3, v3, L.kind, L.block_of, L.block_start, L.cmt, scale,
              L.cmt_cutoff, probs, out);
  if (L.cmt_stats && T > 1) count_cmt_drops(probs, L, NH);
  Shape shape = q.shape();
  return make_op_result("landmark_attention", out.view(shape), {q, k, v},
                        [q3, k3, v3, probs, L, scale, shape](const Tensor& g) {
                          Tensor dq(q3.shape(), q3.dtype(), q3.device()), dk(q3.shape(), q3.dtype(), q3.device()),
                              dv(q3.shape(), q3.dtype(), q3.device());
                          if (dq.numel() > 0)
                            LM_KERNEL(q3.device(), landmark_attention_backward, q3, k3, v3, L.kind, L.block_of,
                                      L.block_start, L.cmt, probs, g.contiguous().view(q3.shape()), scale, dq, dk, dv);
                          return std::vector<Tensor>{dq.view(shape), dk.view(shape), dv.view(shape)};
                        });
}

Tensor landmark_attention_weights(const Tensor& q, const Tensor& k, const LandmarkLayout& L) {
  check_inputs(q, k, k, L);
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), HS = q.size(3);
  // Run the fused forward for P' (v does not matter), then expand P' into weights on the host
  // with the same row function the kernels use.
  Tensor probs({B * NH, T, T}, q.dtype(), q.device()), out({B * NH, T, HS}, q.dtype(), q.device());
  Tensor q3 = q.contiguous().view({B * NH, T, HS}), k3 = k.contiguous().view({B * NH, T, HS});
  if (out.numel() > 0)
    LM_KERNEL(q.device(), landmark_attention_forward, q3, k3, k3, L.kind, L.block_of, L.block_start, L.cmt,
              1.0 / std::sqrt(static_cast<double>(HS)), L.cmt_cutoff, probs, out);
  Tensor p = probs.to(Device::CPU), w = zeros({B * NH, T, T}, q.dtype());
  LandmarkLayout host = L.kind.device() == Device::CPU ? L : make_layout(L.kind.to(Device::CPU));
  host.cmt_cutoff = L.cmt_cutoff;
  LM_DISPATCH_FLOAT(q.dtype(), "landmark_attention_weights", {
    for (int64_t h = 0; h < B * NH; ++h) {
      const RowLayout row = host.row(h / NH);
      for (int64_t i = 0; i < T; ++i)
        gsm::row_weights<scalar_t>(row, static_cast<int>(i), p.data<scalar_t>() + (h * T + i) * T,
                                   w.data<scalar_t>() + (h * T + i) * T);
    }
  });
  return w.to(q.device()).view({B, NH, T, T});
}

}  // namespace lm

namespace lm {
AttentionFn landmark_attention_core(const LandmarkLayout& layout, bool fused) {
  if (fused) return [layout](const Var& q, const Var& k, const Var& v) { return landmark_attention(q, k, v, layout); };
  Tensor kinds = layout.kind.to(Device::CPU);
  return [kinds](const Var& q, const Var& k, const Var& v) {
    return landmark_attention_reference(q, k, contiguous(v), kinds);
  };
}
}  // namespace lm
