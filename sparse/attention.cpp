// attention.cpp: the top-k landmark attention front, its autograd wrapper and its GPT core
// (attention.h).
#include "sparse/attention.h"

#include <cmath>
#include <vector>

#include "autograd/functions.h"
#include "sparse/kernels.h"
#include "tensor/dispatch.h"

namespace lm {

SparseGates parse_sparse_gates(const std::string& s) {
  if (s == "chosen") return SparseGates::Chosen;
  if (s == "all") return SparseGates::All;
  LM_FAIL("unknown gate variant '" << s << "' (expected chosen or all)");
}

const char* sparse_gates_name(SparseGates g) { return g == SparseGates::All ? "all" : "chosen"; }

namespace {
void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const LandmarkLayout& L, int64_t top_k) {
  LM_CHECK(q.dim() == 4 && is_floating(q.dtype()),
           "sparse_landmark_attention: q must be float (B, NH, T, HS), got " << describe(q));
  LM_CHECK(k.shape() == q.shape() && v.shape() == q.shape() && k.dtype() == q.dtype() && v.dtype() == q.dtype() &&
               k.device() == q.device() && v.device() == q.device(),
           "sparse_landmark_attention: q " << describe(q) << ", k " << describe(k) << ", v " << describe(v)
                                           << " must share shape, dtype and device");
  LM_CHECK(L.B == q.size(0) && L.T == q.size(2),
           "sparse_landmark_attention: layout is for (B, T) = (" << L.B << ", " << L.T << ") but q is " << describe(q));
  LM_CHECK(L.kind.device() == q.device(), "sparse_landmark_attention: layout on " << device_name(L.kind.device())
                                                                                  << " but q on "
                                                                                  << device_name(q.device()));
  LM_CHECK(top_k >= 1, "sparse_landmark_attention: K (--train-top-k) must be >= 1, got " << top_k);
  // The CMT (Appendix D) is refused: its controlled blocks would need a choice inside the CMT's
  // group as well, which this op does not define.
  const std::vector<int32_t> cmt = L.cmt.to_vector<int32_t>();
  for (size_t b = 0; b < cmt.size(); ++b)
    LM_CHECK(cmt[b] < 0, "sparse_landmark_attention: batch row "
                             << b << " holds a context-miss token; top-k training does not support --cmt");
}

// The left-out sums of one forward, counted over the regular rows that had more than K blocks.
void add_left_out(const Tensor& left_out, const LandmarkLayout& L, int64_t NH, int64_t top_k, LeftOutStats& st) {
  const size_t layer = static_cast<size_t>(st.calls++);
  if (st.sum.size() <= layer) {
    st.sum.resize(layer + 1, 0.0);
    st.rows.resize(layer + 1, 0);
  }
  const std::vector<double> m = left_out.to(Device::CPU).to_double_vector();
  const std::vector<int32_t> kind = L.kind.to_vector<int32_t>(), block_of = L.block_of.to_vector<int32_t>();
  const int64_t T = L.T;
  for (int64_t h = 0; h < L.B * NH; ++h)
    for (int64_t i = 0; i < T; ++i) {
      const int64_t at = (h / NH) * T + i;
      if (kind[at] != kRegular || block_of[at] <= top_k) continue;
      st.sum[layer] += m[h * T + i];
      ++st.rows[layer];
    }
}
}  // namespace

Var sparse_landmark_attention(const Var& q, const Var& k, const Var& v, const LandmarkLayout& L,
                              const SparseOptions& opts, Tensor* left_out) {
  check_inputs(q.value(), k.value(), v.value(), L, opts.top_k);
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), HS = q.size(3), K = opts.top_k;
  const bool all = opts.gates == SparseGates::All;
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  Tensor q3 = q.value().contiguous().view({B * NH, T, HS}), k3 = k.value().contiguous().view({B * NH, T, HS}),
         v3 = v.value().contiguous().view({B * NH, T, HS});
  Tensor chosen({B * NH, T, K}, DType::I32, q.device()), out({B * NH, T, HS}, q.dtype(), q.device());
  Tensor m = left_out ? Tensor({B * NH, T}, q.dtype(), q.device()) : Tensor();
  if (out.numel() > 0)
    LM_KERNEL(q.device(), sparse_landmark_forward, q3, k3, v3, L.kind, L.block_of, L.block_start, K, all, scale, chosen,
              m, out);
  if (left_out) *left_out = m.view({B, NH, T});
  Shape shape = q.shape();
  return make_op_result("sparse_landmark_attention", out.view(shape), {q, k, v},
                        [q3, k3, v3, chosen, L, K, all, scale, shape](const Tensor& g) {
                          Tensor dq(q3.shape(), q3.dtype(), q3.device()), dk(q3.shape(), q3.dtype(), q3.device()),
                              dv(q3.shape(), q3.dtype(), q3.device());
                          if (dq.numel() > 0)
                            LM_KERNEL(q3.device(), sparse_landmark_backward, q3, k3, v3, L.kind, L.block_of,
                                      L.block_start, K, all, chosen, g.contiguous().view(q3.shape()), scale, dq, dk,
                                      dv);
                          return std::vector<Tensor>{dq.view(shape), dk.view(shape), dv.view(shape)};
                        });
}

Tensor sparse_landmark_choice(const Tensor& q, const Tensor& k, const LandmarkLayout& L, int64_t top_k) {
  check_inputs(q, k, k, L, top_k);
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), HS = q.size(3);
  Tensor q3 = q.contiguous().view({B * NH, T, HS}), k3 = k.contiguous().view({B * NH, T, HS});
  Tensor chosen({B * NH, T, top_k}, DType::I32, q.device()), out({B * NH, T, HS}, q.dtype(), q.device());
  if (out.numel() > 0)
    LM_KERNEL(q.device(), sparse_landmark_forward, q3, k3, k3, L.kind, L.block_of, L.block_start, top_k, false,
              1.0 / std::sqrt(static_cast<double>(HS)), chosen, Tensor(), out);
  return chosen.view({B, NH, T, top_k});
}

AttentionFn sparse_attention_core(const LandmarkLayout& layout, const SparseOptions& opts,
                                  std::shared_ptr<LeftOutStats> stats) {
  return [layout, opts, stats](const Var& q, const Var& k, const Var& v) {
    if (!stats) return sparse_landmark_attention(q, k, v, layout, opts);
    Tensor m;
    Var y = sparse_landmark_attention(q, k, v, layout, opts, &m);
    add_left_out(m, layout, q.size(1), opts.top_k, *stats);
    return y;
  };
}

}  // namespace lm
