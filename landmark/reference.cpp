// reference.cpp: landmark attention composed from autograd ops, written to read like the paper's
// equations (Section 3.1, Appendix D). It is the executable specification the fused kernel is
// tested against; it allocates a (B, T, T, T) "same group" tensor, so keep T small.
#include <cmath>
#include <vector>

#include "autograd/functions.h"
#include "landmark/attention.h"
#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

std::vector<int32_t> paper_groups(const std::vector<int32_t>& kind) {
  const int32_t T = static_cast<int32_t>(kind.size());
  // p_j: the position of the landmark that closes j's block (j itself for a landmark); T for the
  // open tail block; -3 for the CMT (a group of its own when it is the query).
  std::vector<int32_t> p(T, T);
  int32_t next = T;
  for (int32_t j = T - 1; j >= 0; --j) {
    if (kind[j] == kLandmark || kind[j] == kControlledLandmark) next = j;
    p[j] = kind[j] == kContextMiss ? -3 : next;
  }
  std::vector<int32_t> G(static_cast<size_t>(T) * T, kMaskedGroup);
  for (int32_t i = 0; i < T; ++i)
    for (int32_t j = 0; j <= i; ++j) {
      int32_t g;
      if (kind[j] == kContextMiss)
        g = p[i];  // the CMT joins the query's group
      else if (p[j] != j)
        g = p[j];  // regular tokens: their own block
      else if (p[i] == j)
        g = -1;  // the query's own landmark: ignored
      else if (kind[j] == kControlledLandmark)
        g = -2;  // controlled landmarks: their own group
      else
        g = p[i];  // free landmarks: the query's group
      G[static_cast<size_t>(i) * T + j] = g;
    }
  return G;
}

Var landmark_attention_reference(const Var& q, const Var& k, const Var& v, const Tensor& kinds) {
  LM_CHECK(
      q.dim() == 4 && kinds.dim() == 2 && kinds.size(0) == q.size(0) && kinds.size(1) == q.size(2),
      "landmark_attention_reference: q " << describe(q.value()) << " and kinds " << describe(kinds) << " disagree");
  const int64_t B = q.size(0), T = q.size(2), HS = q.size(3);
  const DType dt = q.dtype();
  std::vector<int32_t> kind_all = kinds.to_vector<int32_t>();

  // Constant masks from the group matrix, per batch row (broadcast over heads later).
  std::vector<double> valid(B * T * T, 0), same(B * T * T * T, 0), own(B * T * T, 0), gated(B * T * T, 0),
      controlled(B * T * T, 0), pick(B * T * T, 0);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int32_t> kind(kind_all.begin() + b * T, kind_all.begin() + (b + 1) * T);
    std::vector<int32_t> G = paper_groups(kind);
    std::vector<int32_t> p(T, static_cast<int32_t>(T));  // p_j as in paper_groups, for the gates
    for (int64_t j = T - 1, next = T; j >= 0; --j) {
      if (kind[j] == kLandmark || kind[j] == kControlledLandmark) next = j;
      p[j] = static_cast<int32_t>(next);
    }
    auto at = [&](int64_t i, int64_t j) { return G[i * T + j]; };
    for (int64_t i = 0; i < T; ++i) {
      const int32_t top = kind[i] == kContextMiss ? -3 : p[i];  // the query's own group id
      for (int64_t j = 0; j <= i; ++j) {
        const int32_t g = at(i, j);
        if (g == -1) continue;  // ignored entry
        valid[(b * T + i) * T + j] = 1;
        for (int64_t kk = 0; kk <= i; ++kk)
          if (at(i, kk) == g) same[((b * T + i) * T + j) * T + kk] = 1;
        if (kind[j] != kRegular) continue;  // landmarks and the CMT get weight 0
        if (g == top) {
          own[(b * T + i) * T + j] = 1;
        } else {
          gated[(b * T + i) * T + j] = 1;  // weight = S_ij * S_{i, p_j} (* S_{i, cmt})
          if (kind[p[j]] == kControlledLandmark) controlled[(b * T + i) * T + j] = 1;
        }
      }
    }
    for (int64_t j = 0; j < T; ++j)  // pick[k][j] = 1 when k = p_j: matmul(S, pick) gathers S_{i, p_j}
      if (kind[j] == kRegular && p[j] < T) pick[(b * T + p[j]) * T + j] = 1;
  }
  auto constant = [&](const std::vector<double>& x, const Shape& s) { return from_vector(x, s).to(dt).to(q.device()); };
  Tensor valid_t = constant(valid, {B, 1, T, T}), same_t = constant(same, {B, T, T, T}),
         own_t = constant(own, {B, 1, T, T}), gated_t = constant(gated, {B, 1, T, T}),
         ctrl_t = constant(controlled, {B, 1, T, T}), pick_t = constant(pick, {B, 1, T, T});

  // Scores and the grouped softmax S_ij = exp(s_ij) / sum over k in j's group of exp(s_ik).
  Var s = mul(matmul(q, k, false, true), 1.0 / std::sqrt(static_cast<double>(HS)));  // (B, NH, T, T)
  Var masked = where(valid_t, s, Var(full({}, -INFINITY, dt, q.device())));
  Var e = exp(sub(masked, max(masked, -1, true)));  // 0 on invalid entries
  // Z_ij = sum_k same[i][j][k] e_ik: a batched matmul over (B, T_i) after moving heads inward.
  Var e_p = permute(e, {0, 2, 1, 3});                                    // (B, T_i, NH, T_k)
  Var z = permute(matmul(e_p, Var(same_t), false, true), {0, 2, 1, 3});  // (B, NH, T_i, T_j)
  Var z_safe = where(valid_t, z, Var(full({}, 1.0, dt, q.device())));    // no 0/0 on invalid entries
  Var S = div(e, z_safe);

  // AttWeight: own group as is; other blocks gated by their landmark (and by the CMT if controlled).
  Var gate = matmul(S, Var(pick_t.expand(S.shape()).contiguous()));  // gate_ij = S_{i, p_j}
  Var cmt_col = narrow(S, 3, 0, 1);                                  // S_{i, 0}: the CMT if present
  Var gated_w = mul(mul(S, gate), add(mul(cmt_col, Var(ctrl_t)), Var(sub(gated_t, ctrl_t))));
  Var W = add(mul(S, Var(own_t)), mul(gated_w, Var(gated_t)));
  return matmul(W, v);
}

}  // namespace lm
