// reference.cpp: the naive twin of top-k landmark attention (attention.h), composed from autograd
// ops like landmark/reference.cpp: the paper's group matrix for each (batch row, head, query),
// with the regular tokens of the blocks not chosen masked out (and, under Chosen, their
// landmarks too), then a grouped softmax over a "same group" tensor and the gating products. Its
// backward is autograd's. Memory (B NH, T, T, T): tests only.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "autograd/functions.h"
#include "landmark/attention.h"
#include "sparse/attention.h"
#include "tensor/create.h"

namespace lm {

namespace {
// The K best of `scores` (index = block), ties to the older block: a full sort, independent of
// the kernels' running selection.
std::vector<int32_t> top_k_by_sort(const std::vector<double>& scores, int64_t K) {
  std::vector<int32_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return scores[a] > scores[b]; });
  idx.resize(std::min<size_t>(idx.size(), static_cast<size_t>(K)));
  std::sort(idx.begin(), idx.end());
  return idx;
}

struct RowBlocks {
  std::vector<int32_t> block_of, landmark_of_block;  // per position; per block
};
RowBlocks row_blocks(const std::vector<int32_t>& kind) {
  RowBlocks r;
  int32_t blk = 0;
  for (size_t t = 0; t < kind.size(); ++t) {
    r.block_of.push_back(blk);
    if (kind[t] == kLandmark) {
      r.landmark_of_block.push_back(static_cast<int32_t>(t));
      ++blk;
    }
  }
  return r;
}
}  // namespace

Var sparse_landmark_reference(const Var& q, const Var& k, const Var& v, const Tensor& kinds, const SparseOptions& opts,
                              const Tensor& chosen_in) {
  LM_CHECK(q.dim() == 4 && kinds.dim() == 2 && kinds.size(0) == q.size(0) && kinds.size(1) == q.size(2),
           "sparse_landmark_reference: q " << describe(q.value()) << " and kinds " << describe(kinds) << " disagree");
  LM_CHECK(opts.top_k >= 1, "sparse_landmark_reference: K must be >= 1, got " << opts.top_k);
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), HS = q.size(3), K = opts.top_k;
  const bool all = opts.gates == SparseGates::All;
  const std::vector<int32_t> kind_all = kinds.to_vector<int32_t>();
  for (int32_t kd : kind_all)
    LM_CHECK(kd == kRegular || kd == kLandmark,
             "sparse_landmark_reference: only regular tokens and free landmarks (no CMT), got kind " << kd);
  const std::vector<double> qv = q.value().to_double_vector(), kv = k.value().to_double_vector();
  const std::vector<int32_t> given = chosen_in.defined() ? chosen_in.to_vector<int32_t>() : std::vector<int32_t>();
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));

  std::vector<double> valid(B * NH * T * T, 0), same(B * NH * T * T * T, 0), own(B * NH * T * T, 0),
      gated(B * NH * T * T, 0), pick(B * T * T, 0);
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int32_t> kind(kind_all.begin() + b * T, kind_all.begin() + (b + 1) * T);
    const std::vector<int32_t> G = paper_groups(kind);
    const RowBlocks rb = row_blocks(kind);
    for (int64_t j = 0; j < T; ++j) {  // pick[p][j] = 1 when landmark p closes j's block
      const int32_t blk = rb.block_of[j];
      if (kind[j] == kRegular && blk < static_cast<int32_t>(rb.landmark_of_block.size()))
        pick[(b * T + rb.landmark_of_block[blk]) * T + j] = 1;
    }
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t bh = b * NH + h;
      for (int64_t i = 0; i < T; ++i) {
        const int32_t bi = rb.block_of[i];  // i's block; blocks 0..bi-1 are earlier
        std::vector<int32_t> chosen;
        if (!given.empty()) {
          for (int64_t c = 0; c < K; ++c)
            if (given[(bh * T + i) * K + c] >= 0) chosen.push_back(given[(bh * T + i) * K + c]);
        } else {
          std::vector<double> s(bi);
          for (int32_t g = 0; g < bi; ++g) {
            double d = 0;
            for (int64_t e = 0; e < HS; ++e)
              d += qv[(bh * T + i) * HS + e] * kv[(bh * T + rb.landmark_of_block[g]) * HS + e];
            s[g] = d * scale;
          }
          chosen = top_k_by_sort(s, K);
        }
        auto is_chosen = [&](int32_t g) { return std::binary_search(chosen.begin(), chosen.end(), g); };
        const int32_t top = G[i * T + i] == -1 ? static_cast<int32_t>(i) : G[i * T + i];  // the query's group id
        std::vector<int32_t> gid(T, kMaskedGroup);  // this row's group ids after masking
        for (int64_t j = 0; j <= i; ++j) {
          const int32_t g = G[i * T + j], blk = rb.block_of[j];
          if (g == -1) continue;                                            // the query's own landmark
          const bool earlier = blk < bi;                                    // a token or landmark of an earlier block
          if (earlier && kind[j] == kRegular && !is_chosen(blk)) continue;  // tokens left out
          if (earlier && kind[j] == kLandmark && !all && !is_chosen(blk)) continue;  // Chosen: landmark out
          gid[j] = g;
          valid[(bh * T + i) * T + j] = 1;
          if (kind[j] != kRegular) continue;  // landmarks get weight 0
          (g == top ? own : gated)[(bh * T + i) * T + j] = 1;
        }
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t kk = 0; kk <= i; ++kk)
            if (gid[j] != kMaskedGroup && gid[j] == gid[kk]) same[((bh * T + i) * T + j) * T + kk] = 1;
      }
    }
  }
  const DType dt = q.dtype();
  auto constant = [&](const std::vector<double>& x, const Shape& s) { return from_vector(x, s).to(dt).to(q.device()); };
  Tensor valid_t = constant(valid, {B, NH, T, T}), same_t = constant(same, {B * NH, T, T, T}),
         own_t = constant(own, {B, NH, T, T}), gated_t = constant(gated, {B, NH, T, T}),
         pick_t = constant(pick, {B, 1, T, T});

  Var s = mul(matmul(q, k, false, true), scale);  // (B, NH, T, T)
  Var masked = where(valid_t, s, Var(full({}, -INFINITY, dt, q.device())));
  Var e = exp(sub(masked, max(masked, -1, true)));  // 0 on masked entries
  // Z_ij = sum_k same[i][j][k] e_ik, one (1 x T) (T x T)^T product per (head, query)
  Var z = reshape(matmul(reshape(e, {B * NH, T, 1, T}), Var(same_t), false, true), {B, NH, T, T});
  Var S = div(e, where(valid_t, z, Var(full({}, 1.0, dt, q.device()))));
  Var gate = matmul(S, Var(pick_t.expand({B, NH, T, T}).contiguous()));  // gate_ij = S_{i, p_j}
  Var W = add(mul(S, Var(own_t)), mul(mul(S, gate), Var(gated_t)));
  return matmul(W, v);
}

}  // namespace lm
